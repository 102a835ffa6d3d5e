"""``ctxembed batch``: sentences in, one JSON line out per input line, in order, in constant memory.

Input lines are plain sentences, or JSON objects (a line starting with ``{``) with a ``text``
field and an optional ``id`` that is echoed back. A line that cannot be used (bad UTF-8,
broken JSON, no text, empty, no known word, too long) becomes ``{"line": k, "error": "..."}``:
no line is ever dropped. Lines are numbered from 1.

Work goes in chunks: each chunk is tokenised, its sentences grouped by length and run through
attention as padded batches, and its records encoded together. With more than one worker the
chunks are spread over processes (forked, so the memory-mapped store is shared) and written
back in input order; at most two chunks per worker are in flight, so memory stays bounded.
"""

from __future__ import annotations

import gc
import itertools
import os
import sys
from collections import deque
from collections.abc import Iterator

from ctxembed.errors import DataError
from ctxembed.explore import Engine
from ctxembed.records import process_chunk

SCHEMA = "ctxembed.batch/1"
_engine: Engine | None = None  # the worker processes' engine, inherited through fork
_options: dict = {}
# From this many input lines on, one word -> row dict of the vocabulary (built in ~50 ms for 200k
# words) beats a binary search per token lookup (~10 µs each); past a million words the dict
# would cost hundreds of MB, so big vocabularies keep the binary search.
_INDEX_AFTER_LINES = 512
_INDEX_MAX_WORDS = 1_000_000


def _worker(chunk: list[tuple[int, bytes]]) -> bytes:
    return process_chunk(_engine, chunk, _options)


def read_chunks(stream, size: int) -> Iterator[list[tuple[int, bytes]]]:
    chunk: list[tuple[int, bytes]] = []
    for number, raw in enumerate(stream, start=1):
        chunk.append((number, raw))
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def run_batch(
    engine: Engine,
    source: str,
    *,
    with_vectors: bool = False,
    weights: bool = True,
    word: str | None = None,
    chunk: int = 1024,
    workers: int = 0,
) -> int:
    """Stream ``source`` (a path or "-") to stdout; return the number of lines written."""
    options = {"with_vectors": with_vectors, "weights": weights, "word": word}
    if source == "-":
        stream, total_bytes = sys.stdin.buffer, None
    else:
        try:
            stream = open(source, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            raise DataError(f"{source}: no such file") from None
        except OSError as exc:
            raise DataError(f"{source}: cannot read ({exc.strerror})") from None
        total_bytes = os.fstat(stream.fileno()).st_size
    out = sys.stdout.buffer if hasattr(sys.stdout, "buffer") else None
    progress = _Progress(total_bytes) if sys.stderr.isatty() else None
    written = 0
    try:
        chunks = read_chunks(stream, chunk)
        for block in _ordered_results(engine, chunks, options, workers):
            if out is not None:
                out.write(block)
            else:
                sys.stdout.write(block.decode())
            written += block.count(b"\n")
            if progress:
                progress.advance(written, stream)
        if out is not None:
            out.flush()
    finally:
        if progress:
            progress.stop()
        if source != "-":
            stream.close()
    return written


def _ordered_results(engine: Engine, chunks: Iterator, options: dict, workers: int) -> Iterator[bytes]:
    first = next(chunks, None)
    if first is None:
        return
    second = next(chunks, None)
    if second is not None or len(first) >= _INDEX_AFTER_LINES:
        _build_vocabulary_index(engine)  # before the fork, so the workers share it
    count = workers or (min(os.cpu_count() or 1, 2) if second is not None else 1)
    # chain, not a tuple: (first, second, *chunks) would read the whole input into memory
    blocks = itertools.chain((first,) if second is None else (first, second), chunks)
    if count <= 1 or "fork" not in _start_methods():
        for block in blocks:
            yield process_chunk(engine, block, options)
        return
    import multiprocessing

    global _engine, _options
    _engine, _options = engine, options
    pending: deque = deque()
    # Frozen objects are skipped by the workers' garbage collector, so the workers neither spend
    # time on what they inherit nor copy its pages (~7% of a 20,000-line run). The parent thaws
    # its own objects as soon as the workers exist.
    gc.freeze()
    try:
        pool = multiprocessing.get_context("fork").Pool(count)
    finally:
        gc.unfreeze()
    with pool:
        for block in blocks:
            pending.append(pool.apply_async(_worker, (block,)))
            if len(pending) >= 2 * count:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()


def _build_vocabulary_index(engine: Engine) -> None:
    """Switch the engine to dict lookups (same rows as the binary search) for the whole run."""
    if len(engine.store) > _INDEX_MAX_WORDS:
        return
    try:
        engine.bulk()
    except DataError:  # a vocabulary that is not valid UTF-8: keep the binary search, which copes
        pass


def _start_methods() -> list[str]:
    import multiprocessing

    return multiprocessing.get_all_start_methods()


class _Progress:
    """A progress bar on stderr (only when stderr is a terminal)."""

    def __init__(self, total_bytes: int | None):
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.total = total_bytes
        self.bar = Progress(
            TextColumn("batch"),
            BarColumn(),
            TextColumn("{task.fields[lines]:,} lines"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self.task = self.bar.add_task("batch", total=total_bytes, lines=0)
        self.bar.start()

    def advance(self, lines: int, stream) -> None:
        position = stream.tell() if self.total else None
        self.bar.update(self.task, completed=position, lines=lines)

    def stop(self) -> None:
        self.bar.stop()
