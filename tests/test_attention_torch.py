"""Equivalence with PyTorch: scaled_dot_product_attention and nn.MultiheadAttention with copied weights.

Each comparison records its largest absolute deviation in DEVIATIONS and prints it (run with -s to see
the table); the assertion message carries the measured value too. Skipped when torch is not installed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ctxembed.core.attention import AttentionConfig, build_mask, encode, random_params

torch = pytest.importorskip("torch")
F = torch.nn.functional

TOLERANCE = 1e-5
DEVIATIONS: dict[str, float] = {}
DTYPES = {"float64": (np.float64, torch.float64), "float32": (np.float32, torch.float32)}


@pytest.fixture(scope="module", autouse=True)
def deviation_table():
    yield
    print("\nlargest |numpy - torch| per comparison:")
    for name, deviation in sorted(DEVIATIONS.items()):
        print(f"  {name:55s} {deviation:.3e}")


def check(name: str, ours: np.ndarray, theirs: torch.Tensor) -> None:
    """Record max |ours - theirs| and assert it is below TOLERANCE."""
    theirs = theirs.detach().numpy()
    assert ours.shape == theirs.shape, f"{name}: shapes {ours.shape} vs {theirs.shape}"
    deviation = float(np.max(np.abs(ours.astype(np.float64) - theirs.astype(np.float64))))
    DEVIATIONS[name] = deviation
    print(f"{name}: max deviation {deviation:.3e}")
    assert deviation < TOLERANCE, f"{name}: max deviation {deviation:.3e} >= {TOLERANCE}"


def glove_like(shape: tuple[int, ...], dtype: type, seed: int = 0) -> np.ndarray:
    """Random vectors with GloVe-like entries (std ~0.5), so unscaled dot products reach tens."""
    return (np.random.default_rng(seed).normal(size=shape) * 0.5).astype(dtype)


@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("heads", [1, 2])
def test_sdpa_identity_projection(dtype_name, causal, heads):
    np_dtype, torch_dtype = DTYPES[dtype_name]
    x = glove_like((3, 7, 8), np_dtype)
    result = encode(x, AttentionConfig(causal=causal, heads=heads))
    assert result.contextual.dtype == np_dtype
    # identity multi-head = head i gets the i-th slice of d: (B, T, d) -> (B, h, T, d/h)
    heads_view = torch.from_numpy(x).reshape(3, 7, heads, 8 // heads).transpose(1, 2)
    assert heads_view.dtype == torch_dtype
    context = F.scaled_dot_product_attention(heads_view, heads_view, heads_view, is_causal=causal)
    expected = context.transpose(1, 2).reshape(3, 7, 8)  # concatenate the heads again
    check(f"sdpa identity h={heads} causal={causal} {dtype_name}", result.contextual, expected)


@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
def test_sdpa_random_projections(dtype_name, causal, bias):
    np_dtype, _ = DTYPES[dtype_name]
    x = glove_like((2, 6, 10), np_dtype, seed=1)
    config = AttentionConfig(causal=causal, heads=2)
    params = random_params(10, 4, config, seed=3, bias=bias)
    result = encode(x, config, params)

    def project(kind: str) -> torch.Tensor:  # (B, T, d) -> (B, h, T, d_k), with torch doing the matmul
        per_head = []
        for head in params[0].heads:
            W = torch.from_numpy(getattr(head, f"W_{kind}").astype(np_dtype))
            b = getattr(head, f"b_{kind}")
            out = torch.from_numpy(x) @ W
            per_head.append(out + torch.from_numpy(b.astype(np_dtype)) if bias else out)
        return torch.stack(per_head, dim=1)

    q, k, v = project("query"), project("key"), project("value")  # (B, h, T, d_k) each
    context = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    expected = context.transpose(1, 2).reshape(2, 6, 8)
    check(f"sdpa random W bias={bias} causal={causal} {dtype_name}", result.contextual, expected)


@pytest.mark.parametrize(("scale", "temperature"), [(False, 1.0), (True, 2.5), (False, 0.5)])
def test_sdpa_scale_and_temperature(scale, temperature):
    x = glove_like((2, 5, 6), np.float64, seed=2)
    result = encode(x, AttentionConfig(scale=scale, temperature=temperature))
    factor = (1 / math.sqrt(6) if scale else 1.0) / temperature
    xt = torch.from_numpy(x)
    check(
        f"sdpa scale={scale} temperature={temperature} float64",
        result.contextual,
        F.scaled_dot_product_attention(xt, xt, xt, scale=factor),
    )


def copy_into_mha(params, embed_dim: int, heads: int, bias: bool, torch_dtype):
    """A torch MHA holding our weights. torch computes x @ W.T, so each of our (d_in, d_k) matrices is
    transposed; its heads are consecutive row blocks of in_proj_weight (q block, then k, then v)."""
    mha = torch.nn.MultiheadAttention(embed_dim, heads, bias=bias, batch_first=True, dtype=torch_dtype)
    layer = params[0]
    with torch.no_grad():
        kinds = ("query", "key", "value")
        blocks = [np.concatenate([getattr(h, f"W_{kind}").T for h in layer.heads]) for kind in kinds]
        mha.in_proj_weight.copy_(torch.from_numpy(np.concatenate(blocks)))  # (3 E, E)
        mha.out_proj.weight.copy_(torch.from_numpy(layer.W_out.T))  # (E, E)
        if bias:
            biases = [np.concatenate([getattr(h, f"b_{kind}") for h in layer.heads]) for kind in kinds]
            mha.in_proj_bias.copy_(torch.from_numpy(np.concatenate(biases)))  # (3 E,)
            mha.out_proj.bias.copy_(torch.from_numpy(layer.b_out))  # (E,)
    return mha.eval()


@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_multihead_attention_with_padding(dtype_name, bias, causal):
    np_dtype, torch_dtype = DTYPES[dtype_name]
    embed_dim, heads, lengths = 12, 3, np.array([7, 5, 2])
    x = glove_like((3, 7, embed_dim), np_dtype, seed=4)
    config = AttentionConfig(heads=heads, causal=causal)
    # torch's per-head size is embed_dim / heads, and out_proj maps heads * d_k back to embed_dim
    params = random_params(embed_dim, embed_dim // heads, config, seed=5, bias=bias, output_projection=True)
    result = encode(x, config, params, lengths=lengths)

    mha = copy_into_mha(params, embed_dim, heads, bias, torch_dtype)
    key_padding_mask = torch.from_numpy(np.arange(7)[None, :] >= lengths[:, None])  # True = padding
    attn_mask = torch.triu(torch.ones(7, 7, dtype=torch.bool), diagonal=1) if causal else None
    xt = torch.from_numpy(x)
    output, weights = mha(
        xt, xt, xt, key_padding_mask=key_padding_mask, attn_mask=attn_mask, average_attn_weights=False
    )
    real = build_mask(7, lengths=lengths)[:, 0, :, 0]  # (B, T) True = real query
    name = f"MultiheadAttention bias={bias} causal={causal} {dtype_name}"
    # torch still computes outputs for padding queries; ours are zero by design, so compare real rows
    check(name + " output", result.contextual[real], output[torch.from_numpy(real)])
    ours_weights = result.weights[0].transpose(0, 2, 1, 3)[real]  # (B, h, T, T) -> (B, T, h, T) -> (N, h, T)
    theirs_weights = weights.transpose(1, 2)[torch.from_numpy(real)]
    check(name + " weights", ours_weights, theirs_weights)
