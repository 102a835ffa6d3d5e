"""Projections for the attention core: identity, random (Xavier), shared affine; checking and applying them.

A head maps token vectors x (B, T, d_in) to queries, keys and values with ``q = x @ W_query + b_query``.
Matrices are stored as (d_in, d_out), the ``x @ W`` convention of the lecture notes (torch's
``nn.Linear`` stores the transpose). A model is a list of :class:`LayerParams`, one per layer.

>>> from ctxembed.declarations import AttentionConfig
>>> params = random_params(3, 2, AttentionConfig(heads=2), seed=0)
>>> params[0].heads[1].W_key.shape
(3, 2)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ctxembed.declarations import AttentionConfig

HEAD_ARRAYS = ("W_query", "W_key", "W_value", "b_query", "b_key", "b_value")
LAYER_ARRAYS = ("W_out", "b_out")


@dataclass(frozen=True)
class HeadProjection:
    """One head: W_query, W_key (d_in, d_k), W_value (d_in, d_v); optional biases (d_k,), (d_k,), (d_v,)."""

    W_query: np.ndarray
    W_key: np.ndarray
    W_value: np.ndarray
    b_query: np.ndarray | None = None
    b_key: np.ndarray | None = None
    b_value: np.ndarray | None = None


@dataclass(frozen=True)
class LayerParams:
    """One layer: its heads (None = identity, Q = K = V = x split into equal slices) and an optional
    output projection W_out (heads * d_v, d_model) with bias b_out (d_model,)."""

    heads: list[HeadProjection] | None = None
    W_out: np.ndarray | None = None
    b_out: np.ndarray | None = None


def identity_params(config: AttentionConfig) -> list[LayerParams]:
    """Parameter-free layers (the notes' simplified self-attention): Q = K = V = x in every layer."""
    return [LayerParams() for _ in range(config.layers)]


def shared_projection(W: np.ndarray, b: np.ndarray | None = None, *, heads: int = 1) -> LayerParams:
    """One layer whose queries, keys and values share the affine map ``x @ W + b``.

    W (d_in, d_out), b (d_out,) or None. With heads > 1 the d_out columns are cut into equal slices, one
    per head, so ``shared_projection(np.eye(d), heads=h)`` is the identity multi-head. All-but-the-top
    post-processing is ``W = P, b = -mu @ P``: attention then runs on ``(x - mu) @ P``.
    """
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2:
        raise ValueError(f"W has shape {W.shape}, expected (d_in, d_out)")
    d_out = W.shape[1]
    if d_out % heads:
        raise ValueError(f"W has {d_out} columns, which do not split into {heads} equal heads")
    if b is not None:
        b = np.asarray(b, dtype=np.float64)
        _expect("b", b, (d_out,))
    size = d_out // heads
    projections = []
    for head in range(heads):
        columns = slice(head * size, (head + 1) * size)
        W_head = W[:, columns]  # (d_in, d_out / h)
        b_head = None if b is None else b[columns]  # (d_out / h,)
        projections.append(HeadProjection(W_head, W_head, W_head, b_head, b_head, b_head))
    return LayerParams(heads=projections)


def random_params(
    d_in: int,
    d_out: int,
    config: AttentionConfig,
    seed: int = 0,
    *,
    bias: bool = False,
    output_projection: bool = False,
) -> list[LayerParams]:
    """Random projections for every layer and head, reproducible from ``seed``.

    Each head maps its layer input to d_k = d_v = d_out with Xavier/Glorot-uniform matrices,
    U(-a, a) with a = sqrt(6 / (fan_in + fan_out)). With ``output_projection`` each layer gets
    W_out (heads * d_out, d_in) mapping the concatenated heads back to d_in. With ``bias`` every
    matrix gets a bias drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (torch's ``nn.Linear`` default).
    Arrays are drawn in a fixed order, so the same seed and sizes always give the same parameters.
    """
    rng = np.random.default_rng(seed)
    layers = []
    layer_in = d_in
    for _ in range(config.layers):
        heads = []
        for _ in range(config.heads):
            matrices = {name: _xavier(rng, layer_in, d_out) for name in HEAD_ARRAYS[:3]}
            biases = {name: _bias(rng, layer_in, d_out) if bias else None for name in HEAD_ARRAYS[3:]}
            heads.append(HeadProjection(**matrices, **biases))
        concat = config.heads * d_out
        W_out = _xavier(rng, concat, d_in) if output_projection else None
        b_out = _bias(rng, concat, d_in) if output_projection and bias else None
        layers.append(LayerParams(heads, W_out, b_out))
        layer_in = d_in if output_projection else concat
    validate_params(layers, d_in, config)
    return layers


def _xavier(rng: np.random.Generator, fan_in: int, fan_out: int) -> np.ndarray:
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, size=(fan_in, fan_out))  # (fan_in, fan_out)


def _bias(rng: np.random.Generator, fan_in: int, fan_out: int) -> np.ndarray:
    limit = 1.0 / np.sqrt(fan_in)
    return rng.uniform(-limit, limit, size=fan_out)  # (fan_out,)


def validate_params(params: list[LayerParams], d_in: int, config: AttentionConfig, *, plain: bool = False) -> int:
    """Check every array's shape against its layer input; return the last layer's output size.

    Raises ValueError naming the array (in the .npz naming, e.g. ``l0.h1.W_key``) and the expected shape;
    also when a residual connection cannot add the layer output to its input. ``plain`` names the arrays
    without the ``l0.h0.`` prefix, for one-layer one-head files written with plain names.
    """
    if len(params) != config.layers:
        raise ValueError(f"config.layers={config.layers} but parameters for {len(params)} layers were given")
    layer_in = d_in
    for index, layer in enumerate(params):
        prefix = "" if plain else f"l{index}."
        if layer.heads is None:
            if layer_in % config.heads:
                raise ValueError(
                    f"the identity projection splits the vector dimension into {config.heads} heads, "
                    f"but layer {index} has input dimension {layer_in}, not divisible by {config.heads}"
                )
            concat = layer_in
        else:
            if len(layer.heads) != config.heads:
                raise ValueError(f"layer {index} has {len(layer.heads)} heads, config.heads={config.heads}")
            head_prefixes = [""] if plain else [f"{prefix}h{h}." for h in range(config.heads)]
            dims = [_check_head(head_prefixes[h], head, layer_in) for h, head in enumerate(layer.heads)]
            d_k, d_v = dims[0]
            for h, (head_k, head_v) in enumerate(dims):
                if (head_k, head_v) != (d_k, d_v):
                    raise ValueError(
                        f"head {prefix}h{h} has d_k={head_k}, d_v={head_v}, head 0 has d_k={d_k}, d_v={d_v}; "
                        "all heads of a layer must have the same sizes"
                    )
            concat = config.heads * d_v
        layer_out = concat
        if layer.W_out is not None:
            if np.ndim(layer.W_out) != 2 or np.shape(layer.W_out)[0] != concat:
                raise ValueError(
                    f"{prefix}W_out has shape {np.shape(layer.W_out)}, expected ({concat}, d_model): "
                    f"its rows take the {concat} concatenated head outputs"
                )
            layer_out = np.shape(layer.W_out)[1]
            _expect(f"{prefix}b_out", layer.b_out, (layer_out,))
        elif layer.b_out is not None:
            raise ValueError(f"{prefix}b_out is given without {prefix}W_out")
        if config.residual and layer_out != layer_in:
            raise ValueError(
                f"the residual connection of layer {index} adds its output ({layer_out} dimensions: "
                f"{config.heads} heads x d_v) to its input ({layer_in} dimensions); choose d_out = "
                f"d_in / heads or add an output projection W_out of shape ({concat}, {layer_in})"
            )
        layer_in = layer_out
    return layer_in


def _check_head(prefix: str, head: HeadProjection, layer_in: int) -> tuple[int, int]:
    """Validate one head against its layer input size; return (d_k, d_v)."""
    for name in ("W_query", "W_value"):
        matrix = getattr(head, name)
        if np.ndim(matrix) != 2 or np.shape(matrix)[0] != layer_in:
            raise ValueError(
                f"{prefix}{name} has shape {np.shape(matrix)}, expected ({layer_in}, d): "
                f"its rows must match the layer input dimension {layer_in}"
            )
    d_k, d_v = head.W_query.shape[1], head.W_value.shape[1]
    if d_k < 1 or d_v < 1:
        name = "W_query" if d_k < 1 else "W_value"
        raise ValueError(f"{prefix}{name} has shape {np.shape(getattr(head, name))}: a head needs at least 1 dimension")
    _expect(f"{prefix}W_key", head.W_key, (layer_in, d_k))
    _expect(f"{prefix}b_query", head.b_query, (d_k,))
    _expect(f"{prefix}b_key", head.b_key, (d_k,))
    _expect(f"{prefix}b_value", head.b_value, (d_v,))
    return d_k, d_v


def _expect(name: str, array: np.ndarray | None, expected: tuple[int, ...]) -> None:
    if array is not None and np.shape(array) != expected:
        raise ValueError(f"{name} has shape {np.shape(array)}, expected {expected}")


def project_heads(
    x: np.ndarray, layer: LayerParams, heads: int, *, values: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Queries, keys and values of every head: x (B, T, d) -> q, k (B, h, T, d_k) and v (B, h, T, d_v).

    The identity projection (``layer.heads is None``) gives head i the i-th of h equal slices of d.
    ``values=False`` skips the values (v is None): a caller that wants the weights alone.
    """
    B, T, d = x.shape
    if layer.heads is None:
        if d % heads:
            raise ValueError(f"the identity projection cannot split d={d} into {heads} equal heads")
        sliced = x.reshape(B, T, heads, d // heads).transpose(0, 2, 1, 3)  # (B, T, h, d/h) -> (B, h, T, d/h)
        return sliced, sliced, (sliced if values else None)
    q, k = (_project(x, layer.heads, kind) for kind in ("query", "key"))
    return q, k, (_project(x, layer.heads, "value") if values else None)


def _project(x: np.ndarray, heads: list[HeadProjection], kind: str) -> np.ndarray:
    """x (B, T, d) -> (B, h, T, d_out) with every head's W_{kind} and optional b_{kind}."""
    B, T, d = x.shape
    h = len(heads)
    W = np.concatenate([getattr(head, f"W_{kind}") for head in heads], axis=1).astype(x.dtype)  # (d, h * d_out)
    d_out = W.shape[1] // h
    # one matrix product per sentence for every head (many small per-head products are several times
    # slower); not one for the whole (B*T, d) batch, whose rounding would depend on the batch's size,
    # so that a sentence's numbers never depend on the sentences it runs with (batch, Dask partitions)
    joined = x @ W  # (B, T, d) x (d, h*d_out) -> (B, T, h*d_out)
    projected = joined.reshape(B, T, h, d_out).transpose(0, 2, 1, 3)  # (B, T, h, d_out) -> (B, h, T, d_out)
    biases = [getattr(head, f"b_{kind}") for head in heads]
    if any(bias is not None for bias in biases):
        zeros = np.zeros(d_out)  # a head without a bias among heads with one
        b = np.stack([zeros if bias is None else bias for bias in biases]).astype(x.dtype)  # (h, d_out)
        projected = projected + b[None, :, None, :]  # (B, h, T, d_out) + (1, h, 1, d_out)
    return projected
