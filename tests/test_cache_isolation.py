"""No test writes to the user's real cache: module-scoped fixtures, which pytest sets up before the
function-scoped isolated_env, once wrote the fixture stores to ~/.cache/ctxembed. Nor to the user's
installed model: the first neighbour search under it wrote the space's states-*.npy (73 MB) beside it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REAL_CACHE, REAL_MODELS, SESSION_HOME

from ctxembed.vectors.cache import cache_dir


def _real_files() -> dict[str, int]:
    if not REAL_CACHE.is_dir():
        return {}
    return {path.name: path.stat().st_mtime_ns for path in REAL_CACHE.iterdir()}


@pytest.fixture(scope="module")
def module_cache():
    """What a module-scoped fixture sees, and the store it writes, as the fixture stores do."""
    from ctxembed.vectors.sources import open_vectors

    before = _real_files()
    open_vectors("notes-toy")
    return cache_dir(), before


def test_module_scoped_fixtures_use_a_temporary_cache(module_cache):
    folder, before = module_cache
    assert folder.resolve().is_relative_to(SESSION_HOME.resolve())
    written = {name for name, mtime in _real_files().items() if before.get(name) != mtime}
    assert not written, f"written to the real cache {REAL_CACHE}: {sorted(written)}"
    assert any(folder.glob("notes_toy-*")), "the fixture store was not cached in the temporary folder"


def test_a_subprocess_caches_in_the_test_folder(isolated_env):
    before = _real_files()
    env = dict(os.environ)
    subprocess.run(
        [sys.executable, "-m", "ctxembed", "attend", "apple is a phone", "--vectors", "notes-toy", "--json"],
        env=env,
        check=True,
        capture_output=True,
    )
    assert any(Path(isolated_env).glob("notes_toy-*"))
    written = {name for name, mtime in _real_files().items() if before.get(name) != mtime}
    assert not written, f"written to the real cache {REAL_CACHE}: {sorted(written)}"


def _listing(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in folder.rglob("*")}


def test_what_a_test_writes_beside_the_installed_model_goes_to_the_sessions_view(minilm_folder):
    """Tests read the installed model through the session's view of it (conftest.view_of): the states a
    neighbour search builds where they are missing land in the view's space, and the user's model folder
    is left as it was."""
    from ctxembed.engine.registry import open_engine
    from ctxembed.engine.space import open_space

    real = REAL_MODELS / "minilm"
    before = _listing(real)
    assert minilm_folder.resolve() != real.resolve() and minilm_folder.is_relative_to(SESSION_HOME)
    space = open_space(open_engine(model="minilm"), build=False)  # the space `make models` built
    assert space.folder.is_relative_to(SESSION_HOME), space.folder  # checked before anything is removed
    for states in space.folder.glob("states-*.npy"):
        states.unlink()  # the view's link to the user's states, or the file an earlier test built: built again
    space.states()
    [built] = space.folder.glob("states-*.npy")
    assert built.is_file() and not built.is_symlink()
    assert _listing(real) == before
