"""What every drawing of ``--explain``'s steps reads from the explain document, in one place: the
terminal (:func:`ctxembed.views.render.render_explain`), the page (:mod:`ctxembed.views.explain_html`)
and the pictures (:func:`ctxembed.views.figures.attend_figure`) lay these out in their own medium and
decide nothing themselves, so one document reads the same everywhere: the same step labels, the same
numbers, and a matrix's cells shaded on the same range in the same eighths.

>>> steps = {"tokens": ["a", "b"], "scores": [[0.5, None], [-1.0, 1.5]]}
>>> m = matrix_of(steps, {"matrix": "scores", "range": "finite", "mask": "scores"})
>>> (m.low, m.high), m.masked.tolist(), [m.level(1, j) for j in range(2)]
((-1.0, 1.5), [[False, True], [False, False]], [0, 8])
>>> m.key()
'shading in eighths of -1.00 to 1.50, the lowest eighth unshaded; · masked'
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ctxembed.errors import DataError
from ctxembed.views.layout import heat_level, shading_key

SHOWN = 6  # numbers of a vector shown
SMALLEST_TERM = 0.005  # a context's sum leaves out the weights that print as 0.00


def explain_steps(explained: object) -> list[dict]:
    """The steps an explain document names, in order; a DataError for a document without them (an
    ``attend --explain`` JSON written before the steps were named): no view can draw it."""
    steps = explained.get("steps") if isinstance(explained, dict) else None
    if not isinstance(steps, list):
        raise DataError(
            "this explain document names no steps (written by an older ctxembed): "
            "explain the sentence again ({explain}) to draw its steps",
            "explain",
        )
    return steps


def vector_text(values, shown: int = SHOWN) -> str:
    """A vector's first ``shown`` numbers: ``[0.12, -0.40, ...]``."""
    vector = np.asarray(values, dtype=np.float64)  # (d,)
    head = ", ".join(f"{x:.2f}" for x in vector[:shown])
    return f"[{head}{', ...' if len(vector) > shown else ''}]"


def array_at(explained: dict, key: str):
    """The document's array named ``key`` ("mix.contextual": a key of a key)."""
    for part in key.split("."):
        explained = explained[part]
    return explained


def finite_or_nan(values) -> np.ndarray:
    """A matrix of a document as float64, its nulls (masked keys, in JSON) as NaN."""
    return np.array(
        [[np.nan if v is None else v for v in row] for row in np.asarray(values, dtype=object)], dtype=np.float64
    )


def step_label(explained: dict, step: dict) -> str | None:
    """A step's heading, saying "first 6 shown" where its vectors are longer than what is shown."""
    if step["label"] is None:
        return None
    shown = f"; first {SHOWN} shown" if np.shape(explained["inputs"])[1] > SHOWN else ""
    return step["label"].replace("{shown}", shown)


def row_labels(explained: dict, draw: dict, marked) -> list[str]:
    """The row labels of a step's vectors: the tokens, another array of labels (``rows``), or the tokens
    marked with where each vector came from (``rows: "sources"``, ``marked(text, source)``)."""
    tokens = list(explained["tokens"])
    rows = draw.get("rows")
    if rows == "sources":
        sources = explained.get("sources") or ["vocabulary"] * len(tokens)
        return [marked(t, source) for t, source in zip(tokens, sources, strict=True)]
    return list((array_at(explained, rows) if rows else None) or tokens)


@dataclass(frozen=True)
class Matrix:
    """A step's matrix as every view draws it: its values (T, T), the cells shown as masked (no finite
    number in the matrix or in its mask) or None, and the range [low, high] its shading spans."""

    values: np.ndarray  # (T, T) float64, NaN where the document holds null
    masked: np.ndarray | None  # (T, T) bool, or None when no cell is masked
    low: float
    high: float
    digits: int

    def share(self, value: float) -> float:
        """Where ``value`` lies in [low, high], 0..1 (0 for an empty range or no number)."""
        if not self.high > self.low or not math.isfinite(value):
            return 0.0
        return min(1.0, max(0.0, (value - self.low) / (self.high - self.low)))

    def level(self, i: int, j: int) -> int:
        """Cell (i, j)'s heat level: 0 masked or at ``low``, else 1..8, the eighth of the range it falls
        in, rounded up (1, the lowest eighth, is drawn unshaded)."""
        if self.masked is not None and self.masked[i, j]:
            return 0
        return heat_level(self.share(float(self.values[i, j])), 1.0)

    def levels(self) -> np.ndarray:
        """Every cell's :meth:`level`: (T, T) int."""
        rows, columns = self.values.shape
        return np.array([[self.level(i, j) for j in range(columns)] for i in range(rows)], dtype=int)

    def key(self, mode: str | None = None) -> str:
        """What the shading means, in words the terminal (``mode``: its colours) and the page (None)
        print under the matrix."""
        span = f"{self.low:.{self.digits}f} to {self.high:.{self.digits}f}"
        return shading_key(mode, span) + ("; · masked" if self.masked is not None else "")


def matrix_of(explained: dict, draw: dict) -> Matrix:
    """The matrix a step draws (``draw["matrix"]``), masked where ``draw["mask"]`` (or itself) has no
    finite number, on the range of its unmasked cells (``range`` "all" or "finite") or of a weight, [0, 1]."""
    values = finite_or_nan(explained[draw["matrix"]])  # (T, T)
    masked = ~np.isfinite(values)  # (T, T)
    if draw.get("mask"):
        masked |= ~np.isfinite(finite_or_nan(explained[draw["mask"]]))
    shown = values[~masked]
    low, high = 0.0, 1.0
    if draw.get("range") in ("all", "finite") and shown.size:
        low, high = float(shown.min()), float(shown.max())
    return Matrix(values, masked if masked.any() else None, low, high, draw.get("digits", 2))


def weighted_sums(explained: dict, draw: dict) -> list[tuple[str, str, str]]:
    """Each context as its weighted sum of values (``draw["terms"]``): per token, its row label, the sum
    ("0.55·sat + 0.29·river", or "0") and the context vector's text."""
    tokens = list(explained["tokens"])
    weights = np.asarray(explained["weights"], dtype=np.float64)  # (T, T)
    context = np.asarray(explained[draw["terms"]], dtype=np.float64)  # (T, d)
    rows = []
    for i, row in enumerate(tokens):
        terms = " + ".join(
            f"{weights[i, j]:.2f}·{tokens[j]}" for j in range(len(tokens)) if weights[i, j] >= SMALLEST_TERM
        )
        rows.append((row, terms or "0", vector_text(context[i])))
    return rows


@dataclass(frozen=True)
class Neuron:
    """One query's q . k_j term by term: a heading, q's text, and per key its label, its score and the
    dimensions that add the most to it and take the most from it ("d3 +0.41")."""

    heading: str
    query: str
    rows: list[tuple[str, str, list[str], list[str]]]


def neuron_of(explained: dict, draw: dict, shown: int = 3) -> Neuron:
    """The neuron view of a step (``draw["neuron"]``): its query's terms against every key."""
    neuron = explained[draw["neuron"]]
    tokens = list(explained["tokens"])
    raw = np.asarray(explained["raw_scores"], dtype=np.float64)  # (T, T)
    row, word = neuron["query"], neuron["token"]
    terms = np.asarray(neuron["terms"], dtype=np.float64)  # (T, d_k)
    whose = neuron.get("word") or word
    of = "" if whose == word else f" (the first piece of {whose!r})"
    heading = f"{word!r}{of}: q . k_j = sum over its {terms.shape[1]} dimensions d of q_d k_jd (largest terms)"
    rows = []
    for j, label in enumerate(tokens):
        order = np.argsort(terms[j], kind="stable")  # (d_k,) ascending
        plus = [f"d{d} {terms[j, d]:+.2f}" for d in order[::-1][:shown] if terms[j, d] > 0]
        minus = [f"d{d} {terms[j, d]:+.2f}" for d in order[:shown] if terms[j, d] < 0]
        rows.append((label, f"{raw[row, j]:.3f}", plus, minus))
    return Neuron(heading, f"q_{word} = {vector_text(neuron['q'])}", rows)
