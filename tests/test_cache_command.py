"""ctxembed cache shows what the cache folder holds, and --clear deletes what ctxembed wrote there, nothing else."""

from __future__ import annotations

import json

from tests.cli_helpers import succeeds


def test_cache_shows_and_clears_only_its_own_files(tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / "glove-abc.ctxv").write_bytes(b"x" * 1000)
    (folder / "glove-abc.ctxv.lock").write_bytes(b"")
    (folder / "stats-unit-10-ab.npy").write_bytes(b"y" * 500)
    (folder / "notes.txt").write_text("a file of the user's")
    env = {"CTXEMBED_CACHE_DIR": str(folder)}
    shown = json.loads(succeeds("cache", "--json", env=env).stdout)
    assert (shown["files"], shown["bytes"], shown["cleared"]) == (3, 1500, False)
    assert {k["kind"]: k["files"] for k in shown["kinds"]} == {
        "converted vector stores": 1, "neighbour search statistics": 1, "locks": 1,
    }  # fmt: skip
    assert "ctxembed cache --clear" in succeeds("cache", env=env).stdout
    cleared = json.loads(succeeds("cache", "--clear", "--json", env=env).stdout)
    assert cleared["cleared"] and cleared["files"] == 3
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]


def test_a_missing_cache_folder_is_empty_not_an_error(tmp_path):
    doc = json.loads(succeeds("cache", "--json", env={"CTXEMBED_CACHE_DIR": str(tmp_path / "none")}).stdout)
    assert doc["files"] == 0 and doc["bytes"] == 0
