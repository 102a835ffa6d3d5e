"""The store file: writing, opening, lookup, quantisation, truncation, neighbours."""

from __future__ import annotations

import numpy as np
import pytest

from ctxembed.errors import DataError
from ctxembed.vectors.store import VectorStore, quantize_int8, write_store

WORDS = ["the", "bank", "river", "money", "café", "naïve", "z"]


def _matrix(n=len(WORDS), d=5, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)


def test_round_trip_float32_is_exact(tmp_path):
    matrix = _matrix()
    path = write_store(tmp_path / "s.ctxv", WORDS, matrix, meta={"name": "toy"})
    store = VectorStore.open(path)
    assert store.words == WORDS
    assert store.dim == 5 and len(store) == len(WORDS) and store.dtype == "float32"
    assert np.array_equal(store.matrix(), matrix)
    for row, word in enumerate(WORDS):
        assert store.find(word) == row
        assert np.array_equal(store.vector(word), matrix[row])
    assert store.meta["name"] == "toy"
    assert store.lowercase is True


def test_find_uses_binary_search_and_misses_cleanly(tmp_path):
    store = VectorStore.open(write_store(tmp_path / "s.ctxv", WORDS, _matrix()))
    assert store.find("nope") is None and "nope" not in store
    assert store.find("") is None
    assert store.find("caf") is None and store.find("cafés") is None
    with pytest.raises(KeyError):
        store.vector("nope")
    assert store.vocabulary._index is None  # no dict was needed for single lookups


def test_uppercase_vocabulary_is_not_lowercase(tmp_path):
    store = VectorStore.open(write_store(tmp_path / "s.ctxv", ["Apple", "apple"], _matrix(2)))
    assert store.lowercase is False


def test_int8_quantisation_keeps_cosines(tmp_path):
    matrix = _matrix(200, 50, seed=1)
    codes, scales = quantize_int8(matrix)
    assert codes.dtype == np.int8 and np.abs(codes).max() == 127
    assert np.allclose(codes * scales[:, None], matrix, atol=float(scales.max()) / 2 + 1e-7)
    words = [f"w{i}" for i in range(200)]
    store = VectorStore.open(write_store(tmp_path / "q.ctxv", words, matrix, quantize=True))
    assert store.dtype == "int8"
    unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    approx = store.matrix()
    approx_unit = approx / np.linalg.norm(approx, axis=1, keepdims=True)
    assert np.abs(approx_unit @ approx_unit.T - unit @ unit.T).max() < 0.01


def test_cosine_to_all_matches_numpy_for_both_dtypes(tmp_path):
    matrix = _matrix(100, 8, seed=2)
    matrix[3] = 0.0  # a zero row has cosine 0, not NaN
    words = [f"w{i}" for i in range(100)]
    query = np.random.default_rng(3).normal(size=8).astype(np.float32)
    for quantize in (False, True):
        store = VectorStore.open(write_store(tmp_path / f"{quantize}.ctxv", words, matrix, quantize=quantize))
        exact = store.matrix() @ query
        norms = np.linalg.norm(store.matrix(), axis=1) * np.linalg.norm(query)
        expected = np.divide(exact, norms, out=np.zeros_like(exact), where=norms > 0)
        got = store.cosine_to_all(query)
        assert np.allclose(got, expected, atol=1e-5)
        assert got[3] == 0.0


def test_most_similar_orders_and_excludes(tmp_path):
    matrix = np.array([[1, 0], [0.9, 0.1], [0, 1], [-1, 0]], dtype=np.float32)
    store = VectorStore.open(write_store(tmp_path / "s.ctxv", ["a", "b", "c", "d"], matrix))
    best = store.most_similar(np.array([1, 0], dtype=np.float32), k=3, exclude={"a"})
    assert [w for w, _ in best] == ["b", "c", "d"]
    assert best[0][1] == pytest.approx(0.9 / np.hypot(0.9, 0.1))
    assert best[1][1] == pytest.approx(0.0, abs=1e-7)
    assert store.most_similar(np.array([1, 0], dtype=np.float32), k=10)[0][0] == "a"


def test_head_keeps_the_most_frequent_words(tmp_path):
    store = VectorStore.open(write_store(tmp_path / "s.ctxv", WORDS, _matrix()))
    head = store.head(3)
    assert len(head) == 3 and head.words == WORDS[:3]
    assert head.find("river") == 2 and head.find("money") is None
    assert [w for w, _ in head.most_similar(store.vector("money"), k=5)] == sorted(
        WORDS[:3],
        key=lambda w: (
            -float(
                np.dot(store.vector(w), store.vector("money"))
                / np.linalg.norm(store.vector(w))
                / np.linalg.norm(store.vector("money"))
            )
        ),
    )


@pytest.mark.parametrize(
    "words, matrix, message",
    [
        (["a", "a"], np.ones((2, 3)), "duplicate"),
        (["a", "b"], np.array([[1, np.nan, 0], [0, 0, 1]]), "NaN or infinite"),
        (["a", "b\nc"], np.ones((2, 3)), "invalid word"),
        (["a"], np.ones((2, 3)), "matrix of shape"),
    ],
)
def test_write_refuses_bad_input_and_leaves_nothing(tmp_path, words, matrix, message):
    with pytest.raises(DataError, match=message):
        write_store(tmp_path / "bad.ctxv", words, matrix)
    assert list(tmp_path.iterdir()) == []


def test_open_rejects_non_stores_and_truncation(tmp_path):
    fake = tmp_path / "fake.ctxv"
    fake.write_bytes(b"hello world, not a store")
    with pytest.raises(DataError, match="bad magic"):
        VectorStore.open(fake)
    good = write_store(tmp_path / "good.ctxv", WORDS, _matrix())
    cut = tmp_path / "cut.ctxv"
    cut.write_bytes(good.read_bytes()[:-100])
    with pytest.raises(DataError, match="truncated or corrupt"):
        VectorStore.open(cut)
    with pytest.raises(DataError, match="no such file"):
        VectorStore.open(tmp_path / "missing.ctxv")


def test_empty_store_round_trip(tmp_path):
    store = VectorStore.open(write_store(tmp_path / "e.ctxv", [], np.zeros((0, 4))))
    assert len(store) == 0 and store.words == [] and store.find("a") is None
    assert store.most_similar(np.ones(4, dtype=np.float32)) == []


def test_a_failed_write_leaves_neither_file_nor_temporary(tmp_path, monkeypatch):
    target = tmp_path / "s.ctxv"
    write_store(target, WORDS, _matrix())  # an older, good store at the same path
    before = target.read_bytes()

    def broken_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("ctxembed.vectors.store.os.fsync", broken_disk)
    with pytest.raises(OSError, match="No space left"):
        write_store(target, WORDS[:3], _matrix(3))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.ctxv"]
    assert target.read_bytes() == before  # the old store is untouched
