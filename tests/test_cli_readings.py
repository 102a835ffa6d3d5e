"""attend --attention mean|rollout|value-norm: the reading beside the raw weights, in JSON and on screen.

Expected values are worked out from the document's own raw weights with plain arithmetic (and the toy
vectors' lengths by hand), never with ctxembed.core.readings."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.cli_helpers import TOY, fails, run_json, succeeds

TOY_NOTES = ["--vectors", TOY, "--preset", "notes"]  # apple [5,2,0], is [0,0,5], phone [0,5,0], the [0,0,6]


def attend(*args) -> dict:
    return run_json("attend", *args, "--json")


def test_without_a_reading_the_document_has_none():
    doc = attend("apple is the phone", *TOY_NOTES)
    assert doc["schema"] == "ctxembed.attend/5"
    assert "attention" not in doc


def test_the_reading_leaves_the_raw_weights_as_they_were():
    raw = attend("apple is the phone", *TOY_NOTES)
    read = attend("apple is the phone", *TOY_NOTES, "--attention", "rollout")
    assert read["weights"] == raw["weights"]
    assert read["top_attended"] == raw["top_attended"]


def test_mean_is_the_average_of_the_heads():
    doc = attend(
        "the cat sat on the mat", "--preset", "textbook", "--heads", "4", "--layers", "2", "--attention", "mean"
    )
    w = np.array(doc["weights"])  # (2, 4, T, T)
    expected = (w[:, 0] + w[:, 1] + w[:, 2] + w[:, 3]) / 4
    np.testing.assert_allclose(doc["attention"]["layers"], expected, rtol=1e-6)
    assert doc["attention"]["heads"] is None and doc["attention"]["sent_norms"] is None


def test_rollout_multiplies_the_layers_with_half_the_identity():
    doc = attend(
        "the cat sat on the mat", "--preset", "textbook", "--heads", "2", "--layers", "2", "--attention", "rollout"
    )
    w = np.array(doc["weights"], dtype=np.float64)  # (2, 2, T, T)
    eye = np.eye(w.shape[-1])
    first = 0.5 * eye + 0.5 * (w[0, 0] + w[0, 1]) / 2  # rows already sum to 1
    second = 0.5 * eye + 0.5 * (w[1, 0] + w[1, 1]) / 2
    maps = np.array(doc["attention"]["layers"])
    np.testing.assert_allclose(maps[0], first, atol=1e-6)
    np.testing.assert_allclose(maps[1], second @ first, atol=1e-6)
    assert doc["attention"]["masked_keys"] == [[] for _ in range(6)]  # the 0.5 I is never masked


def test_value_norm_on_the_toy_vectors_by_hand():
    # notes preset: one head, identity projections, no W_out: what token j sends is its own vector x_j
    doc = attend("apple is the phone", *TOY_NOTES, "--attention", "value-norm")
    lengths = [math.sqrt(25 + 4), 5.0, 6.0, 5.0]  # |apple|, |is|, |the|, |phone|
    reading = doc["attention"]
    np.testing.assert_allclose(reading["sent_norms"], [[lengths]], rtol=1e-6)
    w = np.array(doc["weights"])[0, 0]  # (T, T)
    sent = w * np.array(lengths)  # alpha_ij |x_j|
    expected = sent / sent.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(reading["heads"][0][0], expected, rtol=1e-5)
    np.testing.assert_allclose(reading["layers"][0], expected, rtol=1e-5)  # one head: the layer is that head
    top = reading["top_attended"][0][0]  # apple's first: the largest share of its row
    assert top["weight"] == pytest.approx(expected[0].max(), rel=1e-5)


def test_value_norm_with_an_output_projection_differs_from_the_weights():
    args = ["we sat on the river bank", "--preset", "learned", "--attention", "value-norm"]
    doc = attend(*args)
    reading = doc["attention"]
    heads = np.array(reading["heads"])
    assert heads.shape == np.array(doc["weights"]).shape
    np.testing.assert_allclose(heads.sum(-1), 1.0, atol=1e-5)
    assert not np.allclose(heads, doc["weights"], atol=1e-3)  # ||v W_out|| differs between tokens


def test_the_terminal_shows_the_reading_and_its_top_tokens():
    out = succeeds("attend", "apple is the phone", *TOY_NOTES, "--attention", "value-norm").stdout
    assert "value-norm, layer 0 (the heads added up)" in out
    assert "per token (value-norm, layer 0 (the heads added up))" in out
    assert "Kobayashi" in out


@pytest.mark.parametrize("extra", [["--head", "0"], ["--all-heads"]])
def test_a_reading_without_heads_refuses_a_head(extra):
    line = fails(2, "attend", "apple is the phone", *TOY_NOTES, "--attention", "rollout", *extra)
    assert "--attention rollout has one map per layer" in line


def test_an_unknown_reading_is_a_usage_error():
    line = fails(2, "attend", "apple is the phone", *TOY_NOTES, "--attention", "saliency")
    assert "--attention must be one of raw, mean, rollout, value-norm" in line
