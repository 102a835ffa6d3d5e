"""--explain shows the numbers the result was computed with: one traced forward pass, pinned exactly."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ctxembed.core.attention import AttentionConfig, attention, attention_steps, encode, random_params
from ctxembed.errors import DataError
from ctxembed.report import explain_steps
from tests.cli_helpers import TOY, run_json, succeeds

SENTENCE = "the fisherman sat on the muddy river bank"
CASES = [
    [],  # the default preset: all-but-the-top, SIF key bias, self masked, layer mix 0.2·h0 + 0.8·h1
    ["--preset", "textbook", "--causal", "--causal-mode", "after"],
    ["--preset", "textbook", "--heads", "4", "--layers", "3", "--layer", "1", "--head", "2"],
    ["--preset", "textbook", "--projection", "random", "--output-projection", "--layer-norm", "--positions"],
    ["--preset", "notes", "--normalization", "sum", "--layers", "2", "--layer", "0"],
]


def test_traced_encode_gives_the_same_numbers_as_the_plain_one():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 6, 8)).astype(np.float32)  # (B, T, d)
    config = AttentionConfig(heads=2, layers=2, residual=True, layer_norm=True, exclude_self=True, causal=True)
    params = random_params(8, 4, config, seed=1, output_projection=True)
    lengths, bias = np.array([6, 4, 1]), rng.normal(size=(3, 6)).astype(np.float32)
    plain = encode(x, config, params, lengths=lengths, key_bias=bias)
    traced = encode(x, config, params, lengths=lengths, key_bias=bias, trace=True)
    assert plain.steps is None and len(traced.steps) == 2
    assert np.array_equal(plain.weights, traced.weights) and np.array_equal(plain.contextual, traced.contextual)
    for layer, steps in enumerate(traced.steps):
        assert np.array_equal(steps.attention.weights, traced.weights[layer])
        assert np.array_equal(steps.output, traced.layer_outputs[layer])
        assert steps.attention.raw_scores.dtype == np.float32  # no float64 re-run


def test_the_steps_add_up():
    rng = np.random.default_rng(2)
    q, k, v = (rng.normal(size=(5, 3)) for _ in range(3))  # (T, d)
    bias = rng.normal(size=5)
    steps = attention_steps(q, k, v, key_bias=bias, temperature=2.0)
    assert np.array_equal(steps.raw_scores, q @ k.T)
    assert steps.divisor == np.sqrt(3) * 2.0
    assert np.allclose(steps.scaled_scores, q @ k.T / steps.divisor)
    assert np.array_equal(steps.scores, steps.scaled_scores + bias)
    context, weights = attention(q, k, v, key_bias=bias, temperature=2.0)
    assert np.array_equal(weights, steps.weights) and np.array_equal(context, steps.context)


@pytest.mark.parametrize("args", CASES)
def test_explain_json_equals_the_result_exactly(args):
    doc = run_json("attend", SENTENCE, *args, "--explain", "--with-vectors", "--json")
    steps = doc["explain"]
    layer, head = steps["layer"], steps["head"]
    assert steps["weights"] == doc["weights"][layer][head]  # == on the numbers, not allclose
    if steps["last_layer"] and steps["mix"] is None:
        assert steps["output"] == doc["contextual"]
    if steps["mix"] is not None:  # the default's layer mix: the last step makes the contextual vectors
        assert steps["last_layer"] and steps["mix"]["contextual"] == doc["contextual"]
        inputs, output = np.array(steps["inputs"]), np.array(steps["output"])
        assert np.allclose(doc["contextual"], 0.2 * inputs + 0.8 * output, atol=1e-6)
    masked = np.array([[value is None for value in row] for row in steps["scores"]])
    weights = np.array(steps["weights"])
    assert np.all(weights[masked] == 0)


def test_explain_document_is_built_from_the_traced_arrays():
    from ctxembed.api import Explorer

    ex = Explorer(preset="textbook", heads=2, layers=2)
    result = ex.attend(SENTENCE, trace=True).result
    for layer in range(2):
        steps = explain_steps(ex.engine, result, layer=layer, head=1)
        assert np.array_equal(steps["weights"], result.weights[layer, 1])
        assert np.array_equal(steps["inputs"], result.layer_inputs[layer])
    assert np.array_equal(steps["output"], result.contextual)  # layer 1 is the last
    with pytest.raises(DataError, match="trace=True"):
        explain_steps(ex.engine, ex.attend(SENTENCE).result, layer=0, head=0)


def test_explain_steps_are_numbered_one_to_nine_and_each_matrix_is_printed_once():
    stdout = succeeds("attend", SENTENCE, "--explain").stdout
    numbers = [int(n) for n in re.findall(r"^(\d)\. ", stdout, re.M)]
    assert numbers == list(range(1, 10))  # 9: the default's layer mix
    assert "9. layer mix: contextual = 0.2·h0 + 0.8·h1" in stdout
    without = succeeds("attend", SENTENCE, "--explain", "--mix", "off").stdout
    assert [int(n) for n in re.findall(r"^(\d)\. ", without, re.M)] == list(range(1, 9))
    assert stdout.count("weights, softmax") == 1
    assert "5. scores after the key bias and the mask" in stdout


def test_explain_marks_masked_scores():
    stdout = succeeds("attend", "apple phone", "--vectors", TOY, "--preset", "textbook", "--causal", "--explain").stdout
    at = stdout.index("5. scores after the key bias and the mask")
    block = stdout[at : stdout.index("6. weights")]
    rows = [line for line in block.splitlines() if line.startswith("│")]
    assert rows[0].split("│")[3].strip() == "·"  # apple cannot see phone
    assert rows[1].split("│")[2].strip() == "5.77"  # phone sees apple: 10 / sqrt(3)


def test_a_matrix_wider_than_the_terminal_is_drawn_in_blocks_of_whole_columns():
    """Sixteen tokens at 80 columns: each weight is printed whole (squeezed cells would fold its digits)."""
    import io

    from rich.console import Console

    from ctxembed.api import Explorer
    from ctxembed.views.render import render_explain

    text = "the old fisherman sat on the muddy river bank while his friends went to the bank"
    doc = Explorer(preset="textbook").explain(text).document()["explain"]
    console = Console(file=io.StringIO(), width=80, color_system=None)
    render_explain(console, doc)
    out = console.file.getvalue()
    assert "6. weights, softmax" in out and "blocks of columns" in out
    assert max(map(len, out.splitlines())) <= 80
    drawn = set(re.findall(r"-?\d+\.\d{3}\b", out.split("6. weights")[1].split("7. context")[0]))
    assert {f"{w:.3f}" for w in np.ravel(doc["weights"])} <= drawn
