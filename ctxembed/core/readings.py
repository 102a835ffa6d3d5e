"""Readings of attention: what a weight means once the rest of the layer is taken into account.

A raw weight alpha_ij says how much query i looks at key j in one head of one layer. Three readings
put it in context, all forward-only, from the numbers the forward pass computed (no second run):

- ``mean``: the heads of a layer averaged, one (T, T) map per layer (:func:`mean_over_heads`);
- ``rollout`` (Abnar & Zuidema 2020): each layer's head mean with the residual connection standing
  in as 0.5 I, multiplied through the layers, so layer l's map says how much of each *input* token
  reaches position i after l + 1 layers (:func:`rollout`);
- ``value-norm`` (Kobayashi et al. 2020): what key j actually sends to query i is the vector
  alpha_ij f(x_j), f(x_j) = v_j W_out (the value times the head's rows of the output projection);
  a large weight on a token whose f(x_j) is short moves little. :func:`sent_vectors` gives f per head,
  :func:`value_norm` the norms ||alpha_ij f_h(x_j)|| per head and ||sum_h alpha^h_ij f_h(x_j)|| per
  layer, each row divided by its sum so that it reads like the weights (a share of what arrives).

>>> import numpy as np
>>> w = np.array([[[[0.5, 0.5], [0.0, 1.0]]]])  # (L=1, h=1, T=2, T=2)
>>> rollout(w)[0]                                  # 0.5 I + 0.5 A, rows sum to 1
array([[0.75, 0.25],
       [0.  , 1.  ]])
>>> v = np.array([[[3.0, 4.0], [0.0, 1.0]]])       # (h=1, T=2, d_v=2): |v_0| = 5, |v_1| = 1
>>> value_norm(w[0], sent_vectors(v, None)).heads[0]  # row 0: 0.5*5 against 0.5*1
array([[0.83333333, 0.16666667],
       [0.        , 1.        ]])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ctxembed.core.attention import mean_over_heads

__all__ = [
    "READINGS",
    "ValueNorm",
    "mean_over_heads",
    "rollout",
    "row_shares",
    "score_terms",
    "sent_vectors",
    "value_norm",
]

# The readings a command can show, and whether each has one map per head (else one per layer).
READINGS = {"raw": True, "mean": False, "rollout": False, "value-norm": True}
ROLLOUT_RESIDUAL = 0.5  # Abnar & Zuidema's stand-in for the residual connection: A_hat = 0.5 I + 0.5 A


def row_shares(values: np.ndarray) -> np.ndarray:
    """Non-negative values (..., T, T) divided by their row sums; an all-zero row stays zero (no 0 / 0)."""
    total = values.sum(axis=-1, keepdims=True)  # (..., T, 1)
    return values / np.where(total > 0, total, 1)  # (..., T, T)


def rollout(weights: np.ndarray, residual: float = ROLLOUT_RESIDUAL) -> np.ndarray:
    """Attention rollout: weights (L, h, T, T) -> (L, T, T), map l = A_hat_l ... A_hat_0.

    A_hat = residual * I + (1 - residual) * (mean of the layer's heads), rows renormalised (a query whose
    keys were all masked keeps itself). Entry [l, i, j] is the share of input token j in position i's
    vector after layer l, if every layer mixed its input as its attention says."""
    T = weights.shape[-1]
    identity = np.eye(T, dtype=weights.dtype)  # (T, T)
    mixed = residual * identity + (1 - residual) * mean_over_heads(weights)  # (L, T, T)
    mixed = row_shares(mixed)  # (L, T, T)
    out = np.empty_like(mixed)  # (L, T, T)
    through = identity  # (T, T) before any layer, each position holds only itself
    for layer, step in enumerate(mixed):
        through = step @ through  # (T, T) x (T, T) -> (T, T)
        out[layer] = through
    return out


def sent_vectors(values: np.ndarray, w_out: np.ndarray | None) -> np.ndarray:
    """What each token sends through each head: f_h(x_j) = v^h_j W_out^h, values (h, T, d_v) -> (h, T, D).

    ``w_out`` (h * d_v, D) is the output projection; head h's context meets only its rows
    h * d_v ... (h + 1) * d_v. Without one, the heads' contexts are concatenated as they are, so f_h(x_j)
    is v^h_j in head h's slice of the output (D = h * d_v, zeros elsewhere). A bias on the output is
    added once per query, not per key, so it belongs to no token and is left out."""
    heads, T, d_v = values.shape
    if w_out is None:
        sent = np.zeros((heads, T, heads * d_v), dtype=values.dtype)  # (h, T, h * d_v)
        for h in range(heads):
            sent[h, :, h * d_v : (h + 1) * d_v] = values[h]  # (T, d_v) into head h's slice
        return sent
    per_head = w_out.astype(values.dtype).reshape(heads, d_v, -1)  # (h * d_v, D) -> (h, d_v, D)
    return values @ per_head  # (h, T, d_v) x (h, d_v, D) -> (h, T, D)


@dataclass(frozen=True)
class ValueNorm:
    """Value-norm attention of one layer (Kobayashi et al. 2020), each row a share that sums to 1."""

    heads: np.ndarray  # (h, T, T) ||alpha^h_ij f_h(x_j)|| / row sum
    layer: np.ndarray  # (T, T) ||sum_h alpha^h_ij f_h(x_j)|| / row sum: the heads' vectors added, as a layer does
    sent_norms: np.ndarray  # (h, T) ||f_h(x_j)||: how long a vector token j sends through head h


def value_norm(weights: np.ndarray, sent: np.ndarray) -> ValueNorm:
    """weights (h, T, T) and the vectors each token sends (h, T, D) from :func:`sent_vectors` ->
    :class:`ValueNorm`. The layer map needs only the heads' Gram matrix per key, G_j = f(x_j) f(x_j)^T
    (h x h): ||sum_h a_h f_h||^2 = a^T G_j a with a = alpha_ij over heads, so no (T, T, D) array is made."""
    norms = np.linalg.norm(sent, axis=-1)  # (h, T)
    per_head = weights * norms[:, None, :]  # (h, T, T) * (h, 1, T): alpha^h_ij ||f_h(x_j)||
    gram = np.einsum("htd,gtd->thg", sent, sent)  # (h, T, D) x (h, T, D) -> (T, h, h) per key
    squared = np.einsum("hij,jhg,gij->ij", weights, gram, weights)  # (T, T) a^T G_j a per pair
    layer = np.sqrt(np.maximum(squared, 0))  # (T, T); rounding can leave -1e-17 where the sum is 0
    return ValueNorm(row_shares(per_head), row_shares(layer), norms)


def score_terms(query: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """The raw score q . k_j as its d_k terms q_d k_jd (BertViz's neuron view): query (d_k,), keys (T, d_k)
    -> (T, d_k); row j sums to q . k_j. Which dimensions make a query find a key, and which hold it back."""
    return keys * query[None, :]  # (T, d_k) * (1, d_k) -> (T, d_k)
