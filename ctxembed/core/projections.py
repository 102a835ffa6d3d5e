"""Projections for the attention core: identity, random (Xavier), shared affine, .npz files; applying them.

A head maps token vectors x (B, T, d_in) to queries, keys and values with ``q = x @ W_query + b_query``.
Matrices are stored as (d_in, d_out), the ``x @ W`` convention of the lecture notes (torch's
``nn.Linear`` stores the transpose). A model is a list of :class:`LayerParams`, one per layer.

``.npz`` layout (layer and head indices start at 0, every array real-valued)::

    l{layer}.h{head}.W_query   (d_layer, d_k)      d_layer = d_in for layer 0, else the previous output size
    l{layer}.h{head}.W_key     (d_layer, d_k)
    l{layer}.h{head}.W_value   (d_layer, d_v)
    l{layer}.h{head}.b_query   (d_k,)              optional, likewise b_key (d_k,) and b_value (d_v,)
    l{layer}.W_out             (heads * d_v, d_model)  optional output projection
    l{layer}.b_out             (d_model,)          optional, only together with W_out

With one layer and one head the plain names ``W_query``, ``W_key``, ``W_value``, ``b_query``, ``b_key``,
``b_value``, ``W_out`` and ``b_out`` are accepted as well.

>>> from ctxembed.config import AttentionConfig
>>> params = random_params(3, 2, AttentionConfig(heads=2), seed=0)
>>> params[0].heads[1].W_key.shape
(3, 2)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ctxembed.config import AttentionConfig

if TYPE_CHECKING:  # settings are a layer above: only read, never imported at run time
    from ctxembed.settings import Settings

HEAD_ARRAYS = ("W_query", "W_key", "W_value", "b_query", "b_key", "b_value")
LAYER_ARRAYS = ("W_out", "b_out")
_HEAD_NAME = re.compile(r"l(\d+)\.h(\d+)\.(W_query|W_key|W_value|b_query|b_key|b_value)")
_LAYER_NAME = re.compile(r"l(\d+)\.(W_out|b_out)")


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


def load_projections(path: str | PathLike, d_in: int, config: AttentionConfig) -> list[LayerParams]:
    """Read projections from an .npz file (layout in the module docstring) and validate every shape.

    Raises ValueError for a missing, unknown, non-numeric or wrongly shaped array; the message names it.
    """
    # "meta" and "train.*" are what ``ctxembed train`` records beside the projections (ctxembed.vectors.weights)
    arrays = {name: value for name, value in _read_npz(path).items() if not _training_record(name)}
    plain = sorted(set(arrays) & set(HEAD_ARRAYS + LAYER_ARRAYS))
    if plain:
        if config.layers != 1 or config.heads != 1:
            raise ValueError(
                f"plain names {plain} are only accepted for 1 layer and 1 head; "
                f"use l{{layer}}.h{{head}}.W_query etc. for layers={config.layers}, heads={config.heads}"
            )
        if len(plain) != len(arrays):
            raise ValueError(f"{path} mixes plain names {plain} with prefixed names")
        arrays = {(f"l0.h0.{name}" if name in HEAD_ARRAYS else f"l0.{name}"): v for name, v in arrays.items()}

    heads: list[list[dict]] = [[{} for _ in range(config.heads)] for _ in range(config.layers)]
    outputs: list[dict] = [{} for _ in range(config.layers)]
    for name, value in arrays.items():
        if not (np.issubdtype(value.dtype, np.floating) or np.issubdtype(value.dtype, np.integer)):
            raise ValueError(f"{name} has dtype {value.dtype}, expected real numbers")
        value = value.astype(np.float64)
        _check_values(name, value)
        if match := _HEAD_NAME.fullmatch(name):
            layer, head, kind = int(match[1]), int(match[2]), match[3]
            if layer >= config.layers or head >= config.heads:
                raise ValueError(f"{name} is outside layers={config.layers}, heads={config.heads}")
            heads[layer][head][kind] = value
        elif match := _LAYER_NAME.fullmatch(name):
            layer, kind = int(match[1]), match[2]
            if layer >= config.layers:
                raise ValueError(f"{name} is outside layers={config.layers}")
            outputs[layer][kind] = value
        else:
            raise ValueError(f"unknown array {name!r} in {path}; expected names like l0.h0.W_query, l0.W_out")

    params = []
    for layer, layer_heads in enumerate(heads):
        for head, found in enumerate(layer_heads):
            missing = [kind for kind in HEAD_ARRAYS[:3] if kind not in found]
            if missing:
                names = ", ".join(missing if plain else [f"l{layer}.h{head}.{kind}" for kind in missing])
                raise ValueError(f"{path} has no array {names}")
        params.append(LayerParams([HeadProjection(**found) for found in layer_heads], **outputs[layer]))
    validate_params(params, d_in, config, plain=bool(plain))
    return params


MAX_ABS_WEIGHT = 1e4  # larger entries make scores overflow float32 long before they mean anything


def _training_record(name: str) -> bool:
    return name == "meta" or name.startswith("train.")


def _read_npz(path: str | PathLike) -> dict[str, np.ndarray]:
    """The named arrays of an .npz file; ValueError (with the reason) for anything else: a bare
    .npy array, a truncated or damaged archive, pickled objects, a FIFO or a directory."""
    import zipfile

    from ctxembed.errors import DataError
    from ctxembed.vectors.sources import regular_file

    try:
        regular_file(Path(path))
    except DataError as exc:
        if "no such file" in exc.message:
            raise FileNotFoundError(path) from None
        raise ValueError(exc.message.split(": ", 1)[-1]) from None
    try:
        loaded = np.load(path, allow_pickle=False)
    except ValueError as exc:
        if "pickle" in str(exc):
            raise ValueError("holds pickled objects, which are never loaded; save plain arrays") from None
        raise ValueError(f"not a NumPy .npz archive ({exc})") from None
    except (zipfile.BadZipFile, EOFError) as exc:
        raise ValueError(f"truncated or damaged .npz archive ({exc})") from None
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise ValueError("is a single .npy array, expected an .npz archive of named arrays (l0.h0.W_query, ...)")
    try:
        with loaded as archive:
            return {name: archive[name] for name in archive.files}
    except ValueError as exc:
        if "pickle" in str(exc):
            raise ValueError("holds pickled objects, which are never loaded; save plain arrays") from None
        raise ValueError(f"damaged .npz archive ({exc})") from None
    except (zipfile.BadZipFile, EOFError, OSError, KeyError) as exc:
        raise ValueError(f"truncated or damaged .npz archive ({exc or type(exc).__name__})") from None


def _check_values(name: str, value: np.ndarray) -> None:
    if not np.isfinite(value).all():
        raise ValueError(f"{name} has NaN or infinite values")
    if value.size and np.abs(value).max() > MAX_ABS_WEIGHT:
        raise ValueError(f"{name} has a value of {np.abs(value).max():.3g}, past the {MAX_ABS_WEIGHT:g} limit")


def save_projections(path: str | PathLike, params: list[LayerParams]) -> None:
    """Write projections to ``path`` as an uncompressed .npz, with the prefixed names of the module doc."""
    arrays = {}
    for layer, layer_params in enumerate(params):
        if layer_params.heads is None:
            raise ValueError(f"layer {layer} uses the identity projection, which has no arrays to save")
        for head, projection in enumerate(layer_params.heads):
            for kind in HEAD_ARRAYS:
                if (value := getattr(projection, kind)) is not None:
                    arrays[f"l{layer}.h{head}.{kind}"] = np.asarray(value)
        for kind in LAYER_ARRAYS:
            if (value := getattr(layer_params, kind)) is not None:
                arrays[f"l{layer}.{kind}"] = np.asarray(value)
    with open(path, "wb") as file:  # an open file keeps the name exactly as given (no ".npz" appended)
        np.savez(file, **arrays)


def projection_params(settings: Settings, d_in: int) -> list[LayerParams] | None:
    """The query/key/value projections ``settings`` ask for on d_in-dimensional vectors:
    None for the identity, Xavier matrices from the seed, or the arrays of a weights file."""
    from ctxembed.errors import DataError, SettingError

    a = settings.attention
    if settings.projection == "identity":
        return None
    if settings.projection == "random":
        d_out = settings.d_out or d_in // a.heads
        if d_out < 1:
            raise SettingError(
                f"{{heads}} {a.heads} leave no dimensions per head of the {d_in}; give {{d_out}}", "heads", "d_out"
            )
        try:
            return random_params(d_in, d_out, a, seed=settings.seed, output_projection=settings.output_projection)
        except ValueError as exc:
            raise SettingError(str(exc)) from None
    try:
        return load_projections(settings.weights_file, d_in, a)
    except FileNotFoundError:
        raise DataError(f"{settings.weights_file}: no such file") from None
    except (ValueError, OSError) as exc:
        raise DataError(f"{settings.weights_file}: {exc}") from None
