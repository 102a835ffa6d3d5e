"""``ctxembed batch``: sentences in, one JSON line out per input line, in order, in bounded memory.

Input lines are plain sentences, or JSON objects (a line starting with ``{``) with a ``text``
field and an optional ``id`` that is echoed back. A line that cannot be used (bad UTF-8,
broken JSON, no text, empty, no known word, too long) becomes ``{"line": k, "error": "..."}``:
no line is ever dropped. Lines are numbered from 1.

Guarantees of this driver (tests/test_batch_driver.py pins each one):

- **Bounded input.** Lines are read in pieces of 64 KiB; a line longer than
  :func:`line_limit` bytes is never held whole: it becomes an error record as soon as it passes
  the limit and the rest of it is skipped. A chunk also stops growing at 1 MiB of input.
- **Streaming.** A chunk is handed on when it is full, or as soon as the input has nothing more
  to give right now (a slow producer's line is answered within ~50 ms); each chunk's records are
  written, unbuffered, as soon as they and all earlier ones are ready.
- **Workers.** Processes are forked by hand (not multiprocessing.Pool, whose parent waits forever
  on dead workers): one chunk at a time each, over pipes. Workers ignore SIGINT, die silently on
  SIGTERM, and exit when the parent goes away. A worker that dies has its chunk redone once by a
  fresh worker, then reported line by line. An exception inside a chunk redoes it line by line,
  and a line that still fails becomes an ``internal error`` record.
- **Signals.** SIGINT and SIGTERM stop the batch at once: the workers are killed (SIGKILL, then
  reaped), and the output ends at a record boundary (signals wait while a block is written).
- **Writing behind.** A file at ``--out`` is written in a thread of its own, one block behind the
  loop that feeds the workers, so they never wait while a Parquet row group is encoded; a write's
  error ends the run as if the loop had met it, and no file is left at ``--out``.
- **Full disk.** ENOSPC becomes a DataError, and a partly written block is cut back to its last
  complete line, so the output ends at a line boundary.
"""

from __future__ import annotations

import bisect
import errno
import itertools
import operator
import os
import select
import signal
import sys
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ctxembed.batch.pool import WorkerPool, write_all
from ctxembed.batch.records import Encoded, LongLine, Tally, encoded_records, error_record
from ctxembed.batch.size import note_weights_size
from ctxembed.budget import BUDGET, line_weights
from ctxembed.engine import ContextEngine, split_word
from ctxembed.engine.contract import WORDPIECES
from ctxembed.errors import CtxembedError, DataError
from ctxembed.options import default
from ctxembed.output import say
from ctxembed.progress import Lines, enabled
from ctxembed.vectors.corpus import not_text, open_file

SCHEMA = "ctxembed.batch/1"
# From this many input lines on, a lookup table of the whole vocabulary (~10 ms for 400k words)
# beats a binary search per token lookup (~10 µs each); see VectorStore.prepare_bulk.
_INDEX_AFTER_LINES = 512
_READ_BYTES = 1 << 16  # one read from the input
# Lines per chunk for --format parquet, npz and projector: a chunk is a Parquet row group, and its
# sentences run in groups of one length, so 4x more lines make groups about 4x larger (Brown lines spread
# over ~60 lengths a chunk) and the per-group NumPy calls cost less a line: 20-30% less worker CPU time
# for --no-weights --word on Brown lines than 1024 (one process, loaded machine). Records do not depend
# on the chunk (a sentence's numbers are its own: see columns.arrays); JSON lines keep 1024, which
# bounds the encoded text a worker holds with weights.
COLUMNAR_CHUNK = 4096
_CHUNK_BYTES = 1 << 20  # a chunk stops growing here, whatever its line count: its sentences' tokens,
# records and groups are what a process holds (500-token lines, 4 heads, 4 layers: ~245 MB at 1 MiB, ~380 at 8)
_IDLE_SECONDS = 0.05  # input silent this long: hand on the lines read so far
_BYTES_PER_TOKEN = 1024  # line limit = this x --max-tokens (at least _MIN_LINE_BYTES)
_MIN_LINE_BYTES = 64 << 10


_RAW = operator.itemgetter(1)  # (number, raw) -> raw
# the weights a chunk's lines may keep, by line_cost's bound (a piece a byte): 512 MB of float32 at worst, about a
# quarter of it for English (four bytes a piece), and every line of the largest sentence's weights
CHUNK_COST = 8 * BUDGET.weights


def line_limit(max_tokens: int) -> int:
    """The longest input line read, in bytes: generous for any sentence --max-tokens allows
    (1 KiB a token), small enough that a runaway line costs no memory or time."""
    return max(_MIN_LINE_BYTES, _BYTES_PER_TOKEN * max_tokens)


# ------------------------------------------------------------------------------ reading
class LineSource:
    """Numbered input lines, read in bounded pieces, cut into chunks that never wait on a slow producer.

    ``stream`` is a binary file object; with a real file descriptor, idle input is detected
    with select() so that the lines read so far are handed on instead of waiting for a full chunk.
    """

    def __init__(
        self,
        stream,
        limit: int,
        *,
        name: str | None = None,
        total_bytes: int | None = None,
        line_cost: Callable[[int], int] | None = None,
    ):
        self.stream = stream
        self.limit = limit
        # a line's bytes -> the most its run may keep (a trained model's weights): a chunk stops before
        # their sum passes CHUNK_COST, so what a chunk holds until it is written stays bounded
        self.line_cost = line_cost
        self.name = name  # given: the first block is checked to be text (not_text), and the input named
        self.total_bytes = total_bytes  # a file's size (None for a pipe): how much is left, for share()
        self.taken_bytes = self.taken_lines = 0  # handed out in chunks so far
        try:
            self.fd: int | None = stream.fileno()
        except (AttributeError, OSError, ValueError):
            self.fd = None
        self.buffer = bytearray()
        self.number = 0  # lines numbered so far
        self.skipping = False  # inside a line already refused as too long
        self.eof = False
        self.lines: deque = deque()  # complete lines waiting: (number, bytes | LongLine)
        self.pending_bytes = 0

    def _read(self) -> None:
        """One read; completes lines into self.lines (each with its newline, as read)."""
        if self.fd is not None:
            try:
                data = os.read(self.fd, _READ_BYTES)
            except OSError as exc:
                raise DataError(f"cannot read the input ({exc.strerror})") from None
        else:
            data = self.stream.read(_READ_BYTES)
        if self.name is not None and self.number == 0 and not self.buffer and not self.skipping:
            if (problem := not_text(data)) is not None:  # the first block: refused whole, one line
                raise DataError(f"{self.name}: {problem}")
        if not data:
            self.eof = True
            if self.buffer and not self.skipping:
                self._add(bytes(self.buffer))
            self.buffer.clear()
            return
        start = self._whole_lines(data) if not self.skipping else 0
        while start < len(data):
            newline = data.find(b"\n", start)
            end = len(data) if newline < 0 else newline + 1
            if not self.skipping:
                self.buffer += data[start:end]
                if len(self.buffer) > self.limit:
                    # refuse now; the rest of the line is read and dropped, never kept
                    self.number += 1
                    self.lines.append((self.number, LongLine(self.limit)))
                    self.pending_bytes += len(self.lines[-1][1])  # 1: a refused line counts as a byte
                    self.buffer.clear()
                    self.skipping = newline < 0
                elif newline >= 0:
                    self._add(bytes(self.buffer))
                    self.buffer.clear()
            elif newline >= 0:
                self.skipping = False
            start = end

    def _whole_lines(self, data: bytes) -> int:
        """The usual case, in a few calls over the whole read instead of a step per line: every
        complete line of ``data`` (after what the buffer holds) within the limit. Returns where the
        rest starts (0: nothing taken, the line by line loop does it all)."""
        last = data.rfind(b"\n")
        if last < 0:
            return 0
        head = data[: last + 1]
        if self.buffer:
            head = bytes(self.buffer) + head
        if head.count(b"\r") != head.count(b"\r\n"):  # a lone CR: splitlines() would split there too
            return 0
        lines = head.splitlines(keepends=True)  # = split at each newline, newline kept
        if max(map(len, lines)) > self.limit:
            return 0
        self.buffer.clear()
        first = self.number + 1
        self.number += len(lines)
        self.lines.extend(zip(range(first, self.number + 1), lines, strict=True))
        self.pending_bytes += len(head)
        return last + 1

    def _add(self, raw: bytes) -> None:
        self.number += 1
        self.lines.append((self.number, raw))
        self.pending_bytes += len(raw)

    def input_waiting(self, timeout: float) -> bool:
        """True when a read would not block (always for files and streams without a descriptor)."""
        if self.fd is None or self.eof:
            return True
        try:
            ready, _, _ = select.select([self.fd], [], [], timeout)
        except (OSError, ValueError):  # not selectable (e.g. some special files): plain reads
            return True
        return bool(ready)

    def next_chunk(self, size: int, *, wait: bool = True) -> list | None:
        """The next chunk, or None at the end of input (or, with ``wait=False``, when none is ready).

        A chunk is full at ``size`` lines or _CHUNK_BYTES; a partial chunk is handed on when the
        input has been idle for _IDLE_SECONDS, or at its end."""
        while True:
            if len(self.lines) >= size or self.pending_bytes >= _CHUNK_BYTES or (self.eof and self.lines):
                return self._take(size)
            if self.eof:
                return None
            if self.lines:
                if not self.input_waiting(_IDLE_SECONDS):
                    return self._take(size)
            elif not wait and not self.input_waiting(0):
                return None
            self._read()

    def _take(self, size: int) -> list:
        """Up to ``size`` lines, and no more once _CHUNK_BYTES have been taken."""
        chunk = list(itertools.islice(self.lines, size))
        ends = list(itertools.accumulate(map(len, map(_RAW, chunk))))  # bytes up to each line's end
        count = min(len(chunk), bisect.bisect_left(ends, _CHUNK_BYTES) + 1)  # lines begun under the cap
        if self.line_cost is not None and count:
            costs = list(itertools.accumulate(self.line_cost(len(_RAW(line))) for line in chunk[:count]))
            count = min(count, bisect.bisect_right(costs, CHUNK_COST) or 1)  # at least one line
        del chunk[count:]
        for _ in range(count):
            self.lines.popleft()
        self.pending_bytes -= ends[count - 1] if count else 0
        self.taken_bytes += ends[count - 1] if count else 0
        self.taken_lines += count
        return chunk

    def share(self, size: int, workers: int) -> int:
        """Lines for the next chunk among ``workers``: ``size``, but near the end of a file (its size known)
        a share of the lines left, 1 / (2 x workers) of them and at least size / 16 (guided scheduling).
        With equal chunks to the end, the worker given the last full one runs it alone while the others
        wait: on 30,000 Brown lines in chunks of 4,096, one worker's last 0.7 chunk. Lines left are
        reckoned from the bytes left at the mean length of the lines taken so far."""
        if self.total_bytes is None or not self.taken_bytes:
            return size
        left = (self.total_bytes - self.taken_bytes) * self.taken_lines / self.taken_bytes  # lines, roughly
        return max(1, size // 16, min(size, int(left / (2 * workers))))


# ------------------------------------------------------------------------------ writing
class Output:
    """Whole blocks of records to stdout: unbuffered, never cut mid-line by a signal or a full disk."""

    def __init__(self):
        stream = sys.stdout
        stream.flush()
        try:
            self.fd: int | None = stream.fileno()
        except (AttributeError, OSError, ValueError):
            self.fd = None  # e.g. a test runner's captured stdout
        self.stream = stream

    def close(self, complete: bool) -> None:
        """Nothing to finish: each block was written whole as it came."""

    def write(self, parts: list[bytes]) -> None:
        """One block of records, given as the pieces it is made of (see records.Encoded)."""
        if not any(parts):
            return
        if self.fd is None:
            target = getattr(self.stream, "buffer", None)
            for part in parts:
                if target is not None:
                    target.write(part)
                else:
                    self.stream.write(bytes(part).decode())
            self.stream.flush()
            return
        with _signals_deferred():
            self._write_all(parts)

    def _write_all(self, parts: list[bytes]) -> None:
        start = self._position()
        try:
            write_all(self.fd, parts)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                self._cut_to_line(start, b"".join(parts), getattr(exc, "written", 0))
                raise DataError(f"cannot write the output: {exc.strerror}") from None
            raise

    def _position(self) -> int | None:
        try:
            import fcntl  # POSIX only: imported where it is used, so the module imports everywhere

            if fcntl.fcntl(self.fd, fcntl.F_GETFL) & os.O_APPEND:
                return os.fstat(self.fd).st_size
            return os.lseek(self.fd, 0, os.SEEK_CUR)
        except (OSError, ImportError):
            return None  # a pipe or a terminal: a full disk cannot happen there

    def _cut_to_line(self, start: int | None, block: bytes, done: int) -> None:
        """After a partial write, drop the incomplete last line (truncating frees space, never needs it)."""
        if start is None or done == 0:
            return
        keep = block.rfind(b"\n", 0, done) + 1  # bytes of complete lines written
        try:
            os.ftruncate(self.fd, start + keep)
            os.lseek(self.fd, start + keep, os.SEEK_SET)
        except OSError:
            pass


@contextmanager
def _signals_deferred():
    """Hold SIGINT and SIGTERM while a block is written, so a record is never cut in half; a
    signal that arrives meanwhile is delivered (and raises) right after."""
    mask = {signal.SIGINT, signal.SIGTERM}
    try:
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, mask)
    except (AttributeError, ValueError, OSError):  # no sigmask here (not Unix, not the main thread)
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


# ------------------------------------------------------------------------------ the driver
def run_batch(
    engine: ContextEngine,
    source: str,
    *,
    with_vectors: bool = default("with_vectors"),
    weights: bool = True,
    word: str | None = default("word"),
    chunk: int | None = default("chunk", "batch"),
    workers: int = default("workers"),
    fmt: str = default("output_format"),
    out: str | None = default("out"),
    digits: int | None = default("digits"),
) -> int:
    """Stream ``source`` (a path or "-") to stdout, or to ``out`` in ``fmt`` (see
    :mod:`ctxembed.batch.columnar`); return the number of lines read. ``chunk`` lines go to a worker
    at a time: unset, the table's default for JSON lines and COLUMNAR_CHUNK for the columnar formats."""
    if chunk is None:
        chunk = default("chunk") if fmt == "jsonl" else COLUMNAR_CHUNK
    if word is not None:
        split_word(word)  # a malformed --word is one usage error now, not an error record per line
    options = {"with_vectors": with_vectors, "weights": weights, "word": word, "digits": digits, "format": fmt}
    if fmt != "jsonl" or out:
        from ctxembed.batch.columnar import check_format  # the columnar formats only

        check_format(fmt, out, word)
    if source == "-":
        if sys.stdin is None:  # started with stdin closed (<&-)
            raise DataError("stdin is closed: give a file of sentences, or pipe them in")
        stream, total_bytes = sys.stdin.buffer if hasattr(sys.stdin, "buffer") else sys.stdin, None
    else:
        stream = open_file(source, "a file of sentences")  # closed below
        total_bytes = os.fstat(stream.fileno()).st_size
    if weights:  # a note before a run that would write a lot of weights (a 6 x 12 model's, say)
        note_weights_size(engine, None if source == "-" else source, total_bytes, fmt, digits)
    name = "stdin" if source == "-" else source
    # a trained model keeps each line's weights over its pieces (at most one piece a byte) until its chunk is written
    cost = line_weights(engine.card) if weights and engine.card.units == WORDPIECES else None
    lines = LineSource(stream, line_limit(engine.max_tokens), name=name, total_bytes=total_bytes, line_cost=cost)
    progress = Lines(total_bytes) if enabled() else None
    written = 0  # counted for the progress bar alone: one record per input line, so at the end it is lines.number
    errors = lacking = 0
    complete = False
    sink = None
    try:
        sink = _sink(engine, options, out)  # in the try: a signal right after it still removes its file
        for block in _results(engine, lines, options, chunk, workers):
            sink.write(block.parts)
            errors += block.errors  # counted where the records were made: the output is never scanned
            lacking += block.lacking
            if progress:
                written += block.lines
                progress.advance(written, stream)
        complete = True
    finally:
        if sink is not None:
            sink.close(complete)  # a file at --out only once every line is in it
        if progress:
            progress.stop()
        if source != "-":
            stream.close()
    _summary(lines.number, errors, lacking, word, fmt)
    return lines.number


def _sink(engine: ContextEngine, options: dict, out: str | None):
    """Where the blocks go: stdout (JSON Lines), or a file at ``out`` made whole at the end, written
    behind the pool (see WriteBehind)."""
    if options["format"] == "jsonl" and out is None:
        return Output()
    from ctxembed.batch.columnar import open_sink  # the columnar formats only

    return WriteBehind(lambda: open_sink(options["format"], out, engine, options))


class WriteBehind:
    """A file sink's writes in a thread of their own, one block behind the loop that feeds the workers.

    Writing a chunk's Parquet row group takes the parent tens of milliseconds; written in the parent's
    loop, those were milliseconds in which no worker got its next chunk or could hand in its result
    (measured: --format parquet kept 1.5-1.7 of 2 cores busy). pyarrow and file writes release the GIL, so
    the loop goes on meanwhile. One block at most is being written (memory stays bounded; the pool
    keeps its bytes valid until the next but one is asked for), and the sink is only ever used by one
    thread at a time. A write's error (a full disk) is raised at the next write or at close, which
    waits for the write under way before it finishes or removes the file."""

    def __init__(self, open_sink):
        from concurrent.futures import ThreadPoolExecutor  # file sinks only

        self.thread = ThreadPoolExecutor(1, thread_name_prefix="ctxembed-write")
        self.pending = None  # the write under way (a Future)
        self.sink = open_sink()  # last: the file exists only once the caller holds what removes it

    def write(self, parts: list) -> None:
        self.wait()
        self.pending = self.thread.submit(self.sink.write, parts)

    def wait(self) -> None:
        """Until the write under way is done; its exception, if it failed, is raised here."""
        pending, self.pending = self.pending, None
        if pending is not None:
            pending.result()

    def close(self, complete: bool) -> None:
        try:
            self.wait()
        except BaseException:
            complete = False  # the last block was not written: no file at --out
            raise
        finally:
            self.thread.shutdown(wait=True)
            self.sink.close(complete)


def _summary(lines: int, errors: int, lacking: int, word: str | None, fmt: str = "jsonl") -> None:
    """What a person would miss in the output, on stderr; a run where no line could be used fails. npz
    and projector hold a row per occurrence of --word, so what they miss has no row (no record says so)."""
    rows = fmt in ("npz", "projector")
    if lacking:
        kept = "they have no row" if rows else 'their records have "word": null'
        say(f"batch: {lacking:,} of {lines - errors:,} sentences lack {word!r}: {kept}")
    if errors and errors == lines:
        raise DataError(f'no line could be used: all {lines:,} records are errors (each says why in "error")')
    if errors:
        kept = "they have no row" if rows else 'their records have an "error"'
        say(f"batch: {errors:,} of {lines:,} lines could not be used: {kept}")


def _results(engine: ContextEngine, lines: LineSource, options: dict, size: int, workers: int) -> Iterator[Encoded]:
    """Encoded records of every chunk, in order: in this process until the input proves big
    (a full chunk with more to come), then over worker processes if fork is available."""

    def work(chunk: list) -> Encoded:
        if options.get("format", "jsonl") != "jsonl":
            return columnar_work(engine, chunk, options)
        tally = Tally()
        lines = safe_records(engine, chunk, options, make=tally.records, error=tally.error)
        return Encoded(lines, len(lines), tally.errors, tally.lacking)

    indexed = False
    while (block := lines.next_chunk(size)) is not None:
        full = len(block) >= size or lines.pending_bytes > 0 or bool(lines.lines)
        if not indexed and (len(block) >= _INDEX_AFTER_LINES or (full and not lines.eof)):
            prepare_bulk(engine)  # before any fork, so the workers share its lookup table
            indexed = True
        count = workers or (usable_cores() if full and not lines.eof else 1)
        if count > 1 and hasattr(os, "fork"):
            pool = WorkerPool(work, count, lost=_lost_maker(engine, options), start=_worker_start(options))
            yield from pool.run(block, lines, size)
            return
        yield work(block)


def prepare_bulk(engine: ContextEngine) -> None:
    """Ready the engine for many sentences: the word table's bulk lookups, built once (in the parent
    before any fork, so every worker shares it). An engine without batch's column kernel has none."""
    if engine.columns is not None:
        engine.columns.lexicon.prepare_bulk()


_CPU_LIMITS = (  # (file, how to read it): a container's CPU quota, cgroup v2 then v1
    ("/sys/fs/cgroup/cpu.max", lambda text: text.split()[:2]),
    ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", lambda text: [text.strip(), _read("/sys/fs/cgroup/cpu/cpu.cfs_period_us")]),
)


def usable_cores() -> int:
    """Cores this process may run on: its CPU affinity (taskset, cpusets), capped by a container's
    CPU quota (docker --cpus, Kubernetes limits) rounded up; at least 1. What --workers 0 starts
    for big input: one worker per core, as many as the machine lets this process use."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    for path, parse in _CPU_LIMITS:
        text = _read(path)
        if text is None:
            continue
        try:
            quota, period = parse(text)
            if quota not in ("max", "-1"):
                cores = min(cores, -(-int(quota) // int(period)))  # a quota of 1.5 cores: 2 workers
        except (ValueError, TypeError, ZeroDivisionError):
            pass  # unreadable: no quota
        break
    return max(1, cores)


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as fh:
            return fh.read()
    except (OSError, ValueError):
        return None


def safe_process(engine: ContextEngine, block: list, options: dict) -> bytes:
    """The output lines of ``block``, joined: what batch writes for it."""
    return b"".join(safe_records(engine, block, options))


def safe_records(engine: ContextEngine, block: list, options: dict, *, make=None, error=error_record) -> list:
    """encoded_records (or ``make``'s records), but an unexpected exception (or running out of memory)
    redoes the chunk line by line, and a line that still fails becomes ``error(line, message)``: one bad
    line never costs the others."""
    try:
        return (make or encoded_records)(engine, block, options)
    except (Exception, MemoryError):  # noqa: BLE001 - a bug or a memory shortage must not lose the chunk
        if len(block) == 1:
            number, _ = block[0]
            exc = sys.exc_info()[1]
            label = engine.label
            if isinstance(exc, CtxembedError):  # e.g. NaN at some stage: a known failure, said plainly
                return [error(number, exc.render(label))]
            if isinstance(exc, MemoryError):
                fewer = f"{label('layers')}/{label('heads')} or {label('max_tokens')}"
                message = f"out of memory for this line (try fewer {fewer})"
                return [error(number, message)]
            return [error(number, f"internal error: {type(exc).__name__}: {exc}")]
        return [line for item in block for line in safe_records(engine, [item], options, make=make, error=error)]


def columnar_work(engine: ContextEngine, block: list, options: dict) -> Encoded:
    """A chunk as the columns of ``options["format"]`` (see :mod:`ctxembed.batch.columnar`)."""
    from ctxembed.batch.columnar import column_block  # the columnar formats only

    return column_block(engine, chunk_table(engine, block, options), options)


def chunk_table(engine: ContextEngine, block: list, options: dict):
    """A chunk's :class:`ctxembed.batch.column_chunk.ChunkColumns`, built from the group arrays; an
    engine without batch's columns, or an unexpected exception, takes the records' path, where
    :func:`safe_records` redoes the chunk line by line: one bad line never costs the others."""
    from ctxembed.batch.column_chunk import chunk_columns, from_records  # the columnar formats only
    from ctxembed.batch.columnar import error_dict, record_dicts

    try:
        table = chunk_columns(engine, block, options, lists=options.get("format") == "parquet")
    except (Exception, MemoryError):  # noqa: BLE001 - redone below, line by line where it fails
        table = None
    if table is not None:
        return table
    records = safe_records(engine, block, options, make=record_dicts, error=error_dict)
    return from_records(records, options, engine)


def _worker_start(options: dict):
    """What a worker does once forked: for the columnar formats, allocators that hand back what a
    chunk freed (see columnar.lean_memory); JSON lines need nothing."""
    if options.get("format", "jsonl") == "jsonl":
        return None
    from ctxembed.batch.columnar import lean_memory  # the columnar formats only

    return lean_memory


def _lost_maker(engine: ContextEngine, options: dict):
    """What a chunk whose worker died twice becomes: its lines as error records, in the run's format."""
    if options.get("format", "jsonl") == "jsonl":
        return None

    def lost(block: list, reason: str) -> Encoded:
        from ctxembed.batch.column_chunk import from_records  # the columnar formats only
        from ctxembed.batch.columnar import column_block, lost_block

        return column_block(engine, from_records(lost_block(block, reason), options, engine), options)

    return lost
