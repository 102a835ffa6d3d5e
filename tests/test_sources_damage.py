"""Damaged caches are rebuilt, the shipped store asks for a reinstall, odd files are refused by name."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest
from gensim.models import KeyedVectors

from ctxembed.errors import DataError
from ctxembed.vectors.cache import cache_path, load_npz_checked, save_npz_atomic
from ctxembed.vectors.sources import convert, open_shipped, open_vectors, resolve

WORDS = [f"w{i}" for i in range(3000)]


@pytest.fixture
def w2v_file(tmp_path):
    kv = KeyedVectors(vector_size=100)
    kv.add_vectors(WORDS, np.random.default_rng(0).normal(size=(len(WORDS), 100)).astype(np.float32))
    path = tmp_path / "vectors.txt"
    kv.save_word2vec_format(str(path))
    return path


def _flip(path, offset):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x40
    path.write_bytes(bytes(data))


def test_cache_damaged_at_open_is_rebuilt_with_one_note(w2v_file):
    notes: list[str] = []
    target = open_vectors(str(w2v_file), on_convert=notes.append).path
    target.write_bytes(target.read_bytes()[:1000])  # truncated
    store = open_vectors(str(w2v_file), on_convert=notes.append)
    assert len(notes) == 2 and "is damaged; rebuilding it from" in notes[1]
    assert len(store) == len(WORDS) and store.vector("w5").shape == (100,)


def test_cache_damage_found_later_removes_the_cache_so_the_next_run_rebuilds(w2v_file):
    notes: list[str] = []
    target = open_vectors(str(w2v_file), on_convert=notes.append).path
    _flip(target, target.stat().st_size - 100)  # the end of the matrix: only checked when used
    store = open_vectors(str(w2v_file), on_convert=notes.append)
    assert len(notes) == 1  # the header and vocabulary are intact: served from the cache
    with pytest.raises(DataError, match="damaged.*removed; the next run rebuilds it"):
        store.vector(WORDS[-1])
    assert not target.exists()
    rebuilt = open_vectors(str(w2v_file), on_convert=notes.append)
    assert len(notes) == 2 and rebuilt.vector(WORDS[-1]).shape == (100,)


def test_damaged_shipped_store_says_reinstall(tmp_path):
    from ctxembed.vectors.sources import default_store_path

    copy = tmp_path / "shipped.ctxv"
    copy.write_bytes(default_store_path().read_bytes())
    _flip(copy, copy.stat().st_size // 2)  # inside the matrix
    store = open_shipped(copy)
    with pytest.raises(DataError, match="reinstall ctxembed"):
        store.verify()
    copy.write_bytes(copy.read_bytes()[:5000])
    with pytest.raises(DataError, match="reinstall ctxembed"):
        open_shipped(copy)


def test_source_replaced_during_conversion_is_not_cached_as_fresh(w2v_file, monkeypatch):
    import ctxembed.vectors.formats

    real = ctxembed.vectors.formats.load_foreign

    def load_then_replace(path, *args, **kwargs):
        loaded = real(path, *args, **kwargs)
        with open(path, "a") as fh:
            fh.write("extra 1 2 3\n")  # the file changes after it was read
        return loaded

    monkeypatch.setattr(ctxembed.vectors.formats, "load_foreign", load_then_replace)
    with pytest.raises(DataError, match="changed while it was being converted"):
        open_vectors(str(w2v_file))
    assert not cache_path(w2v_file.resolve(), None).exists()


def test_conversion_waits_for_the_lock_then_uses_the_cache(w2v_file):
    from filelock import FileLock

    notes: list[str] = []
    target = cache_path(w2v_file.resolve(), None)
    target.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(f"{target}.lock")
    lock.acquire()
    result: list = []
    worker = threading.Thread(target=lambda: result.append(open_vectors(str(w2v_file), on_convert=notes.append)))
    worker.start()
    time.sleep(0.5)
    assert worker.is_alive() and not notes  # waiting for the lock, not converting
    convert(w2v_file.resolve(), "word2vec-text", target, limit=None, trust=False)  # "the other process" converts
    lock.release()
    worker.join(30)
    assert result and not notes  # the waiter found a fresh cache: no second conversion


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(DataError, match="is a FIFO, not a regular file"):
        resolve(str(fifo))


def test_symlink_loop_and_broken_link_and_directory(tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(DataError, match="symbolic link loop"):
        resolve(str(loop))
    broken = tmp_path / "broken"
    broken.symlink_to(tmp_path / "nothing")
    with pytest.raises(DataError, match="broken symbolic link"):
        resolve(str(broken))
    with pytest.raises(DataError, match="is a directory"):
        resolve(str(tmp_path))


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_bytes(b""),  # emptied
        lambda p: p.write_bytes(p.read_bytes()[:100]),  # truncated
        lambda p: _flip(p, p.stat().st_size // 2),  # flipped bytes
    ],
    ids=["empty", "truncated", "flipped"],
)
def test_statistics_cache_damage_is_noted_and_removed(tmp_path, damage, capfd):
    path = tmp_path / "stats.npz"
    save_npz_atomic(path, mean=np.arange(1000, dtype=np.float32), directions=np.eye(30, dtype=np.float32))
    assert set(load_npz_checked(path, ("mean", "directions"))) == {"mean", "directions"}
    damage(path)
    assert load_npz_checked(path, ("mean", "directions")) is None
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "statistics cache" in err and "rebuilding it" in err
    assert not path.exists()


def test_statistics_cache_with_nan_is_refused(tmp_path, capfd):
    import zipfile

    path = tmp_path / "stats.npz"
    with zipfile.ZipFile(path, "w") as archive:  # a cache written without our checksum helper
        for key, value in {"mean": np.array([np.nan], dtype=np.float32), "directions": np.eye(2)}.items():
            with archive.open(f"{key}.npy", "w") as fh:
                np.lib.format.write_array(fh, value)
    assert load_npz_checked(path, ("mean", "directions")) is None
    assert "damaged" in capfd.readouterr().err


def test_an_emptied_statistics_cache_is_rebuilt_on_the_next_run(w2v_file, isolated_env):
    from ctxembed.cli import app
    from tests.cli_helpers import RUNNER

    def attend():
        args = ["attend", "w1 w2 w3", "--vectors", str(w2v_file), "--preset", "textbook", "--abtt", "2", "--json"]
        return RUNNER.invoke(app, args, env={"CTXEMBED_CACHE_DIR": str(isolated_env)})

    first = attend()
    assert first.exit_code == 0, first.stderr
    [stats] = isolated_env.glob("stats-*.npz")
    stats.write_bytes(b"")
    second = attend()
    assert second.exit_code == 0, second.stderr
    notes = [line for line in second.stderr.splitlines() if "statistics cache" in line]
    assert len(notes) == 1 and "is damaged" in notes[0] and "rebuilding it" in notes[0]
    assert stats.stat().st_size > 0  # rebuilt
    assert second.stdout == first.stdout
    third = attend()
    assert "statistics cache" not in third.stderr


def test_convert_to_a_full_disk_is_one_clean_error(tmp_path, monkeypatch):
    import errno

    import ctxembed.vectors.store
    from ctxembed.vectors.sources import convert_to_store

    class Full:
        def __init__(self, path):
            pass

        def __enter__(self):
            raise OSError(errno.ENOSPC, "No space left on device")

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(ctxembed.vectors.store, "atomic_file", Full)
    with pytest.raises(DataError, match="cannot write the store \\(No space left on device\\)"):
        convert_to_store("default", tmp_path / "x.ctxv", limit=None, trust=False, quantize=False)


def test_converting_the_shipped_store_copies_it_byte_for_byte(tmp_path):
    from ctxembed.vectors.sources import convert_to_store, default_store_path

    convert_to_store("default", tmp_path / "copy.ctxv", limit=None, trust=False, quantize=False)
    assert (tmp_path / "copy.ctxv").read_bytes() == default_store_path().read_bytes()


def test_a_cut_copy_of_the_shipped_store_keeps_its_subwords_and_row_flags(tmp_path):
    from ctxembed.vectors.sources import convert_to_store, default_store_path
    from ctxembed.vectors.store import VectorStore

    convert_to_store("default", tmp_path / "cut.ctxv", limit=1000, trust=False, quantize=False)
    whole, cut = VectorStore.open(default_store_path()), VectorStore.open(tmp_path / "cut.ctxv")
    assert len(cut) == 1000 and np.array_equal(cut.row_sources, whole.row_sources[:1000])
    assert cut.row_source(cut.find("a")) == "estimated"
    assert "xqzzv" not in cut and np.array_equal(cut.vector("xqzzv"), whole.vector("xqzzv"))
