"""Does masking a token's identical twins (other tokens with the same vocabulary key, as the self mask
masks the token itself) separate word senses better? Measured on data/senses.tsv with the default preset.

Two suites: the sentences as they are (each holds its target once; twins are other repeated words such as
"the"), and the same sentences each followed by a sentence of the other sense of the same word, so the
target has a twin of the other sense (as in "the bank by the river is not the bank I use"); the first
occurrence is the one scored. Reported as `eval senses` does: words whose every same-sense pair is more
similar than every cross-sense pair, and the mean margin (same-sense minus cross-sense cosine).

Run from the repository: `.venv/bin/python scripts/measure_twin_mask.py`.
"""

from __future__ import annotations

import csv
import itertools

import numpy as np

import ctxembed
import ctxembed.core.attention as attention

_KEYS: list[str] = []  # the sentence being run: its attended tokens' keys
_original = attention.build_mask


def twin_mask(T, **kwargs):
    allowed = _original(T, **kwargs)
    if _KEYS and len(_KEYS) == T:
        keys = np.array(_KEYS)
        twins = (keys[:, None] == keys[None, :]) & ~np.eye(T, dtype=bool)  # (T, T) same key, other token
        allowed = allowed & ~twins
    return allowed


def vectors(ex, items, masked: bool) -> list[np.ndarray]:
    engine = ex.engine
    out = []
    for word, _, text in items:
        prepared = engine.prepare(text)
        _KEYS[:] = [prepared.token_keys[p] for p in prepared.used] if masked else []
        [result] = engine.run([prepared])
        out.append(result.contextual[result.index_of(word)])
    _KEYS[:] = []
    return out


def score(items, vecs) -> tuple[float, float]:
    separated, margins = [], []
    for word in dict.fromkeys(w for w, _, _ in items):
        members = [i for i, item in enumerate(items) if item[0] == word]
        same, cross = [], []
        for i, j in itertools.combinations(members, 2):
            a, b = vecs[i], vecs[j]
            cos = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
            (same if items[i][1] == items[j][1] else cross).append(cos)
        separated.append(min(same) > max(cross))
        margins.append(np.mean(same) - np.mean(cross))
    return float(np.mean(separated)), float(np.mean(margins))


def main() -> None:
    attention.build_mask = twin_mask
    ex = ctxembed.Explorer()
    with open("data/senses.tsv", encoding="utf-8") as fh:
        items = [(r["word"], r["sense"], r["sentence"]) for r in csv.DictReader(fh, delimiter="\t")]
    doubled = []
    for word, sense, text in items:
        other = next(t for w, s, t in items if w == word and s != sense)
        doubled.append((word, sense, f"{text.rstrip('.')} and {other[0].lower()}{other[1:]}"))
    print(f"{'suite':32} {'twins':8} {'separated':>9} {'mean margin':>11}")
    for name, suite in (("senses.tsv as is", items), ("each + a sentence of the other sense", doubled)):
        for masked in (False, True):
            separated, margin = score(suite, vectors(ex, suite, masked))
            print(f"{name:32} {'masked' if masked else 'kept':8} {separated:>9.3f} {margin:>11.4f}")


if __name__ == "__main__":
    main()
