"""The estimator and the subword fit of scripts/build_default_vectors.py, on tiny hand-checkable data."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("scipy")

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "build_default_vectors.py"


@pytest.fixture(scope="module")
def build():
    spec = importlib.util.spec_from_file_location("build_default_vectors", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_affine_map_is_least_squares_by_hand(build):
    # y = 2x + 1 exactly on x = 0, 1, 2: the map is [[2], [1]] (slope, then intercept)
    mapping = build.fit_affine_map(np.array([[0.0], [1.0], [2.0]]), np.array([[1.0], [3.0], [5.0]]))
    assert np.allclose(mapping, [[2.0], [1.0]])
    # y = 0, 0, 3 on x = 0, 1, 2: slope 1.5, intercept -0.5 (the least-squares line, by hand:
    # mean x = 1, mean y = 1, slope = sum (x - 1)(y - 1) / sum (x - 1)^2 = (1 + 0 + 2) / 2)
    mapping = build.fit_affine_map(np.array([[0.0], [1.0], [2.0]]), np.array([[0.0], [0.0], [3.0]]))
    assert np.allclose(mapping, [[1.5], [-0.5]])
    assert np.allclose(build.apply_map(np.array([[4.0]]), mapping), [[5.5]])


def test_weights_pull_the_map_towards_heavy_words(build):
    x, y = np.array([[0.0], [1.0], [2.0]]), np.array([[0.0], [0.0], [3.0]])
    # the two words weighted 1000 decide the line: it passes (almost) through (0, 0) and (1, 0)
    mapping = build.fit_affine_map(x, y, np.array([1000.0, 1000.0, 1.0]))
    assert abs(mapping[0, 0]) < 0.01 and abs(mapping[1, 0]) < 0.01


def test_affine_map_recovers_a_map_from_fewer_dimensions(build):
    rng = np.random.default_rng(0)
    small = rng.normal(size=(200, 3))
    true = rng.normal(size=(4, 5))  # 3 weights + intercept -> 5 dimensions
    large = small @ true[:3] + true[3]
    assert np.allclose(build.fit_affine_map(small, large), true)


def test_subword_fit_reproduces_each_word_from_its_ngrams(build):
    words = ["bank", "banks", "banker", "river", "rivers", "money"]
    targets = np.random.default_rng(0).normal(size=(len(words), 4)).astype(np.float32)
    incidence = build.ngram_incidence(words, 3, 5, 4096)  # (6, 4096), each row averages its n-grams
    assert np.allclose(incidence.sum(axis=1), 1.0)
    table = build.fit_subwords(incidence, targets, ridge=1e-6, iterations=50)
    fitted = incidence @ table  # (6, 4): more n-grams than words, so the fit can be exact
    assert np.allclose(fitted, targets, atol=1e-3)
    # a word left out shares n-grams with the fitted ones: its vector leans towards theirs
    guess = build.ngram_incidence(["bankers"], 3, 5, 4096) @ table  # (1, 4)
    cos = guess[0] @ targets[2] / np.linalg.norm(guess[0]) / np.linalg.norm(targets[2])
    assert cos > 0.5


def test_neighbour_overlap_and_cosine_of_a_perfect_guess(build):
    vocabulary = np.random.default_rng(0).normal(size=(50, 8)).astype(np.float32)
    rows = np.arange(10)
    figures = build.agreement(vocabulary[rows], vocabulary[rows] * 3, rows, build.unit(vocabulary))
    assert figures == {"words": 10, "mean_cosine": 1.0, "top10_overlap": 1.0}
    neighbours = build.top_neighbours(vocabulary[:3], build.unit(vocabulary), np.array([0, 1, 2]), 10)
    assert not np.any(neighbours == np.array([[0], [1], [2]]))  # a word is never its own neighbour


def test_held_out_rows_cover_every_tenth_of_the_ranks(build):
    rows = build.held_out(100_000)
    assert len(rows) == 6000 and len(set(rows.tolist())) == 6000
    assert np.array_equal(np.bincount(rows // 10_000), [600] * 10)
    assert np.array_equal(rows, build.held_out(100_000))  # deterministic


def test_ridge_shrinks_the_slope_but_not_the_intercept(build):
    x, y = np.array([[0.0], [1.0], [2.0]]), np.array([[1.0], [3.0], [5.0]])
    # normal equations by hand, ridge r = 1 on the slope only: [[5 + 1, 3], [3, 3]] M = [[13], [9]]
    # -> slope + intercept = 3 and 6 slope + 3 intercept = 13 -> slope 4/3, intercept 5/3 (without: 2, 1)
    mapping = build.fit_affine_map(x, y, ridge=1.0)
    assert np.allclose(mapping, [[4 / 3], [5 / 3]])
