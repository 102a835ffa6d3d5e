"""The hand-written backward pass of the trained encoder, :func:`ctxembed.core.encoder.encode`. Plain NumPy;
every backward step mirrors one forward step, read bottom to top.

The forward pass is ``encode`` itself, run with ``tape=True``: its :class:`~ctxembed.core.encoder.EncoderTape`
keeps what the chain rule needs, so training differentiates the very numbers ``attend --model`` shows.
One layer, as ``encode`` runs it (N real pieces of a (B, T) batch; padding only inside attention)::

    q, k, v  = split_heads(x W_qkv + b_qkv)                   # (B, H, T, d_h) each
    context, weights = attention(q, k, v, key_bias=padding)   # the textbook path's own function
    z1       = x + merge_heads(context) W_o + b_o             # (N, D) residual
    attended = LayerNorm1(z1)                                 # (N, D) gain and bias
    z2       = attended + GELU(attended W_1 + b_1) W_2 + b_2  # (N, D) residual
    output   = LayerNorm2(z2)                                 # (N, D)

Backward: :func:`affine_layer_norm_backward` (LayerNorm2), :func:`feed_forward_backward` (with GELU's
slope, the derivative of what the forward computed), the residual's identity, LayerNorm1,
:func:`attention_out_backward`, attention through the textbook path's own
:func:`~ctxembed.train.backprop.weighted_sum_backward`, :func:`~ctxembed.train.backprop.softmax_backward`
and :func:`~ctxembed.train.backprop.scores_backward`, then :func:`project_qkv_backward`; wrapped per
layer by :func:`layer_backward`, the embeddings by :func:`embed_backward`, and the stack by
:func:`encode_backward`.

Gradients are keyed like :meth:`ctxembed.core.encoder.EncoderWeights.arrays` (``word``,
``layers.0.W_qkv``, ``layers.0.norm1.gain`` ...), each of its array's shape.
"""

from __future__ import annotations

import math

import numpy as np

from ctxembed.core.encoder import EncoderLayer, EncoderTape, EncoderWeights, LayerTape, Standardized
from ctxembed.train.backprop import layer_norm_backward, scores_backward, softmax_backward, weighted_sum_backward
from ctxembed.train.optim import RowGradient


def affine_layer_norm_backward(
    d_output: np.ndarray, kept: Standardized, gain: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """y = normed * gain + bias, normed = (z - mean z) / std: dL/dy (N, D) -> (dL/dz (N, D), dL/dgain (D,),
    dL/dbias (D,)); the normalisation's own step is the textbook path's :func:`layer_norm_backward`."""
    d_gain = np.einsum("nd,nd->d", d_output, kept.normed)  # (D,)
    d_bias = d_output.sum(axis=0)  # (D,)
    d_normed = d_output * gain  # (N, D)
    return layer_norm_backward(d_normed, kept.normed, 1.0 / kept.std), d_gain, d_bias  # (N, D)


def linear_backward(d_out: np.ndarray, inputs: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """out = inputs W + b: dL/dout (N, m) -> (dL/dinputs (N, n), dL/dW (n, m), dL/db (m,))."""
    d_W = inputs.T @ d_out  # (n, N) x (N, m) -> (n, m)
    d_b = d_out.sum(axis=0)  # (m,)
    return d_out @ W.T, d_W, d_b  # (N, m) x (m, n) -> (N, n)


def feed_forward_backward(
    d_out: np.ndarray, tape: LayerTape, layer: EncoderLayer
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """out = GELU(attended W_1 + b_1) W_2 + b_2: dL/dout (N, D) -> (dL/dattended (N, D), grads)."""
    d_inner, d_W_2, d_b_2 = linear_backward(d_out, tape.inner, layer.W_2)  # (N, F), (F, D), (D,)
    d_inner *= tape.slope  # (N, F) through GELU: its slope at its input
    d_attended, d_W_1, d_b_1 = linear_backward(d_inner, tape.attended, layer.W_1)  # (N, D), (D, F), (F,)
    return d_attended, {"W_1": d_W_1, "b_1": d_b_1, "W_2": d_W_2, "b_2": d_b_2}


def attention_out_backward(
    d_out: np.ndarray, tape: LayerTape, layer: EncoderLayer, real: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """out = merge_heads(context)[real] W_o + b_o: dL/dout (N, D) -> (dL/dcontext (B, H, T, d_h), dW_o, db_o).

    Padding queries' rows of the context reach no output, so their gradient is 0."""
    B, H, T, d_h = tape.q.shape
    d_merged, d_W_o, d_b_o = linear_backward(d_out, tape.merged, layer.W_o)  # (N, D), (D, D), (D,)
    if real.all():
        d_context = d_merged.reshape(B, T, H, d_h)  # (B, T, H, d_h) every row a piece
    else:
        d_context = np.zeros((B * T, H * d_h), d_out.dtype)  # (B*T, D)
        d_context[np.flatnonzero(real)] = d_merged  # (N, D) back in place
        d_context = d_context.reshape(B, T, H, d_h)  # (B, T, H, d_h)
    return d_context.transpose(0, 2, 1, 3), d_W_o, d_b_o  # (B, H, T, d_h)


def project_qkv_backward(
    d_qkv: np.ndarray, tape: LayerTape, layer: EncoderLayer, real: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q | k | v = x W_qkv + b_qkv, heads split: dL/d(q | k | v) (B, T, 3D) -> (dL/dx (N, D) at the real rows,
    dW_qkv (D, 3D), db_qkv (3D,)). A padding row's q, k and v reach nothing (its keys get weight 0, its
    query's output is dropped), so its gradient is 0 and only the real rows are multiplied."""
    B, T, width = d_qkv.shape
    rows = d_qkv.reshape(B * T, width)  # (B*T, 3D)
    if not real.all():
        rows = rows.take(np.flatnonzero(real), axis=0)  # (N, 3D) the real rows, in (B, T) order
    return linear_backward(rows, tape.rows, layer.W_qkv)  # (N, D), (D, 3D), (3D,)


def heads_of(d_qkv: np.ndarray, part: int, heads: int) -> np.ndarray:
    """The (B, H, T, d_h) view of part 0 (q), 1 (k) or 2 (v) of a (B, T, 3D) array: where attention's
    backward writes dL/dq, dL/dk and dL/dv, so they need no copy to become one (B*T, 3D) matrix."""
    B, T, width = d_qkv.shape
    return d_qkv.reshape(B, T, 3, heads, width // (3 * heads))[:, :, part].transpose(0, 2, 1, 3)  # (B, H, T, d_h)


def layer_backward(
    d_output: np.ndarray, tape: LayerTape, layer: EncoderLayer, real: np.ndarray
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The backward step of one encoder layer, from the tape its forward kept: dL/doutput (N, D) ->
    (dL/dinput (N, D), grads keyed by the layer's own names: ``W_qkv``, ``norm1.gain`` ...)."""
    d_z2, d_gain2, d_bias2 = affine_layer_norm_backward(d_output, tape.norm2, layer.norm2[0])  # (N, D)
    d_ffn_input, grads = feed_forward_backward(d_z2, tape, layer)  # (N, D)
    d_attended = d_z2 + d_ffn_input  # (N, D) residual: attended reaches z2 twice
    d_z1, d_gain1, d_bias1 = affine_layer_norm_backward(d_attended, tape.norm1, layer.norm1[0])  # (N, D)
    d_context, d_W_o, d_b_o = attention_out_backward(d_z1, tape, layer, real)  # (B, H, T, d_h)
    B, H, T, d_h = tape.q.shape
    d_qkv = np.empty((B, T, 3 * H * d_h), d_output.dtype)  # (B, T, 3D) filled through three (B, H, T, d_h) views
    d_q, d_k, d_v = (heads_of(d_qkv, part, H) for part in range(3))  # (B, H, T, d_h) each
    d_weights, _ = weighted_sum_backward(d_context, tape.weights, tape.v, out_v=d_v)  # (B, H, T, T)
    d_scores = softmax_backward(d_weights, tape.weights)  # (B, H, T, T); padding keys (weight 0) get 0
    scores_backward(d_scores, tape.q, tape.k, math.sqrt(d_h), out=(d_q, d_k))  # into d_qkv
    d_x, d_W_qkv, d_b_qkv = project_qkv_backward(d_qkv, tape, layer, real)  # (N, D)
    d_x += d_z1  # (N, D) residual: the input reaches z1 directly too
    grads |= {"W_qkv": d_W_qkv, "b_qkv": d_b_qkv, "W_o": d_W_o, "b_o": d_b_o}
    grads |= {"norm1.gain": d_gain1, "norm1.bias": d_bias1, "norm2.gain": d_gain2, "norm2.bias": d_bias2}
    return d_x, grads


def sum_rows(index: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows (N, D) summed by their index (N,): (the U distinct indices, ascending, and their sums (U, D)),
    np.add.at's meaning, sorted and summed by runs (many times faster than np.add.at on rows)."""
    order = np.argsort(index, kind="stable")  # (N,)
    ordered = index[order]  # (N,)
    starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))  # (U,) where each run begins
    return ordered[starts], np.add.reduceat(rows[order], starts, axis=0)  # (U,), (U, D) one sum per index


def embed_backward(d_x: np.ndarray, tape: EncoderTape, weights: EncoderWeights) -> dict[str, np.ndarray]:
    """x = LayerNorm(word[ids] + position[t] + segment[0]): dL/dx (N, D) at the real pieces -> the
    gradients of the word table (a :class:`RowGradient`: the rows the batch used), the position and segment
    tables and the LayerNorm (arrays of their shapes)."""
    d_sum, d_gain, d_bias = affine_layer_norm_backward(d_x, tape.norm, weights.norm[0])  # (N, D)
    rows, places = np.nonzero(tape.real)  # (N,) each piece's sentence and position, in (B, T) order
    d_word = RowGradient(weights.word.shape, *sum_rows(tape.ids[rows, places], d_sum))  # (U,), (U, D)
    d_position = np.zeros(weights.position.shape, d_sum.dtype)  # (max_positions, D)
    used, sums = sum_rows(places, d_sum)  # (T',), (T', D)
    d_position[used] = sums  # (max_positions, D)
    d_segment = np.zeros(weights.segment.shape, d_sum.dtype)  # (type_vocab_size, D)
    d_segment[0] = d_sum.sum(axis=0)  # (D,) every piece is segment 0
    return {"word": d_word, "position": d_position, "segment": d_segment, "norm.gain": d_gain, "norm.bias": d_bias}


def encode_backward(d_top: np.ndarray, tape: EncoderTape, weights: EncoderWeights) -> dict[str, np.ndarray]:
    """The backward step of ``encode(weights, ids, real, tape=True)``: dL/d(last hidden state) at the real
    pieces (N, D), in (B, T) order (``hidden[-1][real]``) -> every gradient, keyed like
    :meth:`~ctxembed.core.encoder.EncoderWeights.arrays` (``word``'s a :class:`RowGradient`: the rows the
    batch used, which the optimiser reads as they are)."""
    grads: dict[str, np.ndarray] = {}
    d_hidden = d_top  # (N, D)
    for number in reversed(range(len(weights.layers))):
        d_hidden, layer_grads = layer_backward(d_hidden, tape.layers[number], weights.layers[number], tape.real)
        grads |= {f"layers.{number}.{name}": grad for name, grad in layer_grads.items()}
    return grads | embed_backward(d_hidden, tape, weights)
