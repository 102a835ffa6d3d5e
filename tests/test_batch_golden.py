"""`ctxembed batch` gives the same bytes as before the speed work, on lines chosen to be awkward.

tests/fixtures/batch/lines.txt holds out-of-vocabulary words, clitics (straight and curly
apostrophes), abbreviations, JSON lines with every kind of id, bad JSON, bad UTF-8, CRLF, empty
lines and a last line without a newline; cased.txt is a small case-sensitive vocabulary with
clitic entries and no subwords. golden.json lists the cases (batch options), each with the
SHA-256 of the output written by `ctxembed batch --chunk 1` at commit 2d26431 (each sentence run
alone, which is what batch does now at any chunk size); the *.jsonl.gz files hold some of those
outputs in full, so a failure can name the first record that changed. The cases spell the default
preset of that commit out as flags (--preset textbook --abtt 3 --sif 0.0001 --exclude-self
--residual --residual-scale 1/9), since the default preset has been retuned since.
The cases with all-but-the-top were regenerated when it became low-rank, (x - mu) - ((x - mu) U) Uᵀ
instead of a (d, d) product: float32 last digits moved, by at most 1.2e-6 (maxtok_positions).
Every case was regenerated when records gained "sources" (each token's vector source), after
checking that the new output with that field removed is the old output, byte for byte.
The cases on the default vectors were regenerated again (scripts/build_batch_golden.py) when the
shipped store became all 400,000 GloVe words with subwords: "I", "'s", numbers and unknown words now
have vectors, so their records changed (and oov_error refuses no line of the default store any
more); the cases on cased.txt kept their bytes.

Bytes are a property of the code *and* of the BLAS kernel. The golden bytes were written on AVX2
machines, where numpy's OpenBLAS runs its Haswell sgemm kernel; on an AVX-512 machine it picks
SkylakeX, whose sums round some float32 last bits differently (seen: 0.56505716 -> 0.5650571). So
the byte test runs batch in a fresh process with OPENBLAS_CORETYPE=Haswell, and skips (saying so)
where that kernel cannot be had; the float32-tolerance test runs under this machine's own kernel.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.cli_helpers import SHARED_CACHE, succeeds
from tests.conftest import FIXTURES, REPO

GOLDEN = FIXTURES / "batch"
CASES = json.loads((GOLDEN / "golden.json").read_text(encoding="utf-8"))
GOLDEN_KERNEL = "Haswell"  # OpenBLAS's sgemm kernel on the AVX2 machines that wrote the golden bytes


def case_args(name: str) -> list[str]:
    return [str(REPO / a) if a.startswith("tests/fixtures/") else a for a in CASES[name]["args"]]


@functools.cache  # each case runs once for both tests
def run_case(name: str, *extra: str) -> bytes:
    return succeeds("batch", GOLDEN / "lines.txt", *case_args(name), *extra).stdout_bytes


def golden_kernel_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXEMBED_", "OPENBLAS_"))}
    return env | {"OPENBLAS_CORETYPE": GOLDEN_KERNEL, "CTXEMBED_CACHE_DIR": str(SHARED_CACHE)}


@functools.cache
def golden_kernel_missing() -> str | None:
    """Why a fresh process here cannot run the golden kernel (not OpenBLAS, not x86-64 with AVX2), or None."""
    probe = "import numpy, threadpoolctl; print([i.get('architecture') for i in threadpoolctl.threadpool_info()])"
    done = subprocess.run([sys.executable, "-c", probe], env=golden_kernel_env(), capture_output=True, text=True)
    if done.returncode != 0:  # e.g. a CPU without AVX2, where OpenBLAS cannot run that kernel
        return f"numpy cannot start with OPENBLAS_CORETYPE={GOLDEN_KERNEL} here (exit {done.returncode})"
    found = done.stdout.strip()
    return None if found == repr([GOLDEN_KERNEL]) else f"numpy's BLAS kernels here are {found}, not [{GOLDEN_KERNEL!r}]"


def run_case_on_golden_kernel(name: str) -> bytes:
    """``ctxembed batch`` for a case in a fresh process whose OpenBLAS runs the golden kernel."""
    command = [sys.executable, "-m", "ctxembed", "batch", str(GOLDEN / "lines.txt"), *case_args(name)]
    done = subprocess.run(command, env=golden_kernel_env(), capture_output=True, check=False, timeout=300)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout


def first_difference(new: bytes, old: bytes) -> str:
    for number, (a, b) in enumerate(zip(new.splitlines(), old.splitlines(), strict=False), start=1):
        if a != b:
            return f"record {number} differs:\nnew {a[:300]!r}\nold {b[:300]!r}"
    return f"{len(new.splitlines())} records now, {len(old.splitlines())} before"


@pytest.mark.parametrize("name", sorted(CASES))
def test_output_is_byte_identical_to_the_golden_copy(name):
    if reason := golden_kernel_missing():
        pytest.skip(f"{reason}: the bytes depend on the kernel (the tolerance test still runs)")
    new = run_case_on_golden_kernel(name)
    assert new.count(b"\n") == CASES[name]["records"]
    if hashlib.sha256(new).hexdigest() != CASES[name]["sha256"]:
        stored = GOLDEN / f"{name}.jsonl.gz"
        detail = first_difference(new, gzip.decompress(stored.read_bytes())) if stored.exists() else ""
        pytest.fail(f"batch output for {name} ({' '.join(CASES[name]['args'])}) changed. {detail}")


def _close(new, old) -> bool:
    """Same structure, same strings, ints and booleans; floats equal to float32 precision."""
    if isinstance(old, dict):
        return isinstance(new, dict) and new.keys() == old.keys() and all(_close(new[k], old[k]) for k in old)
    if isinstance(old, list) and old and isinstance(old[0], (float, list)) and not isinstance(new, str):
        try:
            return np.allclose(np.array(new, dtype=float), np.array(old, dtype=float), rtol=1e-5, atol=1e-7)
        except ValueError:  # ragged: compare item by item
            return len(new) == len(old) and all(_close(a, b) for a, b in zip(new, old, strict=True))
    if isinstance(old, float):
        return isinstance(new, float) and abs(new - old) <= 1e-7 + 1e-5 * abs(old)
    return new == old and type(new) is type(old)


@pytest.mark.parametrize("name", sorted(p.name.removesuffix(".jsonl.gz") for p in GOLDEN.glob("*.jsonl.gz")))
def test_records_match_the_golden_copy_up_to_float32_rounding(name):
    """The portable form of the test above: on another CPU, BLAS may round the last bit differently."""
    old = [json.loads(line) for line in gzip.decompress((GOLDEN / f"{name}.jsonl.gz").read_bytes()).splitlines()]
    new = [json.loads(line) for line in run_case(name).splitlines()]
    assert len(new) == len(old)
    for a, b in zip(new, old, strict=True):
        assert _close(a, b), f"record {b['line']} changed: {json.dumps(a)[:300]} vs {json.dumps(b)[:300]}"


@pytest.mark.parametrize("name", ["default", "random_proj"])
@pytest.mark.parametrize("extra", [("--chunk", "1"), ("--chunk", "4", "--workers", "2"), ("--chunk", "7")])
def test_chunking_and_workers_never_change_a_byte(extra, name):
    """Sentences run in groups of equal length without padding: a record is a function of its line alone."""
    assert run_case(name, *extra) == run_case(name)
