"""A check that word forms do not split senses: data/wsi-pseudowords.tsv with half the occurrences
(seeded) written in their plural form, clustered with the own term kept and dropped (docs/senses.md).

    .venv/bin/python scripts/wsi_form_check.py
"""

from __future__ import annotations

import random
from pathlib import Path

from ctxembed.presets import build_settings
from ctxembed.senses.occurrences import inflections
from ctxembed.senses.wsi import bag_of_words_vectors, contextual_vectors, read_wsi, score_clusters
from ctxembed.vectors.sources import open_vectors

DATA = Path(__file__).resolve().parent.parent / "data"


def main() -> None:
    store = open_vectors(None)
    items = read_wsi(DATA / "wsi-pseudowords.tsv")
    rng = random.Random(0)
    for it in items:
        if rng.random() < 0.5:
            uncountable = {"money", "music", "food", "oil", "blood", "science", "coffee", "rain", "fire", "law", "wine"}
            plural = inflections(it.word)[1] if it.word not in uncountable | {"cattle", "industry", "poem"} else None
            if plural and store.find(plural) is not None:
                it.words[it.index] = plural
    opts = dict(k=None, k_max=8, min_share=0.05, seed=0)
    bow, f = bag_of_words_vectors(store, items)
    print("bow", round(score_clusters(items, bow, f, **opts)["ari"], 3))
    for drop in (True, False):
        v, f = contextual_vectors(store, build_settings("default"), items, drop_own=drop)
        r = score_clusters(items, v, f, **opts)
        print("drop" if drop else "keep", round(r["ari"], 3), round(r["mean_k"], 2))


if __name__ == "__main__":
    main()
