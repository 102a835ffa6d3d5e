"""`ctxembed neighbors`: nearest vocabulary words of a word's static and contextual vectors."""

from __future__ import annotations

import numpy as np
import pytest

from tests.cli_helpers import TOY, fails, run_json, succeeds, table

FRUIT = {"fruit", "fruits", "mango", "pear", "apples", "berries", "citrus", "banana", "strawberry", "peach", "cherry"}
TECH = {"iphone", "ipad", "ipod", "smartphones", "smartphone", "android", "phones", "laptops", "handsets", "ios"}


def neighbors(sentence: str, word: str, *args) -> dict:
    return run_json("neighbors", sentence, "--word", word, *args, "--json")


def words(entries: list[dict]) -> list[str]:
    return [entry["word"] for entry in entries]


def test_k_sets_the_number_of_neighbours():
    doc = neighbors("we sat on the river bank", "bank", "-k", "4")
    assert len(doc["static"]) == 4 and len(doc["contextual"]) == 4


def test_neighbours_are_sorted_by_similarity_descending():
    doc = neighbors("we sat on the river bank", "bank", "-k", "12")
    for side in ("static", "contextual"):
        similarities = [entry["similarity"] for entry in doc[side]]
        assert similarities == sorted(similarities, reverse=True)


def test_the_word_itself_is_excluded():
    doc = neighbors("we sat on the river bank", "bank", "-k", "20")
    assert "bank" not in words(doc["static"]) and "bank" not in words(doc["contextual"])


def test_static_neighbours_by_hand_on_the_toy_vectors():
    doc = neighbors(
        "apple is the phone", "phone", "--vectors", TOY, "--preset", "notes", "-k", "3", "--include-context"
    )
    # phone [0,5,0]: apple [5,2,0] has cosine 2/sqrt(29); is and the are orthogonal (0)
    assert words(doc["static"])[0] == "apple"
    assert doc["static"][0]["similarity"] == pytest.approx(2 / np.sqrt(29))
    assert sorted(words(doc["static"])[1:]) == ["is", "the"]
    assert [entry["similarity"] for entry in doc["static"][1:]] == pytest.approx([0, 0])


def test_static_neighbours_do_not_depend_on_the_sentence():
    fruit = neighbors("Apple is a delicious fruit", "apple", "-k", "5")
    phones = neighbors("Apple makes the best smartphones", "apple", "-k", "5")
    assert fruit["static"] == phones["static"]


def test_fruit_context_brings_fruit_neighbours():
    doc = neighbors("Apple is a delicious fruit", "apple", "-k", "15")
    assert FRUIT & set(words(doc["contextual"]))


def test_phone_context_brings_device_neighbours():
    doc = neighbors("Apple makes the best smartphones", "apple", "-k", "15")
    assert TECH & set(words(doc["contextual"]))


def test_fruit_and_phone_contexts_give_different_neighbours():
    fruit = set(words(neighbors("Apple is a delicious fruit", "apple", "-k", "10")["contextual"]))
    phones = set(words(neighbors("Apple makes the best smartphones", "apple", "-k", "10")["contextual"]))
    assert not FRUIT & phones and not TECH & fruit


# The golden examples of the course notes: the mixed vector's neighbours show the sense, not the sentence.
COMPANY_OR_TECH = TECH | {
    "microsoft",
    "ibm",
    "intel",
    "google",
    "dell",
    "macintosh",
    "pcs",
    "laptop",
    "software",
    "ipods",
}
FOOD = FRUIT | {"vegetables", "tomato", "dessert", "flavors", "juice", "tasty", "potato", "pumpkin", "berry"}


@pytest.mark.parametrize(
    ("sentence", "sense", "other"),
    [
        ("Apple makes the best smartphones", COMPANY_OR_TECH, FOOD),
        ("Apple is a delicious fruit", FOOD, COMPANY_OR_TECH),
    ],
)
def test_the_two_apples_have_the_neighbours_of_their_sense(sentence, sense, other):
    doc = neighbors(sentence, "apple")  # default: k 10, the preset's mix, the sentence's words left out
    found = words(doc["contextual"])
    own = {w.lower() for w in sentence.split()}
    assert len(found) == 10 and sense & set(found) and not other & set(found)
    assert not own & set(found) and doc["excluded"] == sentence.lower().split()[1:]  # "a" too: it has a row


def test_include_context_keeps_the_sentences_words():
    kept = neighbors("Apple makes the best smartphones", "apple", "--include-context")
    assert kept["excluded"] == [] and "smartphones" in words(kept["contextual"])


def test_without_the_mix_most_neighbours_came_from_the_sentence():
    # The previous default (the word's share 0.1): with the sentence kept, its words lead the list.
    doc = neighbors("Apple is a delicious fruit", "apple", "--mix", "0.1,0.9", "--include-context", "-k", "2")
    assert set(words(doc["contextual"])) == {"fruit", "delicious"}


def test_word_and_position_are_reported():
    doc = neighbors("Apple makes the best smartphones", "APPLE", "-k", "1")
    assert (doc["word"], doc["position"], doc["text"]) == ("apple", 0, "Apple makes the best smartphones")


def test_table_shows_both_lists_side_by_side():
    doc = neighbors("we sat on the river bank", "bank", "-k", "3")
    stdout = succeeds("neighbors", "we sat on the river bank", "--word", "bank", "-k", "3").stdout
    assert "word     'bank' at position 5 of: we sat on the river bank" in stdout
    header, rows = table(stdout, "nearest  words")  # the labels column: word, nearest, left out
    assert header == ["#", "static", "cos", "contextual", "cos"]
    assert [row[1] for row in rows] == words(doc["static"])
    assert [row[3] for row in rows] == words(doc["contextual"])
    assert [float(row[4]) for row in rows] == pytest.approx([e["similarity"] for e in doc["contextual"]], abs=6e-4)


def test_word_not_in_the_sentence_is_a_data_error():
    message = fails(1, "neighbors", "we sat on the river bank", "--word", "money")
    assert "'money' is not among the words of the sentence" in message


def test_missing_word_option_is_a_usage_error():
    assert "--word" in fails(2, "neighbors", "we sat on the river bank")


@pytest.mark.parametrize("k", ["0", "x", "1001"])
def test_bad_k_is_a_usage_error(k):
    assert "-k" in fails(2, "neighbors", "we sat on the river bank", "--word", "bank", "-k", k)


def test_contextual_vectors_of_another_size_are_a_data_error():
    args = ["--preset", "textbook", "--projection", "random", "--d-out", "8"]
    assert "dimensions" in fails(1, "neighbors", "the river bank", "--word", "bank", *args)


def test_sentence_from_stdin():
    doc = run_json("neighbors", "--word", "bank", "-k", "2", "--json", input="the river bank\n")
    assert doc["text"] == "the river bank" and doc["position"] == 2


def test_the_header_lines_wrap_under_their_text_not_at_column_0():
    """At 80 columns (a pipe's width) the word, nearest and left-out lines wrap under their own text."""
    sentence = "the fishermen pulled their boat onto the muddy bank of the river"
    stdout = succeeds("neighbors", sentence, "-w", "bank").stdout
    head = stdout[: stdout.index("┏")].splitlines()  # the lines above the table
    labels = ("vectors ", "settings ", "word ", "nearest ", "left out ")
    assert len(head) > len(labels)  # some lines did wrap
    assert all(line.startswith(labels) or line.startswith(" " * 9) for line in head), head
    assert all(line == line.rstrip() for line in head)
