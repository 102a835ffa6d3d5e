"""Shared fixtures: every test runs with its own cache directory and no CTXEMBED_VECTORS.

The whole session (module- and session-scoped fixtures too, which pytest sets up before any
function-scoped one, and every subprocess a test starts) also runs with HOME, XDG_CACHE_HOME and
CTXEMBED_CACHE_DIR in a temporary folder, so no test writes to the user's real ~/.cache/ctxembed.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parent.parent

# The user's cache as ctxembed would find it outside the tests (read before the session moves it).
REAL_CACHE = (
    Path(os.environ["CTXEMBED_CACHE_DIR"]).expanduser()
    if os.environ.get("CTXEMBED_CACHE_DIR")
    else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "ctxembed"
)
# The user's installed models (`ctxembed models install`), read before the session moves HOME: tests of
# the real model read them through a view of the session's (`models_view`), never this folder itself.
REAL_MODELS = (
    Path(os.environ["CTXEMBED_MODELS"]).expanduser()
    if os.environ.get("CTXEMBED_MODELS")
    else Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share").expanduser() / "ctxembed" / "models"
)
SESSION_HOME = Path(tempfile.mkdtemp(prefix="ctxembed-tests-"))


def pytest_configure(config):
    """Before collection: module-level code and higher-scoped fixtures see the session's folders."""
    for name, folder in (("HOME", "home"), ("XDG_CACHE_HOME", "cache"), ("CTXEMBED_CACHE_DIR", "cache/ctxembed")):
        path = SESSION_HOME / folder
        path.mkdir(parents=True, exist_ok=True)
        os.environ[name] = str(path)
    os.environ.setdefault("MPLCONFIGDIR", str(SESSION_HOME / "matplotlib"))
    # A suite started in the background of a non-interactive shell (`make test &`, a CI runner's job)
    # inherits Ctrl-C ignored, and so would every ctxembed it starts: a command started that way rightly
    # keeps ignoring it, but the tests that press Ctrl-C on a command (serve, batch) would see it ignored.
    # Their commands start with the default disposition, as from a terminal (a handler resets at exec).
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_unconfigure(config):
    shutil.rmtree(SESSION_HOME, ignore_errors=True)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory, monkeypatch):
    cache = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("CTXEMBED_CACHE_DIR", str(cache))
    # a trained model's contextual neighbour space is the one `make models` built beside the model's files
    # (engine/space.py: once per install, whatever the cache folder), never a smaller one of the tests' own
    monkeypatch.delenv("CTXEMBED_SPACE_SHARE", raising=False)
    monkeypatch.delenv("CTXEMBED_SPACE_WORDS", raising=False)
    monkeypatch.setenv("GENSIM_DATA_DIR", str(tmp_path_factory.mktemp("gensim-data")))
    monkeypatch.delenv("CTXEMBED_VECTORS", raising=False)
    monkeypatch.delenv("CTXEMBED_DEBUG", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    return cache


def view_of(source: Path, into: Path) -> Path:
    """A folder ``into`` that reads as ``source``: each file a link to the file there (installed.json, a
    few hundred bytes, a copy with its mtime: the one file ctxembed itself may rewrite), each folder (a
    contextual neighbour space) a folder of its own made the same way. What is written into it (a space's
    states-*.npy, a space built anew) stays in it; ``source`` is only read."""
    from ctxembed.vectors.models import INSTALLED

    into.mkdir(parents=True)
    for entry in source.iterdir():
        if entry.is_dir():
            view_of(entry, into / entry.name)
        elif entry.name == INSTALLED:
            shutil.copy2(entry, into / entry.name)
        else:
            (into / entry.name).symlink_to(entry)
    return into


@pytest.fixture(scope="session")
def models_view() -> Path:
    """The user's models folder as the session's tests see it: a view of the session (:func:`view_of`) of
    its minilm, removed with the session, so the suite leaves the user's model folder as it found it."""
    root = SESSION_HOME / "models"
    if (REAL_MODELS / "minilm").is_dir():
        view_of(REAL_MODELS / "minilm", root / "minilm")
    return root


@pytest.fixture
def minilm_folder(models_view, monkeypatch):
    """The installed all-MiniLM-L6-v2, through the session's view of it (CTXEMBED_MODELS points at the view
    for the test). Skips when it is not installed, but FAILS when CTXEMBED_REQUIRE_MODELS=1 (`make test`
    sets it after `make models`)."""
    from ctxembed.vectors.models import install_problem

    problem = install_problem("minilm", REAL_MODELS / "minilm")
    if problem is not None:
        message = f"all-MiniLM-L6-v2 in {REAL_MODELS}: {problem} (or make models)"
        if os.environ.get("CTXEMBED_REQUIRE_MODELS") == "1":
            pytest.fail(message + ", and CTXEMBED_REQUIRE_MODELS=1")
        pytest.skip(message)
    monkeypatch.setenv("CTXEMBED_MODELS", str(models_view))
    return models_view / "minilm"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A second BERT-family model (tests/tiny_model.py: 2 layers, 4 heads, width 32, its own vocabulary),
    registered as one registry entry and installed, for the module's tests; CTXEMBED_MODELS points at it."""
    from tests.tiny_model import install_tiny

    with pytest.MonkeyPatch.context() as patch:
        yield install_tiny(tmp_path_factory.mktemp("models"), patch)
