"""The attention core against values worked out by hand (the lecture notes' toy example and friends).

Expected values are written as plain arithmetic with math.exp, never computed with the module itself.
"""

from __future__ import annotations

import doctest
import math
from pathlib import Path

import numpy as np
import pytest

from ctxembed import declarations as config_module
from ctxembed import presets as settings_module
from ctxembed.core import attention as attention_module
from ctxembed.core import projections as projections_module
from ctxembed.core.attention import (
    AttentionConfig,
    HeadProjection,
    LayerParams,
    add_key_bias,
    attention,
    attention_layer,
    attention_scores,
    attention_steps,
    build_mask,
    encode,
    flat_twins,
    layer_norm,
    normalize,
    random_params,
    scale_scores,
    sentence_twins,
    shared_projection,
    sinusoidal_positions,
    softmax,
    sum_normalize,
    twin_ids,
)
from ctxembed.vectors.weights import load_projections, save_projections

TOY_PATH = Path(__file__).resolve().parents[1] / "data" / "notes_toy.txt"
R3 = math.sqrt(3)  # sqrt(d_k) for the 3-dimensional toy vectors


def load_toy(path: Path = TOY_PATH) -> tuple[list[str], np.ndarray]:
    """A tiny word2vec-text reader: header "count dim", then "word v1 v2 ..." per line."""
    header, *lines = path.read_text(encoding="utf-8").splitlines()
    count, dim = (int(field) for field in header.split())
    words, rows = [], []
    for line in lines:
        word, *values = line.split()
        words.append(word)
        rows.append([float(value) for value in values])
    assert len(words) == count and all(len(row) == dim for row in rows)
    return words, np.array(rows)


def mix(w: list[float]) -> list[float]:
    """sum_j w_j x_j for apple=[5,2,0], is=[0,0,5], phone=[0,5,0], the=[0,0,6], written out."""
    return [5 * w[0], 2 * w[0] + 5 * w[2], 5 * w[1] + 6 * w[3]]


def hand_softmax(scores: list[float]) -> list[float]:
    exps = [math.exp(s) for s in scores]
    return [e / sum(exps) for e in exps]


# Raw dot products of the toy sentence "apple is phone the" (rows = queries):
#   apple: 25+4=29, 0, 10, 0 | is: 0, 25, 0, 30 | phone: 10, 0, 25, 0 | the: 0, 30, 0, 36
E = math.exp
# fmt: off
UNSCALED_WEIGHTS = [
    [E(29) / (E(29) + 1 + E(10) + 1), 1 / (E(29) + 1 + E(10) + 1), E(10) / (E(29) + 1 + E(10) + 1),
     1 / (E(29) + 1 + E(10) + 1)],
    [1 / (1 + E(25) + 1 + E(30)), E(25) / (1 + E(25) + 1 + E(30)), 1 / (1 + E(25) + 1 + E(30)),
     E(30) / (1 + E(25) + 1 + E(30))],
    [E(10) / (E(10) + 1 + E(25) + 1), 1 / (E(10) + 1 + E(25) + 1), E(25) / (E(10) + 1 + E(25) + 1),
     1 / (E(10) + 1 + E(25) + 1)],
    [1 / (1 + E(30) + 1 + E(36)), E(30) / (1 + E(30) + 1 + E(36)), 1 / (1 + E(30) + 1 + E(36)),
     E(36) / (1 + E(30) + 1 + E(36))],
]
_Z = [E(29 / R3) + 2 + E(10 / R3), 2 + E(25 / R3) + E(30 / R3), E(10 / R3) + 2 + E(25 / R3),
      2 + E(30 / R3) + E(36 / R3)]
SCALED_WEIGHTS = [
    [E(29 / R3) / _Z[0], 1 / _Z[0], E(10 / R3) / _Z[0], 1 / _Z[0]],
    [1 / _Z[1], E(25 / R3) / _Z[1], 1 / _Z[1], E(30 / R3) / _Z[1]],
    [E(10 / R3) / _Z[2], 1 / _Z[2], E(25 / R3) / _Z[2], 1 / _Z[2]],
    [1 / _Z[3], E(30 / R3) / _Z[3], 1 / _Z[3], E(36 / R3) / _Z[3]],
]
SUM_WEIGHTS = [  # each raw score divided by its row sum
    [29 / 39, 0, 10 / 39, 0],
    [0, 25 / 55, 0, 30 / 55],
    [10 / 35, 0, 25 / 35, 0],
    [0, 30 / 66, 0, 36 / 66],
]
# fmt: on


@pytest.fixture
def toy() -> np.ndarray:
    return load_toy()[1]


def test_toy_file_is_word2vec_text_with_header():
    assert TOY_PATH.read_text(encoding="utf-8").splitlines()[0] == "4 3"
    words, vectors = load_toy()
    assert words == ["apple", "is", "phone", "the"]
    np.testing.assert_array_equal(vectors, [[5, 2, 0], [0, 0, 5], [0, 5, 0], [0, 0, 6]])


def test_scaled_scores_match_the_notes(toy):
    scores = attention_scores(toy, toy, scale=True)
    assert scores[0, 0] == pytest.approx(16.7432, abs=1e-4)  # apple.apple = 29 / sqrt(3)
    assert scores[0, 2] == pytest.approx(5.7735, abs=1e-4)  # apple.phone = 10 / sqrt(3)
    raw = [[29, 0, 10, 0], [0, 25, 0, 30], [10, 0, 25, 0], [0, 30, 0, 36]]
    np.testing.assert_allclose(scores, np.array(raw) / R3, rtol=1e-12)
    np.testing.assert_array_equal(attention_scores(toy, toy, scale=False), raw)


@pytest.mark.parametrize(
    ("scale", "expected"), [(False, UNSCALED_WEIGHTS), (True, SCALED_WEIGHTS)], ids=["unscaled", "scaled"]
)
def test_toy_softmax_weights_and_contextual_vectors(toy, scale, expected):
    result = encode(toy, AttentionConfig(scale=scale))
    np.testing.assert_allclose(result.weights[0, 0], expected, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(result.contextual, [mix(row) for row in expected], rtol=1e-9, atol=1e-12)
    context, weights = attention(toy, toy, toy, scale=scale)
    np.testing.assert_allclose(weights, expected, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(context, result.contextual, rtol=1e-12)


def test_scaled_weights_are_flatter_than_unscaled(toy):
    # a readable anchor for the notes: scaling moves weight from "apple" itself towards "phone"
    scaled = encode(toy, AttentionConfig(scale=True)).weights[0, 0]
    unscaled = encode(toy, AttentionConfig(scale=False)).weights[0, 0]
    assert scaled[0, 2] == pytest.approx(E(10 / R3) / _Z[0])
    assert 1.7e-5 < scaled[0, 2] < 1.75e-5 and unscaled[0, 2] < 1e-8  # e^(5.77 - 16.74) vs e^(10 - 29)


def test_sum_normalization_of_the_toy_sentence(toy):
    for scale in (False, True):  # dividing all scores by sqrt(3) cannot change their ratios
        result = encode(toy, AttentionConfig(scale=scale, normalization="sum"))
        np.testing.assert_allclose(result.weights[0, 0], SUM_WEIGHTS, rtol=1e-12)
        np.testing.assert_allclose(result.contextual, [mix(row) for row in SUM_WEIGHTS], rtol=1e-12)
    # apple's context: (29 * apple + 10 * phone) / 39
    np.testing.assert_allclose(result.contextual[0], [145 / 39, 108 / 39, 0], rtol=1e-12)


def test_sum_normalization_clamps_negative_scores():
    scores = np.array([[2.0, -1.0, 3.0], [-1.0, -2.0, 0.0], [-1.0, 5.0, -2.0]])
    allowed = np.array([[True, True, True], [True, True, True], [True, False, True]])
    weights = sum_normalize(scores, allowed)
    np.testing.assert_allclose(weights[0], [2 / 5, 0, 3 / 5])  # the negative score gets 0
    np.testing.assert_allclose(weights[1], [1 / 3, 1 / 3, 1 / 3])  # nothing positive: uniform
    np.testing.assert_array_equal(weights[2], [0.5, 0.0, 0.5])  # uniform over allowed keys only
    assert weights[2, 1] == 0.0  # the masked key's positive score is ignored


def test_softmax_masked_keys_are_exactly_zero_and_empty_rows_zero():
    scores = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    allowed = np.array([[True, False, True], [False, False, False]])
    weights = softmax(scores, allowed)
    assert weights[0, 1] == 0.0
    np.testing.assert_allclose(weights[0], [E(1) / (E(1) + E(3)), 0, E(3) / (E(1) + E(3))])
    np.testing.assert_array_equal(weights[1], [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(sum_normalize(scores, allowed)[1], [0.0, 0.0, 0.0])


def test_temperature_divides_the_scores(toy):
    weights = encode(toy, AttentionConfig(scale=False, temperature=10.0)).weights[0, 0]
    np.testing.assert_allclose(weights[0], hand_softmax([2.9, 0.0, 1.0, 0.0]), rtol=1e-12)
    np.testing.assert_allclose(weights[3], hand_softmax([0.0, 3.0, 0.0, 3.6]), rtol=1e-12)
    scaled = scale_scores(np.array([[29.0]]), 3, scale=True, temperature=2.0)
    assert scaled[0, 0] == pytest.approx(29 / R3 / 2)


def test_composed_steps_equal_attention():
    # the --explain path: scores, scaling, key bias, normaliser, weighted sum, one call each
    rng = np.random.default_rng(7)
    q, k, v = rng.normal(size=(2, 3, 5, 4)), rng.normal(size=(2, 3, 5, 4)), rng.normal(size=(2, 3, 5, 6))
    allowed = build_mask(5, lengths=np.array([5, 3]), causal=True)
    key_bias = rng.normal(size=(2, 5))
    for normalization in ("softmax", "sum"):
        raw = attention_scores(q, k, scale=False)
        scores = scale_scores(raw, 4, scale=True, temperature=0.7)
        scores = add_key_bias(scores, key_bias)
        weights = normalize(scores, allowed, normalization=normalization)
        context = weights @ v
        expected_context, expected_weights = attention(
            q, k, v, allowed=allowed, key_bias=key_bias, temperature=0.7, normalization=normalization
        )
        np.testing.assert_array_equal(weights, expected_weights)
        np.testing.assert_array_equal(context, expected_context)
    np.testing.assert_allclose(raw[0, 0, 1, 2], q[0, 0, 1] @ k[0, 0, 2])


@pytest.mark.parametrize(
    ("normalization", "causal", "causal_mode", "empty_row"),
    [
        ("softmax", False, "before", False),  # in place in out, the usual case
        ("softmax", False, "before", True),  # a row with no finite score: computed apart, then copied in
        ("softmax", True, "after", False),
        ("sum", False, "before", False),
    ],
)
def test_attention_into_out_gives_the_same_bits(normalization, causal, causal_mode, empty_row):
    """``out`` only says where the weights go: the same bits as without it, whichever normaliser ran."""
    rng = np.random.default_rng(8)
    q, k, v = (rng.normal(size=(2, 3, 5, 4)).astype(np.float32) for _ in range(3))
    key_bias = np.where(rng.random((2, 5)) < 0.3, -np.inf, 0.0).astype(np.float32)  # (B, T) some keys removed
    key_bias[:, 0] = 0
    if empty_row:
        key_bias[1] = -np.inf  # sentence 1 has no key at all: its rows are zeros
    settings = dict(key_bias=key_bias, normalization=normalization, causal=causal, causal_mode=causal_mode)
    expected_context, expected_weights = attention(q, k, v, **settings)
    out = np.full((2, 3, 5, 5), np.nan, np.float32)  # (B, h, T, T)
    context, weights = attention(q, k, v, out=out, **settings)
    assert weights is out
    np.testing.assert_array_equal(weights, expected_weights)
    np.testing.assert_array_equal(context, expected_context)
    with pytest.raises(ValueError, match="keep=False"):
        attention_steps(q, k, v, out=out)  # the kept scores would be overwritten


def test_causal_toy_weights_by_hand(toy):
    weights = encode(toy, AttentionConfig(scale=False, causal=True)).weights[0, 0]
    expected = [
        [1, 0, 0, 0],
        [1 / (1 + E(25)), E(25) / (1 + E(25)), 0, 0],
        [E(10) / (E(10) + 1 + E(25)), 1 / (E(10) + 1 + E(25)), E(25) / (E(10) + 1 + E(25)), 0],
        UNSCALED_WEIGHTS[3],
    ]
    np.testing.assert_allclose(weights, expected, rtol=1e-9, atol=1e-15)
    assert np.all(weights[np.triu_indices(4, k=1)] == 0.0)


@pytest.mark.parametrize("normalization", ["softmax", "sum"])
def test_causal_before_and_after_agree(normalization):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3, 6, 4))
    lengths = np.array([6, 4, 1])
    configs = [
        AttentionConfig(causal=True, causal_mode=mode, normalization=normalization) for mode in ("before", "after")
    ]
    before, after = (encode(x, config, lengths=lengths) for config in configs)
    np.testing.assert_allclose(before.weights, after.weights, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(before.contextual, after.contextual, rtol=1e-12, atol=1e-15)
    upper = np.triu(np.ones((6, 6), dtype=bool), k=1)
    assert np.all(after.weights[..., upper] == 0.0) and np.all(before.weights[..., upper] == 0.0)
    assert not np.allclose(before.weights, encode(x, AttentionConfig(normalization=normalization)).weights)


def test_causal_after_survives_dominant_future_keys():
    # the future key out-scores the past by 1000: exp(-1000) underflows, so the plain recipe would
    # divide 0 by 0; the row takes the recipe's exact value, all weight on the only past key
    scores = np.array([[0.0, 1000.0], [3.0, 1.0]])
    after = normalize(scores, causal=True, causal_mode="after")
    np.testing.assert_array_equal(after[0], [1.0, 0.0])
    np.testing.assert_allclose(after[1], [E(3) / (E(3) + E(1)), E(1) / (E(3) + E(1))])
    negative = np.array([[-1.0, 5.0], [2.0, -4.0]])
    summed = normalize(negative, normalization="sum", causal=True, causal_mode="after")
    np.testing.assert_array_equal(summed, [[1.0, 0.0], [1.0, 0.0]])  # row 0: only key 0, score <= 0: uniform


def test_causal_after_is_the_notes_recipe():
    # softmax over the full row, zero the future, divide by what is left, written out for row 1 of 3
    scores = np.array([[0.5, 2.0, -1.0], [1.5, 0.25, 3.0], [0.0, 1.0, 2.0]])
    full = [E(1.5), E(0.25), E(3.0)]
    full = [f / sum(full) for f in full]
    kept = [full[0], full[1], 0.0]
    expected = [w / sum(kept) for w in kept]
    after = normalize(scores, causal=True, causal_mode="after")
    np.testing.assert_allclose(after[1], expected, rtol=1e-12)
    np.testing.assert_array_equal(after[0], [1.0, 0.0, 0.0])
    # padding is always masked before normalising, whatever the causal placement
    allowed = np.array([True, True, False])
    padded = normalize(scores, allowed, causal=True, causal_mode="after")
    np.testing.assert_allclose(padded[2], [E(0) / (E(0) + E(1)), E(1) / (E(0) + E(1)), 0.0], rtol=1e-12)


def test_exclude_self_toy_by_hand(toy):
    weights = encode(toy, AttentionConfig(scale=False, exclude_self=True)).weights[0, 0]
    assert np.all(np.diag(weights) == 0.0)
    np.testing.assert_allclose(weights[0], [0, 1 / (2 + E(10)), E(10) / (2 + E(10)), 1 / (2 + E(10))])
    np.testing.assert_allclose(weights[3], [1 / (2 + E(30)), E(30) / (2 + E(30)), 1 / (2 + E(30)), 0])


@pytest.mark.parametrize(
    "config",
    [
        AttentionConfig(exclude_self=True),
        AttentionConfig(exclude_self=True, normalization="sum", causal=True, causal_mode="after"),
        AttentionConfig(exclude_self=True, residual=True, layer_norm=True, layers=2),
    ],
)
def test_exclude_self_single_token_gives_zero_not_nan(config):
    x = np.array([[3.0, -1.0, 2.0]])
    result = encode(x, config)
    np.testing.assert_array_equal(result.weights, np.zeros((config.layers, 1, 1, 1)))
    if config.residual:  # residual keeps the token itself; post-norm of [3, -1, 2]
        centred = [3 - 4 / 3, -1 - 4 / 3, 2 - 4 / 3]
        std = math.sqrt(sum(c * c for c in centred) / 3 + 1e-5)
        once = [c / std for c in centred]
        assert np.all(np.isfinite(result.contextual))
        np.testing.assert_allclose(result.layer_outputs[0], [once], rtol=1e-12)
    else:
        np.testing.assert_array_equal(result.contextual, [[0.0, 0.0, 0.0]])


def test_key_bias_log_weight_reweights_exponentials(toy):
    w = [0.5, 2.0, 1.0, 0.1]  # e.g. smooth-inverse-frequency weights, one per key
    result = encode(toy, AttentionConfig(), key_bias=np.log(w))
    s = [[29, 0, 10, 0], [0, 25, 0, 30], [10, 0, 25, 0], [0, 30, 0, 36]]
    for i in range(4):
        terms = [w[j] * E(s[i][j] / R3) for j in range(4)]  # w_j exp(s_ij) / sum_k w_k exp(s_ik)
        np.testing.assert_allclose(result.weights[0, 0, i], [t / sum(terms) for t in terms], rtol=1e-12)
    # with the sum normaliser the bias is added to the (scaled) scores before clamping
    summed = encode(toy, AttentionConfig(normalization="sum", scale=False), key_bias=[0.0, 0.0, -20.0, 0.0])
    np.testing.assert_allclose(summed.weights[0, 0, 0], [1, 0, 0, 0])  # apple: [29, 0, 10 - 20 -> 0, 0] / 29
    np.testing.assert_allclose(summed.weights[0, 0, 2], [10 / 15, 0, 5 / 15, 0])  # phone: [10, 0, 25 - 20, 0]


def test_key_bias_per_sentence_and_minus_inf():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3, 4))
    bias = np.array([[0.0, 1.0, -np.inf], [2.0, 0.0, 0.0]])
    batched = encode(x, AttentionConfig(), key_bias=bias)
    for b in range(2):
        alone = encode(x[b], AttentionConfig(), key_bias=bias[b])
        np.testing.assert_allclose(batched.weights[:, b], alone.weights, rtol=1e-12)
    assert np.all(batched.weights[0, 0, 0, :, 2] == 0.0)  # log(0) = -inf removes the key


def test_large_scores_do_not_overflow():
    scores = np.array([[1e4, -1e4, 0.0], [-1e4, -1e4, -1e4]])
    for dtype in (np.float32, np.float64):
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            weights = softmax(scores.astype(dtype))
        assert weights.dtype == dtype
        np.testing.assert_array_equal(weights[0], [1.0, 0.0, 0.0])
        np.testing.assert_allclose(weights[1], [1 / 3, 1 / 3, 1 / 3], rtol=1e-6)
    # unscaled dot products of long vectors: 60 * 100^2 = 6e5, far beyond exp's range
    x = np.array([[100.0] * 60, [-100.0] * 60, [50.0] * 60])  # row 2: 3e5 with row 0, 1.5e5 with itself
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        result = encode(x, AttentionConfig(scale=False, causal=True))
    np.testing.assert_array_equal(result.weights[0, 0], [[1, 0, 0], [0, 1, 0], [1, 0, 0]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_output_dtype_follows_input(dtype):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 5, 6))
    config = AttentionConfig(heads=2, layers=2, residual=True, layer_norm=True, positions=True)
    params = random_params(6, 3, config, seed=4, bias=True)
    result = encode(x.astype(dtype), config, params, lengths=np.array([5, 2]), key_bias=np.zeros(5))
    reference = encode(x, config, params, lengths=np.array([5, 2]), key_bias=np.zeros(5))
    assert result.contextual.dtype == dtype and result.weights.dtype == dtype
    assert all(output.dtype == dtype for output in result.layer_outputs)
    tolerance = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(result.contextual, reference.contextual, atol=tolerance)
    np.testing.assert_allclose(result.weights, reference.weights, atol=tolerance)


def test_padding_queries_are_zero_never_nan():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3, 4, 2)) * 1e3
    config = AttentionConfig(residual=True, layer_norm=True, layers=2)
    result = encode(x, config, lengths=np.array([4, 2, 0]))
    assert not np.any(np.isnan(result.weights)) and not np.any(np.isnan(result.contextual))
    np.testing.assert_array_equal(result.weights[:, 1, :, 2:, :], 0.0)  # padding query rows
    np.testing.assert_array_equal(result.weights[:, 1, :, :, 2:], 0.0)  # padding key columns
    np.testing.assert_array_equal(result.contextual[1, 2:], 0.0)
    np.testing.assert_array_equal(result.contextual[2], 0.0)  # an empty sentence
    by_mask = encode(x, config, token_mask=np.arange(4)[None, :] < np.array([[4], [2], [0]]))
    np.testing.assert_array_equal(by_mask.contextual, result.contextual)


def test_build_mask_by_hand():
    mask = build_mask(3, lengths=np.array([2]), causal=True, exclude_self=True)
    assert mask.shape == (1, 1, 3, 3)
    np.testing.assert_array_equal(mask[0, 0], [[0, 0, 0], [1, 0, 0], [0, 0, 0]])
    np.testing.assert_array_equal(build_mask(2)[0, 0], [[1, 1], [1, 1]])


def test_twin_ids_are_equal_for_identical_vectors_only():
    x = np.array([[[1.0, 2], [0, 1], [1, 2], [1, 2.0000001]], [[0, 1], [0, 0], [0, 0], [0, 1]]])  # (2, 4, 2)
    ids = twin_ids(x)
    assert ids.shape == (2, 4)
    assert ids[0, 0] == ids[0, 2] and len({ids[0, 0], ids[0, 1], ids[0, 3]}) == 3  # a near copy is no twin
    assert ids[1, 0] == ids[1, 3] and ids[1, 1] != ids[1, 2]  # two zero vectors (unknown words) are no twins


def test_sentence_twins_are_none_without_a_repeat_and_twin_ids_with_one():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 5, 4)).astype(np.float32)  # (B, T, d) no sentence repeats a vector
    x[1, 0] = x[0, 2]  # a copy in another sentence is no twin
    assert sentence_twins(x) is None
    x[2, 4] = x[2, 1]  # a copy within sentence 2
    x[2, 3] = 0  # a zero vector is no copy of another
    x[0, 1] = x[0, 3] = 0
    np.testing.assert_array_equal(same_ids(sentence_twins(x)), same_ids(twin_ids(x)))
    assert sentence_twins(x[:, :1]) is None  # one token has no copy


def same_ids(ids: np.ndarray) -> np.ndarray:
    """(S, T, T) which tokens of each sentence share an id: what the twin mask reads."""
    return ids[:, :, None] == ids[:, None, :]


def test_sentence_twins_partition_like_twin_ids_on_random_repeats():
    rng = np.random.default_rng(8)
    for T in (2, 3, 9, 40):
        words = rng.standard_normal((6, 5)).astype(np.float32)  # a vocabulary of 6 words, one of them 0
        words[5] = 0
        x = words[rng.integers(0, 6, (7, T))]  # (S, T, d) sentences of repeated words
        found = sentence_twins(x)
        if found is None:
            assert not (same_ids(twin_ids(x)) & ~np.eye(T, dtype=bool)).any()
        else:
            np.testing.assert_array_equal(same_ids(found), same_ids(twin_ids(x)))


def test_flat_twins_of_sentences_of_many_lengths_are_each_sentences_twins():
    rng = np.random.default_rng(9)
    words = rng.standard_normal((5, 4)).astype(np.float32)  # a vocabulary of 5 words, one of them 0
    words[4] = 0
    lengths = np.array([1, 6, 3, 8, 2])
    rows = words[rng.integers(0, 5, lengths.sum())]  # (n, d) sentences end to end
    rows[1 + 6] = rows[1 + 6 + 1] = words[0]  # sentence 2 repeats word 0 at least once
    ids = flat_twins(rows, lengths)
    assert ids is not None
    for start, T in zip(np.cumsum(lengths) - lengths, lengths, strict=True):
        mine = ids[start : start + T][None]  # (1, T)
        np.testing.assert_array_equal(same_ids(mine), same_ids(twin_ids(rows[start : start + T][None])))
    assert flat_twins(words[:4][[0, 1, 0, 1]], np.array([2, 2])) is None  # copies only across sentences


def test_a_hash_collision_only_costs_the_exact_pass(monkeypatch):
    import ctxembed.core.attention as attention

    monkeypatch.setattr(attention, "_hash_weights", lambda n: np.zeros(n, np.uint64))  # every row hashes alike
    x = np.random.default_rng(6).standard_normal((2, 4, 6))  # (B, T, d) float64, no repeat
    np.testing.assert_array_equal(same_ids(sentence_twins(x)), same_ids(twin_ids(x)))  # all distinct
    assert sentence_twins(np.zeros((1, 3, 3), np.float32)) is not None  # zero vectors: their own ids


def test_encode_finds_the_same_weights_whether_twins_are_searched_or_given():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 6, 8)).astype(np.float32)
    x[3, 5] = x[3, 0]  # one sentence repeats a word
    config = AttentionConfig(exclude_self=True, exclude_twins=True)
    searched = encode(x, config).weights
    np.testing.assert_array_equal(searched, encode(x, config, twins=twin_ids(x)).weights)
    assert searched[0, 3, 0, 0, 5] == 0 and searched[0, 2, 0, 0, 5] > 0  # the twin alone is masked


def test_build_mask_masks_twins_by_hand():
    mask = build_mask(4, exclude_self=True, twins=np.array([7, 3, 7, 7]))[0, 0]  # apple is apple apple
    np.testing.assert_array_equal(mask, [[0, 1, 0, 0], [1, 0, 1, 1], [0, 1, 0, 0], [0, 1, 0, 0]])
    kept_self = build_mask(3, twins=np.array([[1, 2, 1]]))[0, 0]  # twins alone keep the diagonal
    np.testing.assert_array_equal(kept_self, [[1, 1, 0], [1, 1, 1], [0, 1, 1]])


def test_exclude_twins_on_the_toy_vectors_by_hand(toy):
    # apple is apple phone: apple . apple = 29 would take the first apple's weight without the twin mask
    x = np.stack([toy[0], toy[1], toy[0], toy[2]])  # (4, 3)
    twins = encode(x, AttentionConfig(scale=False, exclude_self=True, exclude_twins=True)).weights[0, 0]
    np.testing.assert_allclose(twins[0], [0, 1 / (1 + E(10)), 0, E(10) / (1 + E(10))])
    np.testing.assert_array_equal(twins[0], twins[2])  # copies with the same context get the same weights
    kept = encode(x, AttentionConfig(scale=False, exclude_self=True)).weights[0, 0]
    np.testing.assert_allclose(kept[0], np.array([0, 1, E(29), E(10)]) / (1 + E(29) + E(10)))


def test_a_sentence_of_copies_with_twins_masked_gives_zeros_not_nan():
    x = np.array([[3.0, -1.0, 2.0]] * 3)  # the the the
    result = encode(x, AttentionConfig(exclude_self=True, exclude_twins=True))
    np.testing.assert_array_equal(result.weights, np.zeros((1, 1, 3, 3)))
    np.testing.assert_array_equal(result.contextual, np.zeros((3, 3)))


def test_identity_multihead_splits_the_dimensions():
    x = np.array([[1.0, 0.0, 2.0, 1.0], [0.0, 1.0, 1.0, 0.0]])  # head 0 sees dims 0-1, head 1 dims 2-3
    result = encode(x, AttentionConfig(heads=2, scale=False))
    # head 0 scores: [[1, 0], [0, 1]]; head 1 scores: [[5, 2], [2, 1]]
    head0 = [hand_softmax([1, 0]), hand_softmax([0, 1])]
    head1 = [hand_softmax([5, 2]), hand_softmax([2, 1])]
    np.testing.assert_allclose(result.weights[0], [head0, head1], rtol=1e-12)
    expected = [
        [
            head0[0][0] * 1 + head0[0][1] * 0,
            head0[0][0] * 0 + head0[0][1] * 1,
            head1[0][0] * 2 + head1[0][1] * 1,
            head1[0][0] * 1 + head1[0][1] * 0,
        ],
        [head0[1][0] * 1, head0[1][1] * 1, head1[1][0] * 2 + head1[1][1] * 1, head1[1][0] * 1],
    ]
    np.testing.assert_allclose(result.contextual, expected, rtol=1e-12)
    with pytest.raises(ValueError, match="divisible by 3"):
        encode(x, AttentionConfig(heads=3))


def test_shared_projection_eye_is_identity_and_all_but_the_top_is_affine():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 4, 6))
    config = AttentionConfig(heads=3)
    identity = encode(x, config)
    eye = encode(x, config, [shared_projection(np.eye(6), heads=3)])
    np.testing.assert_allclose(eye.contextual, identity.contextual, rtol=1e-12)
    # all-but-the-top as an attention ingredient: W = P, b = -mu @ P  ==  attention on (x - mu) @ P
    mu, P = rng.normal(size=6), rng.normal(size=(6, 6))
    affine = encode(x, AttentionConfig(), [shared_projection(P, -mu @ P)])
    centred = (x - mu) @ P
    context, weights = attention(centred, centred, centred)
    np.testing.assert_allclose(affine.contextual, context, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(affine.weights[0, :, 0], weights, rtol=1e-10, atol=1e-12)


def test_residual_and_post_layer_norm_by_hand(toy):
    result = encode(toy, AttentionConfig(residual=True, residual_scale=0.5, layer_norm=True))
    for i, word in enumerate(toy.tolist()):
        summed = [0.5 * a + c for a, c in zip(word, mix(SCALED_WEIGHTS[i]), strict=True)]  # λx + attn(x)
        mean = sum(summed) / 3
        std = math.sqrt(sum((s - mean) ** 2 for s in summed) / 3 + 1e-5)
        np.testing.assert_allclose(result.contextual[i], [(s - mean) / std for s in summed])
    plain = encode(toy, AttentionConfig(residual=True))
    np.testing.assert_allclose(plain.contextual, toy + np.array([mix(row) for row in SCALED_WEIGHTS]))


def test_layer_norm_by_hand():
    out = layer_norm(np.array([1.0, 2.0, 3.0, 6.0]))  # mean 3, variance (4 + 1 + 0 + 9) / 4 = 3.5
    np.testing.assert_allclose(out, np.array([-2.0, -1.0, 0.0, 3.0]) / math.sqrt(3.5 + 1e-5))
    np.testing.assert_array_equal(layer_norm(np.zeros(3)), [0.0, 0.0, 0.0])


def test_residual_dimension_mismatch_raises():
    config = AttentionConfig(residual=True, heads=2)
    with pytest.raises(ValueError, match=r"residual connection of layer 0 .*\(6, 4\)"):
        random_params(4, 3, config, seed=0)  # 2 heads x 3 = 6 != 4
    params = random_params(4, 3, config, seed=0, output_projection=True)  # W_out (6, 4) maps back
    assert params[0].W_out.shape == (6, 4)
    x = np.ones((2, 4))
    assert encode(x, config, params).contextual.shape == (2, 4)
    bad = [LayerParams(random_params(4, 3, AttentionConfig(heads=2), seed=0)[0].heads)]
    with pytest.raises(ValueError, match="residual connection"):
        encode(x, config, bad)


def test_stacked_layers_feed_each_other():
    rng = np.random.default_rng(6)
    x = rng.normal(size=(2, 5, 4))
    config = AttentionConfig(heads=2, layers=3, residual=True, layer_norm=True)
    params = random_params(4, 2, config, seed=1)
    result = encode(x, config, params, lengths=np.array([5, 3]))
    assert result.weights.shape == (3, 2, 2, 5, 5) and len(result.layer_outputs) == 3
    mask = build_mask(5, lengths=np.array([5, 3]))
    for layer in (1, 2):
        hidden = result.layer_outputs[layer - 1]
        output, weights = attention_layer(hidden, params[layer], config, mask)
        np.testing.assert_allclose(result.weights[layer], weights, rtol=1e-12)
        expected = np.where(
            np.arange(5)[None, :, None] < np.array([5, 3])[:, None, None], layer_norm(hidden + output), 0
        )
        np.testing.assert_allclose(result.layer_outputs[layer], expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(result.contextual, result.layer_outputs[-1])
    assert not np.allclose(result.weights[0], result.weights[1])


def test_unbatched_input_returns_unbatched_output(toy):
    config = AttentionConfig(heads=1, layers=2)
    single = encode(toy, config)
    batched = encode(toy[None], config)
    assert single.contextual.shape == (4, 3) and single.weights.shape == (2, 1, 4, 4)
    np.testing.assert_array_equal(single.contextual, batched.contextual[0])
    np.testing.assert_array_equal(single.layer_outputs[0], batched.layer_outputs[0][0])


def test_sinusoidal_positions_by_hand():
    pe = sinusoidal_positions(3, 5)
    np.testing.assert_allclose(pe[0], [0, 1, 0, 1, 0])
    np.testing.assert_allclose(
        pe[2],
        [
            math.sin(2),
            math.cos(2),
            math.sin(2 / 10000 ** (2 / 5)),
            math.cos(2 / 10000 ** (2 / 5)),
            math.sin(2 / 10000 ** (4 / 5)),
        ],
    )
    assert sinusoidal_positions(2, 4, np.float32).dtype == np.float32


def test_positions_are_added_to_the_input(toy):
    with_positions = encode(toy, AttentionConfig(positions=True, scale=False))
    shifted = toy + sinusoidal_positions(4, 3)
    context, weights = attention(shifted, shifted, shifted, scale=False)
    np.testing.assert_allclose(with_positions.contextual, context, rtol=1e-12)
    # the same word at two positions now gets different contextual vectors
    repeated = np.array([[1.0, 0.0, 1.0]] * 3)
    out = encode(repeated, AttentionConfig(positions=True)).contextual
    assert not np.allclose(out[0], out[2])
    np.testing.assert_allclose(encode(repeated, AttentionConfig()).contextual, repeated)


def test_query_key_positions_steer_but_are_not_carried(toy):
    """position_mode query-key adds the positions to the queries' and keys' input only: with queries and
    keys that ignore their input (W = 0, uniform weights) the output is the same as without positions."""
    from ctxembed.core.projections import HeadProjection, LayerParams

    zero, eye = np.zeros((3, 3)), np.eye(3)
    blind = [LayerParams([HeadProjection(zero, zero, eye)], None, None)]  # W_query = W_key = 0, W_value = I
    config = AttentionConfig(positions=True, position_mode="query-key", residual=True)
    plain = encode(toy, AttentionConfig(residual=True), blind).contextual
    np.testing.assert_allclose(encode(toy, config, blind).contextual, plain, rtol=1e-12)
    carried = encode(toy, AttentionConfig(positions=True, residual=True), blind).contextual
    assert not np.allclose(carried, plain)
    # with the identity projection the positions change the scores, so the weights, not the values
    steered = encode(toy, AttentionConfig(positions=True, position_mode="query-key"))
    shifted = toy + sinusoidal_positions(4, 3)
    context, weights = attention(shifted, shifted, toy)
    np.testing.assert_allclose(steered.contextual, context, rtol=1e-12)
    np.testing.assert_allclose(steered.weights[0, 0], weights, rtol=1e-12)  # layer 0, head 0


def test_random_params_are_xavier_uniform():
    params = random_params(300, 64, AttentionConfig(heads=2), seed=0, bias=True, output_projection=True)
    limit = math.sqrt(6 / (300 + 64))
    W = params[0].heads[1].W_value
    assert W.shape == (300, 64) and np.abs(W).max() <= limit
    assert W.std() == pytest.approx(limit / math.sqrt(3), rel=0.05)  # std of U(-a, a) is a / sqrt(3)
    assert np.abs(params[0].heads[0].b_key).max() <= 1 / math.sqrt(300)
    assert params[0].W_out.shape == (128, 300) and params[0].b_out.shape == (300,)


def test_npz_round_trip(tmp_path):
    config = AttentionConfig(heads=2, layers=2, residual=True)
    params = random_params(4, 2, config, seed=9, bias=True, output_projection=True)
    path = tmp_path / "projections.npz"
    save_projections(path, params)
    with np.load(path) as archive:
        assert "l1.h1.W_query" in archive.files and "l0.b_out" in archive.files
    loaded = load_projections(path, 4, config)
    for original, restored in zip(params, loaded, strict=True):
        np.testing.assert_array_equal(original.W_out, restored.W_out)
        np.testing.assert_array_equal(original.b_out, restored.b_out)
        for head, head_restored in zip(original.heads, restored.heads, strict=True):
            for name in ("W_query", "W_key", "W_value", "b_query", "b_key", "b_value"):
                np.testing.assert_array_equal(getattr(head, name), getattr(head_restored, name))
    x = np.random.default_rng(0).normal(size=(3, 4))
    np.testing.assert_array_equal(encode(x, config, params).contextual, encode(x, config, loaded).contextual)


def test_npz_plain_names_for_one_head(tmp_path):
    rng = np.random.default_rng(0)
    W = {name: rng.normal(size=(3, 2)) for name in ("W_query", "W_key", "W_value")}
    path = tmp_path / "plain.npz"
    np.savez(path, **W, b_value=np.ones(2))
    (layer,) = load_projections(path, 3, AttentionConfig())
    np.testing.assert_array_equal(layer.heads[0].W_key, W["W_key"])
    np.testing.assert_array_equal(layer.heads[0].b_value, [1.0, 1.0])
    assert layer.heads[0].b_query is None
    with pytest.raises(ValueError, match="only accepted for 1 layer and 1 head"):
        load_projections(path, 3, AttentionConfig(heads=2))


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"W_key": (4, 2)}, r"l0\.h0\.W_key has shape \(4, 2\), expected \(3, 2\)"),
        ({"W_query": (4, 2)}, r"l0\.h0\.W_query has shape \(4, 2\), expected \(3, d\)"),
        ({"b_query": (3,)}, r"l0\.h0\.b_query has shape \(3,\), expected \(2,\)"),
        ({"b_value": (2, 1)}, r"l0\.h0\.b_value has shape \(2, 1\), expected \(2,\)"),
        ({"W_out": (3, 3)}, r"l0\.W_out has shape \(3, 3\), expected \(2, d_model\)"),
        ({"W_value": None}, r"no array l0\.h0\.W_value"),
        ({"l0.h0.W_querry": (3, 2)}, r"unknown array 'l0\.h0\.W_querry'"),
        ({"l1.h0.W_query": (3, 2)}, r"l1\.h0\.W_query is outside layers=1"),
    ],
)
def test_bad_npz_raises_value_error_naming_the_array(tmp_path, arrays, message):
    shapes = {"W_query": (3, 2), "W_key": (3, 2), "W_value": (3, 2)}
    for name, shape in arrays.items():
        shapes[name] = shape
    stored = {
        (
            name
            if name.startswith("l")
            else f"l0.h0.{name}"
            if name.startswith(("W_q", "W_k", "W_v", "b_"))
            else f"l0.{name}"
        ): np.zeros(shape)
        for name, shape in shapes.items()
        if shape is not None
    }
    path = tmp_path / "bad.npz"
    np.savez(path, **stored)
    with pytest.raises(ValueError, match=message):
        load_projections(path, 3, AttentionConfig())


def test_npz_rejects_pickled_and_non_numeric_arrays(tmp_path):
    path = tmp_path / "objects.npz"
    matrices = {"W_key": np.zeros((3, 2)), "W_value": np.zeros((3, 2))}
    np.savez(path, W_query=np.array([{"evil": 1}], dtype=object), **matrices)
    with pytest.raises(ValueError, match="pickled objects"):
        load_projections(path, 3, AttentionConfig())
    path = tmp_path / "strings.npz"
    np.savez(path, W_query=np.array(["a", "b"]), **matrices)
    with pytest.raises(ValueError, match="W_query has dtype <U1, expected real numbers"):
        load_projections(path, 3, AttentionConfig())


def test_save_identity_layer_raises(tmp_path):
    with pytest.raises(ValueError, match="identity projection"):
        save_projections(tmp_path / "x.npz", [LayerParams()])


def test_heads_with_different_sizes_raise():
    rng = np.random.default_rng(0)
    heads = [
        HeadProjection(*(rng.normal(size=(3, 2)) for _ in range(3))),
        HeadProjection(*(rng.normal(size=(3, 4)) for _ in range(3))),
    ]
    with pytest.raises(ValueError, match=r"l0\.h1 has d_k=4"):
        encode(np.ones((2, 3)), AttentionConfig(heads=2), [LayerParams(heads)])


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("normalization", "max"),
        ("causal_mode", "during"),
        ("temperature", 0.0),
        ("temperature", float("nan")),
        ("heads", 0),
        ("layers", 1.5),
        ("residual_scale", float("inf")),
        ("causal", "yes"),
    ],
)
def test_config_rejects_bad_values(field, value):
    with pytest.raises(ValueError, match=field):
        AttentionConfig(**{field: value})


def test_module_docstring_examples_run():
    for module in (attention_module, projections_module, config_module, settings_module):
        failures, tried = doctest.testmod(module)
        assert tried > 0 and failures == 0
