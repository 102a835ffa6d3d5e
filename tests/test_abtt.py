"""All-but-the-top statistics: from the store's section, else a cache file, else computed once."""

from __future__ import annotations

import os

import numpy as np
import pytest

from ctxembed.core.abtt import TopRemoval
from ctxembed.vectors import statistics as abtt
from ctxembed.vectors.sources import default_store_path
from ctxembed.vectors.statistics import compute_statistics, statistics
from ctxembed.vectors.store import VectorStore, write_store


@pytest.fixture
def small_store(tmp_path):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(50)]
    matrix = rng.normal(size=(50, 6)) * np.array([5, 3, 2, 1, 0.5, 0.1]) + 1.0  # (50, 6)
    return VectorStore.open(write_store(tmp_path / "s.ctxv", words, matrix))


def test_computed_statistics_are_the_mean_and_principal_directions(small_store):
    found = compute_statistics(small_store, 50)
    x = small_store.matrix().astype(np.float64)  # (50, 6)
    np.testing.assert_allclose(found.mean, x.mean(axis=0), rtol=1e-5)
    variances = np.linalg.eigvalsh(np.cov(x.T, bias=True))[::-1]  # (6,) descending
    np.testing.assert_allclose(found.variances, variances, rtol=1e-4)
    assert found.words == 50 and found.directions.shape == (6, 6)


def test_shipped_store_needs_no_computation_and_no_cache(monkeypatch, isolated_env):
    store = VectorStore.open(default_store_path())
    monkeypatch.setattr(abtt, "compute_statistics", lambda *a: pytest.fail("computed despite the section"))
    found = statistics(store, 200_000)
    assert found.words == 200_000 and found.directions.shape == (100, 100)
    assert not any(isolated_env.iterdir())  # nothing written to the cache


def test_shipped_section_equals_a_fresh_computation():
    store = VectorStore.open(default_store_path())
    stored, fresh = statistics(store, len(store)), compute_statistics(store, len(store))
    np.testing.assert_allclose(stored.mean, fresh.mean, atol=1e-6)
    top = slice(0, 3)  # the directions all-but-the-top removes; signs may differ
    np.testing.assert_allclose(np.abs(stored.directions[:, top]), np.abs(fresh.directions[:, top]), atol=1e-4)


def test_fewer_words_than_the_section_are_computed_then_cached(small_store, monkeypatch):
    calls = []
    real = abtt.compute_statistics
    monkeypatch.setattr(abtt, "compute_statistics", lambda *a: calls.append(a) or real(*a))
    first = statistics(small_store, 30)
    second = statistics(small_store, 30)
    assert len(calls) == 1 and first.words == 30
    np.testing.assert_array_equal(first.directions, second.directions)


def test_a_read_only_cache_still_gives_the_statistics(small_store, isolated_env):
    os.chmod(isolated_env, 0o500)
    try:
        found = statistics(small_store, 50)
    finally:
        os.chmod(isolated_env, 0o700)
    assert found.words == 50


def test_top_removal_removes_the_mean_and_the_top_directions(small_store):
    found = compute_statistics(small_store, 50)
    removal = TopRemoval.from_statistics(found, 2)
    out = removal(small_store.matrix())  # (50, 6)
    np.testing.assert_allclose(out @ found.directions[:, :2], 0, atol=1e-4)
    np.testing.assert_allclose(out.mean(axis=0), 0, atol=1e-4)


def test_top_removal_is_the_projection_i_minus_u_ut_row_by_row(small_store):
    found = compute_statistics(small_store, 50)
    removal = TopRemoval.from_statistics(found, 2)
    vectors = small_store.matrix()  # (50, 6)
    top = found.directions[:, :2].astype(np.float64)  # (6, 2)
    projection = np.eye(6) - top @ top.T  # (6, 6)
    expected = (vectors - found.mean).astype(np.float64) @ projection  # (50, 6)
    np.testing.assert_allclose(removal(vectors), expected, atol=1e-5)
    sentences = vectors[:48].reshape(12, 4, 6)  # (B, T, d) as the engine stacks a group
    alone = np.stack([removal(sentences[b : b + 1])[0] for b in range(12)])  # (B, T, d)
    assert np.array_equal(alone, removal(sentences))  # a sentence never depends on its group


def test_a_converted_store_carries_its_own_statistics(tmp_path, monkeypatch):
    from ctxembed.vectors.sources import convert_to_store

    convert_to_store(str(default_store_path()), tmp_path / "small.ctxv", limit=5000, trust=False, quantize=False)
    small = VectorStore.open(tmp_path / "small.ctxv")
    monkeypatch.setattr(abtt, "compute_statistics", lambda *a: pytest.fail("computed despite the section"))
    found = statistics(small, 5000)
    assert found.words == 5000 and small.dtype == "int8"
    monkeypatch.undo()  # the section holds the statistics of the 5,000 words, not of the 200,000
    np.testing.assert_allclose(found.mean, compute_statistics(small, 5000).mean, atol=1e-6)
