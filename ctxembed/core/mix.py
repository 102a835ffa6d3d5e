"""ELMo's scalar mix: a word's vector as a weighted sum of its layers. Pure maths, no I/O.

Peters et al. (2018, eq. 1) represent a word by every layer of the network at once::

    mixed = γ · Σ_j s_j · h_j        s = softmax(w): s_j >= 0, Σ_j s_j = 1

Here h_0 is the attention input (the static vector after the shared projection, without
positions) and h_1 ... h_L are the outputs of the L attention layers, so K = L + 1 layers,
all in the same d-dimensional space. A cosine ignores γ; it scales the vectors that are
returned, and :func:`fit` learns it as the slope that turns the mixed cosine into log-odds.

Similarity of mixed vectors is the plain cosine of the weighted sums. The alternative, a
weighted concatenation of unit-normalised layers (whose cosine is Σ_j s_j cos(h_j, h'_j)),
measured no better on WiC train and SCWS dev (README, *Meaning in context*), and makes the
vector K times longer.

>>> import numpy as np
>>> layers = np.array([[[1.0, 0.0]], [[0.0, 2.0]]])  # (K=2, T=1, d=2): the word, its context
>>> mix_layers(layers, np.array([0.25, 0.75]))  # (T, d)
array([[0.25, 1.5 ]])
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

LEARNED = "learned"  # --mix learned: the mix `ctxembed eval fit-mix` wrote last
OFF = "off"  # --mix off: the last layer alone, as without a mix


@functools.lru_cache(maxsize=64)
def parse_weights(text: str) -> tuple[float, ...]:
    """ "0.2,0.8" -> (0.2, 0.8), normalised to sum 1; ValueError for anything else. Parsed once per
    text: the settings check it, and opening an engine reads it again (check_spec, resolve_mix)."""
    parts = [p.strip() for p in text.split(",")]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise ValueError(f"expected comma-separated weights such as 0.2,0.8, not {text!r}") from None
    if len(values) < 2:
        raise ValueError(f"a mix needs a weight for layer 0 and at least one more layer, not {text!r}")
    if not all(math.isfinite(v) and v >= 0 for v in values) or sum(values) <= 0:
        raise ValueError(f"mix weights must be finite, >= 0 and not all 0, not {text!r}")
    total = sum(values)
    if math.isinf(total):  # weights near 1e308 overflow their sum: scale them by the largest first
        values = [v / max(values) for v in values]
        total = sum(values)
    return tuple(v / total for v in values)


def is_weights(text: str) -> bool:
    """Whether a --mix value names weights (rather than off, learned or a file)."""
    return "," in text and text.lstrip()[:1] in set("0123456789.")


def check_spec(text: str) -> str:
    """A --mix value: off, learned, weights (checked here) or a file (checked when it is read)."""
    text = text.strip()
    if text in (OFF, LEARNED):
        return text
    if is_weights(text):
        parse_weights(text)
        return text
    try:
        float(text)
    except ValueError:
        pass
    else:
        raise ValueError(f"give one weight per layer from layer 0, e.g. {text},{1 - float(text):g}, not {text!r}")
    if not text:
        raise ValueError("expected weights such as 0.2,0.8, off, learned, or a file written by fit-mix")
    return text


def layer_weights(weights: tuple[float, ...] | np.ndarray, layers: int) -> np.ndarray:
    """The weights s_0 ... s_L (L + 1,) of a model with ``layers`` attention layers.

    A mix names one weight per layer, 0 to L; two weights are also read as (layer 0, last layer)
    with the layers between at 0, so a preset's mix fits any number of layers."""
    given = np.asarray(weights, dtype=np.float64)  # (K,)
    if len(given) == layers + 1:
        return given
    if len(given) == 2:
        full = np.zeros(layers + 1)  # (L + 1,)
        full[0], full[-1] = given
        return full
    raise ValueError(f"the mix has {len(given)} weights but there are {layers + 1} layers (0 to {layers})")


def unit_layers(layers: np.ndarray) -> np.ndarray:
    """Every vector of layers (K, ..., d) scaled to length 1 (a zero vector stays 0)."""
    lengths = np.linalg.norm(layers, axis=-1, keepdims=True)  # (K, ..., 1)
    return np.divide(layers, lengths, out=np.zeros_like(layers), where=lengths > 0)  # (K, ..., d)


def mix_layers(layers: np.ndarray, weights: np.ndarray, gamma: float = 1.0, *, normalize: bool = False) -> np.ndarray:
    """γ Σ_j s_j h_j: layers (K, ..., d), weights (K,) -> (..., d), in the layers' dtype. ``normalize``
    scales every h_j to length 1 first (AllenNLP's ScalarMix with ``do_layer_norm``), so s_j, not the
    lengths the layers happen to have, sets how much each counts."""
    if normalize:
        layers = unit_layers(layers)  # (K, ..., d)
    s = np.asarray(weights, dtype=layers.dtype)  # (K,)
    return (gamma * np.tensordot(s, layers, axes=1)).astype(layers.dtype)  # (K,) . (K, ..., d) -> (..., d)


@dataclass(frozen=True)
class LayerMix:
    """A resolved mix: one weight per layer 0 ... L, and γ."""

    weights: np.ndarray  # (L + 1,) s_j >= 0, summing to 1
    gamma: float = 1.0
    source: str = ""  # what named it: the weights as given, "learned", or a file
    normalize: bool = False  # each layer's vectors scaled to length 1 before the sum (--mix-norm)

    def apply(self, layers: np.ndarray) -> np.ndarray:
        """Layers (L + 1, ..., d) -> the mixed vectors (..., d)."""
        return mix_layers(layers, self.weights, self.gamma, normalize=self.normalize)

    def formula(self) -> str:
        """The mix as a person reads it, e.g. ``0.2·h0 + 0.8·h1`` or, normalised, ``0.5·h0/|h0| + 0.5·h2/|h2|``
        (layers with weight 0 left out)."""
        layer = "h{j}/|h{j}|" if self.normalize else "h{j}"
        terms = " + ".join(f"{s:.3g}·" + layer.format(j=j) for j, s in enumerate(self.weights) if s > 0)
        return terms if self.gamma == 1 else f"{self.gamma:.3g}·({terms})"


def softmax(logits: np.ndarray) -> np.ndarray:
    """s = softmax(w) (K,): ELMo's parameterisation of the weights."""
    shifted = np.exp(logits - logits.max())  # (K,)
    return shifted / shifted.sum()


# ------------------------------------------------------------------------------ fitting
def gram(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Layer-by-layer dot products of n pairs, first and second (n, K, d): A = h_j·h_k of the first
    word, B of the second, C = h_j·h'_k across (each (n, K, K)). The mixed cosine of any weights
    comes from these alone, so fitting never touches the d-dimensional vectors again."""
    first, second = first.astype(np.float64), second.astype(np.float64)
    A = np.einsum("njd,nkd->njk", first, first)  # (n, K, d) x (n, K, d) -> (n, K, K)
    B = np.einsum("njd,nkd->njk", second, second)  # (n, K, K)
    C = np.einsum("njd,nkd->njk", first, second)  # (n, K, K)
    return A, B, C


def mixed_cosines(A: np.ndarray, B: np.ndarray, C: np.ndarray, s: np.ndarray) -> np.ndarray:
    """cos(Σ s_j h_j, Σ s_j h'_j) of n pairs from their Gram matrices (n, K, K) -> (n,); 0 for a zero vector."""
    dot = np.einsum("j,njk,k->n", s, C, s)  # (n,) u·v
    norms = np.sqrt(np.einsum("j,njk,k->n", s, A, s) * np.einsum("j,njk,k->n", s, B, s))  # (n,) |u| |v|
    return np.divide(dot, norms, out=np.zeros_like(dot), where=norms > 0)


@dataclass(frozen=True)
class Fit:
    """What :func:`fit` learned: P(same) = σ(γ² · cos + bias), cos the mixed cosine."""

    weights: np.ndarray  # (K,) s_j = softmax(logits)
    logits: np.ndarray  # (K,) w_j
    gamma: float
    bias: float
    loss: float  # mean cross-entropy at the optimum
    iterations: int
    converged: bool


def objective(theta: np.ndarray, A, B, C, targets: np.ndarray, sample_weight: np.ndarray, ridge: float):
    """Cross-entropy of σ(γ² cos + b) against targets in [0, 1] (n,), and its gradient.

    θ = (w_0 ... w_{K-1}, log γ, b). Labels may be graded (an SCWS rating / 10): the same loss with
    soft targets. ``ridge`` · |w|² pins the softmax's free shift (ELMo regularises w the same way)."""
    K = A.shape[1]
    w, log_gamma, bias = theta[:K], theta[K], theta[K + 1]
    s, g2 = softmax(w), math.exp(2 * log_gamma)  # (K,), γ²
    Cs, CTs = np.einsum("njk,k->nj", C, s), np.einsum("nkj,k->nj", C, s)  # (n, K) C s, Cᵀ s
    As, Bs = np.einsum("njk,k->nj", A, s), np.einsum("njk,k->nj", B, s)  # (n, K)
    dot, P, Q = Cs @ s, As @ s, Bs @ s  # (n,) u·v, |u|², |v|²
    ok = (P > 0) & (Q > 0)  # (n,) pairs whose mixed vectors are both non-zero
    root = np.sqrt(np.where(ok, P * Q, 1.0))  # (n,)
    cos = np.where(ok, dot / root, 0.0)  # (n,)
    z = g2 * cos + bias  # (n,) log-odds
    loss_each = np.logaddexp(0, z) - targets * z  # (n,) cross-entropy, stable for any z
    loss = float(sample_weight @ loss_each) + ridge * float(w @ w)
    dz = sample_weight * (1 / (1 + np.exp(-z)) - targets)  # (n,) dL/dz
    # dcos/ds = (C + Cᵀ)s / (|u||v|) - cos (As / |u|² + Bs / |v|²)
    dcos = np.where(
        ok[:, None],
        (Cs + CTs) / root[:, None]
        - cos[:, None] * (As / np.where(ok, P, 1)[:, None] + Bs / np.where(ok, Q, 1)[:, None]),
        0.0,
    )  # (n, K)
    ds = g2 * (dz @ dcos)  # (K,)
    dw = s * (ds - s @ ds) + 2 * ridge * w  # (K,) softmax Jacobian (diag(s) - s sᵀ) ds
    grad = np.concatenate([dw, [2 * g2 * float(dz @ cos), float(dz.sum())]])
    return loss, grad


def fit(
    A: np.ndarray,
    B: np.ndarray,
    C: np.ndarray,
    targets: np.ndarray,
    *,
    sample_weight: np.ndarray | None = None,
    ridge: float = 1e-3,
    max_iterations: int = 500,
) -> Fit:
    """Learn s = softmax(w) and γ (and the bias of the link) by L-BFGS on the cross-entropy.

    A, B, C (n, K, K) from :func:`gram`; targets (n,) in [0, 1]; sample_weight (n,) sums to 1
    (default: uniform). Only the mixing weights, γ and one bias are learned: the ELMo recipe."""
    from scipy.optimize import minimize  # scipy: only fit-mix fits, not --mix 0.2,0.8

    n, K = A.shape[0], A.shape[1]
    weight = np.full(n, 1 / n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    theta0 = np.zeros(K + 2)  # uniform weights, γ = 1, no bias
    found = minimize(
        objective,
        theta0,
        args=(A, B, C, np.asarray(targets, dtype=np.float64), weight, ridge),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": max_iterations},
    )
    logits = found.x[:K]
    return Fit(
        weights=softmax(logits),
        logits=logits,
        gamma=math.exp(found.x[K]),
        bias=float(found.x[K + 1]),
        loss=float(found.fun),
        iterations=int(found.nit),
        converged=bool(found.success),
    )
