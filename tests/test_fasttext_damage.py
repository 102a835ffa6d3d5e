"""A damaged fastText .bin file is one error naming the file, quickly; a second process never waits
forever on the conversion lock (gensim's reader loops forever on a file cut inside a word)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest

from ctxembed.errors import DataError
from ctxembed.vectors.cache import cache_path
from ctxembed.vectors.sources import open_vectors


@pytest.fixture(scope="module")
def fasttext_bin(tmp_path_factory):
    from gensim.models import FastText
    from gensim.models.fasttext import save_facebook_model

    sentences = [["we", "sat", "on", "the", "river", "bank"], ["money", "in", "the", "bank"]] * 10
    model = FastText(sentences, vector_size=4, min_count=1, epochs=1, bucket=50, min_n=2, max_n=3, seed=1, workers=1)
    path = tmp_path_factory.mktemp("ft") / "model.bin"
    save_facebook_model(model, str(path))
    return path


@contextmanager
def deadline(seconds: int):
    """Fail instead of hanging: SIGALRM interrupts a pure-Python loop such as gensim's word reader."""

    def expired(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _cuts(size: int) -> list[int]:
    return sorted({8, 60, 70, 100, 120, 150, 200, size // 3, size // 2, size - 100, size - 9, size - 1})


def test_every_cut_is_one_error_naming_the_file(fasttext_bin, tmp_path):
    data = fasttext_bin.read_bytes()
    for cut in _cuts(len(data)):
        path = tmp_path / f"cut{cut}.bin"
        path.write_bytes(data[:cut])
        with deadline(10), pytest.raises(DataError) as caught:
            open_vectors(str(path))
        assert str(path) in caught.value.message, (cut, caught.value.message)
    assert open_vectors(str(fasttext_bin)).dim == 4  # the whole file still reads


def test_trailing_bytes_and_a_compressed_cut_are_errors(fasttext_bin, tmp_path):
    import gzip

    data = fasttext_bin.read_bytes()
    longer = tmp_path / "longer.bin"
    longer.write_bytes(data + b"\0" * 5)
    with pytest.raises(DataError, match="after its last matrix"):
        open_vectors(str(longer))
    compressed = tmp_path / "cut.bin.gz"
    compressed.write_bytes(gzip.compress(data[:100]))
    with deadline(10), pytest.raises(DataError, match="truncated fastText"):
        open_vectors(str(compressed))


def test_a_held_lock_times_out_with_a_message(fasttext_bin):
    """Another process holding the conversion lock: this one gives up after LOCK_TIMEOUT, saying why."""
    from filelock import FileLock

    target = cache_path(fasttext_bin, None)
    target.parent.mkdir(parents=True, exist_ok=True)
    code = (
        "import sys; from ctxembed.vectors import sources; sources.LOCK_TIMEOUT = 1.5\n"
        "from ctxembed.errors import DataError\n"
        "try:\n    sources.open_vectors(sys.argv[1])\nexcept DataError as exc:\n    print(exc.message)\n"
    )
    with FileLock(f"{target}.lock"):  # filelock is re-entrant in one process: the waiter is another one
        start = time.monotonic()
        out = subprocess.run(
            [sys.executable, "-c", code, str(fasttext_bin)], capture_output=True, text=True, timeout=30
        )
        waited = time.monotonic() - start
    assert f"{target}.lock" in out.stdout and "remove that file" in out.stdout, (out.stdout, out.stderr)
    assert "waiting for another ctxembed process" in out.stderr
    assert waited < 15


def test_cli_truncated_bin_exits_1_quickly_and_a_second_process_too(fasttext_bin, tmp_path):
    cut = tmp_path / "t.bin"
    cut.write_bytes(fasttext_bin.read_bytes()[:100])
    env = {**os.environ, "CTXEMBED_CACHE_DIR": str(tmp_path / "cache")}
    command = [sys.executable, "-m", "ctxembed", "attend", "--vectors", str(cut), "the river bank"]
    start = time.monotonic()
    runs = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)
    ]
    for run in runs:
        out, err = run.communicate(timeout=30)
        errors = [line for line in err.splitlines() if line.startswith("ctxembed:")]
        assert run.returncode == 1 and out == "", err
        assert len(errors) == 1 and str(cut) in errors[0] and "truncated" in errors[0], err
        assert "internal error" not in err
    assert time.monotonic() - start < 20  # two processes on 2 shared cores; each alone is ~2 s
