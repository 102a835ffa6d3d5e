"""Layer mixes from files, and fitting one on labelled pairs (``ctxembed eval fit-mix``).

The maths lives in :mod:`ctxembed.core.mix`; this module reads and writes the mix files and gathers
the per-layer vectors of labelled pairs (WiC splits, SCWS-style graded pairs) to fit on.

A mix file is the ``ctxembed.mix-fit/1`` JSON document that ``eval fit-mix`` prints and writes:
``--mix FILE`` reads its ``weights`` and ``gamma``; ``--mix learned`` reads the one written last
to the cache folder (:func:`learned_path`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ctxembed.core.mix import LEARNED, OFF, LayerMix, check_spec, is_weights, layer_weights, parse_weights
from ctxembed.errors import DataError, SettingError, UsageError

MIX_SCHEMA = "ctxembed.mix-fit/1"
SCWS_SCALE = 10.0  # SCWS ratings run from 0 to 10; fitting reads rating / 10 as a soft label


def learned_path() -> Path:
    """Where ``eval fit-mix`` writes by default and ``--mix learned`` reads: the cache folder."""
    from ctxembed.vectors.sources import cache_dir

    return cache_dir() / "mix-learned.json"


def resolve_mix(spec: str | None, layers: int) -> LayerMix | None:
    """The mix a ``--mix`` value names, for a model of ``layers`` attention layers (None: no mix)."""
    if spec is None or spec.strip() == OFF:
        return None
    try:
        spec = check_spec(spec)
        if is_weights(spec):
            return LayerMix(layer_weights(parse_weights(spec), layers), 1.0, spec)
    except ValueError as exc:
        raise SettingError(f"{{mix}} {spec}: {exc}", "mix") from None
    path = learned_path() if spec == LEARNED else Path(spec).expanduser()
    if spec == LEARNED and not path.exists():
        raise DataError(f"{{mix}} learned: no learned mix yet ({path}); run `ctxembed eval fit-mix` first", "mix")
    weights, gamma = read_mix_file(path)
    try:
        return LayerMix(layer_weights(weights, layers), gamma, spec)
    except ValueError as exc:
        raise SettingError(f"{{mix}} {spec}: {exc} (it was fitted for another number of layers)", "mix") from None


def read_mix_file(path: Path) -> tuple[tuple[float, ...], float]:
    """The weights and γ of a ``ctxembed.mix-fit/1`` file; DataError naming the file otherwise."""
    try:
        doc = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise DataError(
            f"{{mix}} {path}: no such file (give weights such as 0.2,0.8, off, learned or a file)", "mix"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{{mix}} {path}: not a mix file ({exc})", "mix") from None
    if not isinstance(doc, dict) or doc.get("schema") != MIX_SCHEMA:
        raise DataError(f"{{mix}} {path}: not a mix file (expected a JSON document with schema {MIX_SCHEMA})", "mix")
    weights, gamma = doc.get("weights"), doc.get("gamma")
    numbers = isinstance(weights, list) and len(weights) >= 2 and all(_finite(w) and w >= 0 for w in weights)
    if not numbers or not abs(sum(weights) - 1) < 1e-6:
        raise DataError(f"{{mix}} {path}: 'weights' must be 2 or more numbers >= 0 that sum to 1", "mix")
    if not (_finite(gamma) and gamma > 0):
        raise DataError(f"{{mix}} {path}: 'gamma' must be a finite number > 0", "mix")
    return tuple(float(w) for w in weights), float(gamma)


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def write_mix_file(doc: dict, path: Path) -> None:
    from ctxembed.output import dumps
    from ctxembed.vectors.store import atomic_file

    try:
        with atomic_file(path) as fh:
            fh.write((dumps(doc, indent=2) + "\n").encode())  # the numbers exactly as --json prints them
    except OSError as exc:
        raise DataError(f"{path}: cannot write the mix ({exc.strerror})") from None


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
    from ctxembed.evaluation.evaluate import is_scws, read_scws, read_wic

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


def fit_document(store, settings, sources: list[LabelledPairs], vectors: dict) -> dict:
    """Learn the mix on the sources (each weighs the same in the loss) and describe it as a document."""
    from ctxembed.core import mix as mixing
    from ctxembed.evaluation.evaluate import spearman, target_layers

    settings = replace(settings, mix=None)  # the layers themselves, not a mix of them
    grams, targets, weights, described = [], [], [], []
    for source in sources:
        first, ok1 = target_layers(store, settings, source.firsts)
        second, ok2 = target_layers(store, settings, source.seconds)
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
    layers = settings.attention.layers
    return {
        "schema": MIX_SCHEMA,
        "vectors": vectors,
        "settings": settings.as_dict(),
        "settings_summary": settings.summary(),
        "layers": layers,
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
