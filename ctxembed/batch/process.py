"""How a ``ctxembed batch`` process starts and ends: the speed work that touches the entry point, kept here.

The command line calls :func:`batch_process` once, before it imports numpy, and runs inside what it
returns. For any other command that is a context that does nothing. For batch:

- OpenBLAS is asked for one thread (``OPENBLAS_NUM_THREADS=1``, unless the user set it) before numpy
  loads it. Batch does its BLAS work in one thread per process (:func:`ctxembed.batch.records.one_blas_thread`),
  so the threads OpenBLAS would start at load only spin idle, on the cores the workers need.
- The process leaves with ``os._exit`` once the command is done, skipping the interpreter's teardown
  (every module's objects freed one by one, after the last record is written). Not when something
  waits for the normal exit: a profiler, a tracer (coverage) or an atexit function.
  tests/test_batch_driver.py (``test_batch_exits_at_once_yet_a_profiler_or_atexit_function_still_runs``)
  pins both sides.

``make bench`` measures what each saves.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys


class _QuickExit:
    """A context whose SystemExit ends the process at once, unless something waits for the normal exit."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, traceback) -> bool:
        if kind is SystemExit and _nothing_waits_for_exit():
            _exit_at_once(exc.code)
        return False  # anything else goes on as raised


def batch_process(argv: list[str]) -> contextlib.AbstractContextManager:
    """For ``ctxembed batch`` (``argv[1]``): one BLAS thread from now on, and a context whose
    ``SystemExit`` ends the process at once; for any other command a context that does nothing.
    Call it before numpy is imported."""
    if argv[1:2] != ["batch"]:
        return contextlib.nullcontext()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # a value the user gave is kept
    return _QuickExit()


def _nothing_waits_for_exit() -> bool:
    """No profiler, tracer (coverage) or atexit function that the normal exit would let finish."""
    pending = getattr(atexit, "_ncallbacks", lambda: 1)()  # CPython's count; elsewhere: assume some
    return sys.getprofile() is None and sys.gettrace() is None and pending == 0


def _exit_at_once(code) -> None:
    """Exit without the interpreter's teardown. Batch registers no atexit work and writes its records
    unbuffered; what Python still buffers is flushed here."""
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)  # what Python does with sys.exit("message")
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # a closed pipe or stream: nothing more to say
            pass
    os._exit(code or 0)
