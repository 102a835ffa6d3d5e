"""Where --out and --save put the data (issue 45, and issue 44's m4): a new path or a regular file is
replaced whole; an existing FIFO or device is written through as `cat > F` would, and stays what it was;
a directory is refused in one line before any work; a full disk leaves no temporary file and its line
names --out; files get the umask's mode. Each test fails on the writers that renamed a temporary file
over whatever --out named."""

from __future__ import annotations

import contextlib
import io
import os
import resource
import signal
import stat
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest

from ctxembed.errors import DataError
from ctxembed.output import write_projector
from tests.cli_helpers import SHARED_CACHE, fails, invoke, succeeds
from tests.conftest import REPO
from tests.test_batch_columnar import brown

WAIT = 60  # seconds a reader waits for the writer: a hang fails the test, not the suite
FORMATS = {"jsonl": ".jsonl", "parquet": ".parquet", "npz": ".npz"}


@pytest.fixture(scope="module")
def lines(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("out-targets") / "in.txt"
    path.write_bytes(b"\n".join(brown(60)) + b"\n")
    return path


def batch_args(source: Path, fmt: str, out) -> list:
    word = ["--word", "the"] if fmt in ("npz", "projector") else []
    return ["batch", source, "--format", fmt, "--out", out, "--no-weights", *word]


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@contextlib.contextmanager
def reading(fifo: Path):
    """A thread reading ``fifo`` whole (as `cat FIFO` would); yields a list that holds the bytes once done."""
    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as fh:
            got.append(fh.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield got
    finally:
        if reader.is_alive():  # the writer never opened it: unblock the reader
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(WAIT)


def device_full(tmp_path: Path) -> Path:
    """A device like /dev/full: a node of its own under ``tmp_path`` when this runs as root (so a writer
    that replaces device nodes replaces this one, never the system's), /dev/full otherwise (which a user
    cannot replace)."""
    if os.geteuid() != 0:
        return Path("/dev/full")
    node = tmp_path / "full"
    os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    return node


# ------------------------------------------------------------------------------ a directory
@pytest.mark.parametrize("fmt", [*FORMATS])
def test_out_a_directory_is_one_line_before_any_work(lines, tmp_path, fmt):
    folder = tmp_path / "already"
    folder.mkdir()
    line = fails(1, *batch_args(lines, fmt, folder))
    assert line == f"ctxembed: error: --out {folder}: is a directory; give a file name"
    assert leftovers(tmp_path) == [] and list(folder.iterdir()) == []


def test_projector_out_a_file_is_one_line(lines, tmp_path):
    taken = tmp_path / "map"
    taken.write_text("mine\n")
    line = fails(1, *batch_args(lines, "projector", taken))
    assert "--out" in line and "writes a folder" in line and taken.read_text() == "mine\n"


def test_save_a_directory_is_one_line(tmp_path):
    folder = tmp_path / "x.svg"
    folder.mkdir()
    line = fails(1, "attend", "the river bank", "--save", folder)
    assert line == f"ctxembed: error: --save {folder}: is a directory; give a file name"


@pytest.mark.parametrize("kind", ["a directory named .tsv", "a file as the folder"])
def test_senses_save_that_cannot_be_a_projector_pair_is_one_line_before_the_scan(tmp_path, monkeypatch, kind):
    from ctxembed.senses import run

    target = tmp_path / ("map.tsv" if kind.startswith("a directory") else "map")
    target.mkdir() if kind.startswith("a directory") else target.write_text("mine\n")
    monkeypatch.setattr(run, "find_senses", lambda *a, **k: pytest.fail("the corpus was scanned"))
    line = fails(1, "senses", "bank", "--save", target)
    assert line.startswith(f"ctxembed: error: --save {target}") and leftovers(tmp_path) == []


# ------------------------------------------------------------------------------ a FIFO, a device
@pytest.mark.parametrize("fmt", [*FORMATS])
def test_out_a_fifo_is_written_through_and_stays_a_fifo(lines, tmp_path, fmt):
    regular = tmp_path / f"regular{FORMATS[fmt]}"
    succeeds(*batch_args(lines, fmt, regular))
    fifo = tmp_path / f"fifo{FORMATS[fmt]}"
    os.mkfifo(fifo)
    with reading(fifo) as got:
        succeeds(*batch_args(lines, fmt, fifo))
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and leftovers(tmp_path) == []
    [data] = got
    if fmt == "jsonl":
        assert data == regular.read_bytes()
    elif fmt == "npz":
        streamed, whole = np.load(io.BytesIO(data)), np.load(regular)
        assert zipfile.is_zipfile(io.BytesIO(data)) and set(streamed.files) == set(whole.files)
        assert all(np.array_equal(streamed[name], whole[name]) for name in whole.files)
    else:
        import pyarrow.parquet as pq

        assert pq.read_table(io.BytesIO(data)).equals(pq.read_table(regular))


def test_out_a_link_to_a_file_stays_a_link(lines, tmp_path):
    real, link = tmp_path / "real.jsonl", tmp_path / "link.jsonl"
    real.write_text("old\n")
    link.symlink_to(real)
    succeeds(*batch_args(lines, "jsonl", link))
    assert link.is_symlink() and real.read_text().startswith('{"line":1') and leftovers(tmp_path) == []


def test_every_writer_keeps_a_link_to_a_file_a_link(tmp_path):
    """output.atomic_file (train --out, the mix file, the caches) replaces the file a link names, as batch's
    --out does, instead of replacing the link with a file and leaving the file it named as it was."""
    from ctxembed.output import atomic_file

    real, link = tmp_path / "real.npz", tmp_path / "link.npz"
    real.write_bytes(b"old")
    link.symlink_to(real)
    with atomic_file(link) as fh:
        fh.write(b"new")
    assert (
        link.is_symlink()
        and real.read_bytes() == b"new"
        and sorted(p.name for p in tmp_path.iterdir()) == ["link.npz", "real.npz"]
    )


def test_out_a_descriptor_path_writes_to_that_descriptor(lines):
    """/dev/stdout's kind, by a path a writer that renames could never replace (/proc refuses new files):
    the records go down the pipe that is stdout, as `cat > /dev/stdout` would send them."""
    env = dict(os.environ, PYTHONPATH=str(REPO), CTXEMBED_CACHE_DIR=str(SHARED_CACHE))
    args = [sys.executable, "-m", "ctxembed", *map(str, batch_args(lines, "jsonl", "/proc/self/fd/1"))]
    run = subprocess.run(args, capture_output=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr.decode()[-1000:]
    assert run.stdout == succeeds("batch", lines, "--format", "jsonl", "--no-weights").stdout.encode()


@pytest.mark.parametrize("fmt", [*FORMATS])
def test_out_a_full_device_fails_in_one_line_and_stays_a_device(lines, tmp_path, fmt):
    device = device_full(tmp_path)
    line = fails(1, *batch_args(lines, fmt, device))
    assert line == f"ctxembed: error: cannot write --out {device}: No space left on device"
    assert stat.S_ISCHR(os.lstat(device).st_mode) and leftovers(device.parent) == []


def test_save_to_a_fifo_is_written_through(tmp_path):
    fifo = tmp_path / "bank.svg"
    os.mkfifo(fifo)
    with reading(fifo) as got:
        succeeds("attend", "the river bank", "--save", fifo)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and got[0].startswith(b"<?xml") and b"</svg>" in got[0]
    assert leftovers(tmp_path) == []


def test_the_library_writers_write_through(tmp_path):
    from ctxembed.output import write_output  # save_document's writer

    device = device_full(tmp_path)
    with pytest.raises(DataError, match=f"cannot write .*{device}: No space left on device"):
        write_output(device, b"{}\n", "save")  # save_document's writer (its suffix check wants .json)
    assert stat.S_ISCHR(os.lstat(device).st_mode)
    fifo = tmp_path / "map.tsv"
    os.mkfifo(fifo)
    with reading(fifo) as got:
        paths = write_projector(fifo, np.eye(2, dtype=np.float32), ("a",), [("x",), ("y",)])
    assert got == [b"1.0\t0.0\n0.0\t1.0\n"] and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert paths[1].read_text() == "a\nx\ny\n" and leftovers(tmp_path) == []


# ------------------------------------------------------------------------------ a full disk
@pytest.fixture
def small_disk(tmp_path):
    """A folder on a full-to-be disk: a 256 KiB tmpfs when this can mount one (root), else a folder
    where the run's writes fail past 256 KiB (RLIMIT_FSIZE: a fault injected into every write).
    Yields (folder, preexec_fn for the run)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = os.geteuid() == 0 and (
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)], capture_output=True).returncode
        == 0
    )

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 10, 256 << 10))

    try:
        yield disk, (None if mounted else limit)
    finally:
        if mounted:
            subprocess.run(["umount", str(disk)], check=False)


@pytest.mark.parametrize("fmt", ["npz", "projector", "parquet", "jsonl"])
def test_a_full_disk_leaves_no_temporary_file_and_names_out(tmp_path, small_disk, fmt):
    folder, preexec = small_disk
    source = tmp_path / "big.txt"
    source.write_bytes(b"\n".join(brown(3000)) + b"\n")
    out = folder / ("map" if fmt == "projector" else f"out{FORMATS[fmt]}")
    args = [str(a) for a in batch_args(source, fmt, out)] + ["--workers", "1"]
    if fmt in ("parquet", "jsonl"):
        args.remove("--no-weights")  # the weights: megabytes
    env = dict(os.environ, PYTHONPATH=str(REPO), CTXEMBED_CACHE_DIR=str(SHARED_CACHE))
    run = subprocess.run(
        [sys.executable, "-m", "ctxembed", *args], capture_output=True, env=env, preexec_fn=preexec, timeout=300
    )
    lines = run.stderr.decode().splitlines()
    assert run.returncode == 1 and len(lines) == 1, run.stderr.decode()[-2000:]
    assert lines[0].startswith(f"ctxembed: error: cannot write --out {out}"), lines
    assert lines[0].endswith(("No space left on device", "File too large")), lines
    assert not out.exists() and leftovers(folder) == [] and [p.name for p in folder.iterdir()] == []


# ------------------------------------------------------------------------------ m4: the umask's mode
@pytest.mark.parametrize("fmt", [*FORMATS, "projector"])
@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_out_files_get_the_umasks_mode(lines, tmp_path, fmt, umask):
    out = tmp_path / ("map" if fmt == "projector" else f"out{FORMATS[fmt]}")
    previous = os.umask(umask)
    try:
        result = invoke(*batch_args(lines, fmt, out))
    finally:
        os.umask(previous)
    assert result.exit_code == 0, result.stderr
    files = [out / "vectors.tsv", out / "metadata.tsv"] if fmt == "projector" else [out]
    assert [stat.S_IMODE(f.stat().st_mode) for f in files] == [0o666 & ~umask] * len(files)


def test_saved_files_get_the_umasks_mode(tmp_path):
    previous = os.umask(0o027)
    try:
        succeeds("attend", "the river bank", "--save", tmp_path / "bank.svg")
        write_projector(tmp_path / "map.tsv", np.eye(2, dtype=np.float32), ("a",), [("x",), ("y",)])
    finally:
        os.umask(previous)
    for name in ("bank.svg", "map.tsv", "map-metadata.tsv"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o640, name
