"""Build the project's word-sense induction files (the `ctxembed eval wsi` format) deterministically.

- data/wsi-senses.tsv: the polysemy suite data/senses.tsv (written for the project), tokenised by
  ctxembed's tokenizer, with the target's token index: 24 words, 2 senses, 6 occurrences each.
- data/wsi-pseudowords.tsv: pseudowords (Gale, Church & Yarowsky 1992; Schuetze 1998) from the
  Brown example corpus: 2 to 5 unrelated words share one surface form (the first word's), and the
  word each occurrence really was is its sense. Sense sizes are skewed the way real senses are
  (a dominant one, then smaller ones). 24 pseudowords.

    .venv/bin/python scripts/build_wsi_fixtures.py
"""

from __future__ import annotations

import gzip
import random
import re
from pathlib import Path

from ctxembed.vectors.tokenize import tokenize

DATA = Path(__file__).resolve().parent.parent / "data"
# Each group: the words merged into one pseudoword (the first one's spelling is kept).
GROUPS = [
    ("church", "river"),
    ("money", "dog"),
    ("music", "hospital", "army"),
    ("car", "tree"),
    ("food", "school", "war"),
    ("horse", "president"),
    ("book", "ship", "wine"),
    ("doctor", "road"),
    ("girl", "machine", "court", "garden"),
    ("college", "oil"),
    ("game", "bed", "law"),
    ("window", "company"),
    ("island", "plan", "student", "baby", "fire"),
    ("paper", "blood"),
    ("father", "market", "rain"),
    ("street", "science"),
    ("piano", "wall", "tax"),
    ("boat", "theory", "coffee"),
    ("camp", "letter"),
    ("hotel", "prayer", "gun", "cattle"),
    ("farm", "film"),
    ("bridge", "dinner", "election"),
    ("engine", "poem"),
    ("kitchen", "soldier", "industry", "star", "teacher"),
]
SIZES = (48, 20, 12, 8, 6)  # occurrences of the 1st, 2nd, ... word of a group (at most)
MAX_TOKENS = 60


def senses_suite() -> list[str]:
    rows = []
    for line in (DATA / "senses.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        word, sense, sentence = line.split("\t")
        tokens = tokenize(sentence)
        index = next(t.position for t in tokens if t.key == word)
        rows.append(f"{word}\t{sense}\t{index}\t{' '.join(t.text for t in tokens)}")
    return rows


def pseudowords() -> list[str]:
    wanted = {word for group in GROUPS for word in group}
    pattern = re.compile(r"\b(" + "|".join(sorted(wanted)) + r")\b")
    found: dict[str, list[tuple[int, list[str]]]] = {w: [] for w in wanted}
    with gzip.open(DATA / "brown.txt.gz", "rt", encoding="utf-8") as corpus:
        for line in corpus:
            if not pattern.search(line):
                continue
            tokens = tokenize(line.strip())
            if len(tokens) > MAX_TOKENS:
                continue
            texts = [t.text for t in tokens]
            hits = [t.position for t in tokens if t.text in wanted]  # lower-case exact: no names, no plurals
            if len(hits) == 1:  # one target per sentence: the others would leak the sense
                found[texts[hits[0]]].append((hits[0], texts))
    rng = random.Random(0)
    rows = []
    for group in GROUPS:
        surface = group[0]
        for word, size in zip(group, SIZES, strict=False):
            chosen = rng.sample(found[word], min(size, len(found[word])))
            for index, texts in chosen:
                texts = list(texts)
                texts[index] = surface
                rows.append(f"{surface}\t{word}\t{index}\t{' '.join(texts)}")
    return rows


def main() -> None:
    header = "word\tsense\tindex\tsentence"
    for name, rows in (("wsi-senses.tsv", senses_suite()), ("wsi-pseudowords.tsv", pseudowords())):
        (DATA / name).write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
        print(f"{name}: {len(rows)} occurrences of {len({r.split(chr(9))[0] for r in rows})} words")


if __name__ == "__main__":
    main()
