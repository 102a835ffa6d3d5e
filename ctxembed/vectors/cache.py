"""The cache folder: converted vector stores and checksummed statistics files, keyed by their source."""

from __future__ import annotations

import hashlib
import json
import os
import zlib
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
