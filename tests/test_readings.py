"""Readings of attention (rollout, value-norm, head mean) against values worked out by hand, and
against the layer's own output: the value-norm vectors summed are what the layer added."""

from __future__ import annotations

import doctest
import math
from pathlib import Path

import numpy as np
import pytest

from ctxembed.core import readings as readings_module
from ctxembed.core.attention import AttentionConfig, encode, random_params
from ctxembed.core.readings import mean_over_heads, rollout, row_shares, sent_vectors, value_norm

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_doctests_run():
    failures, tried = doctest.testmod(readings_module)
    assert tried > 0 and failures == 0


def test_the_worked_example_in_the_docs_holds():
    failures, tried = doctest.testfile(str(DOCS / "attention.md"), module_relative=False)
    assert tried >= 8 and failures == 0


def test_rollout_of_two_layers_by_hand():
    # layer 0: two heads whose mean is 0.5 everywhere; layer 1: every query looks at token 0
    layer0 = [[[1.0, 0.0], [0.5, 0.5]], [[0.0, 1.0], [0.5, 0.5]]]
    layer1 = [[[1.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [1.0, 0.0]]]
    out = rollout(np.array([layer0, layer1]))
    # A_hat0 = 0.5 I + 0.5 [[.5, .5], [.5, .5]] = [[.75, .25], [.25, .75]]
    np.testing.assert_allclose(out[0], [[0.75, 0.25], [0.25, 0.75]])
    # A_hat1 = 0.5 I + 0.5 [[1, 0], [1, 0]] = [[1, 0], [.5, .5]]; A_hat1 @ A_hat0:
    # row 1 = .5 * [.75, .25] + .5 * [.25, .75] = [.5, .5]
    np.testing.assert_allclose(out[1], [[0.75, 0.25], [0.5, 0.5]])


def test_rollout_keeps_a_fully_masked_query_on_itself():
    weights = np.array([[[[0.0, 0.0], [0.3, 0.7]]]])  # query 0 had no key to attend to
    out = rollout(weights)
    np.testing.assert_allclose(out[0, 0], [1.0, 0.0])  # 0.5 I alone, renormalised
    np.testing.assert_allclose(out[0, 1], [0.15, 0.85])  # 0.5 * [.3, .7] + 0.5 * [0, 1]
    assert np.isfinite(out).all()


def test_rollout_rows_sum_to_one_and_keep_float32():
    rng = np.random.default_rng(0)
    weights = row_shares(rng.random((3, 4, 5, 5)).astype(np.float32))
    out = rollout(weights)
    assert out.dtype == np.float32 and out.shape == (3, 5, 5)
    np.testing.assert_allclose(out.sum(-1), 1.0, rtol=1e-6)


def test_head_mean_is_the_average_of_the_heads():
    weights = np.array([[[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [0.5, 0.5]]]])  # (1, 2, 2, 2)
    np.testing.assert_allclose(mean_over_heads(weights)[0], [[0.5, 0.5], [0.25, 0.75]])


def test_value_norm_by_hand_two_heads_in_their_own_slices():
    # no output projection: head h's values land in its own slice, so the heads' vectors are orthogonal
    weights = np.array([[[0.5, 0.5], [1.0, 0.0]], [[0.25, 0.75], [0.0, 1.0]]])  # (h=2, T=2, T=2)
    values = np.array([[[3.0], [1.0]], [[2.0], [4.0]]])  # (h=2, T=2, d_v=1): |f_0| = 3, 1; |f_1| = 2, 4
    sent = sent_vectors(values, None)
    np.testing.assert_array_equal(sent[1, :, 0], [0.0, 0.0])  # head 1 writes only its own slice
    result = value_norm(weights, sent)
    np.testing.assert_allclose(result.sent_norms, [[3.0, 1.0], [2.0, 4.0]])
    # head 0, query 0: 0.5 * 3 = 1.5 and 0.5 * 1 = 0.5 -> shares .75, .25
    np.testing.assert_allclose(result.heads[0, 0], [0.75, 0.25])
    # head 1, query 0: 0.25 * 2 = 0.5 and 0.75 * 4 = 3 -> shares 1/7, 6/7
    np.testing.assert_allclose(result.heads[1, 0], [1 / 7, 6 / 7])
    # the layer, query 0: key 0 sends (1.5, 0.5), key 1 sends (0.5, 3): lengths sqrt(2.5), sqrt(9.25)
    a, b = math.sqrt(2.5), math.sqrt(9.25)
    np.testing.assert_allclose(result.layer[0], [a / (a + b), b / (a + b)])
    # query 1: head 0 sends 1 * 3 from key 0, head 1 sends 1 * 4 from key 1
    np.testing.assert_allclose(result.layer[1], [3 / 7, 4 / 7])


def test_value_norm_heads_that_cancel_send_nothing():
    # both heads look at the same keys, but W_out maps head 0 to +e0 and head 1 to -e0: the layer adds nothing
    weights = np.array([[[0.5, 0.5], [0.5, 0.5]]] * 2)  # (2, 2, 2)
    values = np.ones((2, 2, 1))  # (h, T, d_v)
    w_out = np.array([[1.0, 0.0], [-1.0, 0.0]])  # (h * d_v, D)
    result = value_norm(weights, sent_vectors(values, w_out))
    np.testing.assert_allclose(result.heads, weights)  # each head alone: equal norms, the weights again
    np.testing.assert_allclose(result.layer, 0.0, atol=1e-12)  # summed, they cancel: an all-zero row stays 0


def test_value_norm_layer_equals_the_explicit_sum_of_vectors():
    rng = np.random.default_rng(1)
    h, T, d_v, D = 3, 4, 2, 5
    weights = row_shares(rng.random((h, T, T)))
    sent = sent_vectors(rng.normal(size=(h, T, d_v)), rng.normal(size=(h * d_v, D)))
    explicit = np.linalg.norm(np.einsum("hij,hjd->ijd", weights, sent), axis=-1)  # (T, T) the vectors added
    np.testing.assert_allclose(value_norm(weights, sent).layer, row_shares(explicit), rtol=1e-12)


@pytest.mark.parametrize("output_projection", [True, False])
def test_sent_vectors_add_up_to_what_the_layer_computed(output_projection):
    """sum_j sum_h alpha^h_ij f_h(x_j) + b_out is the layer's merged output, from the same forward pass."""
    rng = np.random.default_rng(2)
    config = AttentionConfig(heads=2)
    x = rng.normal(size=(5, 8))
    params = random_params(8, 4, config, seed=3, output_projection=output_projection)
    traced = encode(x, config, params, trace=True)
    step = traced.steps[0]
    sent = sent_vectors(step.v, params[0].W_out)  # (h, T, D)
    summed = np.einsum("hij,hjd->id", step.attention.weights, sent)  # (T, D)
    bias = 0 if params[0].b_out is None else params[0].b_out
    np.testing.assert_allclose(summed + bias, step.merged, rtol=1e-10, atol=1e-12)


def test_readings_run_on_the_models_units_then_become_words():
    """A subword model's reading is computed over its pieces, then aggregated with its own to_words:
    rollout of aggregated weights would be another number."""
    from ctxembed.api import Explorer
    from ctxembed.engine.sentence import AttentionParts
    from ctxembed.report import attention_reading
    from tests.cli_helpers import TOY

    explorer = Explorer(TOY, "notes", on_note=lambda _: None)
    [result] = explorer.contextualize(["apple is the phone"])  # 4 words; say "phone" ran as 2 pieces

    def to_words(maps: np.ndarray) -> np.ndarray:  # (..., 5, 5) -> (..., 4, 4): keys summed, queries averaged
        keys = np.concatenate([maps[..., :3], maps[..., 3:].sum(-1, keepdims=True)], axis=-1)
        return np.concatenate([keys[..., :3, :], keys[..., 3:, :].mean(-2, keepdims=True)], axis=-2)

    pieces = row_shares(np.random.default_rng(4).random((2, 1, 5, 5)))  # (L, h, P, P)

    class PieceEngine:
        def attention_parts(self, _):
            return AttentionParts(pieces, None, to_words)

    doc = attention_reading(result, "rollout", PieceEngine(), [[]] * 4)
    np.testing.assert_allclose(doc["layers"], to_words(rollout(pieces)))
    assert not np.allclose(doc["layers"], rollout(to_words(pieces)), atol=1e-3)
    np.testing.assert_allclose(np.asarray(doc["layers"]).sum(-1), 1.0)
