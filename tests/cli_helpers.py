"""Helpers the CLI tests share: run ``ctxembed`` through CliRunner, parse strict JSON, read rich tables."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path

from typer.testing import CliRunner

from ctxembed.cli import app
from tests.conftest import REPO

TOY = str(REPO / "data" / "notes_toy.txt")  # apple [5,2,0], is [0,0,5], phone [0,5,0], the [0,0,6]
RUNNER = CliRunner()


# The conftest gives every test its own cache directory, so the shipped store's principal directions
# (all-but-the-top, ~0.5 s) and the toy vectors' conversion would be recomputed by every CLI call.
# CLI calls share one temporary cache instead; tests about cache states use files of their own.
SHARED_CACHE = Path(tempfile.mkdtemp(prefix="ctxembed-cli-tests-"))
atexit.register(shutil.rmtree, SHARED_CACHE, ignore_errors=True)


def invoke(*args, input: str | bytes | None = None, env: dict | None = None):
    """Run ``ctxembed ARGS``; whatever happens, no traceback and no uncaught exception."""
    env = {"CTXEMBED_CACHE_DIR": str(SHARED_CACHE), **(env or {})}
    result = RUNNER.invoke(app, [str(a) for a in args], input=input, env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    assert "Traceback" not in result.stdout and "Traceback" not in result.stderr
    return result


def succeeds(*args, input: str | bytes | None = None, env: dict | None = None):
    """Exit 0 and nothing on stderr but notes about converting foreign vectors once (and batch's
    summary of its error records)."""
    result = invoke(*args, input=input, env=env)
    assert result.exit_code == 0, result.stderr
    assert all(line.startswith(("converting ", "batch: ")) for line in result.stderr.splitlines()), result.stderr
    return result


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def strict_json(text: str):
    """Parse JSON, failing on NaN, Infinity and -Infinity (which Python's json accepts by default)."""
    return json.loads(text, parse_constant=_reject_constant)


def run_json(*args, input: str | bytes | None = None, env: dict | None = None) -> dict:
    return strict_json(succeeds(*args, input=input, env=env).stdout)


def json_lines(text: str) -> list[dict]:
    assert text.endswith("\n")
    return [strict_json(line) for line in text.splitlines()]


def fails(code: int, *args, input: str | bytes | None = None, env: dict | None = None) -> str:
    """Exit ``code``, stdout empty, exactly one ``ctxembed: error:`` line on stderr; returns that line."""
    result = invoke(*args, input=input, env=env)
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = [line for line in result.stderr.splitlines() if not line.startswith("converting ")]
    assert len(lines) == 1 and lines[0].startswith("ctxembed: error: "), result.stderr
    return lines[0]


def numbers(rows: list[list[str]]) -> list[list]:
    """Table rows with every cell after the label read as a number."""
    return [[row[0], *map(float, row[1:])] for row in rows]


def table(stdout: str, title: str) -> tuple[list[str], list[list[str]]]:
    """The first rich table printed after a line containing ``title``: (header cells, body rows of cells);
    a header over several lines is joined, cell by cell, with spaces."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if title in line)
    header, rows = [], []
    for line in lines[start + 1 :]:
        if line.startswith("┃"):
            cells = [cell.strip() for cell in line.strip("┃").split("┃")]
            header = [" ".join(filter(None, pair)) for pair in zip(header, cells, strict=True)] if header else cells
        elif line.startswith("│"):
            rows.append([cell.strip() for cell in line.strip("│").split("│")])
        elif line.startswith("└"):
            return header, rows
    raise AssertionError(f"no complete table after {title!r}")


_MEASURE = """
import json, resource, subprocess, sys, time
limit, stdin = int(sys.argv[1]), sys.argv[2]
def cap():  # should a bound regress, fail with MemoryError rather than take the machine
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
start = time.monotonic()
with open(stdin, "rb") as source:
    run = subprocess.run(sys.argv[3:], stdin=source, capture_output=True, preexec_fn=cap)
seconds = time.monotonic() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
peak, cpu = usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime
out, err = (stream.decode("utf-8", "replace") for stream in (run.stdout, run.stderr))
print(json.dumps([run.returncode, peak, seconds, cpu, out, err]))
"""


def measured(*args, stdin: str | Path = "/dev/null", memory_limit: int = 3 << 30, timeout: float = 120):
    """Run ``python -m ctxembed ARGS`` in a process of its own: (exit code, peak resident MB, wall
    seconds, CPU seconds, stdout, stderr). Peak and CPU are the command's alone (its parent starts
    fresh for it); CPU seconds are steadier than wall seconds on a busy machine."""
    import subprocess
    import sys

    command = [sys.executable, "-m", "ctxembed", *map(str, args)]
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(memory_limit), str(stdin), *command],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, "CTXEMBED_CACHE_DIR": str(SHARED_CACHE)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return tuple(json.loads(done.stdout))
