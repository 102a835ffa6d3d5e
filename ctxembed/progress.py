"""Progress for people: a rich bar on stderr, only when stderr is a terminal; nothing otherwise.

- :func:`steps` counts finished steps of a known number (``eval``'s configurations);
- :func:`reading` follows how far a library call has read a file (gensim parsing a vector file),
  from the file offset the operating system reports for it (Linux; elsewhere a spinner);
- :func:`slow` shows a spinner with the elapsed time, only once a step has taken over a second.

Pipes, tests and ``NO_COLOR``-less scripts see none of it: machine output stays on stdout and
stderr only carries the one-line notes.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SLOW_SECONDS = 1.0  # a step shows progress once it has taken this long


def enabled() -> bool:
    """Progress is drawn only on a terminal (stderr), and never when CTXEMBED_NO_PROGRESS is set."""
    return sys.stderr.isatty() and not os.environ.get("CTXEMBED_NO_PROGRESS")


def _progress(*, bar: bool):
    from rich.console import Console
    from rich.progress import BarColumn, Progress, SpinnerColumn, TaskProgressColumn, TextColumn, TimeElapsedColumn

    columns: list[Any] = [SpinnerColumn(), TextColumn("{task.description}")]
    if bar:
        columns += [BarColumn(), TaskProgressColumn()]
    columns.append(TimeElapsedColumn())
    return Progress(*columns, console=Console(file=sys.stderr, stderr=True), transient=True)


class Steps:
    """A handle to advance: ``step.done()`` after each of the ``total`` steps."""

    def __init__(self, progress=None, task=None):
        self._progress, self._task = progress, task

    def done(self, description: str | None = None) -> None:
        if self._progress is not None:
            self._progress.update(self._task, advance=1, **({"description": description} if description else {}))

    def describe(self, description: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=description)


@contextmanager
def steps(description: str, total: int) -> Iterator[Steps]:
    """A bar of ``total`` steps; the body calls ``.done()`` after each."""
    if not enabled():
        yield Steps()
        return
    with _progress(bar=True) as progress:
        yield Steps(progress, progress.add_task(description, total=total))


@contextmanager
def reading(path: str | os.PathLike, description: str) -> Iterator[None]:
    """A bar of how far the body has read ``path`` (by the offset of its open file descriptor)."""
    if not enabled():
        yield
        return
    path = Path(path).resolve()
    total = path.stat().st_size
    with _progress(bar=True) as progress:
        task = progress.add_task(description, total=total or None)
        stop = threading.Event()

        def follow() -> None:
            while not stop.wait(0.1):
                offset = _read_offset(path)
                if offset is not None:
                    progress.update(task, completed=min(offset, total))

        watcher = threading.Thread(target=follow, daemon=True)
        watcher.start()
        try:
            yield
        finally:
            stop.set()
            watcher.join()


def _read_offset(path: Path) -> int | None:
    """The offset of this process's open descriptor on ``path`` (Linux /proc), or None."""
    try:
        for fd in os.listdir("/proc/self/fd"):
            try:
                if os.readlink(f"/proc/self/fd/{fd}") == str(path):
                    with open(f"/proc/self/fdinfo/{fd}") as info:
                        return int(info.readline().split()[1])  # "pos:\t12345"
            except (OSError, ValueError, IndexError):
                continue
    except OSError:
        return None
    return None


@contextmanager
def slow(description: str) -> Iterator[None]:
    """A spinner with the elapsed time, shown only if the body runs longer than a second."""
    if not enabled():
        yield
        return
    progress = _progress(bar=False)
    timer = threading.Timer(SLOW_SECONDS, lambda: (progress.start(), progress.add_task(description, total=None)))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        timer.join()
        progress.stop()
