"""Every writer of the models folder stages its model the one way (ctxembed/vectors/staging.py): a derived
model's training as `models install` does. Real processes: one killed while it writes leaves a folder that
`models list` calls stale and the next writer removes; several writing one name at once each finish and
leave one writer's folder, whole."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from ctxembed.vectors import derived, staging
from tests.cli_helpers import invoke
from tests.conftest import REPO

RECORD = {
    "schema": derived.SCHEMA,
    "parent": "minilm",
    "weights": "parent",
    "head": {},
    "mix": {},
    "data": {"name": "pairs.tsv"},
    "licence": "Apache-2.0",
}


def python(code: str, root, *args: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "CTXEMBED_MODELS": str(root), "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env, text=True, **kwargs)


def read_at(folder: int, name: str) -> str:
    with open(os.open(name, os.O_RDONLY, dir_fd=folder)) as f:
        return f.read()


def test_a_training_killed_while_it_writes_leaves_a_stale_folder_the_next_writer_removes(tmp_path):
    root = tmp_path / "models"
    hangs = f"""
import time
from ctxembed.vectors import derived
def hang(path):  # the record, written last: the weights and copies are in the temporary folder by now
    print("writing", flush=True)
    time.sleep(600)
derived.atomic_file = hang
derived.write_derived("killed", {RECORD!r})
"""
    writer = python(hangs, root, stdout=subprocess.PIPE)
    assert writer.stdout.readline() == "writing\n"
    busy = [p for p in root.iterdir() if p.name.startswith(".killed-")]
    assert len(busy) == 1 and staging.stale_folders(root) == []  # its writer holds the lock: not stale
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    listed = invoke("models", "list", "--json", env={"CTXEMBED_MODELS": str(root)})
    assert json.loads(listed.stdout)["stale"] == [str(busy[0])]
    notes = []
    os.environ["CTXEMBED_MODELS"] = str(root)
    try:
        derived.write_derived("next", RECORD, on_note=notes.append)
    finally:
        del os.environ["CTXEMBED_MODELS"]
    assert notes == [f"removed {busy[0]}, left by an install or a training that was stopped"]
    assert sorted(p.name for p in root.iterdir()) == ["next"]


def test_an_older_ctxembeds_folders_are_stale_and_a_model_it_moved_aside_is_put_back(tmp_path):
    """An older ctxembed staged a derived model in .NAME-derived-PID and moved the model it replaced to
    .NAME-replaced-PID, with no lock: a minute after, with its process gone, both are stale; the model
    moved aside goes back where no other took its place."""
    root = tmp_path / "models"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)  # a process that has exited
    staged, replaced = root / f".mine-derived-{pid}", root / f".mine-replaced-{pid}"
    for folder in (staged, replaced):
        folder.mkdir(parents=True)
        (folder / "derived.json").write_text(json.dumps(RECORD | {"data": {"name": folder.name}}))
    assert staging.stale_folders(root) == []  # made just now: its writer may still be running
    old = time.time() - 2 * staging.LOCKLESS_AGE
    for folder in (staged, replaced):
        os.utime(folder, (old, old))
    assert staging.stale_folders(root) == [staged, replaced]
    assert staging.remove_stale(root) == [staged, replaced]
    assert sorted(p.name for p in root.iterdir()) == ["mine"]
    assert json.loads((root / "mine" / "derived.json").read_text())["data"]["name"] == replaced.name


def test_trainings_writing_one_name_at_once_each_finish_and_leave_one_whole_folder(tmp_path):
    """Four processes write derived model "same" 150 times each, and stage a two-file model "pair" the one
    way 150 times each: none fails, and every read of "pair" between writes finds both files from one
    write. Before, a writer's rename met another's folder: "Directory not empty", a traceback."""
    root = tmp_path / "models"
    writes = f"""
import sys
from ctxembed.vectors import derived, staging
me = sys.argv[1]
for i in range(150):
    derived.write_derived("same", {RECORD!r} | {{"data": {{"name": f"{{me}}-{{i}}"}}}})
    with staging.staging(derived.models.models_dir(), "pair") as stage:
        (stage.folder / "a.txt").write_text(f"{{me}}-{{i}}")
        (stage.folder / "b.txt").write_text(f"{{me}}-{{i}}")
        stage.place()
"""
    writers = [python(writes, root, name, stderr=subprocess.PIPE) for name in "ABCD"]
    seen = set()
    while any(w.poll() is None for w in writers):
        time.sleep(0.002)
        try:
            folder = os.open(root / "pair", os.O_RDONLY)  # one folder's files, whatever is renamed meanwhile
        except FileNotFoundError:  # before the first write, or between a model moved aside and the next
            continue
        try:
            a, b = (read_at(folder, name) for name in ("a.txt", "b.txt"))
        except FileNotFoundError:  # replaced meanwhile, and being removed
            continue
        finally:
            os.close(folder)
        assert a == b, "a folder mixed from two writes"
        seen.add(a)
    for writer in writers:
        assert writer.wait() == 0, writer.stderr.read()
    assert json.loads((root / "same" / "derived.json").read_text())["data"]["name"].endswith("-149")
    assert (root / "pair" / "a.txt").read_text() == (root / "pair" / "b.txt").read_text()
    assert sorted(p.name for p in root.iterdir()) == ["pair", "same"]
    assert len(seen) > 1


def test_a_link_in_place_of_the_model_is_replaced_and_what_it_names_left_alone(tmp_path, monkeypatch):
    root, elsewhere = tmp_path / "models", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "derived.json").write_text("{}")
    root.mkdir()
    (root / "linked").symlink_to(elsewhere)
    monkeypatch.setenv("CTXEMBED_MODELS", str(root))
    folder = derived.write_derived("linked", RECORD)
    assert not folder.is_symlink() and json.loads((folder / "derived.json").read_text()) == RECORD
    assert (elsewhere / "derived.json").read_text() == "{}"
    assert sorted(p.name for p in root.iterdir()) == ["linked"]
