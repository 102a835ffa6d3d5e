"""VectorStore.find_many: the rows of many words at once from the sorted keys, exactly what the
word -> row dict (and the binary search) give."""

import numpy as np
import pytest

from ctxembed.vectors.sources import open_vectors
from ctxembed.vectors.store import VectorStore, write_store
from ctxembed.vectors.vocabulary import _KEY_BYTES

LONG = "x" * _KEY_BYTES  # exactly the keys' width
WORDS = [
    "the", "a", "ab", "abc", "abd", "Apple", "apple", "café", "cafe", "日本", "日本語", "naïve", "ß",
    "a\x00", "a\x00b", "\x00", "x\x00y",  # NUL bytes: a NumPy S string would drop a trailing one
    LONG, LONG + "y", LONG + "z", LONG[:-1], "y" * 40, "é" * 13, "é" * 12, "\x7f", "\u00ff", "~~",
]  # fmt: skip
ABSENT = [
    "", "b", "abe", "abcd", "th", "them", "Café", "日", "日本語語", "a\x00c", "a\x00\x00", "\x00\x00", "x\x00",
    LONG[:-2], LONG + "yy", LONG + "a", "y" * 39, "y" * 41, "é" * 14, "\ud800", "ab\udfff", "\U0010ffff", " ", "the ",
]  # fmt: skip


@pytest.fixture
def store(tmp_path) -> VectorStore:
    rng = np.random.default_rng(0)
    return VectorStore.open(write_store(tmp_path / "s.ctxv", WORDS, rng.normal(size=(len(WORDS), 4))))


def _dict_rows(store: VectorStore, keys) -> list[int]:
    index = dict(zip(store.words, range(len(store)), strict=True))
    return [index.get(key, -1) for key in keys]


def test_every_word_and_every_absent_key_as_the_dict_and_the_binary_search_give(store):
    keys = WORDS + ABSENT + WORDS[::-1]
    assert store.sorted_lookup  # the table is built, so find_many uses it
    found = store.find_many(keys)
    assert found.dtype == np.int64 and found.shape == (len(keys),)
    assert found.tolist() == _dict_rows(store, keys)
    assert found.tolist() == [-1 if row is None else row for row in map(store.find, keys)]
    assert found[: len(WORDS)].tolist() == list(range(len(WORDS)))
    assert (found[len(WORDS) : len(WORDS) + len(ABSENT)] == -1).all()


@pytest.mark.parametrize("colliding", [False, True])
def test_keys_are_found_by_hash_and_by_string_alike(store, monkeypatch, colliding):
    from ctxembed.vectors import vocabulary

    if colliding:  # every key hashes alike: the strings are searched
        monkeypatch.setattr(vocabulary, "byte_hashes", lambda words: np.zeros(len(words), np.uint64))
    keys = WORDS + ABSENT + WORDS[::-1]
    table = vocabulary.SortedKeys.of(store.vocabulary)
    assert (table.hashes is None) == colliding
    assert table.rows_of(keys).tolist() == _dict_rows(store, keys)


def test_a_word_with_a_keys_hash_is_not_that_key(tmp_path, monkeypatch):
    from ctxembed.vectors import vocabulary

    monkeypatch.setattr(vocabulary, "byte_hashes", lambda words: words[:, 0].copy())  # the first 8 bytes alone
    words = ["applepie", "banana", "cherry"]
    store = VectorStore.open(write_store(tmp_path / "s.ctxv", words, np.eye(3, 4)))
    table = vocabulary.SortedKeys.of(store.vocabulary)
    assert table.hashes is not None
    assert table.rows_of(["applepies", "applepie", "applepi", "cherry"]).tolist() == [-1, 0, -1, 2]


def test_long_and_nul_words_are_kept_aside_and_still_found(store):
    assert store.sorted_lookup
    aside = {key.decode("utf-8") for key in store.vocabulary._sorted.others}
    assert aside == {w for w in WORDS if "\x00" in w or len(w.encode("utf-8")) > _KEY_BYTES}
    assert {"y" * 40, LONG + "y", "é" * 13, "a\x00"} <= aside and LONG not in aside and "é" * 12 not in aside


def test_few_words_without_a_table_and_no_keys_at_all(store):
    assert store.find_many(["apple", "nope", "a\x00"]).tolist() == [6, -1, 13]  # binary search: no table
    assert store.vocabulary._sorted is None
    assert store.find_many([]).tolist() == []
    assert store.sorted_lookup and store.find_many([]).tolist() == []


def test_a_head_of_the_store_finds_only_its_rows(store):
    assert store.sorted_lookup
    head = store.head(5)
    assert head.sorted_lookup
    assert head.find_many(WORDS).tolist() == list(range(5)) + [-1] * (len(WORDS) - 5)


def test_the_shipped_store_every_word_and_variants():
    store = open_vectors(None)
    assert store.sorted_lookup
    words = store.words
    variants = (
        words + [w + "\x00" for w in words[:2000]] + [w[:-1] for w in words[:5000]] + [w + "s" for w in words[:5000]]
    )
    variants += [w.upper() for w in words[:2000]]
    assert store.find_many(variants).tolist() == _dict_rows(store, variants)


def test_find_switches_to_the_dict_once_searches_would_cost_more_and_gives_the_same_rows(store, monkeypatch):
    """The store picks its own structure: binary searches until _DICT_AFTER_FINDS of them, then
    the word -> row dict; never the dict when its sorted keys serve bulk lookups (batch)."""
    from ctxembed.vectors import vocabulary as store_module

    monkeypatch.setattr(store_module, "_DICT_AFTER_FINDS", 10)
    keys = WORDS + ABSENT
    searched = [-1 if row is None else row for row in map(store.find, keys[:10])]
    assert store.vocabulary._index is None  # ten binary searches
    rest = [-1 if row is None else row for row in map(store.find, keys[10:])]
    assert store.vocabulary._index is not None  # then the dict
    assert searched + rest == _dict_rows(store, keys)


def test_find_keeps_to_the_binary_search_beside_sorted_keys_or_past_the_size_limit(tmp_path, monkeypatch):
    from ctxembed.vectors import vocabulary as store_module

    monkeypatch.setattr(store_module, "_DICT_AFTER_FINDS", 2)
    rng = np.random.default_rng(0)
    stores = [
        VectorStore.open(write_store(tmp_path / f"{i}.ctxv", WORDS, rng.normal(size=(len(WORDS), 4)))) for i in (0, 1)
    ]
    assert stores[0].sorted_lookup  # bulk lookups go through sorted keys
    monkeypatch.setattr(store_module, "INDEX_MAX_WORDS", len(WORDS) - 1)
    for kept in stores:
        assert [kept.find(w) for w in WORDS * 2] == list(range(len(WORDS))) * 2
        assert kept.vocabulary._index is None
