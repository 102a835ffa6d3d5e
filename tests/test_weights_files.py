"""Projection weights files: everything that is not plain finite arrays of usable shapes is one clean error."""

from __future__ import annotations

import os

import numpy as np
import pytest

from ctxembed.core.projections import random_params
from ctxembed.declarations import AttentionConfig
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


# ------------------------------------------------------------------ sizes declared, metadata shapes
def test_a_deflated_huge_array_is_refused_from_its_header_in_little_memory(tmp_path):
    """3 MB on disk declaring a (20000, 20000) float64 array (3.2 GB): refused before expanding,
    measured as the peak resident size of the command's process."""
    import resource
    import subprocess
    import sys

    from tests.npz_bomb import write_npz_bomb

    bomb = write_npz_bomb(tmp_path / "bomb.npz")
    assert bomb.stat().st_size < 4_000_000
    measure = (
        "import resource, subprocess, sys\n"
        "run = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "print(run.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, run.stderr.strip())\n"
    )

    def limit_memory():  # should the check regress, fail with MemoryError instead of taking the machine
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    command = [sys.executable, "-m", "ctxembed", *ARGS, str(bomb)]
    out = subprocess.run(
        [sys.executable, "-c", measure, *command], capture_output=True, text=True, timeout=120, preexec_fn=limit_memory
    )
    code, peak_kib, message = out.stdout.split(" ", 2)
    assert code == "1" and "past the" in message and "budget" in message and str(bomb) in message, out.stdout
    assert int(peak_kib) < 200 * 1024, f"peak {int(peak_kib) // 1024} MB"


def _with_meta(tmp_path, text: str):
    from ctxembed.vectors.weights import learned_weights_path

    with np.load(learned_weights_path()) as archive:
        arrays = {name: archive[name] for name in archive.files}
    arrays["meta"] = np.array(text)
    path = tmp_path / "edited.npz"
    np.savez(path, **arrays)
    return path


def _learned_meta() -> dict:
    import json

    from ctxembed.vectors.weights import learned_weights_path, read_metadata

    return json.loads(json.dumps(read_metadata(learned_weights_path())))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda meta: "[" * 100_000 + "]" * 100_000, "nested too deeply"),
        (
            lambda meta: '{"schema": "ctxembed.weights/1", "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
            "nested too deeply",
        ),
        (lambda meta: meta | {"settings": [1, 2]}, "'settings' is a list, not an object"),
        (lambda meta: meta | {"settings": meta["settings"] | {"attention": "x"}}, "settings.attention is a str"),
        (lambda meta: {k: v for k, v in meta.items() if k != "vectors"}, "'vectors' is missing"),
        (lambda meta: meta | {"vectors": meta["vectors"] | {"dim": "100"}}, "vectors.dim is a str, not int"),
        (lambda meta: meta | {"learned": [1]}, "'learned' holds something other than array names"),
        (lambda meta: meta | {"steps": True}, "'steps' is a bool, not int"),
    ],
    ids=["deep-list", "deep-field", "settings-list", "attention-str", "no-vectors", "dim-str", "learned", "steps-bool"],
)
def test_damaged_metadata_is_one_line_naming_the_file(tmp_path, edit, message):
    import json

    changed = edit(_learned_meta())
    path = _with_meta(tmp_path, changed if isinstance(changed, str) else json.dumps(changed))
    for command in (
        ("attend", "the river bank", "--weights", path),
        ("before-after", "the river bank", "--weights", path),
    ):
        line = fails(1, *command)
        assert message in line and str(path) in line, line
        assert "None-dimensional" not in line


def test_a_text_file_as_weights_is_not_said_to_hold_pickles(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("these are not weights\n")
    line = fails(1, *ARGS, path)
    assert "pickle" not in line and "not a NumPy .npz archive" in line, line


def test_a_header_numpy_cannot_tokenize_is_one_line(tmp_path):
    """Found by tests/test_input_fuzz.py: a damaged .npy header made numpy raise tokenize.TokenError."""
    path = tmp_path / "w.npz"
    np.savez(path, **{"l0.h0.W_query": np.zeros((100, 25), np.float32)})
    data = path.read_bytes()
    path.write_bytes(data.replace(b"'shape': (100, 25)", b"'shape': (100, 25("))
    assert "is not a NumPy array" in fails(1, *ARGS, path)
