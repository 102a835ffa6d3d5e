"""Self-attention in plain NumPy: how static word vectors become contextual ones.

Each step of scaled dot-product attention is a small public function, so a caller can run the steps
one by one and show every intermediate matrix (B sentences, h heads, T tokens)::

    scores  = attention_scores(q, k, scale=False)          # (B, h, T, T)  raw dot products q . k
    scores  = scale_scores(scores, d_k, scale=True)         # (B, h, T, T)  / sqrt(d_k) / temperature
    scores  = add_key_bias(scores, key_bias)                # (B, h, T, T)  optional per-key prior
    weights = normalize(scores, allowed, causal=True)       # (B, h, T, T)  softmax, rows sum to 1
    context = weights @ v                                   # (B, h, T, d_v)

:func:`attention` does these steps at once; :func:`encode` runs whole layers (projections, heads,
residual, layer norm, positions) on a batch of sentences and returns every layer's weights.

>>> import numpy as np
>>> x = np.array([[5.0, 2, 0], [0, 0, 5], [0, 5, 0], [0, 0, 6]])  # apple is the phone
>>> result = encode(x, AttentionConfig(scale=False))
>>> result.weights.shape  # (layers, heads, T, T) for one unbatched sentence
(1, 1, 4, 4)
>>> print(np.round(result.weights[0, 0, 2], 3))  # "phone" attends to itself
[0. 0. 1. 0.]

Masks are boolean, True = the query may attend to the key. Masked keys always get weight exactly 0;
a query without any allowed key (padding, or exclude_self in a one-token sentence) gets all-zero
weights and a zero context, never NaN. All arithmetic keeps the input dtype (float32 or float64).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ctxembed.core.projections import (
    HeadProjection,
    LayerParams,
    identity_params,
    project_heads,
    random_params,
    shared_projection,
    validate_params,
)
from ctxembed.declarations import AttentionConfig, CausalMode, Normalization

__all__ = [
    "AttentionConfig",
    "AttentionSteps",
    "EncodeResult",
    "LayerSteps",
    "HeadProjection",
    "LayerParams",
    "add_key_bias",
    "attention",
    "attention_layer",
    "attention_scores",
    "attention_steps",
    "build_mask",
    "byte_hashes",
    "encode",
    "flat_twins",
    "identity_params",
    "input_positions",
    "layer_norm",
    "normalize",
    "project_heads",
    "query_rows",
    "random_params",
    "scale_scores",
    "shared_projection",
    "sinusoidal_positions",
    "softmax",
    "sum_normalize",
    "sentence_twins",
    "twin_ids",
    "validate_params",
]

NORMALIZATIONS = tuple(n.value for n in Normalization)
CAUSAL_MODES = tuple(m.value for m in CausalMode)


# ---------------------------------------------------------------- the steps of one attention call


def attention_scores(q: np.ndarray, k: np.ndarray, *, scale: bool = True, temperature: float = 1.0) -> np.ndarray:
    """Query-key dot products: q (..., T_q, d_k), k (..., T_k, d_k) -> scores (..., T_q, T_k).

    With ``scale`` the scores are divided by sqrt(d_k), then by ``temperature`` (see :func:`scale_scores`).
    """
    scores = q @ np.swapaxes(k, -1, -2)  # (..., T, d_k) x (..., d_k, T) -> (..., T, T)
    return scale_scores(scores, q.shape[-1], scale=scale, temperature=temperature)


def scale_scores(
    scores: np.ndarray, d_k: int, *, scale: bool = True, temperature: float = 1.0, out: np.ndarray | None = None
) -> np.ndarray:
    """Divide scores (..., T, T) by sqrt(d_k) if ``scale``, and by ``temperature``; same shape and dtype
    (into ``out`` when given, which may be ``scores`` itself).

    Scaling keeps the softmax out of saturation: dot products of d_k-dimensional vectors grow like sqrt(d_k).
    """
    divisor = score_divisor(d_k, scale=scale, temperature=temperature)
    if divisor == 1.0:
        return scores
    return np.divide(scores, divisor, out=out)  # (..., T, T); a Python float keeps float32 scores float32


def score_divisor(d_k: int, *, scale: bool = True, temperature: float = 1.0) -> float:
    """What scores are divided by: sqrt(d_k) * temperature, or the temperature alone without ``scale``."""
    return (math.sqrt(d_k) if scale else 1.0) * temperature


def add_key_bias(scores: np.ndarray, key_bias: np.ndarray | None, out: np.ndarray | None = None) -> np.ndarray:
    """Add a per-key bias (T,) or (B, T) to every query's scores (B, ..., T, T); None changes nothing.
    The sum goes into ``out`` when given (which may be ``scores`` itself).

    A bias of log(w_j) multiplies key j's softmax weight by w_j (then renormalises); -inf removes the key.
    """
    if key_bias is None:
        return scores
    dtype = scores.dtype if np.issubdtype(scores.dtype, np.floating) else np.float64
    key_bias = np.asarray(key_bias, dtype=dtype)
    if key_bias.ndim not in (1, 2) or key_bias.shape[-1] != scores.shape[-1]:
        T = scores.shape[-1]
        raise ValueError(f"key_bias has shape {key_bias.shape}, expected (T,) or (B, T) with T={T}")
    # (B, T) -> (B, 1, ..., 1, T): the same bias for every head and every query
    ones = (1,) * (scores.ndim - key_bias.ndim)
    expanded = key_bias.reshape(key_bias.shape[:-1] + ones + key_bias.shape[-1:])
    return np.add(scores, expanded, out=out)  # (B, h, T, T)


def softmax(scores: np.ndarray, allowed: np.ndarray | None = None, *, out: np.ndarray | None = None) -> np.ndarray:
    """Numerically stable softmax over the last axis, restricted to allowed keys: (..., T) -> (..., T).

    ``allowed`` is a boolean mask broadcastable to ``scores`` (True = keep); a score of -inf counts as
    masked too. Masked keys get exactly 0; a row without any allowed key is all zeros. ``out`` (float,
    scores' shape; may be ``scores`` itself) is where the weights go when every row has a finite
    maximum (the usual case); otherwise the result is a new array (a caller checks which it got).
    """
    masked = scores if allowed is None else np.where(allowed, scores, -np.inf)  # (..., T, T)
    row_max = masked.max(axis=-1, keepdims=True)  # (..., T, 1)
    # Subtracting the row max keeps every exp() <= 1, so scores of 1e4 cannot overflow.
    # A fully masked row has max -inf; use 0 there to avoid -inf - (-inf) = NaN.
    finite = np.isfinite(row_max)  # (..., T, 1)
    row_max = np.where(finite, row_max, 0)  # (..., T, 1)
    if masked is not scores:
        into = masked  # np.where's own new array
    elif out is not None and finite.all():
        into = out  # each row keeps exp(0) = 1 at its max, so no row needs the zero-sum fallback that reads scores
    else:
        into = None  # a new array
    shifted = np.subtract(masked, row_max, out=into)  # (..., T, T) exp (and then the division) run in place in it
    exponentials = np.exp(shifted, out=shifted if shifted.dtype.kind == "f" else None)  # masked keys: exp(-inf) = 0
    return _normalize_rows(exponentials, scores, allowed)


def sum_normalize(
    scores: np.ndarray, allowed: np.ndarray | None = None, *, out: np.ndarray | None = None
) -> np.ndarray:
    """Divide each score by its row sum: w_j = max(s_j, 0) / sum_i max(s_i, 0) over allowed keys.

    Negative scores are clamped to 0 (a dissimilar word gets no weight rather than a negative one). A row
    whose allowed scores are all <= 0 gets uniform weights over its allowed keys; masked keys get 0.
    Dividing every score by the same number (scaling, temperature) does not change these weights.
    ``out`` is accepted as :func:`softmax` takes it, and unused: the result is a new array (the
    uniform fallback reads the scores, so they must stay).
    """
    positive = np.maximum(scores, 0)  # (..., T, T); a score of -inf gets 0
    if allowed is not None:
        positive = np.where(allowed, positive, 0)  # (..., T, T)
    return _normalize_rows(positive, scores, allowed)


_NORMALIZERS: dict[str, Callable[..., np.ndarray]] = {"softmax": softmax, "sum": sum_normalize}


def normalize(
    scores: np.ndarray,
    allowed: np.ndarray | None = None,
    *,
    normalization: str = "softmax",
    causal: bool = False,
    causal_mode: str = "before",
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Turn scores (..., T, T) into weights (..., T, T) with the chosen normaliser.

    ``allowed`` (padding, exclude-self) is always applied before normalising. With ``causal`` the
    future keys (j > i) are removed too: ``causal_mode="before"`` masks them first (score -inf), then
    normalises; ``"after"`` normalises over every allowed key, zeroes the future and renormalises what
    is left (the notes' second recipe). Both are equal in exact arithmetic. If future keys out-score
    the past by more than exp's range (~745 in float64, ~103 in float32), every surviving weight
    underflows to 0; such rows take the "before" result, which is the recipe's exact value.
    ``out`` (may be ``scores`` itself) is where the normaliser may write the weights without ``causal``
    (see :func:`softmax`); the result is a new array otherwise.
    """
    if normalization not in _NORMALIZERS:
        raise ValueError(f"normalization must be one of {NORMALIZATIONS}, got {normalization!r}")
    if causal_mode not in CAUSAL_MODES:
        raise ValueError(f"causal_mode must be one of {CAUSAL_MODES}, got {causal_mode!r}")
    normalizer = _NORMALIZERS[normalization]
    if not causal:
        return normalizer(scores, allowed, out=out)
    past = np.tril(np.ones(scores.shape[-2:], dtype=bool))  # (T, T) key j <= query i
    causal_allowed = past if allowed is None else allowed & past  # (..., T, T)
    masked_first = normalizer(scores, causal_allowed)  # (..., T, T)
    if causal_mode == "before":
        return masked_first
    weights = normalizer(scores, allowed)  # (..., T, T) over past and future keys
    kept = np.where(past, weights, 0)  # (..., T, T) future keys zeroed
    total = kept.sum(axis=-1, keepdims=True)  # (..., T, 1)
    return np.where(total > 0, kept / np.where(total > 0, total, 1), masked_first)  # (..., T, T)


@dataclass(frozen=True)
class AttentionSteps:
    """Every intermediate result of one attention call, as :func:`attention_steps` computed it."""

    raw_scores: np.ndarray | None  # (..., T, T) q . k (None unless kept)
    scaled_scores: np.ndarray | None  # (..., T, T) raw / divisor (None unless kept)
    divisor: float  # sqrt(d_k) if scaled, times the temperature
    key_bias: np.ndarray | None  # (T,) or (B, T) added to every query's scores
    scores: np.ndarray | None  # (..., T, T) scaled scores plus key bias: what the normaliser saw (None unless kept)
    allowed: np.ndarray | None  # mask broadcastable to scores (padding, self); causal is the normaliser's
    weights: np.ndarray  # (..., T, T)
    context: np.ndarray | None  # (..., T, d_v); None when no values were given


def attention_steps(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray | None,
    *,
    allowed: np.ndarray | None = None,
    key_bias: np.ndarray | None = None,
    scale: bool = True,
    temperature: float = 1.0,
    normalization: str = "softmax",
    causal: bool = False,
    causal_mode: str = "before",
    keep: bool = True,
    out: np.ndarray | None = None,
) -> AttentionSteps:
    """Attention, one step at a time: the only implementation, used by :func:`attention` and --explain.

    ``keep=False`` drops the raw, scaled and biased scores as soon as they are used (less memory for
    batches): every step then runs in the products' own array, which ends up holding the weights.
    ``out`` (B, h, T, T) of the scores' float dtype, only with ``keep=False``, is that array: the weights
    are written there (e.g. a slice of a caller's (L, B, h, T, T)), so they need no copy afterwards.
    ``v=None`` stops at the weights (``context`` is None): what a caller wanting the weights alone needs.
    """
    if keep and out is not None:
        raise ValueError("out holds the weights in place of the scores: give it with keep=False only")
    raw = np.matmul(q, np.swapaxes(k, -1, -2), out=out)  # (B, h, T, d_k) x (B, h, d_k, T) -> (B, h, T, T)
    divisor = score_divisor(q.shape[-1], scale=scale, temperature=temperature)
    own = None if keep else raw  # nothing kept: every step in the products' own array, one (B, h, T, T)
    scaled = scale_scores(raw, q.shape[-1], scale=scale, temperature=temperature, out=own)  # (B, h, T, T)
    raw = raw if keep else None
    scores = add_key_bias(scaled, key_bias, out=own)  # (B, h, T, T)
    scaled = scaled if keep else None
    weights = normalize(
        scores, allowed, normalization=normalization, causal=causal, causal_mode=causal_mode, out=own
    )  # (B, h, T, T)
    if out is not None and weights is not out:
        out[...] = weights  # a normaliser that could not work in place (causal, sum, a row with no finite score)
        weights = out
    scores = scores if keep else None
    context = None if v is None else weights @ v  # (B, h, T, T) x (B, h, T, d_v) -> (B, h, T, d_v)
    return AttentionSteps(raw, scaled, divisor, key_bias, scores, allowed, weights, context)


def attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    allowed: np.ndarray | None = None,
    key_bias: np.ndarray | None = None,
    scale: bool = True,
    temperature: float = 1.0,
    normalization: str = "softmax",
    causal: bool = False,
    causal_mode: str = "before",
    out: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Attention: q, k (..., T, d_k), v (..., T, d_v) -> context (..., T, d_v), weights (..., T, T).

    ``allowed`` (broadcastable to (..., T, T), True = may attend) comes from :func:`build_mask`;
    ``key_bias`` (T,) or (B, T) is added to the scaled scores of each key before normalisation;
    ``causal`` hides future keys, placed by ``causal_mode`` (see :func:`normalize`); the weights are
    computed in ``out`` (..., T, T) when given (see :func:`attention_steps`).
    """
    steps = attention_steps(
        q,
        k,
        v,
        allowed=allowed,
        key_bias=key_bias,
        scale=scale,
        temperature=temperature,
        normalization=normalization,
        causal=causal,
        causal_mode=causal_mode,
        keep=False,
        out=out,
    )
    return steps.context, steps.weights


def build_mask(
    T: int,
    *,
    lengths: np.ndarray | None = None,
    token_mask: np.ndarray | None = None,
    causal: bool = False,
    exclude_self: bool = False,
    twins: np.ndarray | None = None,
) -> np.ndarray:
    """Boolean mask (B or 1, 1, T, T), True = query i may attend to key j; broadcasts over heads.

    ``lengths`` (B,) marks the first lengths[b] tokens of sentence b as real; ``token_mask`` (B, T) marks
    real tokens directly (True = real, the opposite of torch's key_padding_mask). Padding is masked as a
    key and as a query, so a padding row has no allowed key and comes out all zero. ``causal`` bakes the
    triangle into the mask (the "before" placement); :func:`encode` passes it to :func:`attention` instead.
    ``twins`` (B, T) or (T,) ids from :func:`twin_ids` masks each token's twins: the other tokens with its id.
    """
    allowed = np.ones((1, 1, T, T), dtype=bool)  # (1, 1, T, T)
    real = _real_tokens(T, lengths, token_mask)  # (B, T) or None
    if real is not None:
        # a pair is allowed when both the query and the key are real tokens
        allowed = real[:, None, :, None] & real[:, None, None, :]  # (B,1,T,1) & (B,1,1,T) -> (B,1,T,T)
    if causal:
        allowed = allowed & np.tril(np.ones((T, T), dtype=bool))  # key j <= query i
    if exclude_self:
        allowed = allowed & ~np.eye(T, dtype=bool)  # key j != query i
    if twins is not None:
        allowed = allowed & ~_twin_pairs(T, twins)  # key j is no copy of query i
    return allowed


def twin_ids(x: np.ndarray) -> np.ndarray:
    """Static vectors (..., T, d) -> ids (..., T): equal ids for identical vectors (copies of one word,
    "bank" and "bank"), a distinct id for every zero vector (an unknown word is no copy of another).

    The ids come from the static vectors, before any projection, so copies are found exactly.

    >>> twin_ids(np.array([[1.0, 0], [0, 1], [1, 0], [0, 0], [0, 0]])).tolist()
    [0, 1, 0, 3, 4]
    """
    x = np.asarray(x)
    rows = np.ascontiguousarray(x.reshape(-1, x.shape[-1]))  # (n, d)
    as_bytes = rows.view(np.dtype((np.void, rows.itemsize * rows.shape[1]))).ravel()  # (n,) one item a row
    _, first, inverse = np.unique(as_bytes, return_index=True, return_inverse=True)  # ids: first copy's index
    ids = first[inverse.ravel()]  # (n,) the index of each row's first copy
    zero = ~rows.any(axis=1)  # (n,)
    ids[zero] = np.flatnonzero(zero)  # each zero vector its own id
    return ids.reshape(x.shape[:-1])  # (..., T)


def sentence_twins(x: np.ndarray) -> np.ndarray | None:
    """Twin ids of static vectors (..., T, d) as :func:`twin_ids` gives them, but judged within each
    sentence: equal ids within a sentence exactly for copies of one vector (a zero vector is no copy),
    which is all the twin mask reads; or None when no sentence holds two copies of one vector: the
    twin mask then masks nothing, and the mask without it is the same, bit for bit.
    :func:`flat_twins` does the work, for sentences of any lengths laid end to end."""
    x = np.asarray(x)
    T, d = x.shape[-2], x.shape[-1]
    if T < 2:
        return None  # one token: no copy to mask
    rows = x.reshape(-1, d)  # (n, d) the sentences end to end
    ids = flat_twins(rows, np.full(len(rows) // T, T))  # (n,) or None
    return None if ids is None else ids.reshape(x.shape[:-1])  # (..., T)


def flat_twins(rows: np.ndarray, lengths: np.ndarray) -> np.ndarray | None:
    """Twin ids of sentences laid end to end: rows (n, d) the static vectors of sentences of
    ``lengths`` (S,) tokens, one after the other -> ids (n,), equal within a sentence exactly for
    copies of one vector (a zero vector is no copy); or None when no sentence holds two copies.
    Batch finds the twins of many groups of sentences in one pass (:mod:`ctxembed.batch.columns`).

    ``twin_ids`` sorts the whole rows as bytes, which cost batch more than its attention did (profile
    of Brown lines). Here each row is hashed (some of its bytes read as integers, weighted, summed
    with wrap-around: exact, so copies hash alike) together with its sentence, the rows are sorted
    by that key, and every candidate copy is then checked byte for byte against its first; a
    collision of different vectors falls back to ``twin_ids``."""
    rows = np.ascontiguousarray(rows)  # (n, d)
    n = len(rows)
    if (rows.itemsize * rows.shape[1]) % 8:
        return twin_ids(rows)
    words = rows.view(np.uint64)  # (n, w) a row's bytes as integers
    sampled = words[:, :: max(1, words.shape[1] // 8)]  # (n, ~8) enough to tell words apart (copies: checked)
    sentence = np.repeat(np.arange(len(lengths), dtype=np.uint64), lengths)  # (n,) the sentence of each row
    keys = byte_hashes(sampled) + sentence * _SENTENCE_WEIGHT  # (n,) uint64, wrapping
    order = np.argsort(keys, kind="stable")  # (n,) rows by key, in order within a key
    ordered = keys[order]  # (n,)
    repeats = ordered[1:] == ordered[:-1]  # (n - 1,) a key equal to the one before
    if not repeats.any():
        return None
    starts = np.where(np.concatenate([[True], ~repeats]), np.arange(n), 0)  # (n,) where each run begins
    ids = np.empty(n, np.int64)  # (n,)
    ids[order] = order[np.maximum.accumulate(starts)]  # each row: the first row with its key
    copies = np.flatnonzero(ids != np.arange(n))  # (c,) rows whose key came earlier
    if not (words[copies] == words[ids[copies]]).all():
        return twin_ids(rows)  # two different vectors, or sentences, with one key
    zero = copies[~rows[copies].any(axis=1)]  # copies of a zero vector (the first of them keeps its own id)
    ids[zero] = zero  # each zero vector its own id
    return ids


def byte_hashes(words: np.ndarray) -> np.ndarray:
    """Rows of bytes read as integers, words (n, w) uint64 -> (n,) uint64 hashes: each integer weighted by
    a fixed odd multiplier, summed with wrap-around. Exact, so equal rows hash alike; different rows
    may too, so a caller checks its candidates byte for byte (:func:`flat_twins`, the vocabulary's keys)."""
    return words @ _hash_weights(words.shape[1])  # (n,)


@functools.lru_cache(maxsize=8)
def _hash_weights(n: int) -> np.ndarray:
    """(n,) odd uint64 multipliers for :func:`byte_hashes` (fixed: Weyl sequence)."""
    return (np.arange(1, n + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)) | np.uint64(1)


_SENTENCE_WEIGHT = np.uint64(0xC2B2AE3D27D4EB4F)  # odd: copies in different sentences never share a key


def _twin_pairs(T: int, twins: np.ndarray) -> np.ndarray:
    """(B or 1, 1, T, T) True where key j is a twin of query i: the same id, another position."""
    twins = np.asarray(twins)
    if twins.ndim not in (1, 2) or twins.shape[-1] != T:
        raise ValueError(f"twins has shape {twins.shape}, expected (T,) or (B, T) with T={T}")
    ids = twins.reshape(-1, T)  # (B, T)
    same = ids[:, :, None] == ids[:, None, :]  # (B, T, 1) == (B, 1, T) -> (B, T, T)
    return (same & ~np.eye(T, dtype=bool))[:, None]  # (B, 1, T, T)


def _real_tokens(T: int, lengths: np.ndarray | None, token_mask: np.ndarray | None) -> np.ndarray | None:
    """(B, T) bool, True = real token, from lengths (B,) or token_mask (B, T); None if neither is given."""
    if lengths is not None and token_mask is not None:
        raise ValueError("give lengths or token_mask, not both")
    if token_mask is not None:
        token_mask = np.asarray(token_mask)
        if token_mask.dtype != bool or token_mask.ndim != 2 or token_mask.shape[1] != T:
            got = f"{token_mask.dtype} {token_mask.shape}"
            raise ValueError(f"token_mask must be a boolean (B, {T}) array, got {got}")
        return token_mask
    if lengths is not None:
        lengths = np.asarray(lengths)
        if lengths.ndim != 1 or not np.issubdtype(lengths.dtype, np.integer):
            raise ValueError(f"lengths must be a 1-D integer array (B,), got {lengths.dtype} {lengths.shape}")
        if np.any(lengths < 0) or np.any(lengths > T):
            raise ValueError(f"lengths must lie in [0, {T}], got {lengths.tolist()}")
        return np.arange(T)[None, :] < lengths[:, None]  # (1, T) < (B, 1) -> (B, T)
    return None


def _allowed_keys(scores: np.ndarray, allowed: np.ndarray | None) -> np.ndarray:
    """The mask broadcast to the scores' shape (..., T, T); a score of -inf is never allowed."""
    finite = ~np.isneginf(scores)  # (..., T, T)
    return finite if allowed is None else np.broadcast_to(allowed, scores.shape) & finite


def _normalize_rows(values: np.ndarray, scores: np.ndarray, allowed: np.ndarray | None) -> np.ndarray:
    """Divide non-negative values (..., T) by their row sum, in place (``values`` is the normaliser's own
    array). A zero-sum row becomes uniform over its allowed keys (``allowed``, and a score other than
    -inf), or stays all zero if it has none (no 0 / 0)."""
    total = values.sum(axis=-1, keepdims=True)  # (..., T, 1)
    if (total > 0).all():  # the usual case: no row needs the fallback, so skip building it
        return np.divide(values, total, out=values if values.dtype.kind == "f" else None)  # (..., T, T)
    allowed = _allowed_keys(scores, allowed)  # (..., T, T) bool
    count = allowed.sum(axis=-1, keepdims=True)  # (..., T, 1)
    uniform = (allowed / np.maximum(count, 1)).astype(values.dtype)  # (..., T, T)
    ratio = values / np.where(total > 0, total, 1)  # (..., T, T)
    return np.where(total > 0, ratio, uniform)  # (..., T, T)


# ---------------------------------------------------------------- layers: heads, residual, norm, positions


def sinusoidal_positions(T: int, d: int, dtype: np.dtype | type = np.float64) -> np.ndarray:
    """Sinusoidal position encodings (Vaswani et al. 2017) (T, d): PE[t, 2i] = sin(t / 10000^(2i/d)),
    PE[t, 2i+1] = cos(t / 10000^(2i/d))."""
    position = np.arange(T)[:, None]  # (T, 1)
    even = np.arange(0, d, 2)  # (ceil(d/2),) the 2i of each sin/cos pair
    angle = position / 10000.0 ** (even / d)  # (T, 1) / (ceil(d/2),) -> (T, ceil(d/2))
    encoding = np.zeros((T, d))  # (T, d)
    encoding[:, 0::2] = np.sin(angle)  # (T, ceil(d/2)) even dimensions
    encoding[:, 1::2] = np.cos(angle[:, : d // 2])  # (T, floor(d/2)) odd dimensions
    return encoding.astype(dtype)


def input_positions(x: np.ndarray, config: AttentionConfig) -> tuple[np.ndarray, np.ndarray | None]:
    """Where ``config.positions`` go: x (B, T, d) -> (the first layer's input (B, T, d), the positions
    every layer adds to its query and key inputs (T, d), or None). ``position_mode`` input adds them to
    x (the Transformer); query-key leaves x as it is and returns them for the queries and keys."""
    if not config.positions:
        return x, None
    positions = sinusoidal_positions(x.shape[-2], x.shape[-1], x.dtype)  # (T, d)
    if config.position_mode == "input":
        return x + positions, None  # (B, T, d) + (T, d)
    return x, positions


LAYER_NORM_EPS = 1e-5  # added to the variance before its square root, as torch's LayerNorm does


def layer_norm(x: np.ndarray, eps: float = LAYER_NORM_EPS) -> np.ndarray:
    """Normalise each vector (..., d) to mean 0 and variance 1 over its d components; no learned gain/bias."""
    mean = x.mean(axis=-1, keepdims=True)  # (..., 1)
    variance = x.var(axis=-1, keepdims=True)  # (..., 1), biased (divide by d) like torch's LayerNorm
    return (x - mean) / np.sqrt(variance + eps)  # (..., d)


@dataclass(frozen=True)
class LayerSteps:
    """One layer of :func:`encode` step by step (``encode(..., trace=True)``); B axis as in the input."""

    inputs: np.ndarray  # (B, T, d) the layer's input (positions added before layer 0)
    q: np.ndarray  # (B, h, T, d_k)
    k: np.ndarray  # (B, h, T, d_k)
    v: np.ndarray  # (B, h, T, d_v)
    attention: AttentionSteps  # scores, weights (B, h, T, T) and context (B, h, T, d_v)
    merged: np.ndarray  # (B, T, d_model) heads concatenated, then W_out if any
    output: np.ndarray  # (B, T, d_model) after residual and layer norm; padding rows 0
    pre_norm: np.ndarray | None = None  # (B, T, d_model) what layer norm normalised (None without layer norm)
    positions: np.ndarray | None = None  # (T, d) added to the queries' and keys' input only (query-key), or None

    def sentence(self, b: int, n: int) -> LayerSteps:
        """The steps of sentence ``b`` of a batch, cut to its ``n`` real tokens (the B axis dropped)."""
        a = self.attention
        bias = a.key_bias
        if bias is not None:
            bias = bias[b, :n] if bias.ndim == 2 else bias[:n]  # (n,)
        allowed = None if a.allowed is None else a.allowed[min(b, len(a.allowed) - 1), :, :n, :n]  # (1, n, n)
        cut = AttentionSteps(
            None if a.raw_scores is None else a.raw_scores[b, :, :n, :n],  # (h, n, n)
            None if a.scaled_scores is None else a.scaled_scores[b, :, :n, :n],  # (h, n, n)
            a.divisor,
            bias,
            None if a.scores is None else a.scores[b, :, :n, :n],  # (h, n, n)
            allowed,
            a.weights[b, :, :n, :n],  # (h, n, n)
            a.context[b, :, :n],  # (h, n, d_v)
        )
        return LayerSteps(
            self.inputs[b, :n],
            self.q[b, :, :n],
            self.k[b, :, :n],
            self.v[b, :, :n],
            cut,
            self.merged[b, :n],
            self.output[b, :n],
            None if self.pre_norm is None else self.pre_norm[b, :n],  # (n, d_model)
            None if self.positions is None else self.positions[:n],  # (n, d)
        )


def layer_steps(
    x: np.ndarray,
    layer: LayerParams,
    config: AttentionConfig,
    allowed: np.ndarray | None = None,
    key_bias: np.ndarray | None = None,
    *,
    keep: bool = True,
    values: bool = True,
    positions: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, AttentionSteps, np.ndarray | None]:
    """Multi-head attention of one layer, before residual and norm: x (B, T, d) -> q, k, v (B, h, T, d_k),
    the attention steps (weights (B, h, T, T)) and the merged output (B, T, d_model): heads concatenated
    (h * d_v), then W_out if present. ``allowed`` masks padding and self; ``config.causal`` is applied here.
    ``values=False`` stops at the weights: v, the context and the merged output are None. ``positions``
    (T, d), when given, is added to the queries' and keys' input only (``position_mode`` query-key).
    """
    B, T, _ = x.shape
    if positions is None:
        q, k, v = project_heads(x, layer, config.heads, values=values)  # (B,h,T,d_k), (B,h,T,d_k), (B,h,T,d_v)
    else:
        q, k, _ = project_heads(x + positions, layer, config.heads, values=False)  # (B, h, T, d_k) each
        v = project_heads(x, layer, config.heads)[2] if values else None  # (B, h, T, d_v)
    steps = attention_steps(
        q,
        k,
        v,
        allowed=allowed,
        key_bias=key_bias,
        scale=config.scale,
        temperature=config.temperature,
        normalization=config.normalization,
        causal=config.causal,
        causal_mode=config.causal_mode,
        keep=keep,
    )  # context (B, h, T, d_v), weights (B, h, T, T)
    if not values:
        return q, k, None, steps, None
    merged = steps.context.transpose(0, 2, 1, 3).reshape(B, T, -1)  # (B, h, T, d_v) -> (B, T, h * d_v)
    if layer.W_out is not None:
        merged = merged @ layer.W_out.astype(x.dtype)  # (B, T, h*d_v) x (h*d_v, d_model) -> (B, T, d_model)
        if layer.b_out is not None:
            merged = merged + layer.b_out.astype(x.dtype)  # (B, T, d_model) + (d_model,)
    return q, k, v, steps, merged


def attention_layer(
    x: np.ndarray,
    layer: LayerParams,
    config: AttentionConfig,
    allowed: np.ndarray | None = None,
    key_bias: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Multi-head attention of one layer, before residual and norm: x (B, T, d) -> (output (B, T, d_model),
    weights (B, h, T, T)); see :func:`layer_steps`."""
    _, _, _, steps, merged = layer_steps(x, layer, config, allowed, key_bias, keep=False)
    return merged, steps.weights


@dataclass(frozen=True)
class EncodeResult:
    """What :func:`encode` returns. Unbatched input drops the B axis everywhere."""

    contextual: np.ndarray | None  # (B, T, d_model) the last layer's output; padding positions are 0 (None: not asked)
    weights: np.ndarray | None  # (L, B, h, T, T) the attention weights of every layer and head (None: not kept)
    layer_outputs: list[np.ndarray]  # L arrays (B, T, d_l): each layer's output, the next layer's input (L - 1
    # without outputs: the last layer stops at its weights)
    steps: list[LayerSteps] | None = None  # with trace=True: every intermediate step of every layer


def encode(
    x: np.ndarray,
    config: AttentionConfig,
    params: list[LayerParams] | None = None,
    *,
    lengths: np.ndarray | None = None,
    token_mask: np.ndarray | None = None,
    key_bias: np.ndarray | None = None,
    twins: np.ndarray | None = None,
    trace: bool = False,
    keep_weights: bool = True,
    outputs: bool = True,
) -> EncodeResult:
    """Run ``config.layers`` attention layers over static vectors x (B, T, d) or (T, d).

    ``params`` holds one :class:`LayerParams` per layer (None = identity projections). ``lengths`` (B,)
    or ``token_mask`` (B, T) mark the real tokens of a padded batch; ``key_bias`` (T,) or (B, T) is added
    to every layer's scores. With ``config.exclude_twins``, ``twins`` (B, T) or (T,) are the tokens'
    :func:`twin_ids` (by default, those of x itself). Each layer computes ``attention_layer``, then, if switched on,
    ``residual_scale * input + output`` and the post-norm ``layer_norm``. Integer input becomes float64.
    ``trace`` keeps every intermediate step (:class:`LayerSteps`): the numbers --explain shows, and
    those training's backward pass (:mod:`ctxembed.train.backprop`) differentiates, are the ones this
    call computed, not a re-run. ``keep_weights=False`` drops each layer's weights once its
    context is computed (``weights`` is None), so memory holds one layer's weights, not all of them.
    ``outputs=False`` is for a caller that wants the weights alone: the last layer stops at its
    weights (no values, context, residual or norm) and ``contextual`` is None. Every weight is the
    same as with outputs, bit for bit: the steps that make it are the same.
    """
    if trace and not outputs:
        raise ValueError("trace keeps every step, so it needs outputs=True")
    if not (outputs or keep_weights):
        raise ValueError("outputs=False and keep_weights=False would compute nothing")
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    unbatched = x.ndim == 2
    if unbatched:
        x = x[None]  # (T, d) -> (1, T, d)
    if x.ndim != 3 or x.shape[1] == 0:
        raise ValueError(f"x must have shape (T, d) or (B, T, d) with T >= 1, got {x.shape}")
    B, T, d = x.shape
    params = identity_params(config) if params is None else params
    validate_params(params, d, config)
    real = _real_tokens(T, lengths, token_mask)  # (B, T), or None: no padding
    if real is not None and real.shape[0] != B:
        raise ValueError(f"lengths/token_mask describe {real.shape[0]} sentences but x has {B}")
    if config.exclude_twins and twins is None:
        twins = sentence_twins(x)  # (B, T), or None: no sentence repeats a vector
    # padding, exclude-self and twins are masked here; the causal triangle is placed by attention()
    allowed = build_mask(
        T, token_mask=real, exclude_self=config.exclude_self, twins=twins if config.exclude_twins else None
    )  # (B or 1, 1, T, T)
    keep = None if real is None else real[:, :, None]  # (B, T, 1): the real tokens, whose rows are kept

    hidden, steering = input_positions(x, config)  # (B, T, d), (T, d) or None
    layer_outputs, layer_weights, traced = [], [], []
    for number, layer in enumerate(params):
        if not outputs and number == len(params) - 1:
            *_, steps, _ = layer_steps(
                hidden, layer, config, allowed, key_bias, keep=False, values=False, positions=steering
            )
            layer_weights.append(steps.weights)  # (B, h, T, T)
            break
        q, k, v, steps, merged = layer_steps(hidden, layer, config, allowed, key_bias, keep=trace, positions=steering)
        output = merged  # (B, T, d')
        if config.residual:
            output = config.residual_scale * hidden + output  # (B, T, d); sizes checked by validate_params
        pre_norm = output if config.layer_norm else None  # (B, T, d') kept by a trace: backprop's layer norm
        if config.layer_norm:
            output = layer_norm(output)  # (B, T, d')
        if keep is not None:
            output = np.where(keep, output, 0)  # (B, T, d'); padding positions stay 0 in every layer
        if trace:
            traced.append(LayerSteps(hidden, q, k, v, steps, merged, output, pre_norm, steering))
        hidden = output
        layer_outputs.append(hidden)
        if keep_weights:
            layer_weights.append(steps.weights)  # (B, h, T, T)
        del steps  # without keep_weights (and trace), the next layer reuses this layer's weights' memory
    weights = np.stack(layer_weights) if keep_weights else None  # L x (B, h, T, T) -> (L, B, h, T, T)
    contextual = hidden if outputs else None  # (B, T, d_model)
    if unbatched:
        steps_of_one = [s.sentence(0, T) for s in traced] if trace else None
        one = None if weights is None else weights[:, 0]  # (L, h, T, T)
        top = None if contextual is None else contextual[0]  # (T, d_model)
        return EncodeResult(top, one, [output[0] for output in layer_outputs], steps_of_one)
    return EncodeResult(contextual, weights, layer_outputs, traced if trace else None)


def query_rows(
    x: np.ndarray,
    config: AttentionConfig,
    layer: LayerParams,
    rows: np.ndarray,
    *,
    key_bias: np.ndarray | None = None,
    twins: np.ndarray | None = None,
) -> np.ndarray:
    """One layer's output at one query per sentence: x (S, T, d), rows (S,) -> (S, d_model), the
    numbers :func:`encode` gives ``output[s, rows[s]]`` for a one-layer, non-causal config, bit for bit.

    A caller that wants one token's vector needs one row of the weights: softmax(q_r Kᵀ / √d_k) V.
    Bit for bit, because every step is the one encode takes, on the same shapes where shape matters:
    the scores are the same (T, T) matrix products, then each sentence's row r goes through the
    same element-wise steps and row reductions (scale, key bias, mask, softmax); its weights are
    put in an otherwise zero (S, h, T, T) array, so the weighted sum is the same (T, T) x (T, d_v)
    product, whose row r depends on row r alone. (A (1, T) product would not do: BLAS rounds a
    one-row product differently.) What is saved is the masks and the softmax over T² numbers, and
    everything after the weights for the other rows. tests/test_query_rows.py checks it against
    encode, and batch's records against the full path."""
    if config.causal:
        raise ValueError("query_rows is for non-causal attention")
    S, T, _ = x.shape
    at = np.arange(S)  # (S,)
    hidden, steering = input_positions(x, config)  # (S, T, d), (T, d) or None
    if steering is None:
        q, k, v = project_heads(hidden, layer, config.heads)  # (S, h, T, d_k), (S, h, T, d_k), (S, h, T, d_v)
    else:
        q, k, _ = project_heads(hidden + steering, layer, config.heads, values=False)  # (S, h, T, d_k) each
        v = project_heads(hidden, layer, config.heads)[2]  # (S, h, T, d_v)
    raw = q @ np.swapaxes(k, -1, -2)  # (S, h, T, d_k) x (S, h, d_k, T) -> (S, h, T, T): encode's products
    picked = raw[at, :, rows][:, :, None, :]  # (S, h, 1, T) each sentence's query row
    scaled = scale_scores(picked, q.shape[-1], scale=config.scale, temperature=config.temperature)  # (S, h, 1, T)
    scores = add_key_bias(scaled, key_bias)  # (S, h, 1, T)
    allowed = np.ones((S, 1, 1, T), dtype=bool)  # the query rows of build_mask's (S, 1, T, T)
    if config.exclude_self:
        allowed[at, 0, 0, rows] = False  # key j != query r
    if twins is not None:
        ids = np.asarray(twins).reshape(S, T)  # (S, T)
        copies = ids == ids[at, rows][:, None]  # (S, T) keys with the query's id
        copies[at, rows] = False  # a token is no twin of itself
        allowed[:, 0, 0] &= ~copies
    weights = normalize(scores, allowed, normalization=config.normalization)  # (S, h, 1, T)
    spread = np.zeros(raw.shape, weights.dtype)  # (S, h, T, T) zero but for the query rows
    spread[at, :, rows] = weights[:, :, 0]
    context = spread @ v  # (S, h, T, T) x (S, h, T, d_v) -> (S, h, T, d_v): encode's products
    merged = context.transpose(0, 2, 1, 3).reshape(S, T, -1)  # (S, T, h * d_v)
    if layer.W_out is not None:
        merged = merged @ layer.W_out.astype(x.dtype)  # (S, T, h*d_v) x (h*d_v, d_model): encode's products
        if layer.b_out is not None:
            merged = merged + layer.b_out.astype(x.dtype)  # (S, T, d_model) + (d_model,)
    output = merged[at, rows]  # (S, d_model) from here on every step is row by row
    if config.residual:
        output = config.residual_scale * hidden[at, rows] + output  # (S, d)
    if config.layer_norm:
        output = layer_norm(output)  # (S, d')
    return output


def mean_over_heads(weights: np.ndarray) -> np.ndarray:
    """The attention of all heads together: (..., h, T, T) -> (..., T, T), each row still summing to 1."""
    return weights.mean(axis=-3)  # (..., h, T, T) -> (..., T, T)


def masked_keys(
    T: int, *, causal: bool = False, exclude_self: bool = False, twins: np.ndarray | None = None
) -> list[list[int]]:
    """For each query i of a T-token sentence, the keys its weight is forced to 0 on by the settings
    (itself with ``exclude_self``, the future with ``causal``, in either placement, its twins when
    ``twins`` (T,) ids are given): what attend's documents carry, so a picture marks exactly these
    cells instead of deriving them again."""
    forced = ~build_mask(T, causal=causal, exclude_self=exclude_self, twins=twins)[0, 0]  # (T, T) True = weight 0
    return [np.flatnonzero(row).tolist() for row in forced]
