"""Every command that writes a file checks its path before any long work: a directory, a missing
folder, a read-only folder are one line, the same for train --out, --save, vectors convert,
eval fit-mix --out and batch --out, and nothing is computed first."""

from __future__ import annotations

import os
import time

import pytest

from tests.cli_helpers import fails
from tests.conftest import FIXTURES

CORPUS = FIXTURES / "train_tiny.txt"


def _bad_paths(tmp_path, name):
    folder = tmp_path / name  # a folder with the file's name and suffix
    folder.mkdir()
    yield folder, "is a directory"
    yield tmp_path / "missing" / name, "no such folder"
    (tmp_path / "plain").write_text("x")
    yield tmp_path / "plain" / name, "is not a folder"
    if os.path.isdir("/sys") and _cannot_create_in("/sys"):
        yield f"/sys/{name}", "cannot write in '/sys'"


def _cannot_create_in(folder: str) -> bool:
    try:
        open(os.path.join(folder, ".ctxembed-probe"), "w").close()
    except OSError:
        return True
    os.unlink(os.path.join(folder, ".ctxembed-probe"))
    return False


COMMANDS = {
    "train --out": lambda path, tmp: ("train", CORPUS, "--out", path),
    "train --checkpoint": lambda path, tmp: ("train", CORPUS, "--out", tmp / "out.npz", "--checkpoint", path),
    "attend --save": lambda path, tmp: ("attend", "the river bank", "--save", path),
    "vectors convert": lambda path, tmp: (
        "vectors",
        "convert",
        FIXTURES.parent.parent / "data" / "notes_toy.txt",
        path,
    ),
    "eval fit-mix --out": lambda path, tmp: ("eval", "fit-mix", FIXTURES / "wic", "--out", path),
    "batch --out": lambda path, tmp: ("batch", CORPUS, "--out", path),
    "batch --format npz --out": lambda path, tmp: ("batch", CORPUS, "--format", "npz", "--word", "the", "--out", path),
}
SUFFIX = {
    "batch --out": "x.jsonl",
    "attend --save": "x.svg",
    "vectors convert": "x.ctxv",
    "eval fit-mix --out": "x.json",
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_unwritable_output_is_refused_before_any_work(tmp_path, command):
    flag = command.split()[-1] if command.split()[-1].startswith("--") else "OUT"
    for path, message in _bad_paths(tmp_path, SUFFIX.get(command, "w.npz")):
        start = time.monotonic()
        line = fails(1, *COMMANDS[command](path, tmp_path))
        assert message in line and f"{flag} {path}" in line, (command, line)
        assert time.monotonic() - start < 10  # 50 epochs would take minutes
    assert not (tmp_path / "missing").exists()  # a missing folder is not created
    assert not (tmp_path / "w.npz").is_file() and not (tmp_path / "out.npz").exists()
