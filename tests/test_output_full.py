"""A full disk on stdout (``> /dev/full``) is one clean line and exit 1 for every command, not an
internal error, and nothing more is printed when Python flushes stdout at exit."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import FIXTURES, REPO

CORPUS = str(FIXTURES / "train_tiny.txt")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize(
    "command",
    [
        ("attend", "the river bank", "--json"),
        ("attend", "the river bank"),
        ("compare", "the river bank", "the bank", "--word", "bank", "--json"),
        ("neighbors", "the river bank", "--word", "bank"),
        ("senses", "the", CORPUS, "--json"),
        ("vectors", "info"),
        ("eval", "wsi", str(REPO / "data" / "wsi-senses.tsv"), "-c", "static", "--json"),
    ],
    ids=["attend-json", "attend", "compare", "neighbors", "senses", "vectors-info", "eval-wsi"],
)
def test_a_full_stdout_is_one_line_and_exit_1(command, tmp_path):
    env = {**os.environ, "CTXEMBED_CACHE_DIR": str(tmp_path)}
    with open("/dev/full", "w") as full:
        run = subprocess.run(
            [sys.executable, "-m", "ctxembed", *command],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            timeout=120,
        )
    lines = run.stderr.splitlines()
    assert run.returncode == 1, run.stderr
    assert lines == ["ctxembed: error: cannot write the output: No space left on device"], run.stderr
