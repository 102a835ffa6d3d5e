"""Where vectors come from: the shipped default, a file on disk, or a gensim-data name; and the cache.

``open_vectors(source)`` is the one entry point the commands use. A foreign file is parsed
through gensim once and written as a store under the cache directory; later runs open that
store with mmap and never import gensim. The cache file is named after the source path and
``--limit``; its header records the source's size and modification time, taken before parsing,
so a changed source is noticed (the cache is then stale and rebuilt). A conversion holds a lock
file beside its cache file, so two processes never convert the same source at once: the second
waits and then uses the first one's cache. A damaged cache (checksum mismatch) is rebuilt from
its source with one note on stderr; a damaged shipped store asks for a reinstall.

Cache directory: ``$CTXEMBED_CACHE_DIR``, else ``$XDG_CACHE_HOME/ctxembed``, else
``~/.cache/ctxembed``.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ctxembed.errors import DataError, UsageError
from ctxembed.output import check_output_path, printable, say
from ctxembed.progress import reading
from ctxembed.vectors.cache import cache_dir, cache_path, file_fingerprint
from ctxembed.vectors.shipped import shipped_path
from ctxembed.vectors.statistics import SECTION, statistics
from ctxembed.vectors.store import ROW_SOURCE_SECTION, VectorStore, write_store

# Opening a store is on every attend/compare path; converting a foreign file or fetching a gensim-data
# model is not. What only those need is imported inside them (docs/architecture.md, "Why imports are lazy").

DEFAULT_STORE_NAME = "glove-6B-100d-400k.ctxv"
DEFAULT_SOURCE = "default"
_GENSIM_DATA_NAME = re.compile(r"^[a-z0-9]+(?:[-_][a-z0-9.]+)+$")


# Vector files shipped with ctxembed that can be named on their own (``--vectors notes-toy``).
SHIPPED_NAMES = {"notes-toy": "notes_toy.txt"}  # the lecture notes' 3-d toy: apple, is, phone, the


def default_store_path() -> Path:
    """The shipped GloVe store."""
    return shipped_path(DEFAULT_STORE_NAME)


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
            raise DataError(f"{path}: the default vectors are missing from this installation; reinstall ctxembed")
        return Source(DEFAULT_SOURCE, path, "default")
    path = Path(spec).expanduser()
    if os.path.lexists(path):
        return Source(spec, regular_file(path, spec), "file")
    if spec in SHIPPED_NAMES:
        return Source(spec, shipped_path(SHIPPED_NAMES[spec]), "file")
    if os.sep not in spec and _GENSIM_DATA_NAME.match(spec) and not Path(spec).suffix:
        return Source(spec, _gensim_data_file(spec), "gensim-data")
    raise DataError(f"{spec}: no such file (nor a gensim-data name such as glove-wiki-gigaword-50)")


def regular_file(path: Path, label: str | os.PathLike | None = None) -> Path:
    """``path`` resolved, if it is a readable regular file; else a DataError that says what it is.

    A FIFO or a device would block or never end, a directory cannot be parsed, and a symbolic
    link loop is not "no such file"."""
    label = label or path
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if os.path.islink(path):
            raise DataError(f"{label}: broken symbolic link (points to {os.readlink(path)})") from None
        raise DataError(f"{label}: no such file") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise DataError(f"{label}: symbolic link loop") from None
        raise DataError(f"{label}: cannot read ({exc.strerror})") from None
    if stat.S_ISDIR(mode):
        raise DataError(f"{label}: is a directory, not a vector file")
    if not stat.S_ISREG(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
        raise DataError(f"{label}: is {kind}, not a regular file; vectors must be read from a file")
    return path.resolve()


def _gensim_data_file(name: str) -> Path:
    """The downloaded file of a gensim-data model, fetching it through gensim's downloader if needed.

    Only the file path is taken from the downloader: its ``load()`` would import and run the
    Python module that comes with the download.
    """
    folder = gensim_data_dir() / name
    cached = sorted(p for p in folder.glob("*") if p.is_file() and not p.name.startswith(("__", ".")))
    if cached:
        return cached[0]
    import logging  # only for gensim's downloader

    import gensim.downloader as downloader  # gensim: only for a gensim-data name

    # gensim logs a traceback when its catalogue cannot be fetched; the error below says it in one line
    log = logging.getLogger(downloader.__name__)
    was_disabled, log.disabled = log.disabled, True
    try:
        try:
            catalogue = downloader.info()  # from the network, else gensim's cached copy
        except ValueError:  # no network and no cached catalogue
            raise DataError(
                f"{name}: cannot reach gensim-data to look this name up (offline?); "
                f"put the file in {folder}/ or pass a file path"
            ) from None
        if name not in catalogue.get("models", {}) and name not in catalogue.get("corpora", {}):
            raise DataError(f"{name}: not a gensim-data model name (see gensim.downloader.info())")
        say(f"downloading {name} through gensim's downloader into {folder} ...")
        return Path(downloader.load(name, return_path=True))
    except DataError:
        raise
    except Exception as exc:  # urllib raises many kinds; all mean the same thing here
        reason = getattr(exc, "reason", None) or exc
        raise DataError(
            f"{name}: cannot download through gensim's downloader ({reason}); offline? "
            f"put the file in {folder}/ or pass a file path"
        ) from None
    finally:
        log.disabled = was_disabled


def cache_state(path: Path, limit: int | None) -> tuple[Path, str]:
    """(cache file, "fresh" | "stale" | "damaged" | "missing") for a foreign source file."""
    target = cache_path(path, limit)
    if not target.exists():
        return target, "missing"
    try:
        store = VectorStore.open(target)
    except DataError:
        return target, "damaged"
    fresh = store.meta.get("source_fingerprint") == file_fingerprint(path)
    return target, "fresh" if fresh else "stale"


def convert(
    path: Path, fmt: str, out: Path, *, limit: int | None, trust: bool, quantize: bool = False, name: str | None = None
) -> Path:
    """Parse a foreign file through gensim and write it as a store at ``out``."""
    from ctxembed.vectors.formats import load_foreign  # .ctxv stores never need it

    fingerprint = file_fingerprint(path)  # before parsing: a file replaced meanwhile is caught below
    with reading(path, f"reading {printable(path.name)}"):
        loaded = load_foreign(path, fmt, limit=limit, trust=trust)
    if not loaded.words:
        raise DataError(f"{path}: no vectors in the file")
    if file_fingerprint(path) != fingerprint:
        raise DataError(f"{path}: the file changed while it was being converted; run again when it is complete")
    meta = {
        "name": name or path.name,
        "format": fmt,
        "source_fingerprint": fingerprint,
        "limit": limit,
        "quantized": "int8" if quantize else None,
    }
    try:
        return write_store(out, loaded.words, loaded.matrix, quantize=quantize, meta=meta, subwords=loaded.subwords)
    except OSError as exc:
        if exc.errno in _FULL and out.parent == cache_dir():
            raise _CacheFull(exc.strerror or str(exc)) from None
        hint = " (set CTXEMBED_CACHE_DIR to a writable folder)" if out.parent == cache_dir() else ""
        raise DataError(f"{out}: cannot write the store ({exc.strerror or exc}){hint}") from None


_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # a full disk, a quota, a file size limit


class _CacheFull(Exception):
    """The cache folder took no more bytes: the caller reads the vectors without a cache, as for a
    read-only folder (F11)."""


def open_vectors(
    spec: str | None = None,
    *,
    limit: int | None = None,
    trust: bool = False,
    on_convert: Callable[[str], None] | None = None,
) -> VectorStore:
    """Open the vectors named by ``spec`` (see :func:`resolve`), converting and caching once."""
    if limit is not None and limit < 1:
        raise UsageError(f"{{limit}} must be a positive number of words, not {limit}", "limit")
    source = resolve(spec)
    if source.kind == "default":
        return _limited(open_shipped(source.path), limit)
    from ctxembed.vectors.formats import detect_format  # .ctxv stores never need it

    fmt = detect_format(source.path)
    if fmt == "ctxembed-store":
        return _limited(VectorStore.open(source.path), limit)
    if fmt == "gensim-native" and not trust:
        from ctxembed.vectors.formats import load_foreign  # .ctxv stores never need it

        load_foreign(source.path, fmt, trust=False)  # raises the UsageError that explains --trust
    target = cache_path(source.path, limit)
    with _conversion_lock(target):
        # A fresh cache of the whole file serves every --limit.
        damaged = None
        for cache_limit in (None, limit) if limit else (None,):
            cached, state = cache_state(source.path, cache_limit)
            if state == "fresh":
                return _limited(_open_cache(cached, source.path), limit)
            if state == "damaged" and cache_limit == limit:
                damaged = cached
        if (problem := _unwritable(target.parent)) is not None:
            if on_convert is not None:
                on_convert(
                    f"the cache folder {target.parent} cannot be written ({problem}): reading {source.path} "
                    "without a cache, again at every run (set CTXEMBED_CACHE_DIR to a writable folder)"
                )
            return _limited(_uncached(source.path, fmt, target.name, limit, trust), limit)
        if on_convert is not None:
            if damaged is not None:
                on_convert(f"the cache {damaged} is damaged; rebuilding it from {source.path}")
            else:
                on_convert(f"converting {source.path} ({fmt}) once into the cache {target}")
        try:
            convert(source.path, fmt, target, limit=limit, trust=trust)
        except _CacheFull as full:
            if on_convert is not None:
                on_convert(
                    f"the cache folder {target.parent} is full ({full}): reading {source.path} without a cache, "
                    "again at every run (free space, or set CTXEMBED_CACHE_DIR to another folder)"
                )
            return _limited(_uncached(source.path, fmt, target.name, limit, trust), limit)
        return _open_cache(target, source.path)


def _unwritable(folder: Path) -> str | None:
    """Why no file can be made in ``folder`` (created if missing), or None when one can."""
    import tempfile  # lazy: only a store being converted needs it, not a start that opens one

    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".probe.", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _uncached(path: Path, fmt: str, name: str, limit: int | None, trust: bool) -> VectorStore:
    """The vectors of ``path`` converted into a temporary store that is mapped, then deleted: the
    mapping keeps its pages, so the store works for this run without a writable cache."""
    import tempfile  # lazy: as in _unwritable

    with tempfile.TemporaryDirectory(prefix="ctxembed-") as folder:
        return VectorStore.open(convert(path, fmt, Path(folder) / name, limit=limit, trust=trust))


def open_shipped(path: Path) -> VectorStore:
    """The shipped store; damage there cannot be repaired by ctxembed, only by a reinstall."""
    hint = "reinstall ctxembed (pip install --force-reinstall ctxembed) to restore the shipped vectors"
    try:
        store = VectorStore.open(path)
    except DataError as exc:
        raise DataError(f"{exc.message}; {hint}") from None
    store.damage_hint = hint
    return store


def _open_cache(target: Path, source: Path) -> VectorStore:
    store = VectorStore.open(target)

    def remove_damaged() -> str:
        target.unlink(missing_ok=True)
        return f"the damaged cache was removed; the next run rebuilds it from {source}"

    store.damage_hint = remove_damaged
    return store


LOCK_TIMEOUT = 900.0  # seconds a second process waits for another one's conversion of the same file


class _conversion_lock:
    """Hold ``<cache>.lock`` while checking and (re)building a cache; no lock if it cannot be made.
    A second process waits at most :data:`LOCK_TIMEOUT` seconds, saying so after one, then stops
    with a message naming the lock (a conversion stuck for that long is not worth waiting for)."""

    def __init__(self, target: Path):
        self.target = target
        self.lock = None

    def __enter__(self):
        from filelock import FileLock, Timeout  # only when converting

        try:
            self.target.parent.mkdir(parents=True, exist_ok=True)
            self.lock = FileLock(f"{self.target}.lock")
            try:
                self.lock.acquire(timeout=min(1.0, LOCK_TIMEOUT))
            except Timeout:
                say(f"waiting for another ctxembed process converting into {self.target}")
                self.lock.acquire(timeout=max(LOCK_TIMEOUT - 1.0, 0.0))
        except Timeout:
            self.lock = None
            raise DataError(
                f"another process has held {self.target}.lock for over {LOCK_TIMEOUT:.0f} s; "
                "if no ctxembed is running, remove that file"
            ) from None
        except OSError:  # a read-only cache folder: convert() explains when it cannot write
            self.lock = None
        return self

    def __exit__(self, *exc) -> None:
        if self.lock is not None:
            self.lock.release()


def _limited(store: VectorStore, limit: int | None) -> VectorStore:
    return store.head(limit) if limit and limit < len(store) else store


def describe(spec: str | None, *, limit: int | None = None) -> dict:
    """What ``vectors info`` shows: format, size, dimension, cache path and freshness; parses nothing."""
    source = resolve(spec)
    info: dict = {"source": source.spec, "path": str(source.path), "kind": source.kind}
    if source.kind == "default":
        fmt = "ctxembed-store"
    else:
        from ctxembed.vectors.formats import detect_format  # .ctxv stores never need it

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
    from ctxembed.vectors.formats import open_maybe_compressed  # .ctxv stores never need it

    if fmt not in ("word2vec-text", "fasttext-vec", "word2vec-binary", "glove-text"):
        return None, None
    from ctxembed.vectors.formats import BOM, READ_ERRORS, read_error  # .ctxv stores never need it

    try:
        with open_maybe_compressed(path) as fh:
            first = fh.readline(1 << 16).removeprefix(BOM).split()
    except READ_ERRORS as exc:
        raise DataError(read_error(path, exc)) from None
    if fmt == "glove-text":
        return None, len(first) - 1
    return int(first[0]), int(first[1])


def convert_to_store(spec: str, out: Path, *, limit: int | None, trust: bool, quantize: bool) -> dict:
    """Write the vectors named by ``spec`` as a store at ``out``; returns what was written.

    A store is copied (cut to ``limit``); an int8 store stays int8, never inflated to float32
    by accident. Any other format is parsed once through gensim.
    """
    from ctxembed.vectors.formats import detect_format  # .ctxv stores never need it

    out = Path(out)
    resolved = resolve(spec)
    fmt = "ctxembed-store" if resolved.kind == "default" else detect_format(resolved.path)
    check_output_path(out, "OUT")
    if fmt == "ctxembed-store":
        whole = VectorStore.open(resolved.path)
        store = _limited(whole, limit)
        meta = dict(store.meta, format=fmt)
        # the sections (e.g. all-but-the-top statistics) describe every word: kept only when all are;
        # a copy cut by --limit gets all-but-the-top statistics of its own
        if len(store) == len(whole):
            sections = {name: whole.section(name) for name in whole._extra}
        else:
            sections = {SECTION: statistics(store, len(store)).as_arrays()}
            if store.row_sources is not None:  # the first rows' codes
                sections[ROW_SOURCE_SECTION] = {"estimated": np.ascontiguousarray(store.row_sources)}
        # the n-gram table (fastText, the shipped store) serves words outside any cut: kept whole
        kept = {"meta": meta, "sections": sections, "subwords": store.subwords}
        try:
            if store.dtype == "int8":  # the same codes and scales, byte for byte
                write_store(out, store.words, store._matrix, scales=store._scales, **kept)
            else:
                write_store(out, store.words, store.matrix(), quantize=quantize, **kept)
        except OSError as exc:
            raise DataError(f"{out}: cannot write the store ({exc.strerror or exc})") from None
    else:
        convert(resolved.path, fmt, out, limit=limit, trust=trust, quantize=quantize)
    store = VectorStore.open(out)
    return {
        "source": spec,
        "format": fmt,
        "out": str(out),
        "words": len(store),
        "dim": store.dim,
        "dtype": store.dtype,
        "bytes": out.stat().st_size,
    }


def vectors_info(source: str | os.PathLike | None = None, *, limit: int | None = None) -> dict:
    """``ctxembed vectors info --json``: a vector source's format, size, dimension and cache state (the
    ``ctxembed.vectors-info/1`` document); reads headers only, parses no vectors."""
    return {"schema": "ctxembed.vectors-info/1", **describe(None if source is None else str(source), limit=limit)}


def convert_vectors(
    source: str | os.PathLike, out: str | os.PathLike, *, limit: int | None = None, trust: bool = False,
    quantize: bool = False,
) -> dict:  # fmt: skip
    """``ctxembed vectors convert --json``: write ``source`` as a ctxembed store at ``out`` (``quantize``:
    int8 with one scale per row); the ``ctxembed.vectors-convert/1`` document of what was written."""
    result = convert_to_store(str(source), Path(out), limit=limit, trust=trust, quantize=quantize)
    return {"schema": "ctxembed.vectors-convert/1", **result}
