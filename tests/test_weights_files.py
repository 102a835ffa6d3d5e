"""Projection weights files: everything that is not plain finite arrays of usable shapes is one clean error."""

from __future__ import annotations

import os

import numpy as np
import pytest

from ctxembed.config import AttentionConfig
from ctxembed.core.projections import random_params
from ctxembed.vectors.weights import save_projections
from tests.cli_helpers import fails

ARGS = ("attend", "the river bank", "--preset", "textbook", "--projection", "file", "--weights")


def _saved(tmp_path, **changes) -> dict:
    path = tmp_path / "good.npz"
    save_projections(path, random_params(100, 100, AttentionConfig(), seed=5))
    with np.load(path) as archive:
        arrays = {name: archive[name] for name in archive.files}
    arrays.update(changes)
    return arrays


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"l0.h0.W_query": np.full((100, 100), np.nan)}, "l0.h0.W_query has NaN or infinite values"),
        ({"l0.h0.W_key": np.full((100, 100), np.inf)}, "l0.h0.W_key has NaN or infinite values"),
        ({"l0.h0.W_value": np.full((100, 100), 1e30)}, "l0.h0.W_value has a value of 1e\\+30, past the 10000 limit"),
        (
            {"l0.h0.W_query": np.zeros((100, 0)), "l0.h0.W_key": np.zeros((100, 0))},
            "l0.h0.W_query has shape \\(100, 0\\): a head needs at least 1 dimension",
        ),
    ],
    ids=["nan", "inf", "huge", "key-dimension-0"],
)
def test_bad_values_and_shapes_are_refused(tmp_path, change, message):
    path = tmp_path / "bad.npz"
    np.savez(path, **_saved(tmp_path, **change))
    assert message.replace("\\", "") in fails(1, *ARGS, path).replace("\\", "")


def test_truncated_npz_is_a_clean_error(tmp_path):
    path = tmp_path / "cut.npz"
    np.savez(path, **_saved(tmp_path))
    path.write_bytes(path.read_bytes()[:5000])
    assert "truncated or damaged .npz archive" in fails(1, *ARGS, path)


def test_bare_npy_is_a_clean_error(tmp_path):
    path = tmp_path / "one.npy"
    np.save(path, np.eye(100))
    assert "single .npy array, expected an .npz archive" in fails(1, *ARGS, path)


def test_pickled_arrays_are_refused(tmp_path):
    path = tmp_path / "objects.npz"
    np.savez(path, **{"l0.h0.W_query": np.array([{"a": 1}], dtype=object)})
    assert "pickled objects" in fails(1, *ARGS, path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_weights_are_refused_without_blocking(tmp_path):
    fifo = tmp_path / "w.npz"
    os.mkfifo(fifo)
    assert "is a FIFO" in fails(1, *ARGS, fifo)
