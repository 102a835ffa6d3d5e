"""A sentence whose vectors are mostly guesses says so: a line on stderr and the documents' ``warnings``
(attend, compare, neighbors), from the one rule in ctxembed.engine.sentence.tokens_warning."""

from __future__ import annotations

from ctxembed.engine.sentence import tokens_warning
from tests.cli_helpers import invoke, strict_json

JAPANESE = "東京は日本の首都です"  # no spaces: the tokenizer makes it one token


def succeeds(*args):
    """Exit 0 (stderr may hold the warning, unlike tests.cli_helpers.succeeds)."""
    result = invoke(*args)
    assert result.exit_code == 0, result.stderr
    return result


def test_the_rule_counts_subword_guesses_over_half_of_the_tokens():
    assert tokens_warning(["a", "b", "c", "d"], ["subword", "subword", "vocabulary", "none"]) is None  # half
    line = tokens_warning(["a", "b", "c"], ["subword", "subword", "vocabulary"])
    assert line is not None and "2 of 3 tokens" in line and "subword" in line
    assert tokens_warning([], []) is None


def test_the_rule_sees_a_language_written_without_spaces():
    line = tokens_warning([JAPANESE], ["vocabulary"])
    assert line is not None and "without spaces" in line
    assert tokens_warning(["東京", "is", "big"], ["vocabulary"] * 3) is None  # a short name among words is fine


def test_attend_warns_on_stderr_and_in_json_for_mostly_guessed_words():
    result = succeeds("attend", "xqzzv blorfed the quuxing", "--json")
    doc = strict_json(result.stdout)
    sources = [t["source"] for t in doc["tokens"]]
    assert sources.count("subword") * 2 > len(sources)
    assert len(doc["warnings"]) == 1 and "subword" in doc["warnings"][0]
    assert doc["warnings"][0] in result.stderr


def test_attend_warns_on_a_japanese_sentence():
    result = succeeds("attend", JAPANESE)
    assert "without spaces" in result.stderr and "without spaces" not in result.stdout


def test_plain_english_has_no_warning():
    result = succeeds("attend", "we sat on the river bank", "--json")
    assert strict_json(result.stdout)["warnings"] == [] and "warning" not in result.stderr


def test_compare_and_neighbors_carry_the_warning():
    compared = succeeds("compare", "the xqzzv blorfed", "the bank", "--word", "the", "--json")
    doc = strict_json(compared.stdout)
    assert len(doc["warnings"]) == 1 and doc["warnings"][0].startswith("sentence 1: ")
    assert doc["warnings"][0] in compared.stderr
    near = succeeds("neighbors", "xqzzv blorfed quuxing bank", "--word", "bank", "-k", "3", "--json")
    assert len(strict_json(near.stdout)["warnings"]) == 1 and "subword" in near.stderr
