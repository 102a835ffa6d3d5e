"""Where vectors come from: the shipped default, a file on disk, or a gensim-data name; and the cache.

``open_vectors(source)`` is the one entry point the commands use. A foreign file is parsed
through gensim once and written as a store under the cache directory; later runs open that
store with mmap and never import gensim. The cache file is named after the source path and
``--limit``; its header records the source's size and modification time, so a changed
source is noticed (the cache is then stale and rebuilt).

Cache directory: ``$CTXEMBED_CACHE_DIR``, else ``$XDG_CACHE_HOME/ctxembed``, else
``~/.cache/ctxembed``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ctxembed.errors import DataError, UsageError
from ctxembed.store import STORE_SUFFIX, VectorStore, atomic_file, write_store

DEFAULT_STORE_NAME = "glove-6B-100d-200k.ctxv"
DEFAULT_SOURCE = "default"
_GENSIM_DATA_NAME = re.compile(r"^[a-z0-9]+(?:[-_][a-z0-9.]+)+$")


def default_store_path() -> Path:
    """The shipped GloVe store: inside the installed package, or data/ in a source checkout."""
    packaged = Path(__file__).resolve().parent / "data" / DEFAULT_STORE_NAME
    if packaged.exists():
        return packaged
    return Path(__file__).resolve().parent.parent / "data" / DEFAULT_STORE_NAME


def cache_dir() -> Path:
    explicit = os.environ.get("CTXEMBED_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "ctxembed"


def gensim_data_dir() -> Path:
    """gensim's downloader keeps its files here (the same rule as gensim.downloader.BASE_DIR)."""
    return Path(os.environ.get("GENSIM_DATA_DIR") or Path.home() / "gensim-data").expanduser()


@dataclass(frozen=True)
class Source:
    """A resolved ``--vectors`` value."""

    spec: str  # what the user typed, or "default"
    path: Path  # the file that holds the vectors
    kind: str  # "default" | "file" | "gensim-data"


def resolve(spec: str | None) -> Source:
    """Turn a ``--vectors`` value (None or "default" for the shipped store) into a file."""
    if spec is None or spec == "" or spec == DEFAULT_SOURCE:
        path = default_store_path()
        if not path.exists():
            raise DataError(f"{path}: the default vectors are missing from this installation")
        return Source(DEFAULT_SOURCE, path, "default")
    path = Path(spec).expanduser()
    if path.exists():
        return Source(spec, path.resolve(), "file")
    if os.sep not in spec and _GENSIM_DATA_NAME.match(spec) and not Path(spec).suffix:
        return Source(spec, _gensim_data_file(spec), "gensim-data")
    raise DataError(f"{spec}: no such file (nor a gensim-data name such as glove-wiki-gigaword-50)")


def _gensim_data_file(name: str) -> Path:
    """The downloaded file of a gensim-data model, fetching it through gensim's downloader if needed.

    Only the file path is taken from the downloader: its ``load()`` would import and run the
    Python module that comes with the download.
    """
    folder = gensim_data_dir() / name
    cached = sorted(p for p in folder.glob("*") if p.is_file() and not p.name.startswith(("__", ".")))
    if cached:
        return cached[0]
    print(f"downloading {name} through gensim's downloader into {folder} ...", file=sys.stderr)
    try:
        import gensim.downloader as downloader

        return Path(downloader.load(name, return_path=True))
    except ValueError:
        raise DataError(f"{name}: not a gensim-data model name (see gensim.downloader.info())") from None
    except Exception as exc:  # urllib raises many kinds; all mean the same thing here
        reason = getattr(exc, "reason", None) or exc
        raise DataError(
            f"{name}: cannot download through gensim's downloader ({reason}); offline? "
            f"put the file in {folder}/ or pass a file path"
        ) from None


def _fingerprint(path: Path) -> dict:
    stat = path.stat()
    return {"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def cache_path(path: Path, limit: int | None) -> Path:
    key = hashlib.sha256(f"{path.resolve()}\0{limit or 0}".encode()).hexdigest()[:16]
    stem = path.name.split(".")[0][:40] or "vectors"
    suffix = f"-limit{limit}" if limit else ""
    return cache_dir() / f"{stem}{suffix}-{key}{STORE_SUFFIX}"


def cache_state(path: Path, limit: int | None) -> tuple[Path, str]:
    """(cache file, "fresh" | "stale" | "missing") for a foreign source file."""
    target = cache_path(path, limit)
    if not target.exists():
        return target, "missing"
    try:
        store = VectorStore.open(target)
    except DataError:
        return target, "stale"
    fresh = store.meta.get("source_fingerprint") == _fingerprint(path)
    return target, "fresh" if fresh else "stale"


def convert(
    path: Path, fmt: str, out: Path, *, limit: int | None, trust: bool, quantize: bool = False, name: str | None = None
) -> Path:
    """Parse a foreign file through gensim and write it as a store at ``out``."""
    from ctxembed.formats import load_foreign

    loaded = load_foreign(path, fmt, limit=limit, trust=trust)
    if not loaded.words:
        raise DataError(f"{path}: no vectors in the file")
    meta = {
        "name": name or path.name,
        "format": fmt,
        "source_fingerprint": _fingerprint(path),
        "limit": limit,
        "quantized": "int8" if quantize else None,
    }
    try:
        return write_store(out, loaded.words, loaded.matrix, quantize=quantize, meta=meta, subwords=loaded.subwords)
    except OSError as exc:
        hint = " (set CTXEMBED_CACHE_DIR to a writable folder)" if out.parent == cache_dir() else ""
        raise DataError(f"{out}: cannot write the store ({exc.strerror or exc}){hint}") from None


def open_vectors(
    spec: str | None = None,
    *,
    limit: int | None = None,
    trust: bool = False,
    on_convert: Callable[[str], None] | None = None,
) -> VectorStore:
    """Open the vectors named by ``spec`` (see :func:`resolve`), converting and caching once."""
    if limit is not None and limit < 1:
        raise UsageError(f"--limit must be a positive number of words, not {limit}")
    source = resolve(spec)
    if source.kind == "default":
        return _limited(VectorStore.open(source.path), limit)
    from ctxembed.formats import detect_format

    fmt = detect_format(source.path)
    if fmt == "ctxembed-store":
        return _limited(VectorStore.open(source.path), limit)
    if fmt == "gensim-native" and not trust:
        from ctxembed.formats import load_foreign

        load_foreign(source.path, fmt, trust=False)  # raises the UsageError that explains --trust
    # A fresh cache of the whole file serves every --limit.
    for cache_limit in (None, limit) if limit else (None,):
        target, state = cache_state(source.path, cache_limit)
        if state == "fresh":
            return _limited(VectorStore.open(target), limit)
    target = cache_path(source.path, limit)
    if on_convert is not None:
        on_convert(f"converting {source.path} ({fmt}) once into the cache {target}")
    convert(source.path, fmt, target, limit=limit, trust=trust)
    return VectorStore.open(target)


def _limited(store: VectorStore, limit: int | None) -> VectorStore:
    return store.head(limit) if limit and limit < len(store) else store


def describe(spec: str | None, *, limit: int | None = None) -> dict:
    """What ``vectors info`` shows: format, size, dimension, cache path and freshness; parses nothing."""
    source = resolve(spec)
    info: dict = {"source": source.spec, "path": str(source.path), "kind": source.kind}
    if source.kind == "default":
        fmt = "ctxembed-store"
    else:
        from ctxembed.formats import detect_format

        fmt = detect_format(source.path)
    info["format"] = fmt
    store = None
    if fmt == "ctxembed-store":
        info.update(cache=None, cache_state="not needed")
        store = VectorStore.open(source.path)
    else:
        target, state = cache_state(source.path, limit)
        info.update(cache=str(target), cache_state=state)
        if state == "fresh":
            store = VectorStore.open(target)
    if store is not None:
        store = _limited(store, limit)
        info.update(
            name=store.meta.get("name", source.path.name),
            words=len(store),
            dim=store.dim,
            dtype=store.dtype,
            lowercase=store.lowercase,
            subwords=store.subwords is not None,
        )
    else:
        words, dim = _announced_size(source.path, fmt)
        if words is not None and limit:
            words = min(words, limit)
        info.update(name=source.path.name, words=words, dim=dim, dtype=None, lowercase=None, subwords=None)
    return info


def _announced_size(path: Path, fmt: str) -> tuple[int | None, int | None]:
    """(words, dimension) from a file's first line, without parsing it: the word2vec header, or
    the number of values on GloVe's first line (its word count would need a full pass)."""
    from ctxembed.formats import open_maybe_compressed

    if fmt not in ("word2vec-text", "fasttext-vec", "word2vec-binary", "glove-text"):
        return None, None
    with open_maybe_compressed(path) as fh:
        first = fh.readline(1 << 16).split()
    if fmt == "glove-text":
        return None, len(first) - 1
    return int(first[0]), int(first[1])


def stats_cache_path(store: VectorStore, kind: str) -> Path | None:
    """Where to cache statistics of a store (e.g. its principal directions); None if it has no file."""
    try:
        fingerprint = _fingerprint(Path(store.path).resolve())
    except OSError:
        return None
    key = hashlib.sha256(json.dumps([fingerprint, len(store), kind]).encode()).hexdigest()[:16]
    return cache_dir() / f"stats-{kind}-{key}.npz"


def save_npz_atomic(path: Path, **arrays) -> None:
    """Best effort: a cache that cannot be written is simply not kept."""
    try:
        with atomic_file(path) as fh:
            np.savez(fh, **arrays)
    except OSError:
        pass
