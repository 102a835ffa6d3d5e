"""Commands that only read a store never import gensim (and so scipy): about a second saved per call."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

PROBE = """
import runpy, sys
sys.argv = ["ctxembed", *{args!r}]
try:
    runpy.run_module("ctxembed", run_name="__main__")
except SystemExit as exit:
    code = exit.code
# numpy.ma (~7 ms) comes with np.unique and friends; train/backprop with a module-level import of training
heavy = ("gensim", "scipy", "rich.progress", "dask", "distributed", "tokenizers", "sklearn", "matplotlib",
         "numpy.ma", "ctxembed.train.trainer", "ctxembed.train.backprop")  # fmt: skip
print("MODULES", *(name in sys.modules for name in heavy), file=sys.stderr)
"""


@pytest.mark.parametrize(
    "args",
    [
        ["compare", "we sat on the river bank", "I deposited money in the bank", "--word", "bank", "--json"],
        ["attend", "Apple makes phones"],
        ["neighbors", "Apple makes phones", "--word", "apple", "--json"],
        ["vectors", "info", "--json"],
    ],
)
def test_store_commands_do_not_import_gensim(args, isolated_env):
    env = dict(os.environ, CTXEMBED_CACHE_DIR=str(isolated_env), PYTHONPATH=str(REPO))
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(args=args)], capture_output=True, text=True, env=env, timeout=120
    )
    line = [x for x in out.stderr.splitlines() if x.startswith("MODULES")]
    assert line == ["MODULES" + " False" * 11], out.stderr
