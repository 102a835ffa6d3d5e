"""The hand-written backward pass of :func:`ctxembed.core.attention.encode`. Plain NumPy; every backward
step mirrors one forward step.

The forward pass is ``encode`` itself, run with ``trace=True``: its :class:`~ctxembed.core.attention.LayerSteps`
keep every intermediate the chain rule needs, so training differentiates the very numbers ``attend``
computes. One layer, as ``encode`` runs it::

    q, k, v  = project_heads(x, layer)                    # (B, h, T, d_k), (B, h, T, d_k), (B, h, T, d_v)
    scores   = attention_scores(q, k) + key_bias          # (B, h, T, T)  q . k / sqrt(d_k) / temperature
    weights  = softmax(scores, allowed, causal)           # (B, h, T, T)
    context  = weights @ v                                # (B, h, T, d_v)
    merged   = concat(context) @ W_out                    # (B, T, d_model)
    output   = layer_norm(residual_scale * x + merged)    # (B, T, d_model), each step only if switched on

Backward (the chain rule, read bottom to top): :func:`layer_norm_backward`, the residual's
``residual_scale * d_output``, :func:`output_projection_backward`, :func:`weighted_sum_backward`,
:func:`softmax_backward`, :func:`scores_backward` and :func:`projection_backward`, wrapped per layer by
:func:`layer_backward` and for the stack by :func:`encode_backward`.

Gradients are keyed like the weights file (``l0.h1.W_query``, ``l0.W_out``), so they line up with
:func:`ctxembed.vectors.weights.save_projections`. Only the softmax normalisation is differentiated here.
"""

from __future__ import annotations

import math

import numpy as np

from ctxembed.core.attention import LAYER_NORM_EPS, AttentionConfig, LayerSteps
from ctxembed.core.projections import HeadProjection, LayerParams

# ---------------------------------------------------------------------------------------- backward


def layer_norm_backward(d_normed: np.ndarray, normed: np.ndarray, inv_std: np.ndarray) -> np.ndarray:
    """y = (z - mean z) / sqrt(var z + eps), no gain or bias: dL/dy (B, T, d) -> dL/dz (B, T, d).

    dz = (dy - mean(dy) - y * mean(dy * y)) / sqrt(var + eps), the means over the d components.
    """
    mean_d = d_normed.mean(axis=-1, keepdims=True)  # (B, T, 1)
    mean_dy = (d_normed * normed).mean(axis=-1, keepdims=True)  # (B, T, 1)
    return inv_std * (d_normed - mean_d - normed * mean_dy)  # (B, T, d)


def output_projection_backward(
    d_output: np.ndarray, merged: np.ndarray, W_out: np.ndarray | None, has_bias: bool
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """output = merged @ W_out + b_out: dL/doutput (B, T, d_model) -> (dL/dmerged (B, T, h*d_v), dW_out, db_out).

    Without W_out the output is ``merged`` itself and the gradient passes through.
    """
    if W_out is None:
        return d_output, None, None
    d_model = d_output.shape[-1]
    flat_merged = merged.reshape(-1, merged.shape[-1])  # (B*T, h*d_v)
    flat_d = d_output.reshape(-1, d_model)  # (B*T, d_model)
    d_W_out = flat_merged.T @ flat_d  # (h*d_v, B*T) x (B*T, d_model) -> (h*d_v, d_model)
    d_b_out = flat_d.sum(axis=0) if has_bias else None  # (d_model,)
    d_merged = d_output @ W_out.astype(d_output.dtype).T  # (B, T, d_model) x (d_model, h*d_v) -> (B, T, h*d_v)
    return d_merged, d_W_out, d_b_out


def weighted_sum_backward(
    d_context: np.ndarray, weights: np.ndarray, v: np.ndarray, out_v: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """context = weights @ v: dL/dcontext (B, h, T, d_v) -> (dL/dweights (B, h, T, T), dL/dv (B, h, T, d_v));
    dL/dv is written into ``out_v`` (B, h, T, d_v) when given (a view of a caller's layout)."""
    d_weights = d_context @ np.swapaxes(v, -1, -2)  # (B, h, T, d_v) x (B, h, d_v, T) -> (B, h, T, T)
    d_v = np.matmul(np.swapaxes(weights, -1, -2), d_context, out=out_v)  # (B, h, T, T) x (B, h, T, d_v)
    return d_weights, d_v


def softmax_backward(d_weights: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """weights = softmax(scores) over allowed keys: dL/dweights (B, h, T, T) -> dL/dscores (B, h, T, T).

    ds_j = w_j (dw_j - sum_i w_i dw_i). Masked keys have w_j = 0, so their scores get no gradient, and a
    row without allowed keys (all-zero weights) gets none at all.
    """
    row_dot = (d_weights * weights).sum(axis=-1, keepdims=True)  # (B, h, T, 1)
    return weights * (d_weights - row_dot)  # (B, h, T, T)


def scores_backward(
    d_scores: np.ndarray,
    q: np.ndarray,
    k: np.ndarray,
    divisor: float,
    out: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """scores = q kᵀ / divisor (+ a constant key bias): dL/dscores (B, h, T, T) -> (dL/dq, dL/dk),
    each (B, h, T, d_k), written into ``out`` (two (B, h, T, d_k) views of a caller's layout) when given."""
    d_raw = d_scores / divisor if divisor != 1.0 else d_scores  # (B, h, T, T)
    out_q, out_k = (None, None) if out is None else out
    d_q = np.matmul(d_raw, k, out=out_q)  # (B, h, T, T) x (B, h, T, d_k) -> (B, h, T, d_k)
    d_k = np.matmul(np.swapaxes(d_raw, -1, -2), q, out=out_k)  # (B, h, T, T) x (B, h, T, d_k) -> (B, h, T, d_k)
    return d_q, d_k


def projection_backward(
    d_projected: np.ndarray, x: np.ndarray, W: np.ndarray, rows: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """projected = x @ W[head] + b[head]: dL/dprojected (B, h, T, d_k), x (B, T, d), W (h, d, d_k) ->
    (dL/dx (B, T, d), dL/dW (h, d, d_k), dL/db (h, d_k)). Heads side by side make each one matrix product.

    With ``rows`` (B, T) bool, dL/dx is computed for those tokens only: (n_rows, d).
    """
    B, h, T, d_k = d_projected.shape
    d = x.shape[-1]
    flat_x = x.reshape(B * T, d)  # (B*T, d)
    side_by_side = d_projected.transpose(0, 2, 1, 3).reshape(B * T, h * d_k)  # (B*T, h*d_k)
    d_W = (flat_x.T @ side_by_side).reshape(d, h, d_k).transpose(1, 0, 2)  # (d, B*T) x (B*T, h*d_k) -> (h, d, d_k)
    d_b = side_by_side.sum(axis=0).reshape(h, d_k)  # (h, d_k)
    W_flat = W.transpose(1, 0, 2).reshape(d, h * d_k)  # (h, d, d_k) -> (d, h*d_k)
    if rows is not None:
        side_by_side = side_by_side[rows.reshape(-1)]  # (n_rows, h*d_k)
        return side_by_side @ W_flat.T, d_W, d_b  # (n_rows, h*d_k) x (h*d_k, d) -> (n_rows, d)
    d_x = (side_by_side @ W_flat.T).reshape(B, T, d)  # (B*T, h*d_k) x (h*d_k, d) -> (B, T, d)
    return d_x, d_W, d_b


def layer_backward(
    d_output: np.ndarray,
    steps: LayerSteps,
    layer: LayerParams,
    config: AttentionConfig,
    index: int,
    rows: np.ndarray | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The backward step of one layer of ``encode``, from the ``steps`` its trace kept:
    dL/doutput (B, T, d_model) -> (dL/dx (B, T, d_in), grads).

    ``grads`` maps weight-file names (``l{index}.h{head}.W_query`` ...) to gradients of the same shapes.
    With ``rows`` (B, T) bool, dL/dx is returned for those tokens only, (n_rows, d_in): the first layer's
    input gradient is only wanted where a learned vector ([MASK]) went in, which saves three products.
    """
    if config.normalization != "softmax":
        raise ValueError("training differentiates the softmax normalisation only")
    x, attention = steps.inputs, steps.attention  # (B, T, d_in), the layer's attention steps
    B, h, T, d_v = steps.v.shape
    if config.layer_norm:
        inv_std = 1.0 / np.sqrt(steps.pre_norm.var(axis=-1, keepdims=True) + LAYER_NORM_EPS)  # (B, T, 1)
        d_output = layer_norm_backward(d_output, steps.output, inv_std)  # (B, T, d_model)
    d_x = config.residual_scale * d_output if config.residual else np.zeros_like(x)  # (B, T, d_in)
    if rows is not None:
        d_x = d_x[rows]  # (n_rows, d_in)
    grads: dict[str, np.ndarray] = {}
    has_bias = layer.b_out is not None
    concatenated = attention.context.transpose(0, 2, 1, 3).reshape(B, T, h * d_v)  # (B, h, T, d_v) -> (B, T, h*d_v)
    d_merged, d_W_out, d_b_out = output_projection_backward(d_output, concatenated, layer.W_out, has_bias)
    if d_W_out is not None:
        grads[f"l{index}.W_out"] = d_W_out  # (h*d_v, d_model)
    if d_b_out is not None:
        grads[f"l{index}.b_out"] = d_b_out  # (d_model,)
    d_context = d_merged.reshape(B, T, h, d_v).transpose(0, 2, 1, 3)  # (B, T, h*d_v) -> (B, h, T, d_v)
    d_weights, d_v_heads = weighted_sum_backward(d_context, attention.weights, steps.v)  # (B,h,T,T), (B,h,T,d_v)
    d_scores = softmax_backward(d_weights, attention.weights)  # (B, h, T, T)
    d_q, d_k = scores_backward(d_scores, steps.q, steps.k, attention.divisor)  # (B, h, T, d_k) each
    # positions are a constant added to the queries' and keys' input: dL/dx is the same, dL/dW sees x + positions
    steering = x if steps.positions is None else x + steps.positions  # (B, T, d_in) + (T, d_in)
    sources = (("query", d_q, steering), ("key", d_k, steering), ("value", d_v_heads, x))
    for kind, d_projected, source in sources:
        W = np.stack([getattr(head, f"W_{kind}") for head in layer.heads]).astype(x.dtype)  # (h, d_in, d_k)
        d_x_kind, d_W, d_b = projection_backward(d_projected, source, W, rows)  # (B,T,d_in), (h,d_in,d_k), (h,d_k)
        d_x = d_x + d_x_kind  # (B, T, d_in) or (n_rows, d_in)
        for head, projection in enumerate(layer.heads):
            grads[f"l{index}.h{head}.W_{kind}"] = d_W[head]  # (d_in, d_k)
            if getattr(projection, f"b_{kind}") is not None:
                grads[f"l{index}.h{head}.b_{kind}"] = d_b[head]  # (d_k,)
    return d_x, grads


def encode_backward(
    d_contextual: np.ndarray,
    steps: list[LayerSteps],
    params: list[LayerParams],
    config: AttentionConfig,
    real: np.ndarray,
    input_rows: np.ndarray | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The backward step of ``encode(x, config, params, token_mask=real, trace=True)``, from its ``steps``
    (one :class:`LayerSteps` per layer): dL/dcontextual (B, T, d_model) -> (dL/dx (B, T, d), grads).

    Positions are a constant added to x, so dL/dx is the first layer's input gradient; with
    ``input_rows`` (B, T) bool it is computed for those tokens only, (n_rows, d).
    """
    grads: dict[str, np.ndarray] = {}
    keep = real[:, :, None]  # (B, T, 1) True at real tokens
    d_hidden = d_contextual  # (B, T, d_model)
    for index in reversed(range(len(params))):
        d_output = np.where(keep, d_hidden, 0)  # (B, T, d'); padding rows were set to 0, not computed
        rows = input_rows if index == 0 else None
        d_hidden, layer_grads = layer_backward(d_output, steps[index], params[index], config, index, rows)
        grads.update(layer_grads)
    return d_hidden, grads


# ---------------------------------------------------------------------------------------- the objective


def sampled_softmax_loss(
    predicted: np.ndarray,
    target_vectors: np.ndarray,
    negative_vectors: np.ndarray,
    accidental: np.ndarray,
    log_scale: float,
    true_bias: np.ndarray,
    negative_bias: np.ndarray,
) -> tuple[float, np.ndarray, float, np.ndarray, np.ndarray]:
    """Masked-word loss: mean over M masked tokens of -log p(true word | context), p a softmax over the
    true word and K shared negatives, logits = exp(log_scale) * h . e + b (b: the word's output bias,
    as in BERT's prediction head).

    predicted (M, d) the contextual vectors at the masked positions; target_vectors (M, d); negative_vectors
    (K, d); accidental (M, K) True where a negative is the true word itself (left out of the softmax);
    true_bias (M,), negative_bias (K,). Returns (loss, dL/dpredicted (M, d), dL/dlog_scale,
    dL/dtrue_bias (M,), dL/dnegative_bias (K,)).
    """
    M = len(predicted)
    scale = math.exp(log_scale)
    true_dots = scale * np.einsum("md,md->m", predicted, target_vectors)  # (M,) scale * h . e
    negative_dots = predicted @ (scale * negative_vectors).T  # (M, d) x (d, K) -> (M, K)
    true_logits = true_dots + true_bias  # (M,)
    negative_logits = np.where(accidental, -np.inf, negative_dots + negative_bias)  # (M, K) a hit does not compete
    row_max = np.maximum(true_logits, negative_logits.max(axis=1))  # (M,)
    true_exp = np.exp(true_logits - row_max)  # (M,)
    negative_exp = np.exp(negative_logits - row_max[:, None])  # (M, K), 0 at accidental hits
    total = true_exp + negative_exp.sum(axis=1)  # (M,)
    loss = float(np.mean(np.log(total) - (true_logits - row_max)))  # mean of -log p(true word)
    d_true = (true_exp / total - 1.0) / M  # (M,) dL/dtrue_logit: p_true - 1, averaged over M
    d_negative = negative_exp / (total[:, None] * M)  # (M, K) dL/dnegative_logit: p_negative, averaged
    d_predicted = scale * (d_true[:, None] * target_vectors + d_negative @ negative_vectors)  # (M, d)
    d_log_scale = float(d_true @ true_dots + np.einsum("mk,mk->", d_negative, negative_dots))  # d(scale*dot)/dlog s
    return loss, d_predicted, d_log_scale, d_true, d_negative.sum(axis=0)


# ---------------------------------------------------------------------------------------- parameters


def params_to_arrays(params: list[LayerParams]) -> dict[str, np.ndarray]:
    """Layers -> {weights-file name: array}; the inverse of :func:`arrays_to_params`."""
    arrays: dict[str, np.ndarray] = {}
    for index, layer in enumerate(params):
        for head, projection in enumerate(layer.heads):
            for kind in ("W_query", "W_key", "W_value", "b_query", "b_key", "b_value"):
                if (value := getattr(projection, kind)) is not None:
                    arrays[f"l{index}.h{head}.{kind}"] = value
        for kind in ("W_out", "b_out"):
            if (value := getattr(layer, kind)) is not None:
                arrays[f"l{index}.{kind}"] = value
    return arrays


def arrays_to_params(arrays: dict[str, np.ndarray], layers: int, heads: int) -> list[LayerParams]:
    """{weights-file name: array} -> layers of :class:`LayerParams` (views of the same arrays, no copy)."""
    params = []
    for index in range(layers):
        projections = []
        for head in range(heads):
            prefix = f"l{index}.h{head}."
            found = {kind: arrays.get(prefix + kind) for kind in ("b_query", "b_key", "b_value")}
            projections.append(
                HeadProjection(
                    arrays[prefix + "W_query"], arrays[prefix + "W_key"], arrays[prefix + "W_value"], **found
                )
            )
        params.append(LayerParams(projections, arrays.get(f"l{index}.W_out"), arrays.get(f"l{index}.b_out")))
    return params
