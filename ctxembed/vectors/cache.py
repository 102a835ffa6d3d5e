"""The cache folder: converted vector stores, checksummed statistics files and memory-mapped arrays
derived from a store (the unit rows neighbour search reads), keyed by their source."""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ctxembed.output import atomic_file, say
from ctxembed.vectors.store import STORE_SUFFIX, VectorStore


def cache_dir() -> Path:
    explicit = os.environ.get("CTXEMBED_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "ctxembed"


def file_fingerprint(path: Path) -> dict:
    stat = path.stat()
    return {"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def cache_path(path: Path, limit: int | None) -> Path:
    import hashlib  # lazy: a trained model's start opens no cached file, nor OpenSSL

    key = hashlib.sha256(f"{path.resolve()}\0{limit or 0}".encode()).hexdigest()[:16]
    stem = path.name.split(".")[0][:40] or "vectors"
    suffix = f"-limit{limit}" if limit else ""
    return cache_dir() / f"{stem}{suffix}-{key}{STORE_SUFFIX}"


def stats_cache_path(store: VectorStore, kind: str) -> Path | None:
    """Where to cache statistics of a store (e.g. its principal directions); None if it has no file."""
    try:
        fingerprint = file_fingerprint(Path(store.path).resolve())
    except OSError:
        return None
    import hashlib  # lazy: as in cache_path

    key = hashlib.sha256(json.dumps([fingerprint, len(store), kind]).encode()).hexdigest()[:16]
    return cache_dir() / f"stats-{kind}-{key}.npz"


def _arrays_crc(arrays: dict[str, np.ndarray]) -> int:
    crc = 0
    for key in sorted(arrays):
        array = np.ascontiguousarray(arrays[key])
        crc = zlib.crc32(f"{key}:{array.dtype.str}:{array.shape}".encode(), crc)
        crc = zlib.crc32(memoryview(array).cast("B") if array.size else b"", crc)
    return crc


def save_npz_atomic(path: Path, **arrays) -> None:
    """Write a statistics cache with a checksum of its arrays. Best effort: a cache that cannot
    be written is simply not kept."""
    arrays = {key: np.ascontiguousarray(value) for key, value in arrays.items()}
    try:
        with atomic_file(path) as fh:
            np.savez(fh, **arrays, _crc32=np.array(_arrays_crc(arrays), dtype=np.int64))
    except OSError:
        pass


def load_npz_checked(path: Path, keys: tuple[str, ...]) -> dict[str, np.ndarray] | None:
    """A statistics cache written by :func:`save_npz_atomic`, or None when it is missing.

    A damaged one (empty, truncated, not a zip, missing keys, checksum mismatch, non-finite
    numbers) is removed with one note on stderr, and None returned, so the caller rebuilds it."""
    if not path.exists():
        return None
    problem = None
    try:
        with np.load(path, allow_pickle=False) as saved:
            arrays = {key: saved[key] for key in keys}
            crc = int(saved["_crc32"])
    except KeyError as exc:
        problem = f"no {exc.args[0]!r} in it"
    except Exception as exc:  # noqa: BLE001 - EOFError, BadZipFile, ValueError, OSError...: all mean damaged
        problem = type(exc).__name__
    else:
        if crc != _arrays_crc(arrays):
            problem = "checksum mismatch"
        elif not all(np.isfinite(a).all() for a in arrays.values() if a.dtype.kind == "f"):
            problem = "non-finite numbers"
        else:
            return arrays
    say(f"ctxembed: note: the statistics cache {path} is damaged ({problem}); rebuilding it")
    try:
        path.unlink()
    except OSError:
        pass
    return None


_MAPPED: dict[Path, np.ndarray] = {}  # arrays this process has mapped and checked, by their cache file


def mapped_array(store: VectorStore, kind: str, shape: tuple[int, ...], build: Callable[[], np.ndarray]) -> np.ndarray:
    """A float32 array derived from ``store`` (``kind`` names it and what it depends on), memory-mapped
    from the cache folder: built by ``build()`` and written once, then mapped by every later process.

    The file is ``<kind>-<key>-<crc>.npy``: its CRC-32 is in its name and checked when a process first
    maps it, so a damaged file is removed with one note and built again. A store without a file, or a
    cache folder that cannot be written (read-only, full), gives the array built in memory."""
    base = stats_cache_path(store, kind)
    if base is None:
        return build()
    return mapped_file(base.with_name(base.name.removesuffix(".npz")), shape, build)


def mapped_file(base: Path, shape: tuple[int, ...], build: Callable[[], np.ndarray]) -> np.ndarray:
    """A float32 array kept as ``<base>-<crc>.npy`` (the cache's, and a contextual space's rows beside a
    model): mapped when a file with a matching CRC-32 is there (checked once a process; a damaged one is
    removed with a note), else built by ``build()`` and written (best effort: a folder that cannot be
    written gives the array in memory, and the next process builds it again)."""
    for found in sorted(base.parent.glob(f"{base.name}-*.npy")):
        if found in _MAPPED:
            return _MAPPED[found]
        array = _checked_npy(found, shape)
        if array is not None:
            _MAPPED[found] = array
            return array
    array = np.ascontiguousarray(build(), dtype=np.float32)
    try:
        with atomic_file(base.parent / f"{base.name}-{crc(array)}.npy") as fh:
            np.save(fh, array, allow_pickle=False)
    except OSError:
        pass
    return array


def crc(array: np.ndarray) -> str:
    """The CRC-32 of an array's bytes, as 8 hex digits (a kept array's name, a contextual space's record)."""
    return f"{zlib.crc32(memoryview(np.ascontiguousarray(array)).cast('B')) if array.size else 0:08x}"


def _checked_npy(path: Path, shape: tuple[int, ...]) -> np.ndarray | None:
    """The array of a file written by :func:`mapped_array`, memory-mapped, or None (removed, with a note)
    when it is damaged: not an .npy, another shape or dtype, or a CRC-32 other than its name's."""
    problem = None
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError:
        return None  # another process replaced it meanwhile
    except Exception as exc:  # noqa: BLE001 - ValueError, OSError, EOFError...: all mean damaged
        problem = type(exc).__name__
    else:
        expected = path.stem.rsplit("-", 1)[-1]
        if array.shape != shape or array.dtype != np.float32:
            problem = f"shape {array.shape} {array.dtype}"
        elif crc(array) != expected:
            problem = "checksum mismatch"
        else:
            return array
    say(f"ctxembed: note: the cache {path} is damaged ({problem}); rebuilding it")
    try:
        path.unlink()
    except OSError:
        pass
    return None


# What ctxembed writes into the cache folder, by name: the only files `ctxembed cache --clear` deletes
# (a CTXEMBED_CACHE_DIR pointed at a folder of other files loses none of them).
CACHE_KINDS = (
    ("converted vector stores", ("*" + STORE_SUFFIX,)),
    ("neighbour search statistics", ("stats-*",)),
    ("locks", ("*" + STORE_SUFFIX + ".lock", "*.lock")),
)


def _cache_files() -> dict[str, list[Path]]:
    folder = cache_dir()
    found: dict[str, list[Path]] = {kind: [] for kind, _ in CACHE_KINDS}
    if not folder.is_dir():
        return found
    seen: set[Path] = set()
    for kind, patterns in CACHE_KINDS:
        for pattern in patterns:
            for path in sorted(folder.glob(pattern)):
                if path.is_file() and path not in seen:
                    seen.add(path)
                    found[kind].append(path)
    return found


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # gone meanwhile (another process cleared it)
        return 0


def cache_document(*, clear: bool = False) -> dict:
    """What the cache folder holds, by kind (files and bytes); with ``clear``, those files deleted
    first-to-last and what was freed. A process reading a store it opened keeps it (POSIX unlink)."""
    files = _cache_files()
    kinds = [
        {"kind": kind, "files": len(paths), "bytes": sum(_size(p) for p in paths)} for kind, paths in files.items()
    ]
    if clear:
        for paths in files.values():
            for path in paths:
                path.unlink(missing_ok=True)
    return {
        "schema": "ctxembed.cache/1",
        "folder": str(cache_dir()),
        "kinds": kinds,
        "files": sum(k["files"] for k in kinds),
        "bytes": sum(k["bytes"] for k in kinds),
        "cleared": clear,
    }
