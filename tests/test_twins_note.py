"""A repeated word whose copies get one contextual vector (no word order) is said so: in neighbors and
compare with --word, as a JSON warning and a line on stderr, and on the live page."""

from __future__ import annotations

import json

from tests.cli_helpers import invoke, run_json


def noted(*args) -> dict:
    """The JSON document of a run that exits 0 with notes on stderr."""
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


SENTENCE = "I deposited cash at the bank and then sat on the river bank"


def test_neighbors_of_a_copy_that_shares_its_vector_says_so():
    for word in ("bank", "bank#2"):
        doc = noted("neighbors", SENTENCE, "--word", word, "-k", "3")
        assert [line for line in doc["warnings"] if "bank and bank#2 share one contextual vector" in line]
    result = invoke("neighbors", SENTENCE, "--word", "bank#2", "-k", "3")
    assert result.exit_code == 0
    assert "warning: bank and bank#2 share one contextual vector" in result.stderr
    assert "--positions" in result.stderr


def test_no_note_when_the_copies_differ_or_the_word_is_once():
    assert run_json("neighbors", SENTENCE, "--word", "bank#2", "-k", "3", "--positions", "--json")["warnings"] == []
    assert run_json("neighbors", SENTENCE, "--word", "river", "-k", "3", "--json")["warnings"] == []


def test_compare_names_the_sentence_whose_copies_share_a_vector():
    doc = noted("compare", "we walked from the bank to the river bank", "I paid the bank", "--word", "bank")
    assert doc["warnings"] == [
        "sentence 1: bank and bank#2 share one contextual vector: these settings give attention no word order, "
        "so copies of a word see the same sentence (--positions adds word order; a trained model such as "
        "--model minilm has it)"
    ]
