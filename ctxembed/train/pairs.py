"""Labelled pairs for training a derived model: WiC's layout or a plain TSV, read into items
(words 1, index 1, words 2, index 2, label) and a record of the data (its file's name and sha256).

- a WiC folder (its ``train`` split), or one ``SPLIT.data.txt`` of it (its ``SPLIT.gold.txt`` beside it):
  :func:`ctxembed.evaluation.evaluate.read_wic` reads them; T = 1, F = 0;
- a TSV: ``sentence1 <tab> sentence2 <tab> word or positions <tab> label``, a sentence's words split at
  spaces, the word found in each sentence (its first occurrence, case ignored) or given as ``i-j`` (word
  indices from 0), the label 0/1 or a graded score in [0, 1].
"""

from __future__ import annotations

from pathlib import Path

from ctxembed.errors import DataError

Item = tuple[list[str], int, list[str], int, float]


def read_pairs(path: str | Path) -> tuple[list[Item], dict]:
    """The pairs of ``path`` (see the module) and what a derived model records of them:
    {"name", "sha256", "pairs", "layout"} (and "labels": the gold file's name and sha256 for WiC)."""
    from ctxembed.evaluation.evaluate import read_wic  # lazy: evaluation reads WiC, one reader
    from ctxembed.vectors.models import sha256_of

    path = Path(path)
    if path.is_dir() or path.name.endswith(".data.txt"):
        folder, split = (path, "train") if path.is_dir() else (path.parent, path.name[: -len(".data.txt")])
        splits = {s.name: s for s in read_wic(folder)}
        chosen = splits.get(split)
        if chosen is None or chosen.gold is None:
            raise DataError(f"{folder}: no labelled split {split!r} (its {split}.gold.txt beside it)")
        data, gold = folder / f"{split}.data.txt", folder / f"{split}.gold.txt"
        items = [
            (list(a.words), a.index, list(b.words), b.index, float(label))
            for (a, b), label in zip(chosen.pairs, chosen.gold, strict=True)
        ]
        record = {"name": data.name, "sha256": sha256_of(data), "layout": "wic"}
        record["labels"] = {"name": gold.name, "sha256": sha256_of(gold)}
    else:
        if not path.is_file():
            raise DataError(f"{path}: no such file (labelled pairs: a WiC folder or a TSV)")
        items = [_tsv_item(path, number, line) for number, line in _lines(path)]
        record = {"name": path.name, "sha256": sha256_of(path), "layout": "tsv"}
    if len(items) < 2:
        raise DataError(f"{path}: {len(items)} labelled pairs; training needs at least 2")
    return items, record | {"pairs": len(items)}


def _lines(path: Path) -> list[tuple[int, str]]:
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataError(f"{path}: not valid UTF-8 (byte {error.start})") from None
    except OSError as error:
        raise DataError(f"{path}: cannot read ({error.strerror})") from None
    return [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]


def _tsv_item(path: Path, number: int, line: str) -> Item:
    fields = line.split("\t")
    where = f"{path}: line {number}"
    if len(fields) != 4:
        raise DataError(
            f"{where}: expected 4 tab-separated fields (sentence1, sentence2, word, label), got {len(fields)}"
        )
    first, second = fields[0].split(), fields[1].split()
    marked = fields[2].strip()
    try:
        label = float(fields[3])
    except ValueError:
        raise DataError(f"{where}: label {fields[3]!r} is not a number") from None
    if not 0 <= label <= 1:
        raise DataError(f"{where}: label {label:g} is not in [0, 1]")
    indices = marked.split("-")
    if len(indices) == 2 and all(i.isdigit() for i in indices):
        i, j = int(indices[0]), int(indices[1])
    else:
        i, j = _index(first, marked), _index(second, marked)
        if i is None or j is None:
            raise DataError(f"{where}: the word {marked!r} is not in {'sentence1' if i is None else 'sentence2'}")
    if not (0 <= i < len(first) and 0 <= j < len(second)):
        raise DataError(f"{where}: positions {marked} outside the sentences")
    return first, i, second, j, label


def _index(words: list[str], word: str) -> int | None:
    lowered = [w.lower().strip(".,;:!?\"'()") for w in words]
    return lowered.index(word.lower()) if word.lower() in lowered else None
