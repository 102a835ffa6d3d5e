"""Which default makes contextual neighbours recognisable without losing the sense? Measured on data/senses.tsv.

Run from the repository: `.venv/bin/python scripts/measure_neighbours.py` (about 15 s of CPU).

For every sentence: the target's contextual vector (default preset), its top-10 neighbours (sentence words
left out, as `neighbors` does) under each option. Reported: median frequency rank of the neighbours, share
outside the 50,000 most frequent, and sense agreement = mean Jaccard overlap of the neighbour sets of two
sentences with the same sense minus that of two sentences with different senses (same word).
"""

from __future__ import annotations

import csv
import itertools
import statistics

import numpy as np

import ctxembed
from ctxembed.vectors.search import _removed_cosines

ex = ctxembed.Explorer()
engine, store = ex.engine, ex.store
with open("data/senses.tsv", encoding="utf-8") as fh:
    rows = list(csv.DictReader(fh, delimiter="\t"))
extra = [
    ("bank", "river", "we sat on the river bank"),
    ("bank", "finance", "I deposited $500 at the bank on Monday."),
    ("plant", "factory", "the workers at the plant went on strike"),
    ("plant", "flora", "she watered the plant on the window sill"),
    ("bass", "fish", "he caught a huge bass in the lake"),
    ("bass", "music", "he plays bass in a jazz band"),
]
items = [(r["word"], r["sense"], r["sentence"]) for r in rows]
N = len(store)
log_rank = np.log(np.arange(1, N + 1))


def options():
    yield "all 200k", lambda s: s
    for top in (100_000, 50_000, 30_000, 20_000, 10_000):
        yield f"top {top // 1000}k", (lambda t: lambda s: np.where(np.arange(N) < t, s, -np.inf))(top)
    for lam in (0.005, 0.01, 0.02):
        yield f"cos - {lam}·ln(rank)", (lambda weight: lambda s: s - weight * log_rank)(lam)


_COSINES: dict[str, np.ndarray] = {}


def neighbours(item):
    cos_cache = _COSINES
    word, sense, text = item
    if text not in cos_cache:
        [res] = ex.contextualize([text])
        row = res.index_of(word)
        vec = res.contextual[row]
        scores = _removed_cosines(store, vec, engine.removal)
        exclude = {t.key for t in res.used_tokens()}
        banned = [r for r in map(store.find, exclude) if r is not None]
        scores[banned] = -np.inf
        cos_cache[text] = scores
    return cos_cache[text]


def top10(scores):
    top = np.argpartition(-scores, 10)[:10]
    return top[np.argsort(-scores[top])]


for title, dataset in (("data/senses.tsv (144 sentences)", items), ("own sentences (6)", extra)):
    print(f"\n{title}")
    print(f"{'option':22} {'median rank':>11} {'>50k share':>10} {'sense agreement':>15}  example: river bank")
    for name, transform in options():
        sets, ranks = {}, []
        for item in dataset:
            t = top10(transform(neighbours(item)))
            sets[item] = set(t.tolist())
            ranks += t.tolist()
        same, cross = [], []
        for a, b in itertools.combinations(dataset, 2):
            if a[0] != b[0]:
                continue
            j = len(sets[a] & sets[b]) / len(sets[a] | sets[b])
            (same if a[1] == b[1] else cross).append(j)
        agreement = statistics.mean(same) - statistics.mean(cross) if same and cross else float("nan")
        river = top10(transform(neighbours(("bank", "river", "we sat on the river bank"))))
        words = " ".join(store.word_at(int(r)) for r in river[:8])
        beyond = np.mean(np.array(ranks) >= 50_000)
        print(f"{name:22} {int(np.median(ranks)):>11,} {beyond:>10.3f} {agreement:>15.3f}  {words}")
