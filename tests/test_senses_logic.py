"""The clustering side of `senses`: the own term, k chosen by silhouette, sizes and labels."""

from __future__ import annotations

import numpy as np
import pytest

from ctxembed.api import Explorer
from ctxembed.errors import DataError
from ctxembed.senses.induce import cluster, own_term


@pytest.fixture(scope="module")
def engine():
    return Explorer().engine


def test_own_term_is_what_the_mix_takes_from_the_word_itself(engine):
    sentence = engine.prepare("we sat on the river bank")
    result = engine.run([sentence])[0]
    row = sentence.used.index(5)
    own = own_term(engine, result, row)
    weights = result.mix.gamma * np.asarray(result.mix.weights)
    np.testing.assert_allclose(own, weights[0] * result.inputs[row], rtol=1e-6)
    # what is left is the context: the last layer's attention output, weighted by the mix
    np.testing.assert_allclose(result.contextual[row] - own, weights[-1] * result.last_layer[row], atol=1e-5)


def blobs(sizes, seed=0):
    """Unit vectors around len(sizes) orthogonal directions, ``sizes`` of each."""
    rng = np.random.default_rng(seed)
    centres = np.eye(20)[: len(sizes)]
    points = np.concatenate([c + 0.15 * rng.standard_normal((n, 20)) for c, n in zip(centres, sizes, strict=True)])
    return points / np.linalg.norm(points, axis=1, keepdims=True), np.repeat(np.arange(len(sizes)), sizes)


@pytest.mark.parametrize("sizes", [(30, 10), (20, 20, 20), (40, 15, 10, 8)])
def test_auto_k_finds_the_number_of_groups(sizes):
    points, truth = blobs(sizes)
    result = cluster(points)
    assert result.k == len(sizes) and result.chosen_by == "silhouette"
    assert len(set(zip(result.labels, truth, strict=True))) == len(sizes)  # the groups, up to naming
    assert list(np.bincount(result.labels)) == sorted(sizes, reverse=True)  # sense 0 is the largest


def test_auto_k_respects_the_minimum_share_and_small_inputs():
    points, _ = blobs((60, 2))
    result = cluster(points, min_share=0.05)  # a group of 2 in 62 is under 5%: not a sense of its own
    assert all(size >= 4 for size in np.bincount(result.labels))
    three, _ = blobs((2, 1))
    assert cluster(three).k == 1 and cluster(three).chosen_by == "too few occurrences"


def test_given_k_and_too_few_points():
    points, _ = blobs((5, 5))
    assert cluster(points, 2).k == 2
    with pytest.raises(DataError, match="fewer than"):
        cluster(points[:3], 4)


def test_tables_never_print_minus_zero():
    from ctxembed.views.render_senses import _fixed

    assert _fixed(-4e-7, 3) == "0.000"
    assert _fixed(-0.25, 3) == "-0.250"
