"""attend --explain --focus WORD: the neuron view, q . k_j term by term, from the traced q and k."""

from __future__ import annotations

import numpy as np

from tests.cli_helpers import TOY, fails, run_json, succeeds
from tests.test_json_schema import assert_valid

TOY_NOTES = ["--vectors", TOY, "--preset", "notes"]  # apple [5,2,0], is [0,0,5], phone [0,5,0], the [0,0,6]


def test_terms_of_the_toy_sentence_by_hand():
    doc = run_json("attend", "apple is the phone", *TOY_NOTES, "--explain", "--focus", "phone", "--json")
    neuron = doc["explain"]["neuron"]
    assert (neuron["query"], neuron["token"]) == (3, "phone")
    assert neuron["q"] == [0.0, 5.0, 0.0]  # identity projections: q = x_phone
    # q_d k_jd for apple [5,2,0], is [0,0,5], the [0,0,6], phone [0,5,0]
    assert neuron["terms"] == [[0.0, 10.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 25.0, 0.0]]


def test_terms_add_up_to_the_traced_raw_scores_of_any_layer_and_head():
    args = ["I deposited money in the bank", "--preset", "learned", "--explain", "--layer", "0", "--head", "3"]
    doc = run_json("attend", *args, "--focus", "bank", "--json")
    assert_valid(doc, "ctxembed.attend/5")
    explain = doc["explain"]
    neuron = explain["neuron"]
    assert neuron["query"] == 5 and neuron["q"] == explain["queries"][5]  # the traced query, not a re-run
    terms = np.array(neuron["terms"])
    assert terms.shape == (6, 25)
    np.testing.assert_allclose(terms.sum(axis=1), explain["raw_scores"][5], rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(terms, np.array(explain["keys"]) * np.array(neuron["q"]), rtol=1e-6)


def test_without_focus_there_is_no_neuron_view():
    doc = run_json("attend", "apple is the phone", *TOY_NOTES, "--explain", "--json")
    assert doc["explain"]["neuron"] is None


def test_terminal_lists_the_terms_that_add_and_take_most():
    out = succeeds("attend", "apple is the phone", *TOY_NOTES, "--explain", "--focus", "phone").stdout
    assert "'phone': q . k_j = sum over its 3 dimensions" in out
    row = next(line for line in out.splitlines() if line.startswith("│ apple") and "d1 +10.00" in line)
    assert "25" not in row


def test_a_focus_word_not_in_the_sentence_is_a_data_error():
    line = fails(1, "attend", "apple is the phone", *TOY_NOTES, "--explain", "--focus", "banana")
    assert "--word 'banana' is not among the words of the sentence" in line


def test_a_result_without_steps_is_one_clear_error():
    from ctxembed.api import Explorer
    from ctxembed.errors import DataError
    from ctxembed.report import explain_steps

    explorer = Explorer(TOY, "notes", on_note=lambda _: None)
    [result] = explorer.contextualize(["apple is the phone"])  # run without trace: no steps kept
    try:
        explain_steps(explorer.engine, result, layer=0, head=0)
    except DataError as exc:
        assert exc.render(lambda name: "--" + name).startswith(
            "--explain needs the steps of each layer (q, k, scores), which this result does not hold"
        )
    else:
        raise AssertionError("explain_steps accepted a result without steps")
