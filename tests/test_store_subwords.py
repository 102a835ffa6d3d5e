"""Store parts added for the shipped vectors: int8 character n-grams, and each row's source by name."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ctxembed.errors import DataError
from ctxembed.vectors.store import ROW_SOURCE_SECTION, Subwords, VectorStore, quantize_int8, write_store
from ctxembed.vectors.subwords import MAX_WORD_CHARS, ngram_buckets, ngram_buckets_many, ngram_counts

WORDS = ["the", "bank", "river", "money"]
BUCKET, MIN_N, MAX_N = 64, 3, 4


def _matrix(rows, d=6, seed=0):
    return np.random.default_rng(seed).normal(size=(rows, d)).astype(np.float32)


def _header(path):
    raw = path.read_bytes()
    return json.loads(raw[16 : 16 + int.from_bytes(raw[8:16], "little")])


def test_int8_ngrams_round_trip_with_their_scales(tmp_path):
    table = _matrix(BUCKET, seed=1)
    codes, scales = quantize_int8(table)
    path = write_store(tmp_path / "s.ctxv", WORDS, _matrix(len(WORDS)), subwords=Subwords(codes, MIN_N, MAX_N, scales))
    assert _header(path)["subwords"] == {"min_n": MIN_N, "max_n": MAX_N, "bucket": BUCKET, "dtype": "int8"}
    store = VectorStore.open(path)
    store.verify()
    assert store.subwords.ngrams.dtype == np.int8
    assert np.array_equal(store.subwords.ngrams, codes) and np.array_equal(store.subwords.scales, scales)
    # an unknown word: the mean of its dequantised n-gram rows, close to the float32 table's
    rows = ngram_buckets("banks", MIN_N, MAX_N, BUCKET)
    expected = (codes[rows].astype(np.float32) * scales[rows][:, None]).mean(axis=0)
    assert np.allclose(store.vector("banks"), expected, atol=1e-6)
    assert np.allclose(store.vector("banks"), table[rows].mean(axis=0), atol=0.02)
    assert store.can_embed("banks")


def test_float32_ngrams_keep_their_header_and_stay_readable(tmp_path):
    table = _matrix(BUCKET, seed=2)
    path = write_store(tmp_path / "s.ctxv", WORDS, _matrix(len(WORDS)), subwords=Subwords(table, MIN_N, MAX_N))
    assert "dtype" not in _header(path)["subwords"]  # as written before int8 n-grams existed
    store = VectorStore.open(path)
    assert store.subwords.scales is None and store.subwords.ngrams.dtype == np.float32
    rows = ngram_buckets("banks", MIN_N, MAX_N, BUCKET)
    assert np.array_equal(store.vector("banks"), table[rows].mean(axis=0))


def test_int8_ngrams_need_one_scale_per_row(tmp_path):
    codes, scales = quantize_int8(_matrix(BUCKET))
    with pytest.raises(DataError, match="one scale per n-gram row"):
        write_store(tmp_path / "s.ctxv", WORDS, _matrix(len(WORDS)), subwords=Subwords(codes, 3, 4, scales[:-1]))


def test_damaged_ngram_scales_are_caught(tmp_path):
    codes, scales = quantize_int8(_matrix(BUCKET))
    path = write_store(tmp_path / "s.ctxv", WORDS, _matrix(len(WORDS)), subwords=Subwords(codes, 3, 4, scales))
    header = _header(path)
    start = 16 + int.from_bytes(path.read_bytes()[8:16], "little")
    start += (-start) % 64
    raw = bytearray(path.read_bytes())
    raw[start + header["sections"]["ngram_scales"][0]] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(DataError, match="ngram_scales"):
        VectorStore.open(path).vector("banks")


def test_row_source_names_each_row_and_head_keeps_the_first_codes(tmp_path):
    codes = np.array([0, 1, 0, 1], dtype=np.uint8)
    sections = {ROW_SOURCE_SECTION: {"estimated": codes}}
    path = write_store(tmp_path / "s.ctxv", WORDS, _matrix(len(WORDS)), sections=sections)
    store = VectorStore.open(path)
    assert [store.row_source(row) for row in range(len(WORDS))] == ["vocabulary", "estimated"] * 2
    assert store.head(2).row_sources.tolist() == [0, 1] and store.head(2).row_source(1) == "estimated"


def test_a_store_without_row_sources_has_only_vocabulary_rows(tmp_path):
    store = VectorStore.open(write_store(tmp_path / "s.ctxv", WORDS, _matrix(len(WORDS))))
    assert store.row_sources is None and store.row_source(3) == "vocabulary"


def _tricky_words(count=1500, seed=3):
    """Words of mixed scripts and lengths: ASCII, accents, CJK, emoji (4 UTF-8 bytes), combining
    marks, the markers "<" ">" themselves, the empty word and a long one."""
    rng = np.random.default_rng(seed)
    alphabet = list("abcxyzAZ09'-_.<>") + [
        "é",
        "ß",
        "İ",
        "\u212a",
        "日",
        "本",
        "\U0001f600",
        "\u0301",
        "\u02bc",
        "\u2019",
    ]
    words = ["".join(rng.choice(alphabet, size=rng.integers(0, 14))) for _ in range(count)]
    return [*words, "", "a", "<", ">", "banks", "don't", "x" * 300, "naïve" * 40]


@pytest.mark.parametrize(
    ("min_n", "max_n", "bucket"), [(3, 6, 2_000_000), (1, 1, 97), (1, 3, 64), (2, 4, 1000), (5, 5, 7)]
)
def test_ngram_buckets_many_equals_the_pure_python_reference(min_n, max_n, bucket):
    words = _tricky_words()
    rows, counts = ngram_buckets_many(words, min_n, max_n, bucket)
    reference = [ngram_buckets(word, min_n, max_n, bucket) for word in words]
    assert counts.tolist() == list(map(len, reference))
    assert rows.tolist() == [row for word_rows in reference for row in word_rows]  # fastText's order too


@pytest.mark.parametrize(("quantized", "block"), [(True, 8192), (False, 8192), (True, 60)])
def test_subword_vectors_equal_the_mean_of_the_ngram_rows_bit_for_bit(tmp_path, monkeypatch, quantized, block):
    monkeypatch.setattr("ctxembed.vectors.store._NGRAM_BLOCK", block)  # 60: a few words a block, long ones alone
    table = np.random.default_rng(4).normal(size=(BUCKET * 50, 9)).astype(np.float32)
    table[np.abs(table) < 0.3] = -0.0  # a column of -0.0 rows: mean's sum starts at +0.0
    codes, scales = quantize_int8(table)
    subwords = Subwords(codes, 2, 5, scales) if quantized else Subwords(table, 2, 5)
    store = VectorStore.open(write_store(tmp_path / "s.ctxv", WORDS, _matrix(len(WORDS), d=9), subwords=subwords))
    words = _tricky_words()
    vectors, built = store.subword_vectors(words)
    for word, vector, has in zip(words, vectors, built, strict=True):
        rows = ngram_buckets(word, 2, 5, BUCKET * 50)
        assert has == bool(rows) == store.can_embed(word)
        if not rows:
            assert store.subword_vector(word) is None and not vector.any()
            continue
        expected = store.subwords.rows(rows).mean(axis=0).astype(np.float32)  # (D,) one word's mean, as before
        assert expected.tobytes() == vector.tobytes() == store.subword_vector(word).tobytes(), word


@pytest.mark.parametrize(("min_n", "max_n"), [(3, 6), (1, 1), (1, 3), (2, 4), (5, 5), (0, 2), (4, 3)])
def test_ngram_counts_from_lengths_equal_the_hashing_counts(min_n, max_n):
    words = _tricky_words()
    _, counts = ngram_buckets_many(words, min_n, max_n, 97)
    assert ngram_counts([len(word) for word in words], min_n, max_n).tolist() == counts.tolist()


def test_a_word_past_the_length_cap_is_built_from_its_first_characters(tmp_path):
    """A 1,000,000-character word read millions of n-gram rows at once (2 GB in batch); past
    MAX_WORD_CHARS characters the n-grams are those of the word cut there. Shorter words: untouched."""
    table = _matrix(BUCKET * 50, seed=5)
    path = write_store(tmp_path / "s.ctxv", WORDS, _matrix(len(WORDS)), subwords=Subwords(table, 3, 6))
    store = VectorStore.open(path)
    long = "naïve-" * 2000  # 12,000 characters
    capped = long[:MAX_WORD_CHARS]
    assert store.subword_vector(long).tobytes() == store.subword_vector(capped).tobytes()
    rows = ngram_buckets(capped, 3, 6, BUCKET * 50)  # the cap's word itself is built as fastText builds it
    assert np.allclose(store.subword_vector(capped), table[rows].mean(axis=0), atol=1e-6)
    uncapped = table[ngram_buckets(long, 3, 6, BUCKET * 50)].mean(axis=0)
    assert not np.allclose(store.subword_vector(long), uncapped, atol=1e-3)
    assert store.can_embed(long) and store.subwords.builds([long, ""]).tolist() == [True, False]  # "<>": no 3-gram
