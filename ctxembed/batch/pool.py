"""The batch worker pool: processes forked by hand (not multiprocessing.Pool, whose parent waits
forever on dead workers), each fed one chunk at a time over a pair of pipes.

A frame on a pipe is the payload's length (8 bytes, little-endian), then the payload: a pickled chunk
to a worker. Back come the records' length and three counts (records, errors, records lacking the
word; 8 bytes each), then the encoded records: the parent adds the counts up and never scans the
records. It reads them straight into one buffer (no pieces to join), and a buffer whose result has been
written serves a later result: the parent's memory is not handed back and faulted in again per chunk. Workers
ignore SIGINT (the parent decides), die silently on SIGTERM and exit when their task pipe closes. A
worker that dies has its chunk redone once by a fresh worker; a second death reports the chunk's
lines as error records.
"""

from __future__ import annotations

import gc
import os
import pickle
import select
import signal
import struct
import sys
import time
import warnings
from collections.abc import Callable, Iterator

from ctxembed.batch.records import Encoded, all_errors, error_record

_RESULT_HEAD = struct.Struct("<4Q")  # a result frame's head: the records' length, then Encoded's three counts


class _Worker:
    def __init__(self, pid: int, tasks: int, results: int):
        self.pid, self.tasks, self.results = pid, tasks, results
        self.job: tuple[int, list, int] | None = None  # (sequence number, chunk, attempt)
        self.head = b""  # the result's head (length and counts), as it arrives
        self.body: memoryview | None = None  # the result's bytes, read into a buffer once their length is known
        self.got = 0  # bytes of the result received so far


class WorkerPool:
    """``count`` forked workers, each applying ``work`` to one chunk at a time (a list of (line number,
    line) pairs in, encoded records out) over pipes; the parent never blocks on a dead one."""

    def __init__(
        self,
        work: Callable[[list], Encoded],
        count: int,
        lost: Callable[[list, str], Encoded] | None = None,
        start: Callable[[], None] | None = None,
    ):
        self.work, self.count = work, count
        self.start = start  # run in each worker once it is forked, before its first chunk
        # a chunk whose worker died twice -> its lines as error records (default: JSON lines)
        self.lost = lost or (lambda block, reason: all_errors([error_record(number, reason) for number, _ in block]))
        self.workers: list[_Worker] = []
        self.done: dict[int, Encoded] = {}
        self.queue: list[tuple[int, list, int]] = []  # chunks to (re)send: (seq, chunk, attempt)
        self.retired: list[int] = []  # workers let go at the end of the input, to reap
        self.spare: list[bytearray] = []  # buffers of results already written, to read later ones into
        self.lent: dict[int, bytearray] = {}  # id of a result's view -> the buffer under it
        self.largest = 0  # bytes of the largest result so far

    def run(self, first: list, lines, size: int) -> Iterator[Encoded]:
        """The results of ``first`` and of every later chunk of ``size`` lines ``lines`` (a
        :class:`ctxembed.batch.driver.LineSource`) gives, in input order. A result's bytes stay valid
        until the caller asks for the result after the next."""
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

    def _loop(self, first: list, lines, size: int) -> Iterator[Encoded]:
        self.queue.append((0, first, 1))
        sent, next_out = 1, 0  # sequence numbers handed out, and the next one to write
        held: Encoded | None = None  # the result yielded last: its caller may still be writing it
        while True:
            for worker in self.workers:
                if worker.job is None and self.queue:
                    self._send(worker, self.queue.pop(0))
            while next_out in self.done:
                result = self.done.pop(next_out)
                yield result
                # The caller may go on writing a result in a thread of its own after it has asked for the
                # next one (driver.WriteBehind): its buffers are reused once the caller asks for the one after.
                if held is not None:
                    self._give_back(held.parts)
                held = result
                next_out += 1
            if lines.eof and not lines.lines and not self.queue:
                self._retire_idle()
            idle = any(worker.job is None for worker in self.workers)
            busy = any(worker.job is not None for worker in self.workers)
            if lines.eof and not lines.lines and not busy and not self.queue:
                return
            # read on only while a worker is free and little is waiting to be written: no look-ahead
            more = lines.lines or not lines.eof
            want_input = idle and more and not self.queue and len(self.done) < 2 * self.count
            if want_input:
                block = lines.next_chunk(lines.share(size, self.count), wait=False)
                if block is not None:
                    self.queue.append((sent, block, 1))
                    sent += 1
                    continue
            self._wait(want_input and not lines.eof and lines.fd is not None, lines)

    def _wait(self, with_input: bool, lines) -> None:
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
        pid = _fork()
        if pid == 0:  # the worker: never returns into the parent's code
            code = 0
            try:
                os.close(task_write)
                os.close(result_read)
                for other in self.workers:  # the other workers' pipe ends: EOF must reach them
                    os.close(other.tasks)
                    os.close(other.results)
                if self.start is not None:
                    self.start()
                _serve(self.work, task_read, result_write)
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
            write_frame(worker.tasks, [payload])
        except OSError:  # it died before reading: _receive sees the EOF and redoes the job
            pass

    def _receive(self, worker: _Worker) -> None:
        """Read what a worker has sent: its result's head, then as much of the records as the pipe holds,
        into the result's buffer."""
        if worker.body is None:
            data = os.read(worker.results, _RESULT_HEAD.size - len(worker.head))
            if not data:
                self._lost(worker)
                return
            worker.head += data
            if len(worker.head) < _RESULT_HEAD.size:
                return
            worker.body = self._lend(_RESULT_HEAD.unpack(worker.head)[0])
        if worker.got < len(worker.body):
            count = os.readv(worker.results, [worker.body[worker.got :]])
            if not count:
                self._lost(worker)
                return
            worker.got += count
        if worker.got == len(worker.body):
            self.done[worker.job[0]] = Encoded([worker.body], *_RESULT_HEAD.unpack(worker.head)[1:])
            worker.head, worker.body, worker.got = b"", None, 0
            worker.job = None

    def _lend(self, size: int) -> memoryview:
        """``size`` bytes to read a result into: the front of a spare buffer (its pages are this process's
        already: no page faults, no zeroing), else of a new one with room for a larger result than any
        so far (chunks' results vary by a third)."""
        self.largest = max(self.largest, size)
        buffer = max(self.spare, key=len, default=None)
        if buffer is not None:
            self.spare.remove(buffer)
        if buffer is None or len(buffer) < size:  # a spare too small is let go: no more buffers than results
            buffer = bytearray(self.largest * 5 // 4 + 1)
        view = memoryview(buffer)[:size]
        self.lent[id(view)] = buffer
        return view

    def _give_back(self, parts: list) -> None:
        """A written result's buffers go back to the spares, unless its writer still holds a view of one."""
        for part in parts:
            buffer = self.lent.pop(id(part), None) if isinstance(part, memoryview) else None
            if buffer is None:
                continue
            try:
                part.release()
                buffer.append(buffer.pop())  # a resize (in place): refused while any view of the buffer lives
            except BufferError:
                continue
            self.spare.append(buffer)

    def _lost(self, worker: _Worker) -> None:
        """A worker died: reap it, start another, redo its chunk once, then report it line by line."""
        status = _reap(worker.pid)
        self.workers.remove(worker)
        os.close(worker.tasks)
        os.close(worker.results)
        seq, block, attempt = worker.job
        if worker.body is not None:
            self._give_back([worker.body])
        if attempt < 2:
            self.queue.insert(0, (seq, block, attempt + 1))
        else:
            reason = f"the worker process died ({_describe_status(status)}) while processing this line's chunk"
            self.done[seq] = self.lost(block, reason)
        self._spawn()

    def _retire_idle(self) -> None:
        """No chunk is left to hand out: idle workers are let go now (their task pipe closes, so they
        exit) and exit while the others finish, instead of one after the other at the end."""
        for worker in [worker for worker in self.workers if worker.job is None]:
            self.workers.remove(worker)
            os.close(worker.tasks)
            os.close(worker.results)
            self.retired.append(worker.pid)

    def _stop(self) -> None:
        """Close the task pipes (workers exit on EOF); anything still alive after a moment is killed."""
        for worker in self.workers:
            for fd in (worker.tasks, worker.results):
                try:
                    os.close(fd)
                except OSError:
                    pass
        interrupted = sys.exc_info()[0] is not None
        for pid in self.retired + [worker.pid for worker in self.workers]:
            if interrupted:
                _kill(pid)
            _reap(pid, patience=0.5)
        self.workers.clear()
        self.retired.clear()


def _serve(work: Callable[[list], Encoded], tasks: int, results: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent decides
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # die silently
    warnings.simplefilter("ignore")
    while True:
        payload = read_frame(tasks)
        if payload is None:
            return  # the parent closed the pipe (done, or gone)
        block = pickle.loads(payload)
        output = work(block)
        write_frame(results, output.parts, output.lines, output.errors, output.lacking)


def write_frame(fd: int, parts: list[bytes], *counts: int) -> None:
    """The payload's length and ``counts`` (8 bytes each), then the payload's ``parts``, without
    copying them into one buffer first."""
    head = struct.pack(f"<{1 + len(counts)}Q", sum(map(len, parts)), *counts)
    write_all(fd, [head, *parts])


_IOVECS = 512  # parts per writev call (Linux takes up to 1024)


def write_all(fd: int, parts: list[bytes]) -> None:
    """Every byte of ``parts``, in order, with as few writev calls as the kernel allows. An OSError
    carries in ``written`` how many bytes went out before it."""
    views = [memoryview(part) for part in parts if len(part)]
    first = done = 0
    while first < len(views):
        try:
            count = os.writev(fd, views[first : first + _IOVECS])
        except OSError as exc:
            exc.written = done
            raise
        done += count
        while first < len(views) and count >= len(views[first]):
            count -= len(views[first])
            first += 1
        if count:
            views[first] = views[first][count:]


_PIPE_BYTES = 1 << 20


def _widen(fd: int) -> None:
    """A 1 MiB pipe instead of Linux's 64 KiB: a chunk's records (~2 MB with weights) cross in a few
    reads, not dozens of wake-ups. Where the system refuses (or is not Linux), the pipe stays as it is."""
    import fcntl  # POSIX only, as fork is: here, not at the top, so the module imports everywhere

    try:
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ"), _PIPE_BYTES)  # noqa: B009 - Linux only
    except (AttributeError, OSError):
        pass


def read_frame(fd: int) -> bytes | None:
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
        time.sleep(0.001)  # a worker that was told to stop exits within a few ms


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


def _fork() -> int:
    """``os.fork()`` with SIGINT and SIGTERM held until it has returned, in both processes. Python runs
    the at-fork hooks (logging's lock release among them) inside the fork call, where an exception is
    printed and ignored: a stop signal that raised there was lost, and the run went on to the end. Held,
    it is delivered right after, in the parent's own code (the worker has the parent's handler)."""
    mask = {signal.SIGINT, signal.SIGTERM}
    try:
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, mask)
    except (AttributeError, ValueError, OSError):  # no sigmask here (not the main thread)
        return os.fork()
    try:
        return os.fork()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
