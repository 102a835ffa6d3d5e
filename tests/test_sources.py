"""Resolving --vectors, the cache (creation, reuse, invalidation), gensim-data names, the default store."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from gensim.models import KeyedVectors

from ctxembed.errors import DataError, UsageError
from ctxembed.vectors.cache import cache_dir
from ctxembed.vectors.sources import cache_state, default_store_path, describe, open_vectors, resolve
from tests.conftest import REPO

WORDS = ["the", "bank", "river", "money"]


@pytest.fixture
def glove_file(tmp_path):
    kv = KeyedVectors(vector_size=3)
    kv.add_vectors(WORDS, np.arange(12, dtype=np.float32).reshape(4, 3) + 1)
    path = tmp_path / "tiny.txt"
    kv.save_word2vec_format(str(path), write_header=False)
    return path


def test_cache_is_created_then_reused(glove_file, isolated_env):
    notes = []
    first = open_vectors(str(glove_file), on_convert=notes.append)
    assert len(notes) == 1 and "converting" in notes[0]
    caches = list(isolated_env.glob("*.ctxv"))
    assert len(caches) == 1 and first.path == caches[0]
    assert cache_state(glove_file, None) == (caches[0], "fresh")
    second = open_vectors(str(glove_file), on_convert=notes.append)
    assert len(notes) == 1  # no second conversion
    assert np.array_equal(second.matrix(), first.matrix())


def test_changed_source_invalidates_cache(glove_file):
    open_vectors(str(glove_file))
    glove_file.write_text("the 9 9 9\nbank 8 8 8\n")
    os.utime(glove_file, ns=(1, 1))  # a different mtime even on coarse clocks
    assert cache_state(glove_file, None)[1] == "stale"
    store = open_vectors(str(glove_file))
    assert store.words == ["the", "bank"]
    assert store.vector("the").tolist() == [9, 9, 9]
    assert cache_state(glove_file, None)[1] == "fresh"


def test_limit_is_served_from_full_cache_or_its_own(glove_file, isolated_env):
    limited = open_vectors(str(glove_file), limit=2)
    assert limited.words == WORDS[:2]
    open_vectors(str(glove_file))  # full cache
    again = open_vectors(str(glove_file), limit=3, on_convert=lambda m: pytest.fail(m))
    assert again.words == WORDS[:3]
    with pytest.raises(UsageError):
        open_vectors(str(glove_file), limit=0)


def test_cache_dir_follows_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("CTXEMBED_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "ctxembed"
    monkeypatch.setenv("CTXEMBED_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"


def test_gensim_data_name_uses_the_downloader_cache(monkeypatch, tmp_path):
    folder = tmp_path / "gd" / "tiny-vectors-3"
    folder.mkdir(parents=True)
    with gzip.open(folder / "tiny-vectors-3.gz", "wt") as fh:
        fh.write("2 3\nbank 1 2 3\nriver 4 5 6\n")
    (folder / "__init__.py").write_text("raise SystemExit('must never run')\n")
    monkeypatch.setenv("GENSIM_DATA_DIR", str(tmp_path / "gd"))
    store = open_vectors("tiny-vectors-3")
    assert store.words == ["bank", "river"]
    assert resolve("tiny-vectors-3").kind == "gensim-data"


def _offline(monkeypatch, tmp_path):
    import gensim.downloader

    def unreachable(url, *args, **kwargs):
        raise OSError("Network is unreachable")

    monkeypatch.setattr(gensim.downloader, "urlopen", unreachable)
    monkeypatch.setattr(gensim.downloader, "BASE_DIR", str(tmp_path / "gensim-data"))
    monkeypatch.setenv("GENSIM_DATA_DIR", str(tmp_path / "gensim-data"))
    return tmp_path / "gensim-data"


def test_gensim_data_offline_says_offline_not_unknown_name(monkeypatch, tmp_path, capfd):
    _offline(monkeypatch, tmp_path)
    with pytest.raises(DataError, match="cannot reach gensim-data .*offline") as caught:
        open_vectors("glove-wiki-gigaword-50")
    assert "not a gensim-data model name" not in caught.value.message
    assert "Traceback" not in capfd.readouterr().err  # gensim's logged traceback is kept quiet


def test_gensim_data_offline_with_a_cached_catalogue(monkeypatch, tmp_path):
    base = _offline(monkeypatch, tmp_path)
    base.mkdir()
    (base / "information.json").write_text(
        json.dumps({"models": {"glove-wiki-gigaword-50": {"file_name": "g.gz"}}, "corpora": {}})
    )
    with pytest.raises(DataError, match="cannot download .*offline"):
        open_vectors("glove-wiki-gigaword-50")
    with pytest.raises(DataError, match="not a gensim-data model name"):
        open_vectors("glove-wiki-nothing-50")


def test_unknown_source_is_a_clear_error():
    with pytest.raises(DataError, match="no such file"):
        resolve("./nowhere/vectors.txt")


def test_default_vectors_are_real_glove():
    store = open_vectors(None)
    assert store.path == default_store_path()
    assert len(store) == 400_000 and store.dim == 100 and store.dtype == "int8"
    assert store.words[:3] == ["the", ",", "."]
    neighbours = [w for w, _ in store.most_similar(store.vector("king"), k=5, exclude={"king"})]
    assert {"queen", "prince"} <= set(neighbours)
    money = [w for w, _ in store.most_similar(store.vector("bank"), k=10, exclude={"bank"})]
    assert "banks" in money and "river" not in money


def test_environment_variable_selects_vectors(glove_file, monkeypatch):
    from typer.testing import CliRunner

    from ctxembed.cli import app

    monkeypatch.setenv("CTXEMBED_VECTORS", str(glove_file))
    result = CliRunner().invoke(app, ["vectors", "info", "--json"])
    # vectors info takes a SOURCE argument; the environment variable is for --vectors
    assert json.loads(result.stdout)["source"] == "default"
    assert describe(str(glove_file))["format"] == "glove-text"


def test_cached_open_does_not_import_gensim(glove_file, isolated_env):
    open_vectors(str(glove_file))  # build the cache in this process
    code = (
        "import sys; from ctxembed.vectors.sources import open_vectors; "
        f"s = open_vectors({str(glove_file)!r}); print(len(s), 'gensim' in sys.modules, 'scipy' in sys.modules)"
    )
    env = dict(os.environ, CTXEMBED_CACHE_DIR=str(isolated_env), PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split() == ["4", "False", "False"]


def test_an_unwritable_cache_reads_the_vectors_without_one_and_says_so(glove_file, monkeypatch, tmp_path):
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the cache folder should be")
    monkeypatch.setenv("CTXEMBED_CACHE_DIR", str(blocked))
    notes = []
    store = open_vectors(str(glove_file), on_convert=notes.append)
    assert len(store) == 4 and store.vector(store.words[0]).shape == (store.dim,)
    assert len(notes) == 1 and "cannot be written" in notes[0] and "without a cache" in notes[0]
    assert "CTXEMBED_CACHE_DIR" in notes[0] and blocked.read_text().startswith("a file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not-a-dir", glove_file.name]  # nothing left behind


def test_info_reads_sizes_from_the_header_without_converting(tmp_path, isolated_env):
    kv = KeyedVectors(vector_size=3)
    kv.add_vectors(WORDS, np.ones((4, 3), dtype=np.float32))
    w2v = tmp_path / "v.bin"
    kv.save_word2vec_format(str(w2v), binary=True)
    info = describe(str(w2v))
    assert (info["format"], info["words"], info["dim"], info["cache_state"]) == ("word2vec-binary", 4, 3, "missing")
    glove = tmp_path / "g.txt"
    kv.save_word2vec_format(str(glove), write_header=False)
    info = describe(str(glove), limit=2)
    assert (info["format"], info["words"], info["dim"]) == ("glove-text", None, 3)
    assert list(isolated_env.glob("*.ctxv")) == []  # describing converts nothing


def test_a_full_cache_folder_reads_the_vectors_without_one_and_says_so(glove_file, monkeypatch, isolated_env):
    """A full disk was fatal ("cannot write the store (No space left on device)") where a read-only
    folder carried on: now both carry on, with one note. The disk fills as the store is written (the real
    writer goes through a temporary file, so nothing is left at the cache's name)."""
    import errno

    from ctxembed.vectors import sources

    real = sources.write_store

    def full_disk(out, *args, **kwargs):
        if out.parent == isolated_env:  # the cache folder is full; the temporary folder is not
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(out, *args, **kwargs)

    monkeypatch.setattr(sources, "write_store", full_disk)
    notes = []
    store = open_vectors(str(glove_file), on_convert=notes.append)
    assert len(store) == 4 and store.vector(store.words[0]).shape == (store.dim,)
    full = [note for note in notes if "is full" in note]
    assert len(full) == 1 and "(No space left on device)" in full[0] and "without a cache" in full[0]
    assert notes[0].startswith("converting ") and len(notes) == 2
