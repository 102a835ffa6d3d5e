"""Every token keeps its place and says where its vector came from; a repeated word's occurrence can be chosen.

- The API's ``AttendResult.tokens`` is the JSON's ``tokens`` (nothing dropped, nothing shifted).
- ``source`` per token: ``vocabulary``, ``estimated`` (rows a store marks so, ``VectorStore.row_sources``),
  ``subword`` (built from n-grams) or ``none``.
- ``--word bank#2`` (and ``#N``) in attend, compare and neighbors, with the occurrence named.
"""

from __future__ import annotations

import numpy as np
import pytest

import ctxembed
from ctxembed.engine import locate, split_word
from ctxembed.vectors.store import ROW_SOURCE_SECTION, ROW_SOURCES, Subwords, VectorStore, write_store
from tests.cli_helpers import TOY, fails, invoke, json_lines, run_json, strict_json, succeeds

WORDS = ["the", "bank", "river", "money", "by", "is", "not", "i", "use", "my"]


def _store(tmp_path, *, estimated=(), subwords=False) -> str:
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(len(WORDS), 8)).astype(np.float32)
    sections = None
    if estimated:
        codes = np.zeros(len(WORDS), np.uint8)
        codes[[WORDS.index(w) for w in estimated]] = ROW_SOURCES.index("estimated")
        sections = {ROW_SOURCE_SECTION: {"estimated": codes}}
    ngrams = Subwords(rng.normal(size=(64, 8)).astype(np.float32), 3, 4) if subwords else None
    return str(write_store(tmp_path / "s.ctxv", WORDS, matrix, sections=sections, subwords=ngrams))


# ------------------------------------------------------------------------------ the API keeps every token
def test_api_tokens_are_the_json_tokens_for_a_sentence_with_unknown_words():
    ex = ctxembed.Explorer(vectors=TOY, preset="textbook")
    a = ex.attend("apple zzqx is the qqq phone")
    assert a.tokens == a.to_dict()["tokens"]
    assert [t["text"] for t in a.tokens] == ["apple", "zzqx", "is", "the", "qqq", "phone"]
    assert [t["source"] for t in a.tokens] == ["vocabulary", "none", "vocabulary", "vocabulary", "none", "vocabulary"]
    assert a.attended_positions == [0, 2, 3, 5] == a.to_dict()["attended_positions"]
    assert a.skipped == [{"text": "zzqx", "position": 1}, {"text": "qqq", "position": 4}]
    # the arrays' rows follow attended_positions, as the JSON's do
    assert a.static.shape[0] == len(a.attended_positions)
    assert a.tokens[a.attended_positions[3]]["text"] == "phone"


# ------------------------------------------------------------------------------ sources
def test_a_store_without_row_sources_says_vocabulary_and_none(tmp_path):
    store = VectorStore.open(_store(tmp_path))
    assert store.row_sources is None
    doc = run_json("attend", "the bank qqqq", "--vectors", _store(tmp_path), "--preset", "textbook", "--json")
    assert [t["source"] for t in doc["tokens"]] == ["vocabulary", "vocabulary", "none"]


def test_rows_a_store_marks_as_estimated_are_estimated_everywhere(tmp_path):
    path = _store(tmp_path, estimated=("river",))
    store = VectorStore.open(path)
    assert store.row_sources.dtype == np.uint8 and ROW_SOURCES[store.row_sources[WORDS.index("river")]] == "estimated"
    assert store.head(2).row_sources.shape == (2,)
    doc = run_json("attend", "the river bank", "--vectors", path, "--preset", "textbook", "--json")
    assert [t["source"] for t in doc["tokens"]] == ["vocabulary", "estimated", "vocabulary"]
    table = succeeds("attend", "the river bank", "--vectors", path, "--preset", "textbook").stdout
    assert "river°" in table and "° vector estimated" in table  # a mark and its legend
    neighbours = run_json("neighbors", "the river bank", "--word", "river", "--vectors", path, "--json", "-k", "2")
    assert neighbours["source"] == "estimated"


def test_subword_and_zero_vectors_are_subword_and_none(tmp_path):
    path = _store(tmp_path, subwords=True)
    doc = run_json("attend", "the bankz river", "--vectors", path, "--preset", "textbook", "--json")
    assert [t["source"] for t in doc["tokens"]] == ["vocabulary", "subword", "vocabulary"]
    zero = run_json("attend", "the river qq", "--vectors", _store(tmp_path), "--oov", "zero", "--json")
    assert [t["source"] for t in zero["tokens"]] == ["vocabulary", "vocabulary", "none"]
    assert zero["attended_positions"] == [0, 1, 2]


# ------------------------------------------------------------------------------ choosing an occurrence
@pytest.mark.parametrize(
    ("spec", "found"),
    [("bank", (1, 1, 2)), ("bank#2", (8, 2, 2)), ("#8", (8, 2, 2)), ("BANK#1", (1, 1, 2)), ("bank#3", None)],
)
def test_locate_reads_word_occurrence_and_position(spec, found):
    tokens = "the bank by the river is not the bank i use".split()
    assert locate(spec, tokens, tokens, range(len(tokens))) == found


def test_a_hash_without_digits_is_part_of_the_word():
    assert split_word("c#") == ("c#", None) and split_word("#3") == (None, 3)


SENTENCE = "the bank by the river is not the bank i use"


def _noted(*args):
    """A run that exits 0 and may note on stderr that a repeated word's copies share one vector."""
    result = invoke(*args)
    assert result.exit_code == 0, result.stderr
    assert all("bank and bank#2 share one contextual vector" in line for line in result.stderr.splitlines())
    return result


def _noted_json(*args) -> dict:
    return strict_json(_noted(*args).stdout)


def test_neighbors_word_hash_two_takes_the_second_occurrence_and_says_so(tmp_path):
    path = _store(tmp_path)
    doc = _noted_json("neighbors", SENTENCE, "--word", "bank#2", "--vectors", path, "--json", "-k", "2")
    assert (doc["position"], doc["occurrence"], doc["occurrences"]) == (8, 2, 2)
    first = _noted_json("neighbors", SENTENCE, "--word", "bank", "--vectors", path, "--json", "-k", "2")
    assert (first["position"], first["occurrence"]) == (1, 1)
    assert "occurrence 2 of 2" in _noted("neighbors", SENTENCE, "-w", "bank#2", "--vectors", path, "-k", "2").stdout
    assert "occurs 2 times" in fails(1, "neighbors", SENTENCE, "--word", "bank#3", "--vectors", path)


def test_compare_word_hash_two_compares_the_second_occurrences(tmp_path):
    path = _store(tmp_path)
    doc = _noted_json("compare", SENTENCE, "my bank is my bank", "--word", "bank#2", "--vectors", path, "--json")
    entry = doc["words"][0]
    assert entry["positions"] == [8, 4]
    assert entry["occurrences"] == [{"occurrence": 2, "of": 2}, {"occurrence": 2, "of": 2}]
    assert entry["sources"] == ["vocabulary", "vocabulary"]
    table = _noted("compare", SENTENCE, "my bank is my bank", "--word", "bank#2", "--vectors", path).stdout
    assert "S1 #8 (2 of 2)" in table


def test_attend_word_hash_two_focuses_the_second_occurrence(tmp_path):
    path = _store(tmp_path)
    stdout = succeeds("attend", SENTENCE, "--word", "bank#2", "--vectors", path).stdout
    assert "attention of 'bank#2' (#8, occurrence 2 of 2)" in stdout  # labelled as --word names it
    assert "'bank' occurs 2 times" in fails(1, "attend", SENTENCE, "--word", "bank#5", "--vectors", path)


def test_explain_batch_and_pictures_carry_the_sources(tmp_path):
    path = _store(tmp_path, estimated=("river",))
    doc = run_json("attend", "the river qq bank", "--vectors", path, "--explain", "--json", "--oov", "zero")
    assert doc["explain"]["sources"] == ["vocabulary", "estimated", "none", "vocabulary"]
    explained = succeeds("attend", "the river bank", "--vectors", path, "--explain").stdout
    step_one = explained[explained.index("1. inputs") : explained.index("2. queries")]
    assert "river°" in step_one and "° vector estimated" in step_one
    [record] = json_lines(succeeds("batch", "-", "--vectors", path, "--no-weights", input="the river qq\n").stdout)
    assert record["sources"] == ["vocabulary", "estimated", "none"]
    svg = tmp_path / "a.svg"
    succeeds("attend", "the river bank", "--vectors", path, "--save", svg)
    text = svg.read_text(encoding="utf-8")
    assert ">river°<" in text and "° vector estimated" in text


# ------------------------------------------------------------------------------ neighbours people know
def test_default_neighbours_are_among_the_50000_most_frequent_words():
    from ctxembed.vectors.sources import open_vectors

    doc = run_json("neighbors", "we sat on the river bank", "--word", "bank", "--json")
    store = open_vectors(None)
    ranks = [store.find(n["word"]) for n in doc["static"] + doc["contextual"]]
    assert doc["among"] == 50_000 and max(ranks) < 50_000, ranks
    whole = run_json("neighbors", "we sat on the river bank", "--word", "bank", "--json", "--among", "0")
    assert whole["among"] == len(store)
    assert max(store.find(n["word"]) for n in whole["contextual"]) >= 50_000  # what the default leaves out


def test_a_row_source_section_of_the_wrong_shape_is_a_data_error(tmp_path):
    matrix = np.ones((len(WORDS), 8), np.float32)
    sections = {ROW_SOURCE_SECTION: {"estimated": np.zeros(3, np.uint8)}}
    path = write_store(tmp_path / "bad.ctxv", WORDS, matrix, sections=sections)
    assert "row_source" in fails(1, "attend", "the river bank", "--vectors", path)
