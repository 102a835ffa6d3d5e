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
- **Full disk.** ENOSPC becomes a DataError, and a partly written block is cut back to its last
  complete line, so the output ends at a line boundary.
"""

from __future__ import annotations

import bisect
import errno
import gc
import itertools
import operator
import os
import pickle
import select
import signal
import sys
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager

from ctxembed.batch.records import LongLine, error_record, process_chunk
from ctxembed.engine import Engine
from ctxembed.errors import CtxembedError, DataError
from ctxembed.vectors.corpus import open_file

SCHEMA = "ctxembed.batch/1"
# From this many input lines on, one word -> row dict of the vocabulary (built in ~50 ms for 200k
# words) beats a binary search per token lookup (~10 µs each); see Engine.bulk_if_affordable.
_INDEX_AFTER_LINES = 512
_READ_BYTES = 1 << 16  # one read from the input
_CHUNK_BYTES = 1 << 20  # a chunk stops growing here, whatever its line count: its sentences' tokens,
# records and groups are what a process holds (500-token lines, 4 heads, 4 layers: ~245 MB at 1 MiB, ~380 at 8)
_IDLE_SECONDS = 0.05  # input silent this long: hand on the lines read so far
_BYTES_PER_TOKEN = 1024  # line limit = this x --max-tokens (at least _MIN_LINE_BYTES)
_MIN_LINE_BYTES = 64 << 10


_RAW = operator.itemgetter(1)  # (number, raw) -> raw


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

    def __init__(self, stream, limit: int):
        self.stream = stream
        self.limit = limit
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
        del chunk[count:]
        for _ in range(count):
            self.lines.popleft()
        self.pending_bytes -= ends[count - 1] if count else 0
        return chunk


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

    def write(self, block: bytes) -> None:
        if not block:
            return
        if self.fd is None:
            target = getattr(self.stream, "buffer", None)
            if target is not None:
                target.write(block)
            else:
                self.stream.write(block.decode())
            self.stream.flush()
            return
        with _signals_deferred():
            self._write_all(block)

    def _write_all(self, block: bytes) -> None:
        view, done = memoryview(block), 0
        start = self._position()
        while done < len(view):
            try:
                done += os.write(self.fd, view[done:])
            except OSError as exc:
                if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                    self._cut_to_line(start, block, done)
                    raise DataError(f"cannot write the output: {exc.strerror}") from None
                raise

    def _position(self) -> int | None:
        try:
            import fcntl

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
        if sys.stdin is None:  # started with stdin closed (<&-)
            raise DataError("stdin is closed: give a file of sentences, or pipe them in")
        stream, total_bytes = sys.stdin.buffer if hasattr(sys.stdin, "buffer") else sys.stdin, None
    else:
        stream = open_file(source, "a file of sentences")  # closed below
        total_bytes = os.fstat(stream.fileno()).st_size
    lines = LineSource(stream, line_limit(engine.max_tokens))
    out = Output()
    progress = _Progress(total_bytes) if sys.stderr.isatty() else None
    written = 0  # counted for the progress bar alone: one record per input line, so at the end it is lines.number
    try:
        for block in _results(engine, lines, options, chunk, workers):
            out.write(block)
            if progress:
                written += block.count(b"\n")
                progress.advance(written, stream)
    finally:
        if progress:
            progress.stop()
        if source != "-":
            stream.close()
    return lines.number


def _results(engine: Engine, lines: LineSource, options: dict, size: int, workers: int) -> Iterator[bytes]:
    """Encoded records of every chunk, in order: in this process until the input proves big
    (a full chunk with more to come), then over worker processes if fork is available."""
    indexed = False
    while (block := lines.next_chunk(size)) is not None:
        full = len(block) >= size or lines.pending_bytes > 0 or bool(lines.lines)
        if not indexed and (len(block) >= _INDEX_AFTER_LINES or (full and not lines.eof)):
            engine.bulk_if_affordable()  # before any fork, so the workers share the dict
            indexed = True
        count = workers or (usable_cores() if full and not lines.eof else 1)
        if count > 1 and hasattr(os, "fork"):
            yield from _WorkerPool(engine, options, count).run(block, lines, size)
            return
        yield safe_process(engine, block, options)


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


def safe_process(engine: Engine, block: list, options: dict) -> bytes:
    """process_chunk, but an unexpected exception (or running out of memory) redoes the chunk line
    by line, and a line that still fails becomes an error record: one bad line never costs the others."""
    try:
        return process_chunk(engine, block, options)
    except (Exception, MemoryError):  # noqa: BLE001 - a bug or a memory shortage must not lose the chunk
        if len(block) == 1:
            number, _ = block[0]
            exc = sys.exc_info()[1]
            if isinstance(exc, CtxembedError):  # e.g. NaN at some stage: a known failure, said plainly
                return error_record(number, exc.message)
            if isinstance(exc, MemoryError):
                return error_record(number, "out of memory for this line (try fewer --layers/--heads or --max-tokens)")
            return error_record(number, f"internal error: {type(exc).__name__}: {exc}")
        return b"".join(safe_process(engine, [item], options) for item in block)


class _Worker:
    def __init__(self, pid: int, tasks: int, results: int):
        self.pid, self.tasks, self.results = pid, tasks, results
        self.job: tuple[int, list, int] | None = None  # (sequence number, chunk, attempt)
        self.head = b""  # the result's 8-byte length, as it arrives
        self.body: bytearray | None = None  # the result, allocated once its length is known
        self.got = 0  # bytes of body received


class _WorkerPool:
    """Forked workers fed one chunk at a time over pipes; the parent never blocks on a dead one."""

    def __init__(self, engine: Engine, options: dict, count: int):
        self.engine, self.options, self.count = engine, options, count
        self.workers: list[_Worker] = []
        self.done: dict[int, bytes] = {}
        self.queue: list[tuple[int, list, int]] = []  # chunks to (re)send: (seq, chunk, attempt)

    def run(self, first: list, lines: LineSource, size: int) -> Iterator[bytes]:
        # Frozen objects are skipped by the workers' garbage collector, so the workers neither spend
        # time on what they inherit nor copy its pages (~7% of a 20,000-line run).
        gc.freeze()
        try:
            for _ in range(self.count):
                self._spawn()
        finally:
            gc.unfreeze()
        try:
            yield from self._loop(first, lines, size)
        finally:
            self._stop()

    def _loop(self, first: list, lines: LineSource, size: int) -> Iterator[bytes]:
        self.queue.append((0, first, 1))
        sent, next_out = 1, 0  # sequence numbers handed out, and the next one to write
        while True:
            for worker in self.workers:
                if worker.job is None and self.queue:
                    self._send(worker, self.queue.pop(0))
            while next_out in self.done:
                yield self.done.pop(next_out)
                next_out += 1
            idle = any(worker.job is None for worker in self.workers)
            busy = any(worker.job is not None for worker in self.workers)
            if lines.eof and not lines.lines and not busy and not self.queue:
                return
            # read on only while a worker is free and little is waiting to be written: no look-ahead
            more = lines.lines or not lines.eof
            want_input = idle and more and not self.queue and len(self.done) < 2 * self.count
            if want_input:
                block = lines.next_chunk(size, wait=False)
                if block is not None:
                    self.queue.append((sent, block, 1))
                    sent += 1
                    continue
            self._wait(want_input and not lines.eof and lines.fd is not None, lines)

    def _wait(self, with_input: bool, lines: LineSource) -> None:
        busy = [w for w in self.workers if w.job is not None]
        fds = [w.results for w in busy] + ([lines.fd] if with_input else [])
        if not fds:
            return
        ready, _, _ = select.select(fds, [], [], 1.0)
        for worker in busy:
            if worker.results in ready:
                self._receive(worker)

    def _spawn(self) -> None:
        task_read, task_write = os.pipe()
        result_read, result_write = os.pipe()
        _widen(task_write)
        _widen(result_read)
        pid = os.fork()
        if pid == 0:  # the worker: never returns into the parent's code
            code = 0
            try:
                os.close(task_write)
                os.close(result_read)
                for other in self.workers:  # the other workers' pipe ends: EOF must reach them
                    os.close(other.tasks)
                    os.close(other.results)
                _serve(self.engine, self.options, task_read, result_write)
            except BaseException:  # noqa: BLE001 - a worker never prints a traceback
                code = 1
            finally:
                os._exit(code)
        os.close(task_read)
        os.close(result_write)
        self.workers.append(_Worker(pid, task_write, result_read))

    def _send(self, worker: _Worker, job: tuple[int, list, int]) -> None:
        worker.job = job
        worker.head, worker.body, worker.got = b"", None, 0
        payload = pickle.dumps(job[1], protocol=pickle.HIGHEST_PROTOCOL)
        try:
            _write_frame(worker.tasks, payload)
        except OSError:  # it died before reading: _receive sees the EOF and redoes the job
            pass

    def _receive(self, worker: _Worker) -> None:
        """Read what a worker has sent: its result's length, then the result straight into one buffer."""
        if worker.body is None:
            data = os.read(worker.results, 8 - len(worker.head))
            if not data:
                self._lost(worker)
                return
            worker.head += data
            if len(worker.head) < 8:
                return
            worker.body = bytearray(int.from_bytes(worker.head, "little"))
        if worker.got < len(worker.body):
            received = os.readv(worker.results, [memoryview(worker.body)[worker.got :]])
            if not received:
                self._lost(worker)
                return
            worker.got += received
        if worker.got == len(worker.body):
            self.done[worker.job[0]] = worker.body
            worker.head, worker.body, worker.got = b"", None, 0
            worker.job = None

    def _lost(self, worker: _Worker) -> None:
        """A worker died: reap it, start another, redo its chunk once, then report it line by line."""
        status = _reap(worker.pid)
        self.workers.remove(worker)
        os.close(worker.tasks)
        os.close(worker.results)
        seq, block, attempt = worker.job
        if attempt < 2:
            self.queue.insert(0, (seq, block, attempt + 1))
        else:
            reason = f"the worker process died ({_describe_status(status)}) while processing this line's chunk"
            self.done[seq] = b"".join(error_record(number, reason) for number, _ in block)
        self._spawn()

    def _stop(self) -> None:
        """Close the task pipes (workers exit on EOF); anything still alive after a moment is killed."""
        for worker in self.workers:
            for fd in (worker.tasks, worker.results):
                try:
                    os.close(fd)
                except OSError:
                    pass
        interrupted = sys.exc_info()[0] is not None
        for worker in self.workers:
            if interrupted:
                _kill(worker.pid)
            _reap(worker.pid, patience=0.5)
        self.workers.clear()


def _serve(engine: Engine, options: dict, tasks: int, results: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent decides
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # die silently
    import warnings

    warnings.simplefilter("ignore")
    while True:
        payload = _read_frame(tasks)
        if payload is None:
            return  # the parent closed the pipe (done, or gone)
        block = pickle.loads(payload)
        _write_frame(results, safe_process(engine, block, options))


def _write_frame(fd: int, payload: bytes) -> None:
    """The payload's length (8 bytes), then the payload, without copying it into one buffer first."""
    parts = [memoryview(len(payload).to_bytes(8, "little")), memoryview(payload)]
    while parts:
        done = os.writev(fd, parts)
        while parts and done >= len(parts[0]):
            done -= len(parts[0])
            parts.pop(0)
        if parts:
            parts[0] = parts[0][done:]


_PIPE_BYTES = 1 << 20


def _widen(fd: int) -> None:
    """A 1 MiB pipe instead of Linux's 64 KiB: a chunk's records (~2 MB with weights) cross in a few
    reads, not dozens of wake-ups. Where the system refuses (or is not Linux), the pipe stays as it is."""
    import fcntl

    try:
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ"), _PIPE_BYTES)  # noqa: B009 - Linux only
    except (AttributeError, OSError):
        pass


def _read_frame(fd: int) -> bytes | None:
    head = _read_exactly(fd, 8)
    if head is None:
        return None
    body = _read_exactly(fd, int.from_bytes(head, "little"))
    return body


def _read_exactly(fd: int, n: int) -> bytes | None:
    parts, got = [], 0
    while got < n:
        data = os.read(fd, min(n - got, 1 << 20))
        if not data:
            return None
        parts.append(data)
        got += len(data)
    return b"".join(parts)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _reap(pid: int, patience: float = 0.0) -> int | None:
    """waitpid without ever hanging: wait up to ``patience`` seconds, then SIGKILL and reap."""
    import time

    deadline = time.monotonic() + patience
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return status
        if time.monotonic() >= deadline:
            _kill(pid)
            try:
                return os.waitpid(pid, 0)[1]
            except ChildProcessError:
                return None
        time.sleep(0.01)


def _describe_status(status: int | None) -> str:
    if status is None:
        return "unknown cause"
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return f"killed by {signal.Signals(number).name}"
        except ValueError:
            return f"killed by signal {number}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"


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
