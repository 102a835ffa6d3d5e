"""Property tests (hypothesis): invariants that must hold for every input, not just the worked examples.

Run with ``--hypothesis-show-statistics`` to see how many examples each property tried.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from ctxembed.core.attention import AttentionConfig, encode, random_params, softmax, sum_normalize

# moderate example counts keep the whole attention suite well under 30 s on 2 cores
PROPERTY = settings(max_examples=150, deadline=None)
VALUES = st.floats(-3, 3, allow_nan=False, allow_infinity=False)
SCORES = st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False)


@st.composite
def configs(draw, *, causal=None, positions=None) -> AttentionConfig:
    """Any combination of ingredients (causal and positions can be pinned)."""
    residual = draw(st.booleans())
    return AttentionConfig(
        scale=draw(st.booleans()),
        temperature=draw(st.sampled_from([0.5, 1.0, 3.0])),
        normalization=draw(st.sampled_from(["softmax", "sum"])),
        causal=draw(st.booleans()) if causal is None else causal,
        causal_mode=draw(st.sampled_from(["before", "after"])),
        exclude_self=draw(st.booleans()),
        heads=draw(st.sampled_from([1, 2])),
        layers=draw(st.integers(1, 2)),
        residual=residual,
        residual_scale=draw(st.sampled_from([1.0, 0.5])) if residual else 1.0,
        layer_norm=draw(st.booleans()),
        positions=draw(st.booleans()) if positions is None else positions,
    )


@st.composite
def models(draw, d: int, config: AttentionConfig):
    """Identity projections or random ones (seeded) that fit d and the residual."""
    if draw(st.booleans()):
        return None
    d_out = d // config.heads if config.residual else draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**32 - 1))
    return random_params(d, d_out, config, seed, bias=draw(st.booleans()))


@PROPERTY
@given(data=st.data(), T=st.integers(1, 8), rows=st.integers(1, 4))
def test_normalised_rows_sum_to_one_and_masked_keys_are_zero(data, T, rows):
    scores = data.draw(arrays(np.float64, (rows, T), elements=SCORES))
    allowed = data.draw(arrays(np.bool_, (rows, T)))
    has_key = allowed.any(axis=-1)
    for normalise in (softmax, sum_normalize):
        weights = normalise(scores, allowed)
        assert np.all(np.isfinite(weights)) and np.all(weights >= 0)
        np.testing.assert_allclose(weights.sum(axis=-1)[has_key], 1.0, rtol=1e-12)
        assert np.all(weights[~allowed] == 0.0)  # masked keys: exactly zero
        assert np.all(weights[~has_key] == 0.0)  # rows without keys: zero, not NaN
    np.testing.assert_allclose(softmax(scores).sum(axis=-1), 1.0, rtol=1e-12)


@PROPERTY
@given(data=st.data(), T=st.integers(1, 6), config=configs(causal=True))
def test_causal_upper_triangle_is_exactly_zero(data, T, config):
    d = 2 * data.draw(st.integers(1, 2))
    x = data.draw(arrays(np.float64, (2, T, d), elements=VALUES))
    result = encode(x, config, data.draw(models(d, config)), lengths=np.array([T, max(1, T - 2)]))
    upper = np.triu(np.ones((T, T), dtype=bool), k=1)
    assert np.all(result.weights[..., upper] == 0.0)
    # every real query keeps at least itself (or, with exclude_self, an earlier token) and sums to 1
    row_sums = result.weights.sum(axis=-1)  # (L, B, h, T)
    first_row_empty = 1 if config.exclude_self else 0
    np.testing.assert_allclose(row_sums[:, 0, :, first_row_empty:], 1.0, rtol=1e-9)
    assert np.all(np.isfinite(result.contextual))


@PROPERTY
@given(data=st.data(), T=st.integers(1, 6), config=configs(causal=False, positions=False))
def test_permuting_tokens_permutes_outputs(data, T, config):
    d = 2 * data.draw(st.integers(1, 2))
    x = data.draw(arrays(np.float64, (T, d), elements=VALUES))
    key_bias = data.draw(st.none() | arrays(np.float64, (T,), elements=st.floats(-2, 2)))
    params = data.draw(models(d, config))
    order = np.array(data.draw(st.permutations(range(T))))
    original = encode(x, config, params, key_bias=key_bias)
    permuted = encode(x[order], config, params, key_bias=None if key_bias is None else key_bias[order])
    np.testing.assert_allclose(permuted.contextual, original.contextual[order], rtol=1e-9, atol=1e-9)
    # query i and key j of the permuted sentence are tokens order[i] and order[j] of the original
    expected_weights = original.weights[..., order, :][..., order]  # (L, h, T, T)
    np.testing.assert_allclose(permuted.weights, expected_weights, rtol=1e-9, atol=1e-12)


@PROPERTY
@given(data=st.data(), lengths=st.lists(st.integers(1, 5), min_size=1, max_size=4), config=configs())
def test_padded_batch_equals_one_sentence_at_a_time(data, lengths, config):
    d = 2 * data.draw(st.integers(1, 2))
    T = max(lengths)
    # padding holds large junk: it must not leak into any real token
    x = data.draw(arrays(np.float64, (len(lengths), T, d), elements=VALUES))
    key_bias = data.draw(arrays(np.float64, (len(lengths), T), elements=st.floats(-2, 2)))
    for b, length in enumerate(lengths):
        x[b, length:] = 1e3 * (b + 1)
        key_bias[b, length:] = 50.0
    params = data.draw(models(d, config))
    batch = encode(x, config, params, lengths=np.array(lengths), key_bias=key_bias)
    for b, length in enumerate(lengths):
        alone = encode(x[b, :length], config, params, key_bias=key_bias[b, :length])
        np.testing.assert_allclose(batch.contextual[b, :length], alone.contextual, rtol=1e-9, atol=1e-9)
        weights = batch.weights[:, b]  # (L, h, T, T)
        np.testing.assert_allclose(weights[..., :length, :length], alone.weights, rtol=1e-9, atol=1e-12)
        assert np.all(weights[..., length:, :] == 0.0) and np.all(weights[..., length:] == 0.0)
        assert np.all(batch.contextual[b, length:] == 0.0)


@PROPERTY
@given(
    d_in=st.integers(1, 6),
    d_out=st.integers(1, 4),
    heads=st.integers(1, 3),
    layers=st.integers(1, 3),
    seed=st.integers(0, 2**62),
    offset=st.integers(1, 2**62),
    bias=st.booleans(),
)
def test_projections_from_the_same_seed_are_identical(d_in, d_out, heads, layers, seed, offset, bias):
    config = AttentionConfig(heads=heads, layers=layers)
    first, again, other = (
        random_params(d_in, d_out, config, s, bias=bias, output_projection=True) for s in (seed, seed, seed + offset)
    )
    for layer_first, layer_again, layer_other in zip(first, again, other, strict=True):
        np.testing.assert_array_equal(layer_first.W_out, layer_again.W_out)
        assert not np.array_equal(layer_first.W_out, layer_other.W_out)
        for head_first, head_again, head_other in zip(
            layer_first.heads, layer_again.heads, layer_other.heads, strict=True
        ):
            for name in ("W_query", "W_key", "W_value", "b_query", "b_key", "b_value"):
                if bias or name.startswith("W"):
                    np.testing.assert_array_equal(getattr(head_first, name), getattr(head_again, name))
                    assert not np.array_equal(getattr(head_first, name), getattr(head_other, name))
                else:
                    assert getattr(head_first, name) is None
