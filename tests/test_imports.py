"""Start-up: commands that only read a store never import gensim (and so scipy): about a second saved per call;
batch starts numpy without idle BLAS threads. Why imports are lazy: docs/architecture.md."""

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
         "numpy.ma", "ctxembed.train.trainer", "ctxembed.train.backprop", "pyarrow")  # fmt: skip
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
    assert line == ["MODULES" + " False" * 12], out.stderr


TRAINED_PROBE = """
import runpy, sys
sys.argv = ["ctxembed", "attend", "we sat on the river bank", "--model", "minilm", "--json"]
try:
    runpy.run_module("ctxembed", run_name="__main__")
except SystemExit as exit:
    assert not exit.code, exit.code
heavy = ("torch", "transformers", "sentence_transformers", "tokenizers", "gensim", "scipy", "sklearn", "matplotlib",
         "pyarrow", "rich.progress", "zipfile", "hashlib", "tempfile", "ctxembed.vectors.staging")  # fmt: skip
print("MODULES", *(name for name in heavy if name in sys.modules), file=sys.stderr)
"""


def test_the_trained_model_starts_without_torch_or_install_machinery(minilm_folder, isolated_env, tmp_path):
    """attend --model minilm --json runs the NumPy encoder: torch, transformers and sentence-transformers
    stay out even where they are installed, and so do the install's zip and hashing and the cache's
    temporary files, which a start that only maps the converted model does not use (its files as
    installed.json recorded them: the installed files, linked, with the record this version writes)."""
    import json

    from ctxembed.vectors import bert, models

    folder = tmp_path / "minilm"
    folder.mkdir()
    for f in minilm_folder.iterdir():
        if f.name != models.INSTALLED:
            (folder / f.name).symlink_to(f)
    record = json.loads((minilm_folder / models.INSTALLED).read_text())
    record["files"] = {f: models.recorded_stat(minilm_folder / f) for f in bert.FILES}
    (folder / models.INSTALLED).write_text(json.dumps(record))
    env = dict(os.environ, CTXEMBED_CACHE_DIR=str(isolated_env), PYTHONPATH=str(REPO), CTXEMBED_MODELS=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", TRAINED_PROBE], capture_output=True, text=True, env=env, timeout=120)
    assert [x for x in out.stderr.splitlines() if x.startswith("MODULES")] == ["MODULES"], out.stderr


BLAS_PROBE = """
import sys
sys.argv = ["ctxembed", *{args!r}]
{imports}  # loads numpy, and with it OpenBLAS and its threads
from threadpoolctl import threadpool_info
print("BLAS", *[i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"])
"""


def _blas_threads(args: list[str], imports: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENBLAS_", "OMP_"))}
    probe = BLAS_PROBE.format(args=args, imports=imports)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60)
    return next(line for line in out.stdout.splitlines() if line.startswith("BLAS"))


def test_batch_starts_numpy_with_one_blas_thread_and_other_commands_as_numpy_does():
    # batch's work runs one BLAS thread per process: threads started at load would only spin idle
    assert _blas_threads(["batch", "sentences.txt"], "import ctxembed.cli") == "BLAS 1"
    as_numpy = _blas_threads([], "import numpy")
    assert _blas_threads(["attend", "the bank"], "import ctxembed.cli") == as_numpy
    if os.cpu_count() and os.cpu_count() > 1:
        assert as_numpy != "BLAS 1"  # so the first assertion could fail
