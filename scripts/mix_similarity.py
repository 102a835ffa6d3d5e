"""What "similarity" should mean for mixed vectors: the two candidates, measured on the same layers.

- sum:    cos(Σ s_j h_j, Σ s_j h'_j), the cosine of ELMo's weighted sum (what ctxembed does);
- concat: Σ s_j cos(h_j, h'_j), the cosine of the weighted concatenation of unit-normalised layers.

Per-layer vectors of every target are computed once (``evaluate.target_layers``), then each mix
weight is a cheap sweep. Usage (the data are not part of the project)::

    python scripts/mix_similarity.py WIC_DIR SCWS_FILE [--residual-scale 0.111]

With ``--residual-scale`` the layer mixed with h0 is the previous default's output (λ·x + context);
without it, pure context (the current default's layer 1). Prints WiC train / dev accuracy (threshold
tuned on train), SCWS Spearman ρ and the polysemy suite's separated words, for s_0 = 0.1 ... 0.4.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from ctxembed.evaluation import evaluate as ev
from ctxembed.presets import build_settings
from ctxembed.vectors.sources import open_vectors
from ctxembed.vectors.tokenize import tokenize


def similarity(first: np.ndarray, second: np.ndarray, s0: float, how: str) -> np.ndarray:
    """first, second (n, 2, d): layers h0 and h1 of each pair -> (n,) similarities."""
    weights = np.array([s0, 1 - s0])  # (2,)
    if how == "sum":
        return ev.rounded_row_cosines(np.einsum("k,nkd->nd", weights, first), np.einsum("k,nkd->nd", weights, second))
    return np.round(sum(w * ev.rounded_row_cosines(first[:, j], second[:, j]) for j, w in enumerate(weights)), 10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wic", type=Path)
    parser.add_argument("scws", type=Path)
    parser.add_argument("--residual-scale", type=float, default=None)
    args = parser.parse_args()
    store = open_vectors(None)
    extra = {"residual": True, "residual_scale": args.residual_scale} if args.residual_scale else {}
    settings = build_settings("default", mix="off", **extra)
    splits = {s.name: s for s in ev.read_wic(args.wic)}
    layers = {}
    for name in ("train", "dev"):
        firsts, seconds = zip(*splits[name].pairs, strict=True)
        (a, ok_a), (b, ok_b) = (ev.target_layers(store, settings, list(x)) for x in (firsts, seconds))
        layers[name] = (a, b, ok_a & ok_b, splits[name].gold)
    firsts, seconds, ratings = zip(*ev.read_scws(args.scws), strict=True)
    (a, ok_a), (b, ok_b) = (ev.target_layers(store, settings, list(x)) for x in (firsts, seconds))
    scws = (a, b, ok_a & ok_b, np.array(ratings))
    rows = ev.read_senses(ev.default_senses_path())
    occurrences = []
    for row in rows:
        tokens = tokenize(row.text, lowercase=store.lowercase)
        index = next(t.position for t in tokens if t.key == row.word.lower())
        occurrences.append(ev.Occurrence([t.text for t in tokens], index, row.word))
    senses, _ = ev.target_layers(store, settings, occurrences)
    print("similarity  s0    WiC train  WiC dev  SCWS rho  senses separated")
    for how in ("sum", "concat"):
        for s0 in (0.1, 0.15, 0.2, 0.25, 0.3, 0.4):
            a, b, ok, gold = layers["train"]
            train = similarity(a, b, s0, how)
            threshold = ev.best_threshold(train[ok], gold[ok])
            accuracy = {}
            for name, (a, b, ok, gold) in layers.items():
                accuracy[name] = np.mean(((similarity(a, b, s0, how) >= threshold) & ok) == gold)
            a, b, ok, gold = scws
            rho = ev.spearman(similarity(a, b, s0, how)[ok], gold[ok])
            separated = 0
            for word in dict.fromkeys(r.word for r in rows):
                members = [i for i, r in enumerate(rows) if r.word == word]
                same, cross = [], []
                for x, i in enumerate(members):
                    for j in members[x + 1 :]:
                        value = float(similarity(senses[i : i + 1], senses[j : j + 1], s0, how)[0])
                        (same if rows[i].sense == rows[j].sense else cross).append(value)
                separated += min(same) > max(cross)
            print(
                f"{how:10s}  {s0:<4g}  {accuracy['train']:.4f}     {accuracy['dev']:.4f}   {rho:.4f}    "
                f"{separated}/{len(set(r.word for r in rows))}"
            )


if __name__ == "__main__":
    main()
