"""Writing a folder of the models folder: how every writer (``models install``, a derived model's training)
puts a model in place, and how what a killed one left is found and removed.

A model ``NAME`` is written into a temporary folder ``.NAME-XXXXXXXX.staging`` beside the final one, which
holds a lock (``flock``) while its writer runs, then renamed into place whole::

    with staging(root, name) as stage:                # remove_stale(root) first: what killed writers left
        write_the_model_into(stage.folder)
        stage.place()                                 # the model of that name, if any, is replaced

A rename moves a whole folder or fails, so two writers of one name each finish and the last one's folder
is the model: never a mix of both. A temporary folder whose lock is free was left by a writer that was
killed: :func:`stale_folders` lists it (``models list`` shows it under ``stale``) and :func:`remove_stale`
removes it, putting back a model its writer had moved aside to place another. Folders of an older
ctxembed are recognised too: an install's ``.NAME-XXXXXXXX`` of a catalogue model, a derived model's
``.NAME-derived-PID`` and ``.NAME-replaced-PID`` (which holds the model it replaced); those have no lock
and are stale a minute after they were made.
"""

from __future__ import annotations

import errno
import itertools
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

LOCK = ".lock"  # in a temporary folder: held (flock) while its writer runs
SUFFIX = ".staging"
LOCKLESS_AGE = 60  # seconds: a temporary folder without a lock older than this was left by a killed writer
# a temporary folder: this version's, or an older ctxembed's derived model (staged, or the model it replaced)
_TEMPORARY = re.compile(r"^\.(?P<name>.+)-(?:[a-z0-9_]+\.staging|(?P<old>derived|replaced)-\d+)$")


def hold(path: Path):
    """A lock file, held until the returned lock's ``release()`` (a killed process releases it)."""
    from filelock import FileLock  # lazy: only a writer of the models folder locks

    lock = FileLock(path)
    lock.acquire()
    return lock


@dataclass
class Stage:
    """A model being written: ``folder`` (empty at first), renamed to ``final`` by :meth:`place`."""

    work: Path  # the temporary folder: holds the lock, the folder and, once placed, the model replaced
    folder: Path  # where the model is written
    final: Path  # where it goes

    def place(self) -> None:
        """Rename the written folder into place. A model of the same name is moved into the temporary folder
        first (``previous-N``: removed with it, or put back if this writer is killed before it places its
        own); when another writer places its model meanwhile, that one is moved aside the same way."""
        for n in itertools.count():
            try:
                self.folder.rename(self.final)  # fails while a folder (not empty), a file or a link is there
                return
            except OSError as error:
                if error.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                    raise
            try:
                self.final.rename(self.work / f"previous-{n}")
            except FileNotFoundError:  # another writer moved it aside meanwhile
                pass


@contextmanager
def staging(root: Path, name: str, on_note=None) -> Iterator[Stage]:
    """A :class:`Stage` for model ``name`` of the models folder ``root``, its temporary folder removed at the
    end, whatever happens. What killed writers left is removed first (a note each to ``on_note``)."""
    import tempfile  # lazy: only a writer stages a folder

    root.mkdir(parents=True, exist_ok=True)
    clean(root, on_note)
    work = Path(tempfile.mkdtemp(prefix=f".{name}-", suffix=SUFFIX, dir=root))
    try:
        lock = hold(work / LOCK)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    try:
        (work / name).mkdir()  # after the lock: a folder holding only a free lock may be a writer starting
        yield Stage(work, work / name, root / name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        lock.release()


def clean(root: Path, on_note=None) -> None:
    """:func:`remove_stale`, with a note to ``on_note`` for each folder removed."""
    for folder in remove_stale(root):
        (on_note or (lambda message: None))(f"removed {folder}, left by an install or a training that was stopped")


def stale_folders(root: Path) -> list[Path]:
    """The temporary folders of the models folder whose writer was killed."""
    from ctxembed.vectors.catalogue import packages  # an older install's folder is named by its package

    if not root.is_dir():
        return []
    older = tuple(f".{name}-" for name in packages())
    found = [
        p
        for p in root.iterdir()
        if (_TEMPORARY.match(p.name) or p.name.startswith(older))
        and p.is_dir()
        and not p.is_symlink()
        and _abandoned(p)
    ]
    return sorted(found)


def remove_stale(root: Path) -> list[Path]:
    """Remove what killed writers left; a model whose folder such a writer had moved aside is put back when
    no other took its place."""
    removed = stale_folders(root)
    for folder in removed:
        name, previous = _model_of(folder)
        if previous is not None and not (root / name).exists():
            try:
                previous.rename(root / name)
            except OSError:  # another clean-up or writer got there first
                pass
        shutil.rmtree(folder, ignore_errors=True)
    return removed


def _model_of(folder: Path) -> tuple[str, Path | None]:
    """The name of the model a temporary folder was writing, and the model it had moved aside (the last one,
    when it moved several), or None."""
    match = _TEMPORARY.match(folder.name)
    if match is not None and match["old"] == "replaced":  # an older ctxembed's: the folder is the model
        return match["name"], folder
    name = match["name"] if match is not None else folder.name[1:].rsplit("-", 1)[0]  # an older install's
    aside = [p for p in folder.glob("previous*") if p.is_dir() and any(p.iterdir())]
    return name, max(aside, key=lambda p: int(p.name.partition("-")[2] or -1), default=None)


def _abandoned(folder: Path) -> bool:
    """Whether a temporary folder's writer is gone: its lock is free and it holds more than its lock (a
    writer makes its folder only once it holds the lock), or it is older than :data:`LOCKLESS_AGE` (killed
    before it held its lock, or an older ctxembed's folder, which has none)."""
    import time

    try:
        old = time.time() - folder.stat().st_mtime > LOCKLESS_AGE
    except OSError:  # removed meanwhile
        return False
    try:
        if not _free(folder / LOCK):
            return False
        return old or any(p.name != LOCK for p in folder.iterdir())
    except FileNotFoundError:  # no lock: an older ctxembed's folder, or one being removed
        return old and folder.is_dir()
    except OSError:
        return False


def _free(path: Path) -> bool:
    """Whether no process holds the lock file ``path``, asked without creating it (a lock made anew in a
    folder its writer is removing would keep that folder). FileNotFoundError when it is not there."""
    try:
        import fcntl
    except ImportError:  # not POSIX: filelock's own way (which makes the file when it is missing)
        from filelock import FileLock, Timeout

        if not path.exists():
            raise FileNotFoundError(path) from None
        lock = FileLock(path)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            return False
        lock.release()
        return True
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # filelock holds its locks with flock too
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # and with it the lock just taken
    return True
