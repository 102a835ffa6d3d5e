"""Progress for people: a rich bar on stderr, only when stderr is a terminal; nothing otherwise.

- :func:`steps` counts finished steps of a known number (``eval``'s configurations);
- :func:`reading` follows how far a library call has read a file (gensim parsing a vector file),
  from the file offset the operating system reports for it (Linux; elsewhere a spinner);
- :func:`slow` shows a spinner with the elapsed time, only once a step has taken over a second;
- :class:`Training` shows training's steps, loss and speed, and turns Ctrl-C into a clean stop;
- :func:`scanning` follows a corpus scan (``senses``), :class:`Lines` a batch run (``batch``).

Pipes, tests and ``NO_COLOR``-less scripts see none of it: machine output stays on stdout and
stderr only carries the one-line notes.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ctxembed.output import printable

# rich and rich.progress are imported inside, by a bar that is drawn: --json runs and pipes never need them.
SLOW_SECONDS = 1.0  # a step shows progress once it has taken this long


def enabled() -> bool:
    """Progress is drawn only on a terminal (stderr), and never when CTXEMBED_NO_PROGRESS is set."""
    return sys.stderr.isatty() and not os.environ.get("CTXEMBED_NO_PROGRESS")


def _progress(*, bar: bool):
    from rich.console import Console  # rich: only a bar that is drawn needs it
    from rich.progress import BarColumn, Progress, ProgressColumn, SpinnerColumn, TaskProgressColumn, TimeElapsedColumn
    from rich.text import Text

    class Description(ProgressColumn):
        """The task's description as plain text (no markup: a description may quote a file name,
        which must print as it is spelled), with control characters shown as escapes: a file
        named with a terminal escape sequence cannot drive the terminal."""

        def render(self, task) -> Text:
            return Text(printable(task.description))

    columns: list[Any] = [SpinnerColumn(), Description()]
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


class Training:
    """Training's progress: a bar of steps with the loss and speed on a terminal, a line per epoch
    (to ``note`` when there is no bar), and a Ctrl-C that asks the run to stop at the next step
    boundary (a second one aborts at once). ``with Training(total, note) as p: run(on_step=p.on_step,
    on_epoch=p.on_epoch, stop=p.stop)``."""

    def __init__(self, total: int, note: Callable[[str], None], *, unit: str = "tokens"):
        self.total, self.note, self.unit = total, note, unit  # unit: what the speed counts (tokens, pairs)
        self.stopping = False
        self.bar = None
        self.previous_handler = None

    def __enter__(self) -> Training:
        if enabled() and self.total:
            from rich.console import Console  # rich: only a bar that is drawn needs it
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(
                TextColumn("epoch {task.fields[epoch]}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total} steps"),
                TextColumn("loss {task.fields[loss]:.3f}"),
                TextColumn("{task.fields[speed]:,.0f} " + self.unit + "/s"),
                TextColumn("{task.fields[held]}"),  # the last epoch's held-out accuracy, when it has one
                TimeRemainingColumn(),
                console=Console(file=sys.stderr, stderr=True),
                transient=True,
            )
            self.task = self.bar.add_task("train", total=self.total, epoch=1, loss=float("nan"), speed=0.0, held="")
            self.bar.start()
        try:
            self.previous_handler = signal.signal(signal.SIGINT, self._interrupt)
        except ValueError:  # not the main thread (e.g. a test runner): Ctrl-C keeps its usual meaning
            self.previous_handler = None
        return self

    def _interrupt(self, signum, frame):
        if self.stopping:  # a second Ctrl-C: give up at once
            raise KeyboardInterrupt
        self.stopping = True
        self.note("stopping after this step (Ctrl-C again to abort without a checkpoint) ...")

    def stop(self) -> bool:
        return self.stopping

    def on_step(self, info: dict) -> None:
        if self.bar is not None:
            self.bar.update(
                self.task, completed=info["step"], epoch=info["epoch"], loss=info["loss"],
                speed=info[f"{self.unit}_per_second"],
            )  # fmt: skip

    def on_epoch(self, entry: dict) -> None:
        if "held_out_accuracy" in entry:  # a derived model's fine-tuning: accuracies, not a loss
            held = entry["held_out_accuracy"]
            line = f"epoch {entry['epoch']}/{entry['epochs']}: train accuracy {entry['train_accuracy']:.3f}"
            line += (
                ""
                if held is None
                else f", held-out accuracy {held:.3f}" + ("" if entry["best"] else " (not better: stopping)")
            )
            if self.bar is not None and held is not None:
                self.bar.update(self.task, held=f"held-out acc {held:.3f}")
        elif entry["loss"] is None:
            line = f"epoch {entry['epoch']}/{entry['epochs']} done (no held-out sentences)"
        else:
            line = f"epoch {entry['epoch']}/{entry['epochs']}: held-out loss {entry['loss']:.4f}"
            if entry["initial"]:
                line += f" ({entry['loss'] / entry['initial'] - 1:+.1%} from step 0)"
        if self.bar is not None:
            self.bar.console.print(line, highlight=False)
        else:
            self.note(line)

    def __exit__(self, *exc) -> bool:
        if self.bar is not None:
            self.bar.stop()
        if self.previous_handler is not None:
            signal.signal(signal.SIGINT, self.previous_handler)
        return False


@contextmanager
def scanning(source: str | os.PathLike) -> Iterator[Callable[[int], None] | None]:
    """A bar of the characters a corpus scan has read (its size known for a plain file, not for stdin
    or .gz); yields the callback to give the scan, or None when nothing is drawn."""
    if not enabled():
        yield None
        return
    from rich.console import Console  # rich: only a bar that is drawn needs it
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TransferSpeedColumn

    name = str(source)
    total = Path(name).stat().st_size if name != "-" and not name.endswith(".gz") else None
    bar = Progress(
        TextColumn("scanning"), BarColumn(), TransferSpeedColumn(), TimeElapsedColumn(),
        console=Console(file=sys.stderr, stderr=True), transient=True,
    )  # fmt: skip
    task = bar.add_task("scan", total=total)
    with bar:
        yield lambda chars: bar.update(task, completed=chars)


class Lines:
    """Batch's bar: how far the input file has been read (by its offset), and the lines written."""

    def __init__(self, total_bytes: int | None):
        from rich.console import Console  # rich: only a bar that is drawn needs it
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.total = total_bytes
        self.bar = Progress(
            TextColumn("batch"),
            BarColumn(),
            TextColumn("{task.fields[lines]:,} lines"),
            TimeElapsedColumn(),
            console=Console(file=sys.stderr, stderr=True),
            transient=True,
        )
        self.task = self.bar.add_task("batch", total=total_bytes, lines=0)
        self.bar.start()

    def advance(self, lines: int, stream) -> None:
        position = stream.tell() if self.total else None
        self.bar.update(self.task, completed=position, lines=lines)

    def stop(self) -> None:
        self.bar.stop()
