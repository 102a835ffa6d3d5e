"""The batch driver's guarantees: no line lost whatever it holds, bounded reading, streaming,
workers that die or fail, signals, a closed pipe and a full disk. (Fast: ~10 s in all.)"""

from __future__ import annotations

import errno
import io
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from ctxembed.batch import columns
from ctxembed.batch.driver import LineSource, Output, _results, line_limit
from ctxembed.batch.records import LongLine
from tests.cli_helpers import invoke

BAD_LINES = [
    b'{"text": "bank \\ud800"}',  # a lone surrogate
    b'{"id": 18446744073709551616, "text": "the bank"}',  # an id of 2^64
    b'{"id": -9223372036854775809, "text": "the bank"}',  # below int64
    b'{"text": ' + b"[" * 1000 + b"]" * 1000 + b"}",  # nested 1,000 deep
    b"{" * 100_000,  # deeper than any parser goes
    b'{"id": ' + b"[" * 200 + b"]" * 200 + b', "text": "the bank"}',  # an id orjson cannot nest
    b'{"id": "\\udfff", "text": "the bank"}',  # a surrogate in the id
    b"caf\xe9 \xff\xfe",  # invalid UTF-8
    b"\x00\x01\x02",  # control bytes: no row, but the shipped store builds them from subwords
    b"the bank " * 100_000,  # 900 kB: longer than the line limit
    b'["the bank"]',  # JSON but not an object: read as plain text, "[" and "]" are not words
    b'{"text": 5}',
    b"",
    b"\r",
    b"{not json",
]


@pytest.fixture(scope="module")
def engine():
    from ctxembed.engine import Engine
    from ctxembed.presets import build_settings
    from ctxembed.vectors.sources import open_vectors

    return Engine(open_vectors(), build_settings("textbook"), max_tokens=64)


def run_lines(engine, data: bytes, *, chunk: int = 4, workers: int = 1, word: str | None = None) -> list[dict]:
    options = {"with_vectors": False, "weights": True, "word": word}
    source = LineSource(io.BytesIO(data), line_limit(engine.max_tokens))
    records = []
    for block in _results(engine, source, options, chunk, workers):
        data = b"".join(block.parts)
        assert data == b"" or data.endswith(b"\n")
        got = [json.loads(line) for line in data.splitlines()]
        # the counts of batch's summary, taken where the records were made, agree with the records
        assert block.lines == len(got)
        assert block.errors == sum("error" in record for record in got)
        assert block.lacking == sum(record.get("word", 0) is None for record in got)
        records += got
    return records


def test_every_bad_kind_becomes_its_own_record_and_the_batch_carries_on(engine):
    lines = [b"the river bank"] + BAD_LINES + [b'{"id": 7, "text": "the money bank"}']
    records = run_lines(engine, b"\n".join(lines) + b"\n")
    assert [r["line"] for r in records] == list(range(1, len(lines) + 1))
    assert "error" not in records[0] and "error" not in records[-1] and records[-1]["id"] == 7
    for record in records[1:-1]:
        assert "error" in record or record["text"] in ('["the bank"]', "\x00\x01\x02"), record
    messages = " ".join(r.get("error", "") for r in records[1:-1])
    for expected in ("surrogate", "64-bit range", "nested too deeply", "not valid UTF-8", "longer than"):
        assert expected in messages


def test_a_bad_line_in_the_middle_of_a_big_chunk_costs_nothing(engine):
    lines = [b"the river bank"] * 300
    lines[150] = BAD_LINES[0]
    records = run_lines(engine, b"\n".join(lines), chunk=256)
    assert len(records) == 300 and [r["line"] for r in records] == list(range(1, 301))
    assert ["error" in r for r in records].count(True) == 1


def test_byte_order_mark_is_accepted(engine):
    records = run_lines(engine, b"\xef\xbb\xbfthe river bank\n")
    assert records[0]["tokens"] == ["the", "river", "bank"]


def test_a_huge_line_is_refused_without_being_kept():
    limit = 1 << 16
    source = LineSource(io.BytesIO(b"short\n" + b"x" * (5 << 20) + b"\nafter"), limit)
    peak = 0
    chunks = []
    while (chunk := source.next_chunk(10)) is not None:
        chunks.extend(chunk)
        peak = max(peak, len(source.buffer))
    assert chunks == [(1, b"short\n"), (2, LongLine(limit)), (3, b"after")]
    # the long line was dropped while reading it, never held whole
    assert peak <= limit + (1 << 16)


def test_line_limit_follows_max_tokens():
    assert line_limit(512) == 512 * 1024
    assert line_limit(1) == 64 * 1024


def test_an_exception_for_one_line_becomes_its_record(engine, monkeypatch):
    real = columns.prepare_many

    def prepare_many(engine, texts):
        if any("boom" in text for text in texts):
            raise RuntimeError("a bug")
        return real(engine, texts)

    monkeypatch.setattr(columns, "prepare_many", prepare_many)
    records = run_lines(engine, b"the bank\nboom bank\nthe river\n", chunk=8)
    assert [r["line"] for r in records] == [1, 2, 3]
    assert records[1]["error"] == "internal error: RuntimeError: a bug"
    assert "error" not in records[0] and "error" not in records[2]


def test_a_dying_worker_has_its_chunk_redone(engine, monkeypatch, tmp_path):
    real = columns.prepare_many
    marker = tmp_path / "died-once"

    def prepare_many(engine, texts):
        if "die once" in texts and not marker.exists():
            marker.write_text("x")
            os._exit(3)
        if "die always" in texts:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(engine, texts)

    monkeypatch.setattr(columns, "prepare_many", prepare_many)
    lines = [b"the river bank"] * 20
    lines[5] = b"die once"
    records = run_lines(engine, b"\n".join(lines) + b"\n", chunk=4, workers=2)
    assert [r["line"] for r in records] == list(range(1, 21)) and marker.exists()
    assert all("error" not in r or r["line"] == 6 for r in records)  # redone: "die once" is just OOV
    lines[13] = b"die always"
    records = run_lines(engine, b"\n".join(lines) + b"\n", chunk=4, workers=2)
    assert [r["line"] for r in records] == list(range(1, 21))
    reported = [r["line"] for r in records if "died" in r.get("error", "")]
    assert reported == [13, 14, 15, 16]  # its chunk, line by line
    assert "SIGKILL" in records[12]["error"]


def test_a_worker_dying_on_the_last_chunk_is_redone_after_the_idle_ones_were_let_go(engine, monkeypatch, tmp_path):
    import ctxembed.batch.pool as pool

    real, marker, retired = columns.prepare_many, tmp_path / "died-once", []
    real_retire = pool.WorkerPool._retire_idle

    def prepare_many(engine, texts):
        if "die once" in texts and not marker.exists():
            time.sleep(0.2)  # the other workers are idle, the input is done: they are let go meanwhile
            marker.write_text("x")
            os._exit(3)
        return real(engine, texts)

    def retire(self):
        real_retire(self)
        retired.append(len(self.retired))

    monkeypatch.setattr(columns, "prepare_many", prepare_many)
    monkeypatch.setattr(pool.WorkerPool, "_retire_idle", retire)
    lines = [b"the river bank"] * 11 + [b"die once"]
    records = run_lines(engine, b"\n".join(lines) + b"\n", chunk=4, workers=3)
    assert [r["line"] for r in records] == list(range(1, 13)) and marker.exists()
    assert all("error" not in r or r["line"] == 12 for r in records)  # redone by a fresh worker
    assert retired[0] == 2  # the two idle workers were let go while the third ran the last chunk


def test_the_summary_counts_cross_the_workers_pipes(engine):
    data = b"\n".join([b"the river bank", b"{bad", b"the river"] * 10)
    for workers in (1, 2):
        records = run_lines(engine, data, chunk=4, workers=workers, word="bank")  # checks each block's counts
        assert sum("error" in r for r in records) == 10 and sum(r.get("word", 0) is None for r in records) == 10


def test_the_summary_counts_do_not_depend_on_the_records_field_order(engine, monkeypatch):
    """Records written with their keys sorted ("error" before "line", "word" before others) are counted
    alike: the counts come from the records as they are made, not from how their bytes end."""
    import orjson

    from ctxembed.batch import records as batch_records

    def sorted_keys(record: dict) -> bytes:
        options = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE | orjson.OPT_SORT_KEYS
        return orjson.dumps(record, option=options)

    monkeypatch.setattr(batch_records, "encode_record", sorted_keys)
    data = b"\n".join([b"the river bank", b"{bad", b"the river"] * 3)
    records = run_lines(engine, data, chunk=4, word="bank")  # checks each block's counts against its records
    assert sum("error" in r for r in records) == 3 and sum(r.get("word", 0) is None for r in records) == 3


def test_workers_give_the_same_records_as_one_process(engine):
    data = b"\n".join([b"the river bank", BAD_LINES[1], b"the money bank", b""] * 30)
    assert run_lines(engine, data, chunk=7, workers=2) == run_lines(engine, data, chunk=7, workers=1)


def test_full_disk_cuts_the_output_back_to_a_line_boundary(tmp_path, monkeypatch):
    target = tmp_path / "out.jsonl"
    with open(target, "wb") as fh:
        output = Output.__new__(Output)
        output.fd, output.stream = fh.fileno(), fh
        output.write([b'{"line":1}\n'])
        real_write = os.write
        calls = []

        def writev(fd, parts):
            calls.append(len(parts))
            if len(calls) == 1:
                return real_write(fd, bytes(parts[0]))  # the first piece goes out, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(os, "writev", writev)
        from ctxembed.errors import DataError

        with pytest.raises(DataError, match="No space left on device"):
            output.write([b'{"line":2}\n{"li', b'ne":3}\n'])  # a record across two pieces
    assert target.read_bytes() == b'{"line":1}\n{"line":2}\n'


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_full_disk_is_one_line_and_exit_1(tmp_path):
    (tmp_path / "in.txt").write_text("the river bank\n" * 50)
    with open("/dev/full", "wb") as full:
        done = _ctxembed(["batch", str(tmp_path / "in.txt"), "--preset", "textbook"], stdout=full)
    assert done.returncode == 1
    assert done.stderr.decode() == "ctxembed: error: cannot write the output: No space left on device\n"


# ------------------------------------------------------------------------------ real processes
CLI = [sys.executable, "-m", "ctxembed"]


def _ctxembed(args, **kwargs):
    return subprocess.run([*CLI, *args], stderr=subprocess.PIPE, timeout=60, **kwargs)


@pytest.fixture(scope="module")
def big_input(tmp_path_factory):
    path = tmp_path_factory.mktemp("batch") / "big.txt"
    # long enough (~2 s of batch on 2 cores) that a signal sent once records flow always lands mid-run,
    # even on a loaded machine: at 30,000 lines a faster batch could finish before the signal arrived
    path.write_text("the river bank is wide and the money bank is closed\n" * 200_000)
    return path


# Its 200,000 lines keep ~295 MB of weights, so batch first says so (batch/size.py), before any record:
# that one line is expected; nothing else may be on stderr.
SIZE_NOTE = re.compile(rb"^batch: every line keeps the weights of 1 layers x 1 heads .* of jsonl for this input .*\n")


def _without_size_note(stderr: bytes) -> bytes:
    found = SIZE_NOTE.match(stderr)
    assert found, stderr[:300]
    return stderr[found.end() :]


def test_batch_exits_at_once_yet_a_profiler_or_atexit_function_still_runs(tmp_path):
    (tmp_path / "in.txt").write_text("the river bank\n\n")
    done = _ctxembed(["batch", str(tmp_path / "in.txt"), "--no-weights"], stdout=subprocess.PIPE)
    assert done.returncode == 0 and done.stdout.count(b"\n") == 2 and b"1 of 2 lines" in done.stderr
    profiled = subprocess.run(
        [sys.executable, "-m", "cProfile", "-m", "ctxembed", "batch", str(tmp_path / "in.txt")],
        capture_output=True,
        timeout=60,
    )
    assert profiled.returncode == 0 and b"function calls" in profiled.stdout  # the profile is printed
    script = "import atexit, runpy; atexit.register(print, 'ran'); runpy.run_module('ctxembed', run_name='__main__')"
    wrapped = subprocess.run(
        [sys.executable, "-c", script, "batch", str(tmp_path / "in.txt")], capture_output=True, timeout=60
    )
    assert wrapped.stdout.endswith(b"ran\n")  # an atexit function of the caller's


def test_closed_pipe_exits_0_silently(big_input):
    proc = subprocess.Popen(
        [*CLI, "batch", str(big_input), "--preset", "textbook"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    first = proc.stdout.readline()
    proc.stdout.close()  # like `| head -1`
    assert proc.wait(timeout=60) == 0
    assert _without_size_note(proc.stderr.read()) == b""
    assert json.loads(first)["line"] == 1


@pytest.mark.parametrize("how", ["group-SIGINT", "parent-SIGINT", "SIGTERM"])
def test_signals_stop_batch_at_once_with_one_line_and_a_clean_prefix(big_input, tmp_path, how):
    out_path = tmp_path / "out.jsonl"
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(
            [*CLI, "batch", str(big_input), "--chunk", "128", "--preset", "textbook"],
            stdout=out,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while out_path.stat().st_size == 0 and time.monotonic() < deadline:  # mid-run: records flowing
            time.sleep(0.05)
        sent = time.monotonic()
        if how == "group-SIGINT":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGINT if how == "parent-SIGINT" else signal.SIGTERM)
        code = proc.wait(timeout=10)
        took = time.monotonic() - sent
    assert code == (143 if how == "SIGTERM" else 130)
    assert _without_size_note(proc.stderr.read()) == b"ctxembed: interrupted\n"
    assert took < 5  # the target is < 1 s (measured in the report); a loaded test machine gets slack
    data = out_path.read_bytes()
    assert data.endswith(b"\n")
    assert [json.loads(line)["line"] for line in data.splitlines()] == list(range(1, data.count(b"\n") + 1))
    time.sleep(0.2)
    assert subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True).stdout == b""  # no worker left


def test_records_stream_from_a_slow_producer():
    proc = subprocess.Popen(
        [*CLI, "batch", "--no-weights", "--preset", "textbook"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        proc.stdin.write(b"the river bank\n")
        proc.stdin.flush()
        first = proc.stdout.readline()  # arrives while stdin is still open
        assert json.loads(first)["line"] == 1
        proc.stdin.write(b"the money bank\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["line"] == 2
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    assert proc.returncode == 0 and proc.stdout.read() == b""


def test_cli_batch_with_every_bad_kind(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"\n".join([b"the river bank", *BAD_LINES, b"the bank"]) + b"\n")
    result = invoke("batch", path, "--no-weights", "--preset", "textbook")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout_bytes.splitlines()
    assert [json.loads(line)["line"] for line in lines] == list(range(1, len(BAD_LINES) + 3))


def test_usable_cores_follow_affinity_and_a_container_quota(tmp_path, monkeypatch):
    import ctxembed.batch.driver as batch

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5, 6, 7}, raising=False)
    v2 = tmp_path / "cpu.max"
    monkeypatch.setattr(batch, "_CPU_LIMITS", ((str(v2), batch._CPU_LIMITS[0][1]),))
    assert batch.usable_cores() == 8  # no cgroup file: the affinity
    for text, expected in (("max 100000\n", 8), ("150000 100000\n", 2), ("300000 100000\n", 3), ("garbage", 8)):
        v2.write_text(text)
        assert batch.usable_cores() == expected, text
    quota, period = tmp_path / "cpu.cfs_quota_us", tmp_path / "cpu.cfs_period_us"
    v1 = (str(quota), lambda text: [text.strip(), batch._read(str(period))])
    monkeypatch.setattr(batch, "_CPU_LIMITS", (v1,))
    quota.write_text("-1\n")
    period.write_text("100000\n")
    assert batch.usable_cores() == 8
    quota.write_text("400000\n")
    assert batch.usable_cores() == 4
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert batch.usable_cores() == 1  # a quota never raises the count above the affinity


def test_workers_auto_starts_one_per_usable_core_for_big_input(engine, monkeypatch):
    import ctxembed.batch.driver as batch

    counts = []
    real = batch.WorkerPool.__init__

    def pool(self, work, count, **given):
        counts.append(count)
        real(self, work, count, **given)

    monkeypatch.setattr(batch, "usable_cores", lambda: 3)
    monkeypatch.setattr(batch.WorkerPool, "__init__", pool)
    records = run_lines(engine, b"the river bank\n" * 40, chunk=4, workers=0)
    assert counts == [3] and [r["line"] for r in records] == list(range(1, 41))
    counts.clear()
    assert len(run_lines(engine, b"the river bank\n" * 3, chunk=4, workers=0)) == 3
    assert counts == []  # small input: no workers at all


def test_the_json_lines_work_goes_through_tally_records_the_seam_the_bench_bounds_replace(engine, monkeypatch):
    """benchmarks/whatif.py's bounds ("records free", "driver only") hand the driver ready-made records by
    replacing Tally.records; a driver that made its JSON lines some other way would leave those bounds
    measuring the real run (it did, after the driver moved to Tally: the bound sat at the JSONL rate)."""
    from ctxembed.batch import records as batch_records

    def ready(self, engine, chunk, options):
        return [b'{"line": %d, "ready": true}\n' % number for number, _ in chunk]

    monkeypatch.setattr(batch_records.Tally, "records", ready)
    for workers in (1, 2):
        got = run_lines(engine, b"\n".join([b"the river bank"] * 9), chunk=4, workers=workers)
        assert got == [{"line": n, "ready": True} for n in range(1, 10)]


def test_result_buffers_are_reused_once_written_and_never_while_read():
    """The parent reads each result into a buffer that a written result gave back: the same pages,
    no page faults. A result someone still reads (a view exported) keeps its buffer; one merely kept
    is released, so it cannot show a later result's bytes."""
    import numpy as np

    from ctxembed.batch.pool import WorkerPool

    pool = WorkerPool(lambda chunk: None, 1)
    first = pool._lend(1000)
    first[:] = b"a" * 1000
    buffer = first.obj
    pool._give_back([first])
    with pytest.raises(ValueError):  # released
        bytes(first)
    second = pool._lend(800)
    assert second.obj is buffer and len(second) == 800
    held = np.frombuffer(second, np.uint8)  # a writer still reading it
    pool._give_back([second])
    third = pool._lend(800)
    assert third.obj is not buffer and bytes(held) == b"a" * 800
    pool._give_back([third])
    assert len(pool._lend(10_000)) == 10_000  # larger than any spare: a new buffer


def test_each_worker_runs_the_start_hook_once_before_its_chunks():
    """WorkerPool(start=...) runs in every forked worker before its first chunk (batch's columnar formats
    set their allocators there), and never in the parent."""
    from ctxembed.batch.pool import WorkerPool
    from ctxembed.batch.records import Encoded

    started = []

    def work(chunk: list) -> Encoded:
        return Encoded([f"{os.getpid()} {len(started)}\n".encode()], len(chunk), 0, 0)

    lines = LineSource(io.BytesIO(b"x\n" * 8), 100)
    pool = WorkerPool(work, 2, start=lambda: started.append(1))
    results = [bytes(part).split() for result in pool.run(lines.next_chunk(1), lines, 1) for part in result.parts]
    assert len(results) == 8 and started == []  # every chunk answered; the parent never ran it
    assert {count for _, count in results} == {b"1"}  # once in each worker, before its first chunk


def test_a_result_stays_whole_while_a_write_behind_thread_still_writes_it(engine):
    """A file sink writes in a thread of its own (driver.WriteBehind) while the pool reads the next
    results: a result's buffer must not be handed to a later result before its write is done. A slow
    writer that reads each block only after the pool has moved on gets every block intact."""
    import threading

    from ctxembed.batch.driver import WriteBehind

    class SlowSink:
        def __init__(self):
            self.blocks, self.closed, self.threads = [], None, set()

        def write(self, parts):
            time.sleep(0.03)  # meanwhile the pool reads on, into buffers given back
            self.blocks.append(b"".join(bytes(part) for part in parts))
            self.threads.add(threading.get_ident())

        def close(self, complete):
            self.closed = complete

    data = b"".join(b"the river bank number %d\n" % i for i in range(48))
    options = {"with_vectors": False, "weights": True, "word": None}
    sink = WriteBehind(SlowSink)
    for block in _results(engine, LineSource(io.BytesIO(data), line_limit(64)), options, 4, 2):
        sink.write(block.parts)
    sink.close(True)
    got = [json.loads(line) for block in sink.sink.blocks for line in block.splitlines()]
    assert got == run_lines(engine, data, chunk=4, workers=1)
    assert sink.sink.closed is True and threading.get_ident() not in sink.sink.threads


def test_a_write_behind_error_stops_the_run_and_leaves_no_file():
    """A write that fails in the thread (a full disk) is raised at the next write or at close, and the
    sink is closed as incomplete (no file at --out) after the write under way has finished."""
    from ctxembed.batch.driver import WriteBehind
    from ctxembed.errors import DataError

    class FailingSink:
        def __init__(self, fail_at):
            self.fail_at, self.written, self.closed = fail_at, [], None

        def write(self, parts):
            if len(self.written) == self.fail_at:
                raise DataError("cannot write {out} x: No space left on device", "out")
            self.written.append(parts)

        def close(self, complete):
            self.closed = complete

    sink = WriteBehind(lambda: FailingSink(fail_at=1))
    sink.write([b"a"])
    sink.write([b"b"])  # fails in the thread
    with pytest.raises(DataError):
        sink.write([b"c"])  # ... and is raised here
    sink.close(False)
    assert sink.sink.written == [[b"a"]] and sink.sink.closed is False
    last = WriteBehind(lambda: FailingSink(fail_at=0))
    last.write([b"a"])  # the last block fails
    with pytest.raises(DataError):
        last.close(True)
    assert last.sink.closed is False  # the run looked complete, but its last block is not in the file


def test_chunks_shrink_near_the_end_of_a_file_so_the_workers_finish_together(tmp_path):
    """Guided scheduling (LineSource.share): full chunks while much is left, then a shrinking share of
    the lines left (1 / (2 x workers)), never below size / 16; every line once, in order. A pipe (size
    unknown) keeps full chunks to the end."""
    path = tmp_path / "in.txt"
    path.write_bytes(b"".join(b"line %05d of the corpus\n" % i for i in range(30_000)))
    with open(path, "rb") as stream:
        source = LineSource(stream, 1 << 16, total_bytes=path.stat().st_size)
        sizes, numbers = [], []
        while (chunk := source.next_chunk(source.share(4096, 2))) is not None:
            sizes.append(len(chunk))
            numbers += [number for number, _ in chunk]
    assert numbers == list(range(1, 30_001))
    assert sizes[:4] == [4096] * 4 and sizes[4] == (30_000 - 4 * 4096) // 4  # a quarter of what is left
    assert sizes == sorted(sizes, reverse=True)[: len(sizes) - 1] + sizes[-1:]  # shrinking to the end
    assert min(sizes[:-1]) == 4096 // 16 and sum(size < 4096 for size in sizes) > 5
    piped = LineSource(io.BytesIO(path.read_bytes()), 1 << 16)
    assert piped.share(4096, 2) == 4096 and (piped.next_chunk(4096), piped.share(4096, 2))[1] == 4096


def test_a_stop_signal_during_a_workers_fork_is_not_lost(tmp_path):
    """Python runs at-fork hooks (logging's lock release) inside the fork call, where an exception is
    printed and ignored: a SIGTERM whose handler raised there was lost and batch ran on to exit 0 (seen in
    test_batch_columnar's killed run). The pool holds the signals until fork has returned."""
    script = tmp_path / "fork.py"
    script.write_text(
        "import os, signal, sys\n"
        "from ctxembed.batch.pool import _fork\n"
        "class Stop(BaseException): pass\n"
        "def stop(signum, frame): raise Stop()\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "def hook():\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    sum(range(1000))  # the handler would run here, inside the hook\n"
        "os.register_at_fork(after_in_parent=hook)\n"
        "try:\n"
        "    pid = _fork()\n"
        "    if pid == 0:\n"
        "        os._exit(0)\n"
        "    os.waitpid(pid, 0)\n"
        "except Stop:\n"
        "    print('stopped')\n"
        "    sys.exit(0)\n"
        "print('lost')\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.stdout == "stopped\n", (done.stdout, done.stderr[-400:])
