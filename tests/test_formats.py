"""Every supported on-disk format: written by gensim, read back by ctxembed, compared exactly."""

from __future__ import annotations

import bz2
import gzip

import numpy as np
import pytest
from gensim.models import KeyedVectors

from ctxembed.cli.options import error_message
from ctxembed.errors import DataError, UsageError
from ctxembed.vectors.formats import detect_format, load_foreign
from ctxembed.vectors.sources import open_vectors

WORDS = ["the", "bank", "river", "money", "café", "naïve", "deposit", "water"]


@pytest.fixture
def kv():
    vectors = np.random.default_rng(0).normal(size=(len(WORDS), 6)).astype(np.float32)
    keyed = KeyedVectors(vector_size=6)
    keyed.add_vectors(WORDS, vectors)
    return keyed


def _assert_same(store, kv):
    assert store.words == list(kv.index_to_key)
    assert np.array_equal(store.matrix(), kv.vectors)


@pytest.mark.parametrize(
    "name, kwargs, fmt",
    [
        ("w2v.txt", {"binary": False}, "word2vec-text"),
        ("w2v.bin", {"binary": True}, "word2vec-binary"),
        ("glove.txt", {"binary": False, "write_header": False}, "glove-text"),
        ("wiki.vec", {"binary": False}, "fasttext-vec"),
        ("w2v.txt.gz", {"binary": False}, "word2vec-text"),
        ("w2v.bin.gz", {"binary": True}, "word2vec-binary"),
        ("glove.txt.bz2", {"binary": False, "write_header": False}, "glove-text"),
        ("wiki.vec.bz2", {"binary": False}, "fasttext-vec"),
        ("noext", {"binary": True}, "word2vec-binary"),
    ],
)
def test_round_trip_every_word2vec_family_format(tmp_path, kv, name, kwargs, fmt):
    path = tmp_path / name
    kv.save_word2vec_format(str(path), **kwargs)
    assert detect_format(path) == fmt
    _assert_same(open_vectors(str(path)), kv)


def test_gensim_native_needs_trust(tmp_path, kv):
    path = tmp_path / "vectors.kv"
    kv.save(str(path))
    assert detect_format(path) == "gensim-native"
    with pytest.raises(UsageError, match="pass trust if you trust this file") as raised:  # the library: a setting
        open_vectors(str(path))
    assert error_message(raised.value).endswith("pass --trust if you trust this file")  # the command line: its flag
    _assert_same(open_vectors(str(path), trust=True), kv)


def test_gensim_model_file_uses_its_wv(tmp_path):
    from gensim.models import Word2Vec

    sentences = [["we", "sat", "on", "the", "river", "bank"], ["money", "in", "the", "bank"]] * 5
    model = Word2Vec(sentences, vector_size=4, min_count=1, epochs=1, seed=1, workers=1)
    path = tmp_path / "w2v.model"
    model.save(str(path))
    _assert_same(open_vectors(str(path), trust=True), model.wv)


def test_fasttext_bin_gives_oov_words_vectors_from_subwords(tmp_path):
    from gensim.models import FastText
    from gensim.models.fasttext import load_facebook_vectors, save_facebook_model

    sentences = [["we", "sat", "on", "the", "river", "bank"], ["money", "in", "the", "bank", "café"]] * 10
    model = FastText(sentences, vector_size=8, min_count=1, epochs=2, bucket=2000, min_n=2, max_n=4, seed=1, workers=1)
    path = tmp_path / "model.bin"
    save_facebook_model(model, str(path))
    assert detect_format(path) == "fasttext-bin"
    reference = load_facebook_vectors(str(path))
    store = open_vectors(str(path))
    assert store.subwords is not None
    _assert_same(store, reference)
    for oov in ("banking", "rivers", "cafés", "ñandú", "xyzzy"):
        assert oov not in store
        assert store.can_embed(oov)
        np.testing.assert_allclose(store.vector(oov), reference[oov], rtol=1e-5, atol=1e-6)
    # the cached store gives the same answers without gensim
    cached = open_vectors(str(path))
    np.testing.assert_allclose(cached.vector("banking"), reference["banking"], rtol=1e-5, atol=1e-6)


def test_limit_keeps_the_most_frequent(tmp_path, kv):
    path = tmp_path / "w2v.txt"
    kv.save_word2vec_format(str(path))
    store = open_vectors(str(path), limit=3)
    assert store.words == WORDS[:3]
    assert np.array_equal(store.matrix(), kv.vectors[:3])


# ----------------------------------------------------------------------------- bad files
def _write(tmp_path, name, content: bytes):
    path = tmp_path / name
    path.write_bytes(content)
    return path


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("empty.txt", b"", "file is empty"),
        ("mixed.txt", b"3 2\na 1 2\nb 1 2 3\nc 1 2\n", "line 3: 3 values where 2 were expected"),
        ("mixed-glove.txt", b"a 1 2\nb 1\nc 1 2\n", "line 2: 1 values where 2 were expected"),
        ("nan.txt", b"2 2\na 1 2\nb nan 2\n", "line 3: the vector of 'b' has NaN"),
        ("inf-glove.txt", b"a 1 2\nb 1 inf\n", "line 2: the vector of 'b' has infinite values"),
        ("dup.txt", b"3 2\na 1 2\nb 1 2\na 3 4\n", "line 4: duplicate word 'a'"),
        ("dup-glove.txt", b"a 1 2\nb 1 2\nb 3 4\n", "line 3: duplicate word 'b'"),
        ("latin1.txt", b"2 2\nab 1 2\ncaf\xe9 1 2\n", "line 3: not valid UTF-8"),
        ("latin1-glove.txt", b"caf\xe9 1 2\n", "line 1: the word is not valid UTF-8"),
        ("short.txt", b"5 2\na 1 2\nb 1 2\n", "truncated"),
        ("words.txt", b"hello world\nthis is prose\n", "unknown format"),
        ("letters.txt", b"a 1 x\nb 2 3\n", "unknown format"),
    ],
)
def test_bad_text_files_give_one_clear_error(tmp_path, name, content, message):
    path = _write(tmp_path, name, content)
    with pytest.raises(DataError, match=message) as info:
        open_vectors(str(path))
    assert str(path) in info.value.message and "\n" not in info.value.message
    assert list((tmp_path.parent).glob("cache*/*.tmp")) == []


def test_truncated_binary(tmp_path, kv):
    path = tmp_path / "w2v.bin"
    kv.save_word2vec_format(str(path), binary=True)
    cut = _write(tmp_path, "cut.bin", path.read_bytes()[:-10])
    with pytest.raises(DataError, match="truncated"):
        open_vectors(str(cut))


def test_binary_duplicates_and_non_utf8(tmp_path):
    def entry(word: bytes):
        return word + b" " + np.ones(2, dtype=np.float32).tobytes()

    dup = _write(tmp_path, "dup.bin", b"2 2\n" + entry(b"a") + entry(b"a"))
    with pytest.raises(DataError, match="duplicate words: 2 entries but only 1 distinct"):
        open_vectors(str(dup))
    latin = _write(tmp_path, "latin.bin", b"2 2\n" + entry(b"a") + entry(b"caf\xe9"))
    with pytest.raises(DataError, match="not valid UTF-8"):
        open_vectors(str(latin))


def test_compressed_garbage_and_missing_paths(tmp_path):
    bad_gz = _write(tmp_path, "bad.txt.gz", b"this is not gzip")
    with pytest.raises(DataError, match="damaged or truncated compressed file"):
        open_vectors(str(bad_gz))
    with pytest.raises(DataError, match="no such file"):
        open_vectors(str(tmp_path / "missing.txt"))
    with pytest.raises(DataError, match="is a directory"):
        open_vectors(str(tmp_path))
    empty_gz = tmp_path / "empty.txt.gz"
    with gzip.open(empty_gz, "wb"):
        pass
    with pytest.raises(DataError, match="empty"):
        open_vectors(str(empty_gz))
    empty_bz = tmp_path / "empty.txt.bz2"
    empty_bz.write_bytes(bz2.compress(b""))
    with pytest.raises(DataError, match="empty"):
        open_vectors(str(empty_bz))


def test_load_foreign_rejects_unknown_format(tmp_path):
    with pytest.raises(DataError, match="cannot load format"):
        load_foreign(tmp_path / "x", "pdf")


# ------------------------------------------------------------------------------ headers and values that cannot be
@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("short-header.txt", b"3 2\nthe 1 2\nbank 3 4\nriver 5 6\nmoney 7 8\n", "announces 3 words but the file has"),
        ("long-header.txt", b"5 2\nthe 1 2\nbank 3 4\n", "truncated file: the header announces 5 words, the file"),
        ("huge-header.txt", b"99999999999 2\nthe 1 2\n", "announces 99,999,999,999 words, the file has 1"),
        ("zero-dim.txt", b"3 0\nthe\nbank\nriver\n", "line 1: the header announces vectors of dimension 0"),
        ("zero-count.txt", b"0 2\n", "announces 0 words"),
        ("big.txt", b"2 2\nthe 1e30 2\nbank 1 4\n", "line 2: the vector of 'the' has a value of 1e\\+30"),
        ("overflow.txt", b"2 2\nthe 1 2\nbank 1e39 4\n", "line 3: the vector of 'bank' has infinite values"),
    ],
)
def test_headers_and_values_that_cannot_be_are_refused(tmp_path, name, content, message, capfd):
    path = _write(tmp_path, name, content)
    with pytest.raises(DataError, match=message):
        open_vectors(str(path))
    assert capfd.readouterr().err == ""  # no numpy or gensim warning leaks


def test_a_header_count_smaller_than_the_file_is_fine_with_limit(tmp_path):
    path = _write(tmp_path, "short-header.txt", b"3 2\nthe 1 2\nbank 3 4\nriver 5 6\nmoney 7 8\n")
    assert open_vectors(str(path), limit=2).words == ["the", "bank"]


@pytest.mark.parametrize("suffix", [".bin", ".bin.gz"])
@pytest.mark.parametrize("newlines", [False, True])  # the original word2vec tool ends each entry with one
def test_binary_header_smaller_than_the_file_is_refused(tmp_path, suffix, newlines):
    """gensim reads the announced entries and ignores the rest: that would drop vectors silently."""

    def entry(word: bytes, value: float) -> bytes:
        return word + b" " + np.full(2, value, dtype=np.float32).tobytes() + (b"\n" if newlines else b"")

    body = entry(b"the", 1) + entry(b"bank", 2) + entry(b"r\xc3\xadver", 3)
    whole = _write(tmp_path, "whole" + suffix, _maybe_gzip(b"3 2\n" + body + b"\n", suffix))  # a stray last newline
    assert open_vectors(str(whole)).words == ["the", "bank", "r\u00edver"]
    short = _write(tmp_path, "short" + suffix, _maybe_gzip(b"2 2\n" + body, suffix))
    with pytest.raises(DataError, match="the header announces 2 vectors but the file has more"):
        open_vectors(str(short))
    assert open_vectors(str(short), limit=2).words == ["the", "bank"]


def _maybe_gzip(data: bytes, suffix: str) -> bytes:
    return gzip.compress(data) if suffix.endswith(".gz") else data


def test_binary_header_larger_than_the_file_is_refused_before_allocating(tmp_path):
    path = _write(tmp_path, "huge.bin", b"99999999999 300\n" + b"the " + b"\x00" * 1200)
    with pytest.raises(DataError, match="truncated binary file: the header announces 99,999,999,999 vectors"):
        open_vectors(str(path))


@pytest.mark.parametrize("name", ["bom.txt", "bom-glove.txt", "bom.txt.gz"])
def test_a_byte_order_mark_is_accepted(tmp_path, name):
    body = b"the 1 2\nbank 3 4\n" if "glove" in name else b"2 2\nthe 1 2\nbank 3 4\n"
    data = b"\xef\xbb\xbf" + body
    path = _write(tmp_path, name, gzip.compress(data) if name.endswith(".gz") else data)
    store = open_vectors(str(path))
    assert store.words == ["the", "bank"] and store.vector("bank").tolist() == [3.0, 4.0]


def test_corrupt_gzip_stream_is_one_clean_error(tmp_path):
    data = bytearray(gzip.compress(b"".join(b"w%d 1 2\n" % i for i in range(2000))))
    data[40] ^= 0xFF  # inside the deflate stream: zlib.error "Error -3 while decompressing"
    path = _write(tmp_path, "corrupt.txt.gz", bytes(data))
    with pytest.raises(DataError, match="damaged or truncated compressed file"):
        open_vectors(str(path))
