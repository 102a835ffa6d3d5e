"""What opening an installed model checks, whatever its family: the cheap checks every time, the full one
when a file changed.

Every family's loader (its :class:`~ctxembed.vectors.layouts.Layout`'s ``load``; a BERT's is
:func:`ctxembed.vectors.bert.load_bert`) begins with :func:`open_checked`, which checks in about a
millisecond and without reading the weights:

- ``installed.json`` is a record of the current layout with a sha256 for every file the family writes
  (:func:`pinned`);
- each of those files is a regular file (a FIFO or a device is refused before it is read, so nothing
  hangs) whose size and mtime are the ones ``installed.json`` recorded, or those of the last full check
  (remembered in the cache folder, and by the process that made it); when one differs, the full check
  of that file runs first (:func:`verify_files`: its sha256, and for the weights file every number
  finite, checked on the bytes it hashes);

then checks what only the family knows (a BERT's config, safetensors header and vocabulary). The neighbour
store opens with its own header checksum and the model's width (:func:`open_store`), and the engine
refuses non-finite hidden states (:func:`check_finite`). ``ctxembed models verify``
(:func:`ctxembed.vectors.layouts.verify`) runs the full check on every file. A finite change written in
place with the file's mtime put back (a row zeroed, a layer scaled) passes the cheap checks: ``ctxembed
models verify`` finds it. Every refusal is one line naming the file and ``ctxembed models install NAME``,
which installs it again.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from ctxembed.errors import DataError
from ctxembed.output import atomic_file
from ctxembed.vectors.models import (
    FORMAT,
    INSTALLED,
    SMALL,
    ModelPackage,
    damaged,
    install_command,
    models_dir,
    package_of,
    read_record,
)

STAMPS = "verified-models.json"  # in the cache folder: each file's stat when its full check passed
# this process's own record of the same (file -> stat), so a file checked in full is not checked again by
# this process when the cache folder cannot be written (``models verify`` hashes, then opens with the loader)
_PASSED: dict[str, list[int]] = {}


def file_stat(name: str, path: Path) -> os.stat_result:
    """``path``'s stat, refused unless it is a regular file: a FIFO, a device or a folder is never opened."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        raise damaged(name, path, "missing") from None
    except OSError as error:
        raise damaged(name, path, error.strerror or type(error).__name__) from None
    if not stat.S_ISREG(found.st_mode):
        raise damaged(name, path, "not a regular file")
    return found


# ------------------------------------------------------------------ opening


def open_checked(folder: Path, files: tuple[str, ...], weights: str) -> tuple[dict, ModelPackage, dict]:
    """What every family's loader checks first of a converted folder (the model named by its folder's
    name) holding its family's ``files`` (``weights``: its weights file): its record, pinning each of them,
    each a regular file, and the full check of a file that changed since it was last checked. Returns the
    record, the model's package (a fine-tuned model's: its parent's) and each file's stat."""
    name = folder.name
    record = pinned(name, folder, read_record(name, folder), files)
    package = package_of(record.get("derived_from", name))  # a fine-tuned model: its parent's package
    stats = {file: file_stat(name, folder / file) for file in files}
    changed = [file for file in files if not _as_checked(record, folder, file, stats[file])]
    if changed:
        verify_files(name, folder, record, changed, weights)
    return record, package, stats


def pinned(name: str, folder: Path, record: dict, files: tuple[str, ...]) -> dict:
    """The record of installed model ``name`` (:func:`ctxembed.vectors.models.read_record`), refused unless
    it pins a sha256 for each of ``files``, the ones its family writes."""
    if not all(file in record["sha256"] for file in files):
        raise damaged(name, folder / INSTALLED, "no sha256 for each converted file")
    return record


def _as_checked(record: dict, folder: Path, file: str, found: os.stat_result) -> bool:
    """Whether ``file`` has the size and mtime installed.json recorded, or those of its last full check."""
    recorded = record.get("files", {}).get(file)
    if recorded is not None and (found.st_size, found.st_mtime_ns) == (recorded["bytes"], recorded["mtime_ns"]):
        return True
    key, stamp = str((folder / file).resolve()), _stamp(found)
    return _PASSED.get(key) == stamp or _stamps().get(key) == stamp


def expected_metadata(package: ModelPackage) -> dict[str, str]:
    """The safetensors metadata the converter writes."""
    return {"converted_by": "ctxembed", "source": package.upstream, "format": str(FORMAT)}


def open_store(name: str, path: Path, config):
    """The neighbour store, with the install command in any error it gives now or when a block is read."""
    from ctxembed.vectors.store import VectorStore

    try:
        store = VectorStore.open(path)
    except DataError as error:
        raise DataError(f"{error.message}: reinstall with `{install_command(name)}`") from None
    if store.dim != config.hidden:
        raise damaged(name, path, f"{store.dim}-dimensional, the model is {config.hidden}")
    store.damage_hint = f"reinstall with `{install_command(name)}`"
    return store


def check_finite(name: str, array, what: str) -> None:
    """Refuse numbers a damaged weight gave: any non-finite value in ``array`` (the encoder's hidden
    states: a NaN or an infinity in a weight the sentence used reaches them); ``what``: the weights file."""
    import numpy as np

    if not np.isfinite(array).all():
        raise damaged(name, models_dir() / name / what, "a weight gives non-finite numbers")


# ------------------------------------------------------------------ the full check


def verify_files(name: str, folder: Path, record: dict, files: list[str], weights: str) -> None:
    """Hash ``files`` against installed.json (and check ``weights``, the weights file, for a non-finite
    number on the bytes it is hashed from: one read); remember each file's stat once it passes, so the next
    open checks cheaply."""
    passed = {}
    for file in files:
        path = folder / file
        before = file_stat(name, path)
        checked_sha256(name, path, weights=file == weights, expected=record["sha256"][file])
        if _stamp(file_stat(name, path)) == _stamp(before):  # not written while it was read
            passed[str(path.resolve())] = _stamp(before)
    _remember(passed)


def checked_sha256(name: str, path: Path, *, weights: bool, expected: str | None = None) -> str:
    """The sha256 of the file at ``path``, read once, one block at a time; for the weights file (``weights``)
    every number is checked finite on the bytes it is hashed from. DataError naming the file when its sha256
    is not ``expected`` (when given: ``models verify``; said first, so a file changed since install is named
    by its sha256) or a number is a NaN or an infinity. ``models install`` pins what it returns."""
    from ctxembed.vectors.models import sha256_of  # models' own name: tests count its calls

    finite = FiniteCheck(path, file_stat(name, path).st_size) if weights else None
    digest = sha256_of(path, finite and finite.feed)
    if expected is not None and digest != expected:
        raise damaged(name, path, "its sha256 is not the one recorded at install")
    if finite is not None and finite.problem is not None:
        raise damaged(name, path, finite.problem)
    return digest


class FiniteCheck:
    """Every float number of a safetensors file checked finite on its bytes as they are read, in order
    (:meth:`feed`), so the hash of ``models install`` and ``models verify`` and this check share one read.
    ``problem``: why the file is refused (a header that is not safetensors, the first tensor holding a NaN or
    an infinity), or None; kept, not raised, so that a file changed since install is named by its sha256 first."""

    def __init__(self, path: Path, size: int):
        from ctxembed.vectors import safetensors

        self.problem: str | None = None
        self._spans: list[tuple[int, int, object, str]] = []  # (begin, end, dtype, tensor) in the file, by begin
        self._cut: dict[str, bytes] = {}  # tensor -> the bytes of a number a block's end cut, until the next
        try:
            found = safetensors.spans(*safetensors.read_header(path), size)
        except (OSError, ValueError) as error:
            self.problem = str(error).splitlines()[0] or type(error).__name__
            return
        floats = [(begin, end, dtype, tensor) for tensor, (begin, end, dtype, _) in found.items() if dtype.kind == "f"]
        self._spans = sorted(floats, key=lambda span: span[0])

    def feed(self, offset: int, block: bytes) -> None:
        """Check the numbers of the float tensors in ``block``, the file's bytes from ``offset`` on."""
        end, view = offset + len(block), memoryview(block)
        for begin, stop, dtype, tensor in self._spans:
            if self.problem is not None or begin >= end:
                return
            if stop <= offset:
                continue
            piece = view[max(begin, offset) - offset : min(stop, end) - offset]
            head = self._cut.pop(tensor, b"")
            if head:  # a number begun in the block before
                number = head + bytes(piece[: dtype.itemsize - len(head)])
                piece = piece[dtype.itemsize - len(head) :]
                if len(number) < dtype.itemsize:
                    self._cut[tensor] = number
                    continue
                self._check(tensor, number, dtype)
            whole = len(piece) - len(piece) % dtype.itemsize
            self._check(tensor, piece[:whole], dtype)
            if whole < len(piece):
                self._cut[tensor] = bytes(piece[whole:])

    def _check(self, tensor: str, data, dtype) -> None:
        import numpy as np

        from ctxembed.vectors.safetensors import all_finite

        if not all_finite(np.frombuffer(data, dtype)):  # (n,) no copy
            self.problem = f"tensor {tensor} holds a non-finite number"


def _stamp(found: os.stat_result) -> list[int]:
    return [found.st_size, found.st_mtime_ns, found.st_ctime_ns, found.st_ino, found.st_dev]


def _stamps_path() -> Path:
    from ctxembed.vectors.cache import cache_dir

    return cache_dir() / STAMPS


def _stamps() -> dict:
    try:
        with open(_stamps_path(), "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return {}
            stamps = json.loads(f.read(SMALL))
    except (OSError, ValueError, RecursionError):
        return {}
    return stamps if isinstance(stamps, dict) else {}


def _remember(passed: dict) -> None:
    """Add the stats of files that passed their full check to this process's record and the cache's stamps
    (best effort: a cache that cannot be written only means the next process checks them again)."""
    if not passed:
        return
    _PASSED.update(passed)
    stamps = {**_stamps(), **passed}
    try:
        with atomic_file(_stamps_path()) as fh:
            fh.write(json.dumps(stamps, sort_keys=True).encode())
    except OSError:
        pass
