"""A trained BERT-family encoder (BertModel: post-LayerNorm, absolute positions, exact GELU) in NumPy.

The same scaled dot-product attention as the textbook path (:func:`ctxembed.core.attention.attention`)
runs inside every layer; only the trained parts around it are new::

    x = LayerNorm(E_word[ids] + E_pos[t] + E_type[0])                       # (B, T, D) embeddings
    for each of L layers:
        q, k, v = split_heads(x W_qkv + b_qkv)                               # (B, H, T, d_h) each
        context, weights = attention(q, k, v, key_bias=padding)             # (B, H, T, d_h), (B, H, T, T)
        x = LayerNorm(x + merge_heads(context) W_o + b_o)                    # (B, T, D)
        x = LayerNorm(x + GELU(x W_1 + b_1) W_2 + b_2)                       # (B, T, D)

:func:`encode` returns every layer's hidden states (the embeddings' output, then each layer's) and every
attention matrix, shaped [layer][sentence][head][query][key]. :func:`trace_layer` runs one layer again
from its input hidden state with every step kept (q, k, v per head, scores, weights, the feed-forward's
input): what ``--explain`` shows, built from the same functions as :func:`encoder_layer`. Arithmetic
stays in the weights' dtype (float32 normally; float64 reproduces torch to rounding). Speed comes
from five things only: the projections are one matrix product per layer; padding rows skip every
per-token step after q, k, v (output projection, feed-forward, both LayerNorms run on the real pieces'
rows, packed once per batch; attention alone needs the padded layout); the feed-forward runs FFN_ROWS
rows at a time, so its (rows, F) inner block stays in cache; GELU is evaluated in place in few passes,
a block of rows at a time; nothing is copied out: each layer writes its output straight into the
returned hidden states, and attention its weights into the returned attentions (docs/models.md has
the figures).

>>> import numpy as np
>>> weights = random_weights(EncoderConfig(vocab_size=10, hidden=8, layers=2, heads=2, ffn=16), seed=0)
>>> out = encode(weights, np.array([[2, 5, 6, 3]]), np.ones((1, 4), bool))
>>> out.hidden.shape, out.weights.shape   # (L+1, B, T, D), (L, B, H, T, T)
((3, 1, 4, 8), (2, 1, 2, 4, 4))
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ctxembed.core.attention import LayerSteps, attention, attention_steps


@dataclass(frozen=True)
class EncoderConfig:
    """The shape of a BERT encoder (Hugging Face's config.json names in comments)."""

    vocab_size: int  # vocab_size: rows of the word embeddings
    hidden: int = 384  # hidden_size: D
    layers: int = 6  # num_hidden_layers: L
    heads: int = 12  # num_attention_heads: H, each of D / H dimensions
    ffn: int = 1536  # intermediate_size: the feed-forward's inner width
    max_positions: int = 512  # max_position_embeddings: the longest input in pieces
    type_vocab_size: int = 2  # type_vocab_size: segment embeddings (only segment 0 is used)
    eps: float = 1e-12  # layer_norm_eps

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @classmethod
    def from_json(cls, config: Mapping) -> EncoderConfig:
        """From a Hugging Face config.json (a BertModel); ValueError for what this encoder does not run."""
        if config.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"hidden_act {config['hidden_act']!r}: only BERT's exact 'gelu' is supported")
        if config.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError("only absolute position embeddings are supported")
        if config["hidden_size"] % config["num_attention_heads"]:
            raise ValueError("hidden_size must be a multiple of num_attention_heads")
        return cls(
            vocab_size=int(config["vocab_size"]),
            hidden=int(config["hidden_size"]),
            layers=int(config["num_hidden_layers"]),
            heads=int(config["num_attention_heads"]),
            ffn=int(config["intermediate_size"]),
            max_positions=int(config.get("max_position_embeddings", 512)),
            type_vocab_size=int(config.get("type_vocab_size", 2)),
            eps=float(config.get("layer_norm_eps", 1e-12)),
        )


@dataclass(frozen=True)
class EncoderLayer:
    """One layer's trained weights, stored as x @ W (in, out), not torch's (out, in)."""

    W_qkv: np.ndarray  # (D, 3D): x @ W_qkv = q | k | v
    b_qkv: np.ndarray  # (3D,)
    W_o: np.ndarray  # (D, D) the heads' merged context -> the residual stream
    b_o: np.ndarray  # (D,)
    norm1: tuple[np.ndarray, np.ndarray]  # (D,), (D,) gain and bias after attention
    W_1: np.ndarray  # (D, F)
    b_1: np.ndarray  # (F,)
    W_2: np.ndarray  # (F, D)
    b_2: np.ndarray  # (D,)
    norm2: tuple[np.ndarray, np.ndarray]  # (D,), (D,) gain and bias after the feed-forward


@dataclass(frozen=True)
class EncoderWeights:
    """Every trained array of the encoder, in one dtype."""

    config: EncoderConfig
    word: np.ndarray  # (V, D) word-piece embeddings
    position: np.ndarray  # (max_positions, D)
    segment: np.ndarray  # (type_vocab_size, D)
    norm: tuple[np.ndarray, np.ndarray]  # (D,), (D,) the embeddings' LayerNorm
    layers: tuple[EncoderLayer, ...]

    @property
    def dtype(self) -> np.dtype:
        return self.word.dtype

    @classmethod
    def from_tensors(cls, config: EncoderConfig, tensors: Mapping[str, np.ndarray], dtype=np.float32) -> EncoderWeights:
        """From Hugging Face BertModel tensor names (a leading ``bert.`` is dropped); torch's (out, in)
        linear weights are transposed to (in, out) once, here."""
        named = {name.removeprefix("bert."): array for name, array in tensors.items()}

        def get(name: str) -> np.ndarray:
            if name not in named:
                raise ValueError(f"tensor {name!r} is missing")
            return np.ascontiguousarray(named[name], dtype=dtype)

        def linear(prefix: str) -> tuple[np.ndarray, np.ndarray]:
            return np.ascontiguousarray(get(prefix + ".weight").T), get(prefix + ".bias")  # (in, out), (out,)

        def norm(prefix: str) -> tuple[np.ndarray, np.ndarray]:
            return get(prefix + ".weight"), get(prefix + ".bias")

        layers = []
        for number in range(config.layers):
            p = f"encoder.layer.{number}."
            q, k, v = (linear(p + f"attention.self.{name}") for name in ("query", "key", "value"))
            W_o, b_o = linear(p + "attention.output.dense")
            W_1, b_1 = linear(p + "intermediate.dense")
            W_2, b_2 = linear(p + "output.dense")
            layers.append(
                EncoderLayer(
                    W_qkv=np.concatenate([q[0], k[0], v[0]], axis=1),  # 3 x (D, D) -> (D, 3D)
                    b_qkv=np.concatenate([q[1], k[1], v[1]]),  # (3D,)
                    W_o=W_o,
                    b_o=b_o,
                    norm1=norm(p + "attention.output.LayerNorm"),
                    W_1=W_1,
                    b_1=b_1,
                    W_2=W_2,
                    b_2=b_2,
                    norm2=norm(p + "output.LayerNorm"),
                )
            )
        word = get("embeddings.word_embeddings.weight")
        if word.shape != (config.vocab_size, config.hidden):
            raise ValueError(f"word embeddings {word.shape}, config says ({config.vocab_size}, {config.hidden})")
        return cls(
            config,
            word,
            get("embeddings.position_embeddings.weight"),
            get("embeddings.token_type_embeddings.weight"),
            norm("embeddings.LayerNorm"),
            tuple(layers),
        )

    def to_tensors(self) -> dict[str, np.ndarray]:
        """The inverse of :meth:`from_tensors`: Hugging Face BertModel names, linear weights (out, in)
        again, W_qkv split into query, key and value (for torch, which reads that layout)."""
        D = self.config.hidden
        tensors = {
            "embeddings.word_embeddings.weight": self.word,
            "embeddings.position_embeddings.weight": self.position,
            "embeddings.token_type_embeddings.weight": self.segment,
            **_norm_tensors("embeddings.LayerNorm", self.norm),
        }
        for number, layer in enumerate(self.layers):
            p = f"encoder.layer.{number}."
            for part, name in enumerate(("query", "key", "value")):
                columns = slice(part * D, (part + 1) * D)
                tensors[p + f"attention.self.{name}.weight"] = layer.W_qkv[:, columns].T  # (D, D) (out, in)
                tensors[p + f"attention.self.{name}.bias"] = layer.b_qkv[columns]  # (D,)
            tensors |= {
                p + "attention.output.dense.weight": layer.W_o.T,  # (D, D)
                p + "attention.output.dense.bias": layer.b_o,
                **_norm_tensors(p + "attention.output.LayerNorm", layer.norm1),
                p + "intermediate.dense.weight": layer.W_1.T,  # (F, D)
                p + "intermediate.dense.bias": layer.b_1,
                p + "output.dense.weight": layer.W_2.T,  # (D, F)
                p + "output.dense.bias": layer.b_2,
                **_norm_tensors(p + "output.LayerNorm", layer.norm2),
            }
        return tensors

    def arrays(self) -> dict[str, np.ndarray]:
        """Every array by its name in the encoder's own layout (the attributes' names, linear weights
        (in, out), W_qkv whole): what ``ctxembed models install`` stores, so :meth:`from_arrays` loads
        a memory map as it is."""
        named = {"word": self.word, "position": self.position, "segment": self.segment}
        named |= _norm_arrays("norm", self.norm)
        for number, layer in enumerate(self.layers):
            p = f"layers.{number}."
            named |= {
                p + "W_qkv": layer.W_qkv,
                p + "b_qkv": layer.b_qkv,
                p + "W_o": layer.W_o,
                p + "b_o": layer.b_o,
                **_norm_arrays(p + "norm1", layer.norm1),
                p + "W_1": layer.W_1,
                p + "b_1": layer.b_1,
                p + "W_2": layer.W_2,
                p + "b_2": layer.b_2,
                **_norm_arrays(p + "norm2", layer.norm2),
            }
        return named

    @classmethod
    def from_arrays(cls, config: EncoderConfig, arrays: Mapping[str, np.ndarray]) -> EncoderWeights:
        """From :meth:`arrays`' names, each array used as it is: nothing is copied, transposed or cast,
        so weights over a memory map stay one (pages are read when used). ValueError for a missing
        array, or one of another shape or dtype than the word embeddings'."""
        D, F = config.hidden, config.ffn
        dtype = arrays["word"].dtype if "word" in arrays else None

        def get(name: str, *shape: int) -> np.ndarray:
            if name not in arrays:
                raise ValueError(f"array {name!r} is missing")
            array = np.asarray(arrays[name])  # a plain ndarray view of a np.memmap: no copy
            if array.shape != shape or array.dtype != dtype or not array.flags.c_contiguous:
                raise ValueError(f"array {name!r} is {array.dtype} {array.shape}, expected {dtype} {shape} C-ordered")
            return array

        def norm(prefix: str) -> tuple[np.ndarray, np.ndarray]:
            return get(prefix + ".gain", D), get(prefix + ".bias", D)

        layers = tuple(
            EncoderLayer(
                W_qkv=get(p + "W_qkv", D, 3 * D),
                b_qkv=get(p + "b_qkv", 3 * D),
                W_o=get(p + "W_o", D, D),
                b_o=get(p + "b_o", D),
                norm1=norm(p + "norm1"),
                W_1=get(p + "W_1", D, F),
                b_1=get(p + "b_1", F),
                W_2=get(p + "W_2", F, D),
                b_2=get(p + "b_2", D),
                norm2=norm(p + "norm2"),
            )
            for p in (f"layers.{number}." for number in range(config.layers))
        )
        return cls(
            config,
            get("word", config.vocab_size, D),
            get("position", config.max_positions, D),
            get("segment", config.type_vocab_size, D),
            norm("norm"),
            layers,
        )


def _norm_tensors(prefix: str, norm: tuple[np.ndarray, np.ndarray]) -> dict[str, np.ndarray]:
    return {prefix + ".weight": norm[0], prefix + ".bias": norm[1]}


def _norm_arrays(prefix: str, norm: tuple[np.ndarray, np.ndarray]) -> dict[str, np.ndarray]:
    return {prefix + ".gain": norm[0], prefix + ".bias": norm[1]}


def random_weights(config: EncoderConfig, *, seed: int = 0, dtype=np.float32) -> EncoderWeights:
    """Random weights of the right shapes (tests, docs): normal(0, 0.2) matrices, LayerNorm near identity."""
    rng = np.random.default_rng(seed)
    D, F = config.hidden, config.ffn

    def matrix(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.2).astype(dtype)

    def norm() -> tuple[np.ndarray, np.ndarray]:
        return (1 + matrix(D) * 0.1).astype(dtype), matrix(D) * 0.1

    layers = tuple(
        EncoderLayer(
            matrix(D, 3 * D),
            matrix(3 * D),
            matrix(D, D),
            matrix(D),
            norm(),
            matrix(D, F),
            matrix(F),
            matrix(F, D),
            matrix(D),
            norm(),
        )
        for _ in range(config.layers)
    )
    return EncoderWeights(
        config,
        matrix(config.vocab_size, D),
        matrix(config.max_positions, D),
        matrix(config.type_vocab_size, D),
        norm(),
        layers,
    )


# ---------------------------------------------------------------- the pieces of a layer


@dataclass(frozen=True)
class Standardized:
    """What a LayerNorm kept for the backward pass (``keep``): its input standardised, and the divisor."""

    normed: np.ndarray  # (..., D) (x - mean) / std, before gain and bias
    std: np.ndarray  # (..., 1) sqrt(var + eps)


def standardize(x: np.ndarray, eps: float) -> np.ndarray:
    """x (..., D) -> (x - mean) / sqrt(var + eps) in place; returns that divisor, the std (..., 1)."""
    x -= x.mean(axis=-1, keepdims=True)  # (..., D) centred
    variance = np.einsum("...i,...i->...", x, x)[..., None] / x.shape[-1]  # (..., 1), biased like torch
    variance += eps
    std = np.sqrt(variance, out=variance)  # (..., 1)
    x /= std  # (..., D)
    return std


def affine_layer_norm(
    x: np.ndarray, gain: np.ndarray, bias: np.ndarray, eps: float, keep: list | None = None
) -> np.ndarray:
    """BERT's LayerNorm, in place: x (..., D) -> (x - mean) / sqrt(var + eps) * gain + bias, same array.
    ``keep`` (a list): a :class:`Standardized` is appended, what the backward pass reads."""
    std = standardize(x, eps)  # (..., 1); x (..., D) standardised
    if keep is not None:
        keep.append(Standardized(x.copy(), std))  # (..., D), (..., 1)
    x *= gain  # (..., D) * (D,)
    x += bias
    return x


GELU_ROWS = 32  # rows of (rows, F) GELU'd at a time: each pass's two or three (32, F) arrays stay in L2

# Phi(-a) ~ t (c1 + t (c2 + t (c3 + t (c4 + t c5)))) exp(-a^2 / 2), t = 1 / (1 + q a), a >= 0: Abramowitz &
# Stegun 7.1.26 for erfc(a / sqrt 2) / 2 (|error of erf| <= 1.5e-7: below float32's own rounding of GELU's
# inputs), the 1/2 folded into the c and the 1/sqrt 2 into q
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
_PHI_Q = _ERF_P / math.sqrt(2)
_PHI_C = tuple(a / 2 for a in _ERF_A)


def gelu(x: np.ndarray, slope: np.ndarray | None = None) -> np.ndarray:
    """Exact GELU, x Phi(x) = x (1 + erf(x / sqrt 2)) / 2, BERT's "gelu", in place on x (N, F) (or any shape).

    float32 evaluates Phi by Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7), GELU_ROWS rows at a time so
    each block stays in cache; float64 calls math.erf on each element (exact, slow: equivalence runs only).
    ``slope`` (x's shape), when given, receives the derivative of what is computed, at x: the backward
    pass's GELU'(x) (of the polynomial in float32, of the exact GELU in float64)."""
    if x.dtype != np.float32:
        erf = np.vectorize(math.erf, otypes=[x.dtype])
        phi = 0.5 * (1.0 + erf(x / math.sqrt(2)))  # (..., F) Phi(x)
        if slope is not None:
            slope[...] = phi + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)  # (..., F) Phi(x) + x phi(x)
        x *= phi  # (..., F)
        return x
    rows = x.reshape(-1, x.shape[-1])  # (N, F) a view
    slopes = None if slope is None else slope.reshape(rows.shape)  # (N, F) a view
    n = min(GELU_ROWS, len(rows))
    scratch = np.empty((3 if slope is None else 4, n, rows.shape[1]), np.float32)  # (3 or 4, <=32, F) reused
    for start in range(0, len(rows), GELU_ROWS):
        block = rows[start : start + GELU_ROWS]  # (n, F)
        if slopes is None:
            _gelu_block(block, *scratch[:, : len(block)])  # in place
        else:
            *spare, extra = scratch[:, : len(block)]  # 3 x (n, F) the forward's scratch, (n, F) the slope's
            _gelu_block(block, *spare, slopes[start : start + GELU_ROWS], extra)  # in place, and its slope
    return x


def _gelu_block(
    h: np.ndarray,
    a: np.ndarray,
    t: np.ndarray,
    poly: np.ndarray,
    slope: np.ndarray | None = None,
    extra: np.ndarray | None = None,
) -> None:
    """GELU of a float32 block h (n, F) in place, as x Phi(x) = max(x, 0) - |x| Phi(-|x|) (a, t, poly: scratch (n, F)).

    One exp and 19 cheap passes; the Python-float constants keep every step float32 (NEP 50). With
    ``slope`` (n, F) (and ``extra``, scratch (n, F)) the derivative of the same formula goes there:
    with P(a) = poly(t) exp(-a^2 / 2) ~ Phi(-a), GELU'(x) = 1 - (aP)'(a) for x > 0, (aP)'(a) otherwise
    (no pass with a mask: a masked ufunc runs some forty times slower than a plain one)."""
    np.abs(h, out=a)  # (n, F) a = |x|
    np.add(a, 1 / _PHI_Q, out=t)
    np.divide(1 / _PHI_Q, t, out=t)  # (n, F) t = 1 / (1 + q a), written (1/q) / (1/q + a): one pass fewer
    np.multiply(t, _PHI_C[4], out=poly)  # (n, F)
    for c in reversed(_PHI_C[:4]):
        poly += c
        poly *= t  # Horner: t (c1 + t (c2 + ...))
    if slope is not None:
        np.multiply(t, 5 * _PHI_C[4], out=slope)  # (n, F) poly'(t) = c1 + 2 c2 t + ... + 5 c5 t^4, by Horner
        for power, c in reversed(list(enumerate(_PHI_C[:4], start=1))):
            slope += power * c  # (n, F)
            if power > 1:
                slope *= t  # (n, F)
        slope *= t  # (n, F)
        slope *= t  # (n, F) poly'(t) t^2
        slope *= -_PHI_Q  # (n, F) poly'(t) dt/da, dt/da = -q t^2
        np.multiply(a, poly, out=extra)  # (n, F)
        slope -= extra  # (n, F) (d/da of poly(t) exp(-a^2 / 2)) / exp(-a^2 / 2)
    np.square(a, out=t)  # t = a^2 (t is no longer needed)
    t *= -0.5
    np.exp(t, out=t)  # exp(-a^2 / 2)
    poly *= t  # Phi(-a)
    if slope is not None:
        slope *= t  # (n, F) P'(a)
        slope *= a  # (n, F) a P'(a)
        slope += poly  # (n, F) (aP)'(a) = P + a P'
        np.subtract(0.5, slope, out=slope)  # (n, F) 0.5 - (aP)' >= 0: (aP)' = Phi(-a) - a phi(a) <= 1/2
        np.copysign(slope, h, out=slope)  # (n, F) with x's sign: a mask-free where (x > 0, x < 0)
        slope += 0.5  # (n, F) GELU'(x): 1 - (aP)' for x > 0, (aP)' for x < 0
    poly *= a  # |x| Phi(-|x|)
    h += a
    h *= 0.5  # max(x, 0) = (x + |x|) / 2 exactly, and faster than np.maximum with a scalar
    h -= poly  # x Phi(x)


def split_heads(x: np.ndarray, heads: int) -> np.ndarray:
    """(B, T, H * d_h) -> (B, H, T, d_h): each head's slice of the features (a view)."""
    B, T, width = x.shape
    return x.reshape(B, T, heads, width // heads).transpose(0, 2, 1, 3)  # (B, H, T, d_h)


def merge_heads(x: np.ndarray, real: np.ndarray | None = None) -> np.ndarray:
    """(B, H, T, d_h) -> (N, H * d_h): heads side by side again, one row per token (N = B * T), or per real
    piece when ``real`` (B, T) is given (N = real.sum()). A copy either way, so leaving padding out costs no pass."""
    B, H, T, d_h = x.shape
    by_token = x.transpose(0, 2, 1, 3)  # (B, T, H, d_h) a view
    if real is None:
        return by_token.reshape(B * T, H * d_h)  # (B*T, D)
    return by_token[real].reshape(-1, H * d_h)  # (N, D) the real pieces' rows, in (B, T) order


@dataclass(frozen=True)
class EncoderOutput:
    """What :func:`encode` returns for a padded batch of B sentences of T pieces."""

    hidden: np.ndarray  # (L + 1, B, T, D) the embeddings' output, then each layer's; padding rows mean nothing
    weights: np.ndarray | None  # (L, B, H, T, T) every layer's and head's attention; padding keys get 0
    values: list[np.ndarray] | None = None  # with keep_values: per layer (B, H, T, d_h) the values v
    tape: EncoderTape | None = None  # with tape: what the backward pass reads


def project_qkv(rows: np.ndarray, layer: EncoderLayer, config: EncoderConfig, B: int, T: int):
    """Queries, keys and values of every head, with their biases: rows (B*T, D) -> q, k, v (B, H, T, d_h) each.

    q = x W_q + b_q (and k, v alike), one (B*T, D) x (D, 3D) product for the three."""
    D = rows.shape[1]
    qkv = rows @ layer.W_qkv  # (B*T, D) x (D, 3D) -> (B*T, 3D)
    qkv += layer.b_qkv
    qkv = qkv.reshape(B, T, 3 * D)  # (B, T, 3D)
    q = split_heads(qkv[..., :D], config.heads)  # (B, H, T, d_h)
    k = split_heads(qkv[..., D : 2 * D], config.heads)  # (B, H, T, d_h)
    v = split_heads(qkv[..., 2 * D :], config.heads)  # (B, H, T, d_h)
    return q, k, v


def attention_out(
    context: np.ndarray, layer: EncoderLayer, real: np.ndarray | None = None, keep: list | None = None
) -> np.ndarray:
    """The heads' contexts (B, H, T, d_h) side by side, times W_o, plus b_o: (N, D), before the residual;
    N = B*T, or only the real pieces' rows when ``real`` (B, T) is given (see :func:`merge_heads`).
    ``keep`` (a list): the merged heads (N, D) are appended, what the backward pass reads."""
    merged = merge_heads(context, real)  # (N, D)
    if keep is not None:
        keep.append(merged)
    out = merged @ layer.W_o  # (N, D) x (D, D) -> (N, D)
    out += layer.b_o
    return out


def add_and_norm(
    out: np.ndarray, rows: np.ndarray, norm: tuple[np.ndarray, np.ndarray], eps: float, keep: list | None = None
) -> np.ndarray:
    """Residual, then LayerNorm, in place on out (B*T, D): LayerNorm(rows + out) (``keep``: see
    :func:`affine_layer_norm`)."""
    out += rows  # residual
    return affine_layer_norm(out, *norm, eps, keep)  # (B*T, D)


FFN_ROWS = 512  # rows per feed-forward block: a (512, F) inner block stays in cache between its two products


def feed_forward(
    rows: np.ndarray, layer: EncoderLayer, out: np.ndarray | None = None, keep: list | None = None
) -> np.ndarray:
    """GELU(x W_1 + b_1) W_2 + b_2: rows (B*T, D) -> (B*T, D), before the residual, FFN_ROWS rows at a time,
    into ``out`` (B*T, D) when given. ``keep`` (a list): (GELU's outputs (B*T, F), its slopes GELU'
    (B*T, F)) is appended, what the backward pass reads."""
    out = np.empty((len(rows), layer.W_2.shape[1]), rows.dtype) if out is None else out  # (B*T, D)
    kept = None if keep is None else np.empty((2, len(rows), layer.W_1.shape[1]), rows.dtype)  # (2, B*T, F)
    for start in range(0, len(rows), FFN_ROWS):
        block = slice(start, start + FFN_ROWS)
        inner = np.matmul(rows[block], layer.W_1, out=None if kept is None else kept[0, block])  # (n, D) x (D, F)
        inner += layer.b_1  # (n, F)
        gelu(inner, None if kept is None else kept[1, block])  # (n, F) in place
        np.matmul(inner, layer.W_2, out=out[block])  # (n, F) x (F, D) -> (n, D)
    out += layer.b_2
    if keep is not None:
        keep.append((kept[0], kept[1]))  # (B*T, F) each
    return out


def encoder_layer(
    x: np.ndarray,
    rows: np.ndarray,
    layer: EncoderLayer,
    config: EncoderConfig,
    key_bias: np.ndarray | None,
    out: np.ndarray,
    real: np.ndarray | None = None,
    weights_out: np.ndarray | None = None,
    keep: list | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One layer: x (B, T, D) -> output written into ``out`` (B, T, D) (encode's own hidden[l + 1]: no copy);
    returns (the output's real rows (N, D), weights (B, H, T, T), values v (B, H, T, d_h)). The weights
    are computed in ``weights_out`` (B, H, T, T) when given (encode's own attentions[l]: no copy either).

    ``key_bias`` (B, T): 0 for a real piece, -inf for padding (its weight becomes exactly 0). Without
    padding (``real`` None), ``rows`` is x.reshape(B*T, D) and N = B*T. With padding, ``real`` (B, T) marks
    the pieces and ``rows`` (N, D) holds x's real rows, packed: attention needs the padded layout, so
    q, k, v are made for every position from x (whose padding rows must be finite: cheaper than putting
    (N, 3D) packed rows back in place), and every step after it (output projection, feed-forward, both
    LayerNorms) runs on the N real rows alone; the output's padding rows keep what ``out`` held.
    ``keep`` (a list): the layer's :class:`LayerTape` is appended, what the backward pass reads."""
    B, T, D = x.shape
    q, k, v = project_qkv(x.reshape(B * T, D), layer, config, B, T)  # (B, H, T, d_h) each
    context, weights = attention(q, k, v, key_bias=key_bias, out=weights_out)  # (B, H, T, d_h), (B, H, T, T)
    saved = None if keep is None else []  # the LayerNorms' and the feed-forward's tape, in the order they run
    attended = add_and_norm(attention_out(context, layer, real, saved), rows, layer.norm1, config.eps, saved)  # (N, D)
    into = out.reshape(B * T, D) if real is None else None  # (B*T, D) a view of out: no padding, no copy
    output = add_and_norm(
        feed_forward(attended, layer, into, saved), attended, layer.norm2, config.eps, saved
    )  # (N, D)
    if real is not None:
        out[real] = output  # (B, T, D)[real] = (N, D): the pieces' rows back in place
    if keep is not None:
        merged, norm1, (inner, slope), norm2 = saved
        keep.append(LayerTape(rows, q, k, v, weights, merged, norm1, attended, inner, slope, norm2))
    return output, weights, v


@dataclass(frozen=True)
class LayerTape:
    """What one layer's forward pass keeps for its backward pass (``encode(..., tape=True)``): N real rows."""

    rows: np.ndarray  # (N, D) the layer's input
    q: np.ndarray  # (B, H, T, d_h)
    k: np.ndarray  # (B, H, T, d_h)
    v: np.ndarray  # (B, H, T, d_h)
    weights: np.ndarray  # (B, H, T, T) the attention weights; padding keys 0
    merged: np.ndarray  # (N, D) the heads' contexts (weights @ v) side by side, real rows
    norm1: Standardized  # (N, D), (N, 1) the residual after attention, standardised
    attended: np.ndarray  # (N, D) LayerNorm1's output: the feed-forward's input
    inner: np.ndarray  # (N, F) GELU(attended W_1 + b_1)
    slope: np.ndarray  # (N, F) GELU' at attended W_1 + b_1
    norm2: Standardized  # (N, D), (N, 1) the residual after the feed-forward, standardised


@dataclass(frozen=True)
class EncoderTape:
    """What :func:`encode` keeps with ``tape=True``: all the backward pass reads (ctxembed.train.encoder_backprop)."""

    ids: np.ndarray  # (B, T) piece ids
    real: np.ndarray  # (B, T) bool: True = a piece
    norm: Standardized  # (N, D), (N, 1) the embeddings' sum, standardised (real rows)
    layers: list[LayerTape]


@dataclass(frozen=True)
class EncoderLayerSteps(LayerSteps):
    """One encoder layer step by step (:func:`trace_layer`): the textbook layer's steps, plus BERT's own."""

    attended: np.ndarray | None = None  # (B, T, D) LayerNorm(x + merged): the feed-forward's input

    def sentence(self, b: int, n: int) -> EncoderLayerSteps:
        """The steps of sentence ``b`` cut to its ``n`` pieces (the B axis dropped), the feed-forward's input too."""
        cut = super().sentence(b, n)
        return EncoderLayerSteps(**vars(cut), attended=None if self.attended is None else self.attended[b, :n])


def trace_layer(
    weights: EncoderWeights, number: int, x: np.ndarray, key_bias: np.ndarray | None = None
) -> EncoderLayerSteps:
    """Layer ``number`` again from its input x (B, T, D) or (T, D) (``encode``'s ``hidden[number]``), keeping
    every step: q, k, v (B, H, T, d_h), the attention steps (scores, weights (B, H, T, T)), the merged heads,
    the feed-forward's input and the output (B, T, D). The same functions as :func:`encoder_layer`, so
    the same numbers as the encoder's own pass on the same batch; only this layer is held, never all L x H.
    ``key_bias`` (B, T) or (T,): 0 for a piece, -inf for padding. Unbatched x drops the B axis everywhere."""
    x = np.asarray(x, dtype=weights.dtype)
    unbatched = x.ndim == 2
    x = x[None] if unbatched else x  # (T, D) -> (1, T, D)
    config, layer = weights.config, weights.layers[number]
    B, T, D = x.shape
    rows = x.reshape(B * T, D)  # (B*T, D)
    q, k, v = project_qkv(rows, layer, config, B, T)  # (B, H, T, d_h) each
    steps = attention_steps(q, k, v, key_bias=key_bias)  # every score kept: raw, scaled, weights, context
    merged = attention_out(steps.context, layer)  # (B*T, D) before the residual
    attended = add_and_norm(merged.copy(), rows, layer.norm1, config.eps)  # (B*T, D)
    output = add_and_norm(feed_forward(attended, layer), attended, layer.norm2, config.eps)  # (B*T, D)
    traced = EncoderLayerSteps(
        x,
        q,
        k,
        v,
        steps,
        merged.reshape(B, T, D),
        output.reshape(B, T, D),
        attended=attended.reshape(B, T, D),
    )
    return traced.sentence(0, T) if unbatched else traced


def embed(
    weights: EncoderWeights, ids: np.ndarray, out: np.ndarray | None = None, keep: list | None = None
) -> np.ndarray:
    """Piece ids (B, T) -> the first layer's input (B, T, D): word + position + segment 0, then LayerNorm;
    into ``out`` (B, T, D) when given (encode's own hidden[0]: no copy); ``keep``: see :func:`affine_layer_norm`."""
    B, T = ids.shape
    x = np.take(weights.word, ids, axis=0, out=out)  # (B, T, D) the pieces' rows
    x += weights.position[:T]  # (B, T, D) + (T, D)
    x += weights.segment[0]  # (B, T, D) + (D,)
    return affine_layer_norm(x, *weights.norm, weights.config.eps, keep)  # (B, T, D)


def encode(
    weights: EncoderWeights,
    ids: np.ndarray,
    real: np.ndarray,
    *,
    keep_weights: bool = True,
    keep_values: bool = False,
    tape: bool = False,
) -> EncoderOutput:
    """Run the encoder on a padded batch: ids (B, T) int, real (B, T) bool (True = a piece, False = padding).

    Returns every hidden state (L + 1, B, T, D) and, with ``keep_weights``, every attention matrix
    (L, B, H, T, T). A sentence's numbers do not depend on the padding around it (padding keys get
    weight exactly 0), up to float32 rounding of the batched matrix products. Padding rows are left out
    of every step after q, k, v and attention (:func:`encoder_layer`): in ``hidden`` they mean nothing
    (0 after the embeddings), and neither do the weights of padding queries. ``tape`` keeps what the
    backward pass reads (:class:`EncoderTape`); every number is the same as without it, bit for bit."""
    ids = np.asarray(ids)
    real = np.asarray(real, dtype=bool)
    config = weights.config
    if ids.ndim != 2 or ids.shape != real.shape or ids.shape[1] == 0:
        raise ValueError(f"ids and real must be (B, T) with T >= 1, got {ids.shape} and {real.shape}")
    if ids.shape[1] > config.max_positions:
        raise ValueError(f"{ids.shape[1]} pieces: the model takes at most {config.max_positions}")
    dtype = weights.dtype
    B, T = ids.shape
    padded = not real.all()
    key_bias = np.where(real, 0.0, -np.inf).astype(dtype) if padded else None  # (B, T) padding keys: -inf
    hidden = np.empty((config.layers + 1, B, T, config.hidden), dtype)  # (L+1, B, T, D)
    norms = [] if tape else None
    x = embed(weights, ids, out=hidden[0], keep=norms)  # (B, T, D)
    rows = x.reshape(B * T, -1)  # (B*T, D) every row is a piece: no gather, no scatter
    if padded:
        hidden[1:, ~real] = 0  # (L, P, D) the padding rows, never written by the layers: finite, as q, k, v need
        rows = x[real]  # (N, D) the real pieces' rows, gathered once
    attentions = np.empty((config.layers, B, config.heads, T, T), dtype) if keep_weights else None  # (L, B, H, T, T)
    values = [] if keep_values else None
    layer_tapes = [] if tape else None
    for number, layer in enumerate(weights.layers):
        x, out = hidden[number], hidden[number + 1]  # (B, T, D) the layer's input; it writes its output in out
        into = None if attentions is None else attentions[number]  # (B, H, T, T) where its weights go
        rows, _, v = encoder_layer(x, rows, layer, config, key_bias, out, real if padded else None, into, layer_tapes)
        if values is not None:
            values.append(np.ascontiguousarray(v))  # (B, H, T, d_h)
    kept = None
    if tape:
        [norm] = norms
        by_row = norm if not padded else Standardized(norm.normed[real], norm.std[real])  # (N, D), (N, 1)
        flat = Standardized(by_row.normed.reshape(-1, config.hidden), by_row.std.reshape(-1, 1))  # (N, D), (N, 1)
        kept = EncoderTape(ids, real, flat, layer_tapes)
    return EncoderOutput(hidden, attentions, values, kept)
