"""`ctxembed compare`: N sentences give N x N static and contextual cosine matrices of a word."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.cli_helpers import TOY, fails, numbers, run_json, succeeds, table

RIVER = ["we sat on the river bank", "the boat drifted toward the muddy bank"]
MONEY = ["I deposited money in the bank", "the bank raised its interest rates"]
BANKS = RIVER + MONEY


def compare(*args) -> dict:
    return run_json("compare", *args, "--json")


def test_n_sentences_give_n_by_n_matrices():
    doc = compare(*BANKS, "--word", "bank")
    assert doc["sentences"] == BANKS
    assert np.array(doc["static_similarity"]).shape == (4, 4)
    assert np.array(doc["contextual_similarity"]).shape == (4, 4)
    assert np.diag(doc["contextual_similarity"]) == pytest.approx(np.ones(4))


def test_static_cosines_of_one_word_are_all_one():
    doc = compare(*BANKS, "--word", "bank")
    assert np.allclose(doc["static_similarity"], np.ones((4, 4)), atol=1e-9)


# The README's and `make run`'s four sentences.
README_BANKS = [
    "we sat on the river bank",
    "fishermen lined the grassy bank of the stream",
    "I deposited money in the bank",
    "she opened a savings account at the bank",
]


def _blocks(contextual: np.ndarray) -> tuple[list[float], list[float]]:
    same_sense = [contextual[0, 1], contextual[2, 3]]  # river-river, money-money
    across = [contextual[i, j] for i, j in itertools.product((0, 1), (2, 3))]  # river-money
    return same_sense, across


def test_bank_senses_form_two_blocks_with_the_default_preset():
    contextual = np.array(compare(*README_BANKS, "--word", "bank")["contextual_similarity"])
    same_sense, across = _blocks(contextual)
    assert min(same_sense) > max(across), contextual.round(3)


def test_bank_senses_are_closer_on_average_in_other_sentences_too():
    # With these four the strict block order fails by a hair (money-money 0.302 < boat-money 0.319),
    # but every same-sense cosine still beats the cross-sense mean, and textbook attention shows nothing.
    contextual = np.array(compare(*BANKS, "--word", "bank")["contextual_similarity"])
    same_sense, across = _blocks(contextual)
    assert min(same_sense) > np.mean(across) + 0.05, contextual.round(3)
    textbook = np.array(compare(*BANKS, "--word", "bank", "--preset", "textbook")["contextual_similarity"])
    assert textbook.min() > 0.98  # textbook attention leaves every bank almost where it was


def test_notes_golden_context_moves_river_bank_away_from_money_bank():
    doc = compare("we sat on the river bank", "I deposited money in the bank", "--word", "bank")
    static, contextual = doc["static_similarity"][0][1], doc["contextual_similarity"][0][1]
    assert static == pytest.approx(1.0)
    assert contextual < static - 1e-3


def test_contextual_cosines_by_hand_on_the_toy_vectors():
    # --preset notes with sum normalisation: "apple phone" -> apple = (29 apple + 10 phone) / 39;
    # "apple the" -> apple's keys [29, 0] -> apple = apple
    doc = compare(
        "apple phone", "apple the", "--vectors", TOY, "--preset", "notes", "--normalization", "sum", "-w", "apple"
    )
    mixed = (29 * np.array([5, 2, 0]) + 10 * np.array([0, 5, 0])) / 39
    cosine = mixed @ [5, 2, 0] / (np.linalg.norm(mixed) * np.sqrt(29))
    assert np.allclose(doc["contextual_similarity"], [[1, cosine], [cosine, 1]])


def test_without_word_every_shared_word_gets_a_matrix():
    doc = compare("the river bank", "the money bank", "I saw the bank")
    assert [entry["word"] for entry in doc["words"]] == ["the", "bank"]
    assert [entry["positions"] for entry in doc["words"]] == [[0, 0, 2], [2, 2, 3]]
    assert doc["word"] is None and doc["contextual_similarity"] is None  # no one word is the answer
    assert [row["word"] for row in doc["summary"]] == ["the", "bank"]


def test_without_word_one_summary_table_shows_every_shared_word():
    stdout = succeeds("compare", "the river bank", "the money bank", "--preset", "textbook").stdout
    doc = compare("the river bank", "the money bank", "--preset", "textbook")
    for row in doc["summary"]:
        line = next(line for line in stdout.splitlines() if line.startswith(f"│ {row['word']} "))
        cells = [cell.strip() for cell in line.strip("│").split("│")]
        assert cells == [row["word"], f"{row['contextual_mean']:.3f}", f"{row['contextual_lowest']:.3f}"]
    assert "static cosine" not in stdout and "river" not in stdout.split("S2")[-1]


def test_table_labels_sentences_and_prints_the_cosines():
    doc = compare(*BANKS, "--word", "bank", "--preset", "textbook")
    stdout = succeeds("compare", *BANKS, "--word", "bank", "--preset", "textbook").stdout
    assert "S1  we sat on the river bank" in stdout
    assert "S3  I deposited money in the bank\n" in stdout  # nothing skipped: "I" has a row
    header, rows = table(stdout, "contextual cosine: 'bank'")
    assert header == ["", "S1", "S2", "S3", "S4"]
    expected = [
        [f"S{i + 1}", *(pytest.approx(v, abs=6e-4) for v in row)] for i, row in enumerate(doc["contextual_similarity"])
    ]
    assert numbers(rows) == expected


def test_word_missing_from_a_sentence_names_the_sentence_and_the_shared_words():
    message = fails(1, "compare", "we sat on the river bank", "the money is in the vault", "--word", "bank")
    assert "'bank' is not among the words of sentence 2" in message
    assert message.endswith("words shared by all sentences: the")


def test_sentences_without_shared_words_need_word():
    assert "share no word" in fails(1, "compare", "river bank", "money vault", "--preset", "textbook")


def test_one_sentence_is_a_usage_error():
    assert "at least two sentences, got 1" in fails(2, "compare", "we sat on the river bank")


def test_no_sentences_and_empty_stdin_is_a_usage_error():
    assert "at least two sentences, got 0" in fails(2, "compare", input="")


def test_dash_reads_one_sentence_per_stdin_line():
    doc = run_json("compare", "-", "--word", "bank", "--json", input="\n".join(BANKS[:3]) + "\n\n")
    assert doc["sentences"] == BANKS[:3]


def test_piped_stdin_without_arguments_is_read():
    doc = run_json(
        "compare", "--word", "bank", "--preset", "textbook", "--json", input="the river bank\nthe money bank\n"
    )
    assert doc["sentences"] == ["the river bank", "the money bank"]


def test_unknown_sentence_word_errors_go_to_stderr_only():
    # the toy vectors have no subwords, so no token of the first sentence has a vector
    message = fails(1, "compare", "xqzzv qqxj", "the apple", "-w", "apple", "--vectors", TOY, "--preset", "notes")
    assert "no token is in the vocabulary" in message
