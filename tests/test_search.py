"""Neighbour search: the unit rows it reads, their memory-mapped cache, and results equal to a direct
float64 computation over the whole store (the same words, in the same order, the same cosines)."""

from __future__ import annotations

import numpy as np
import pytest

import ctxembed.vectors.cache as cache
from ctxembed.core.abtt import TopRemoval
from ctxembed.vectors.search import nearest, unit_rows
from ctxembed.vectors.sources import open_vectors
from ctxembed.vectors.statistics import statistics


@pytest.fixture(scope="module")
def store():
    return open_vectors(None)


@pytest.fixture(scope="module")
def removal(store):
    return TopRemoval.from_statistics(statistics(store, 200_000), 3)


@pytest.fixture(autouse=True)
def fresh_mappings(monkeypatch):
    monkeypatch.setattr(cache, "_MAPPED", {})  # each test sees its own cache folder from scratch


def by_hand(store, vector, k, exclude, removal=None, among=None):
    """The k best (word, cosine) over the first ``among`` rows, in float64, straight from the store."""
    n = among or len(store)
    rows = store.rows(np.arange(n)).astype(np.float64)  # (n, d)
    if removal is not None:
        rows = (rows - removal.mean) - ((rows - removal.mean) @ removal.top) @ removal.top.T  # (n, d)
    lengths = np.linalg.norm(rows, axis=1) * np.linalg.norm(vector)  # (n,)
    cosines = np.divide(rows @ vector, lengths, out=np.zeros(n), where=lengths > 1e-9)  # (n,)
    for word in exclude:
        if (row := store.find(word)) is not None and row < n:
            cosines[row] = -np.inf
    order = np.argsort(-cosines, kind="stable")[:k]
    return [(store.word_at(int(i)), float(cosines[i])) for i in order]


@pytest.mark.parametrize("among", [50_000, 1000, None])
@pytest.mark.parametrize("space", ["static", "removed"])
def test_nearest_equals_the_direct_computation(store, removal, among, space):
    rng = np.random.default_rng(3)
    chosen = removal if space == "removed" else None
    queries = [store.vector("bank"), store.vector("river") + store.vector("money"), rng.standard_normal(store.dim)]
    for query in queries if among else queries[1:2]:  # the whole vocabulary (the block path): one query
        found = nearest(store, query, k=12, exclude={"bank", "banks"}, removal=chosen, among=among)
        expected = by_hand(store, query, 12, {"bank", "banks"}, chosen, among)
        assert [w for w, _ in found] == [w for w, _ in expected]
        np.testing.assert_allclose([c for _, c in found], [c for _, c in expected], atol=2e-6)


def test_the_unit_rows_are_built_once_and_mapped_by_later_searches(store, removal, isolated_env):
    first = unit_rows(store, 3000, removal)
    files = sorted(isolated_env.glob("*.npy"))
    assert len(files) == 1 and first.shape == (3000, store.dim)
    cache._MAPPED.clear()  # as a new process
    again = unit_rows(store, 3000, removal)
    assert isinstance(again, np.memmap) and again.tobytes() == first.tobytes()
    assert np.linalg.norm(again, axis=1) == pytest.approx(np.ones(3000), abs=1e-5)
    assert unit_rows(store, 3000, None).tobytes() != first.tobytes()  # another space, another file
    assert len(sorted(isolated_env.glob("*.npy"))) == 2


def test_a_damaged_cache_is_rebuilt_with_a_note(store, isolated_env, capsys):
    built = unit_rows(store, 2000, None).copy()
    [path] = isolated_env.glob("*.npy")
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF  # one flipped byte in the last row
    path.write_bytes(bytes(data))
    cache._MAPPED.clear()
    again = unit_rows(store, 2000, None)
    assert "damaged (checksum mismatch)" in capsys.readouterr().err
    assert again.tobytes() == built.tobytes()


def test_a_cache_folder_that_cannot_be_written_still_gives_the_results(store, tmp_path, monkeypatch):
    expected = nearest(store, store.vector("river"), k=5, exclude={"river"}, among=4000)
    cache._MAPPED.clear()
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("CTXEMBED_CACHE_DIR", str(blocked / "ctxembed"))  # (root ignores a read-only mode)
    assert nearest(store, store.vector("river"), k=5, exclude={"river"}, among=4000) == expected
    assert blocked.read_text() == "not a folder"


def test_the_whole_shipped_vocabulary_is_cached_too(store):
    """`neighbors --among 0` searches all 400,000 rows: they are made once and mapped after, as the
    50,000 most frequent are, instead of block by block on every call."""
    from ctxembed.vectors.search import CACHED_FLOATS

    assert len(store) * store.dim <= CACHED_FLOATS
