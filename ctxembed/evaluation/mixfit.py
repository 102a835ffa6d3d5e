"""Fitting a layer mix on labelled pairs (``ctxembed eval fit-mix``).

The maths lives in :mod:`ctxembed.core.mix` and the mix files in :mod:`ctxembed.vectors.mixfiles`;
this module gathers the per-layer vectors of labelled pairs (WiC splits, SCWS-style graded pairs)
and fits the weights on them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ctxembed.core import mix as mixing
from ctxembed.core.mix import LayerMix
from ctxembed.errors import DataError, UsageError
from ctxembed.evaluation.evaluate import is_scws, open_for, read_scws, read_wic, spearman, target_layers
from ctxembed.report import settings_block
from ctxembed.vectors.mixfiles import MIX_SCHEMA

SCWS_SCALE = 10.0  # SCWS ratings run from 0 to 10; fitting reads rating / 10 as a soft label


# ------------------------------------------------------------------------------ fitting
@dataclass
class LabelledPairs:
    """One labelled source: pairs of occurrences and a target in [0, 1] per pair."""

    kind: str  # "wic" | "scws"
    path: str
    split: str | None
    firsts: list
    seconds: list
    targets: np.ndarray  # (n,) 1/0 for WiC, rating / 10 for SCWS


def read_labelled(path: str, split: str) -> LabelledPairs:
    """A WiC folder (its ``split`` with gold labels) or an SCWS-style file."""
    where = Path(path)
    if where.is_dir():
        splits = {s.name: s for s in read_wic(where)}
        chosen = splits.get(split)
        if chosen is None or chosen.gold is None:
            labelled = [n for n, s in splits.items() if s.gold is not None]
            raise UsageError(f"{where}: no labelled split {split!r} (labelled: {', '.join(labelled) or 'none'})")
        firsts, seconds = zip(*chosen.pairs, strict=True)
        return LabelledPairs("wic", str(where), split, list(firsts), list(seconds), chosen.gold.astype(np.float64))
    if not where.exists():
        raise DataError(f"{where}: no such file or folder (a WiC folder or an SCWS-style file)")
    if not is_scws(where):
        raise DataError(f"{where}: not an SCWS-style file (tab-separated, contexts with <b> word </b>)")
    firsts, seconds, ratings = zip(*read_scws(where), strict=True)
    ratings = np.array(ratings, dtype=np.float64)
    if ratings.min() < 0 or ratings.max() > SCWS_SCALE:
        raise DataError(f"{where}: ratings must lie in 0..{SCWS_SCALE:g} (SCWS scale)")
    return LabelledPairs("scws", str(where), None, list(firsts), list(seconds), ratings / SCWS_SCALE)


def fit_document(store, settings, sources: list[LabelledPairs], vectors: dict, *, window: int | None = None) -> dict:
    """Learn the mix on the sources (each weighs the same in the loss) and describe it as a document."""
    settings = replace(settings, mix=None)  # the layers themselves, not a mix of them
    grams, targets, weights, described = [], [], [], []
    for source in sources:
        first, ok1 = target_layers(store, settings, source.firsts, window=window)
        second, ok2 = target_layers(store, settings, source.seconds, window=window)
        covered = ok1 & ok2
        if not covered.any():
            raise DataError(f"{source.path}: no pair has vectors for both targets")
        gram = mixing.gram(first[covered], second[covered])
        grams.append(gram)
        targets.append(source.targets[covered])
        weights.append(np.full(int(covered.sum()), 1 / (covered.sum() * len(sources))))
        described.append((source, covered, gram))
    A, B, C = (np.concatenate([g[i] for g in grams]) for i in range(3))
    fitted = mixing.fit(A, B, C, np.concatenate(targets), sample_weight=np.concatenate(weights))
    threshold = -fitted.bias / fitted.gamma**2  # P(same) > 0.5 where γ² cos + b > 0
    results = []
    for source, covered, gram in described:
        cos = mixing.mixed_cosines(*gram, fitted.weights)  # (n covered,)
        entry = {
            "kind": source.kind,
            "path": source.path,
            "split": source.split,
            "pairs": len(source.targets),
            "covered": int(covered.sum()),
        }
        if source.kind == "wic":
            gold = source.targets > 0.5
            predicted = np.zeros(len(gold), dtype=bool)
            predicted[covered] = cos >= threshold  # a pair without vectors is predicted "different"
            entry["accuracy"] = float(np.mean(predicted == gold))
        else:
            entry["spearman"] = spearman(cos, source.targets[covered]) if len(cos) > 2 else None
        results.append(entry)
    engine = open_for(store, settings, max_tokens=4096, window=window)
    return {
        "schema": MIX_SCHEMA,
        "vectors": vectors,
        **settings_block(engine, window=engine.window),  # as every document of the model has it
        "layers": engine.card.layers,
        "weights": [float(w) for w in fitted.weights],
        "logits": [float(w) for w in fitted.logits],
        "gamma": fitted.gamma,
        "bias": fitted.bias,
        "threshold": threshold,
        "formula": LayerMix(fitted.weights, fitted.gamma).formula(),
        "loss": fitted.loss,
        "iterations": fitted.iterations,
        "converged": fitted.converged,
        "sources": results,
    }
