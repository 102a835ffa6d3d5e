"""Tokenisation: punctuation, case, contractions and their fallbacks, and what --oov does with unknown tokens."""

from __future__ import annotations

import json

import numpy as np
import pytest
from gensim.models import KeyedVectors
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxembed.vectors.tokenize import pretokenized, token_pieces, tokenize, vocabulary_key, words_pieces
from tests.cli_helpers import fails, run_json, succeeds


def texts(sentence: str) -> list[str]:
    return [token.text for token in tokenize(sentence)]


def keys(sentence: str, **kwargs) -> list[str]:
    return [token.key for token in tokenize(sentence, **kwargs)]


def attend(sentence: str, *args) -> dict:
    return run_json("attend", sentence, "--preset", "textbook", *args, "--json")


@pytest.fixture(scope="module")
def without_subwords(tmp_path_factory):
    """Some of the shipped store's words as word2vec text, without "'s", "n't" or n-grams: unknown
    tokens stay unknown (the shipped store builds them from subwords), and clitics fall back."""
    from ctxembed.vectors.sources import open_vectors

    store = open_vectors(None)
    kept = ["the", "bank", "river", "it", "raining", "do", "not", "money"]
    kv = KeyedVectors(vector_size=store.dim)
    kv.add_vectors(kept, np.stack([store.vector(w) for w in kept]))
    path = tmp_path_factory.mktemp("vectors") / "no-subwords.txt"
    kv.save_word2vec_format(str(path))
    return ["--vectors", str(path)]


# ------------------------------------------------------------------------------ the tokenizer
def test_punctuation_is_split_off():
    assert texts("Hello, world! (Really?)") == ["Hello", ",", "world", "!", "(", "Really", "?", ")"]


def test_repeated_punctuation_gives_one_token_per_symbol():
    assert texts("wait...") == ["wait", ".", ".", "."]


def test_abbreviations_numbers_and_hyphenated_words_stay_whole():
    assert texts("the U.S. grew 3.5% in state-of-the-art ways") == [
        "the", "U.S.", "grew", "3.5", "%", "in", "state-of-the-art", "ways",
    ]  # fmt: skip


def test_keys_are_lower_cased_for_a_lower_case_vocabulary():
    assert keys("Apple MAKES iPhones") == ["apple", "makes", "iphones"]


def test_keys_keep_case_for_a_cased_vocabulary():
    assert keys("Apple MAKES iPhones", lowercase=False) == ["Apple", "MAKES", "iPhones"]


def test_surface_forms_and_offsets_are_kept():
    sentence = "Apple's CEO didn't come."
    tokens = tokenize(sentence)
    assert [t.text for t in tokens] == ["Apple", "'s", "CEO", "did", "n't", "come", "."]
    assert all(sentence[t.start : t.end] == t.text for t in tokens)
    assert [t.position for t in tokens] == list(range(7))


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("don't", ["do", "n't"]),
        ("can't", ["ca", "n't"]),
        ("it's", ["it", "'s"]),
        ("they're", ["they", "'re"]),
        ("we've", ["we", "'ve"]),
        ("I'll", ["I", "'ll"]),
        ("I'm", ["I", "'m"]),
        ("he'd", ["he", "'d"]),
    ],
)
def test_contractions_are_split_into_clitics(sentence, expected):
    assert texts(sentence) == expected


def test_curly_apostrophes_keep_their_surface_and_share_the_key():
    tokens = tokenize("don\u2019t")
    assert [t.text for t in tokens] == ["do", "n\u2019t"]
    assert [t.key for t in tokens] == ["do", "n't"]


def test_pretokenized_words_are_not_split_again():
    tokens = pretokenized(["New", "York's", "bank"])
    assert [(t.text, t.key, t.position) for t in tokens] == [
        ("New", "new", 0),
        ("York's", "york's", 1),
        ("bank", "bank", 2),
    ]


def test_clitic_falls_back_to_its_full_word_when_missing():
    assert vocabulary_key("n't", {"not"}.__contains__) == "not"
    assert vocabulary_key("'ll", {"will"}.__contains__) == "will"


def test_clitic_in_the_vocabulary_is_looked_up_as_itself():
    assert vocabulary_key("n't", {"n't", "not"}.__contains__) == "n't"


def test_ambiguous_clitics_have_no_fallback():
    assert vocabulary_key("'s", {"is", "has", "us"}.__contains__) is None
    assert vocabulary_key("'d", {"would", "had"}.__contains__) is None


# ------------------------------------------------------------------------------ on the shipped vocabulary
def test_clitics_use_glove_own_rows():
    contracted = attend("don't it's", "--with-vectors")
    assert [(t["text"], t["in_vocab"]) for t in contracted["tokens"]] == [
        ("do", True), ("n't", True), ("it", True), ("'s", True),
    ]  # fmt: skip
    assert contracted["skipped"] == []
    assert contracted["static"][1] != attend("not", "--with-vectors")["static"][0]  # its own row


def test_nt_falls_back_to_the_vector_of_not_where_the_vocabulary_lacks_it(without_subwords):
    contracted = attend("don't", "--with-vectors", *without_subwords)
    spelled = attend("not", "--with-vectors", *without_subwords)
    assert [(t["text"], t["in_vocab"]) for t in contracted["tokens"]] == [("do", True), ("n't", True)]
    assert contracted["static"][1] == spelled["static"][0]


def test_possessive_s_is_out_of_vocabulary_where_the_vocabulary_lacks_it(without_subwords):
    doc = attend("it's raining", *without_subwords)
    assert [(t["text"], t["in_vocab"], t["used"]) for t in doc["tokens"]] == [
        ("it", True, True), ("'s", False, False), ("raining", True, True),
    ]  # fmt: skip
    assert doc["skipped"] == [{"text": "'s", "position": 1}]
    assert doc["attended_positions"] == [0, 2]


def test_unknown_words_are_built_from_subwords():
    doc = attend("the xqzzv bank", "--with-vectors")
    assert doc["skipped"] == [] and [t["in_vocab"] for t in doc["tokens"]] == [True, True, True]
    assert any(doc["static"][1])


def test_json_keeps_the_surface_form():
    doc = attend("Apple MAKES phones")
    assert [t["text"] for t in doc["tokens"]] == ["Apple", "MAKES", "phones"]


def test_upper_case_words_use_the_lower_case_vector():
    upper = attend("APPLE Apple apple", "--with-vectors")["static"]
    assert upper[0] == upper[1] == upper[2]


def test_cased_vocabulary_keeps_case_and_falls_back_to_lower_case(tmp_path):
    kv = KeyedVectors(vector_size=2)
    kv.add_vectors(["Apple", "apple", "pie"], np.array([[1, 0], [0, 1], [1, 1]], dtype=np.float32))
    path = tmp_path / "cased.txt"
    kv.save_word2vec_format(str(path))
    doc = attend("Apple APPLE apple pie", "--vectors", path, "--with-vectors")
    assert doc["static"] == [[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [1.0, 1.0]]


# ------------------------------------------------------------------------------ --oov
def test_oov_skip_reports_skipped_tokens_in_the_header(without_subwords):
    stdout = succeeds("attend", "it's raining xqzzv", "--preset", "textbook", *without_subwords).stdout
    assert "skipped  out of vocabulary: \"'s\"@1, 'xqzzv'@3" in stdout


def test_oov_skip_is_the_default_and_lists_skipped_tokens_in_json(without_subwords):
    doc = attend("the xqzzv bank", *without_subwords)
    assert doc["skipped"] == [{"text": "xqzzv", "position": 1}]
    assert doc["attended_positions"] == [0, 2]
    assert np.array(doc["weights"]).shape == (1, 1, 2, 2)


def test_oov_zero_uses_a_zero_static_vector(without_subwords):
    doc = attend("the xqzzv bank", "--oov", "zero", "--with-vectors", *without_subwords)
    assert doc["skipped"] == []
    assert doc["attended_positions"] == [0, 1, 2]
    assert [t["in_vocab"] for t in doc["tokens"]] == [True, False, True]
    assert doc["static"][1] == [0.0] * 100
    assert np.array(doc["weights"]).shape == (1, 1, 3, 3)


def test_oov_error_names_the_unknown_words(without_subwords):
    message = fails(1, "attend", "the xqzzv bank it's", "--preset", "textbook", "--oov", "error", *without_subwords)
    assert "out of vocabulary: 'xqzzv', \"'s\"" in message


def test_oov_error_accepts_a_fully_known_sentence():
    assert attend("the river bank", "--oov", "error")["skipped"] == []


# ------------------------------------------------------------------------------ the fast path of batch
_AWKWARD = "ab'\u2019\u02bc\u2018 .-_,US\t3é中\u0301İẞ\x1c\x85\u2028\u00a0\u3000\x0b½²٣$"


@pytest.mark.parametrize("lowercase", [True, False])
@pytest.mark.parametrize("window", [4096, 5, 1])
@given(sentence=st.text(alphabet=_AWKWARD, max_size=60) | st.text(max_size=30))
@settings(max_examples=150, deadline=None)
def test_token_pieces_equal_tokenize(sentence, lowercase, window):
    """The tokenizer's entry point (strings, no offsets, a piece at a time) gives exactly tokenize()'s tokens."""
    tokens = tokenize(sentence, lowercase=lowercase)
    pieces = list(token_pieces(sentence, lowercase=lowercase, window=window))
    assert [text for texts, _, _ in pieces for text in texts] == [t.text for t in tokens]
    assert [key for _, keys, _ in pieces for key in keys] == [t.key for t in tokens]
    assert [last for _, _, last in pieces] == [False] * (len(pieces) - 1) + [True] * bool(pieces)


def test_a_huge_line_is_refused_before_it_is_tokenised_whole():
    import time

    from ctxembed.engine import Engine
    from ctxembed.errors import DataError
    from ctxembed.presets import build_settings
    from ctxembed.vectors.sources import open_vectors

    engine = Engine(open_vectors(None), build_settings("textbook"), max_tokens=512)
    line = "the river bank " * 2_000_000  # 30 MB, 6 million tokens
    start = time.perf_counter()
    with pytest.raises(DataError, match="over 512 tokens, more than max_tokens 512"):
        engine.prepare(line)
    assert time.perf_counter() - start < 0.5  # tokenising it whole takes over a minute


BULK_CASES = [
    "said,", '"red"', "(1940).", "Rogues'", "T.,", "A.", "--", "...", "?!", "''", "``x''", "$3", "#1", "50%", "(a)",
    "[b]", "{c}", "Café,", "日本語。", "naïve!", "\u212a!", "x\u0301,", "emoji\U0001f600", "U.S.", "U.S.A.,", "e.g.",
    "e.g.,", "a.b.c", "1,000", "3.5", "3.5.", "-3", "well-known", "re-entry,", "x_y", "_x_", "__", "A.D..", "5p.m.",
    "$2,000,000", "\u201cquoted\u201d", "Ph.D.'s", "'s", "'S", "'ſ", "'re", "'tis", "'90s", "don't", "can't,",
    "O'Neill's", "rock'n'roll", "U.K.'s", "it\u2019s", "\u2018x\u2019", "it\u02bcs", "dog\u2019s,", "x'",
]  # fmt: skip


def _brown_words(lines=4000) -> list[str]:
    import gzip
    from itertools import islice
    from pathlib import Path

    with gzip.open(Path(__file__).parent.parent / "data" / "brown.txt.gz", "rt", encoding="utf-8") as fh:
        return list(dict.fromkeys(word for line in islice(fh, lines) for word in line.split()))


def _check_bulk(words: list[str]) -> None:
    """words_pieces (the tokenizer's bulk form) cuts ``words``, all together and one at a time,
    exactly as tokenize cuts each word alone (texts as written, keys with straight apostrophes)."""
    expected = [tokenize(word, lowercase=False) for word in words]
    texts, keys, widths = words_pieces(words)
    assert texts == [t.text for tokens in expected for t in tokens]
    assert keys == [t.key for tokens in expected for t in tokens]
    assert widths.tolist() == list(map(len, expected))
    for word, tokens in zip(words[:300], expected, strict=False):
        assert words_pieces([word])[:2] == ([t.text for t in tokens], [t.key for t in tokens])


def test_words_are_cut_in_bulk_exactly_as_tokenize_cuts_each():
    words = _brown_words()
    assert len([word for word in words if not word.isalnum()]) > 2000  # punctuation, clitics: the regex pass
    _check_bulk(words)
    _check_bulk(BULK_CASES)  # curly apostrophes (not curly quotes) are straightened, each word alone
    assert words_pieces(["it\u2019s", "don't,"])[:2] == (
        ["it", "\u2019s", "do", "n't", ","],
        ["it", "'s", "do", "n't", ","],
    )


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(exclude_categories=["Zs", "Zl", "Zp", "Cc", "Cs"]), min_size=1)))
def test_words_pieces_equal_tokenize_on_any_words(words):
    _check_bulk([word for word in words if word.split() == [word]])


def test_format_characters_are_every_cf_character_and_no_other():
    import sys
    import unicodedata

    from ctxembed.vectors.tokenize import _FORMAT

    listed = {c for c in range(sys.maxunicode + 1) if _FORMAT.match(chr(c))}
    cf = {c for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"}
    assert cf <= listed
    assert all(unicodedata.category(chr(c)) in ("Cf", "Cn") for c in listed - cf)  # Cf in later Unicode


def test_format_characters_separate_tokens_and_belong_to_none():
    text = "\ufeffthe\u200bbank\u200d \u200b\u200b co\u00adop\u2060s"
    tokens = tokenize(text)
    assert [t.text for t in tokens] == ["the", "bank", "co", "op", "s"]
    assert all(text[t.start : t.end] == t.text for t in tokens)  # offsets still point at the text
    assert tokenize("\u200b\u200b") == []  # zero-width spaces are no words
    assert [texts for texts, _, _ in token_pieces(text)] == [["the", "bank", "co", "op", "s"]]
    texts, keys, widths = words_pieces(["\ufeffthe\u200bbank\u200d", "\u200b\u200b", "co\u00adop\u2060s"])
    assert texts == ["the", "bank", "co", "op", "s"] and widths.tolist() == [2, 0, 3]


def test_attend_and_batch_skip_zero_width_characters():
    doc = run_json("attend", "the\u200briver\u2060bank", "--json")
    assert [t["text"] for t in doc["tokens"]] == ["the", "river", "bank"]
    fails(1, "attend", "\u200b\u200b")  # no token at all, as for a sentence of spaces
    lines = "the river bank\nthe\u200briver\u00adbank \u200b\u200b\n"
    plain, inside = (json.loads(line) for line in succeeds("batch", "-", input=lines).stdout.splitlines())
    # alone in its run, so that every other word of the run is one token
    alone = json.loads(succeeds("batch", "-", input="the \u200b\u200b river bank\n").stdout)
    assert inside["tokens"] == alone["tokens"] == ["the", "river", "bank"]  # alone: a word of no token
    assert inside["weights"] == alone["weights"] == plain["weights"]
