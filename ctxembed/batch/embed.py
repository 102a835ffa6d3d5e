"""``ctxembed.embed_lines``: the records of ``ctxembed batch``, from Python, one per line, in order.

>>> import ctxembed
>>> lines = ["apple is the phone", '{"id": 7, "text": "the phone"}', "xyzzy"]
>>> for record in ctxembed.embed_lines(lines, vectors="notes-toy", preset="notes", weights=False):
...     print(record["line"], record.get("id"), record.get("tokens"), record.get("error"))
1 None ['apple', 'is', 'the', 'phone'] None
2 7 ['the', 'phone'] None
3 None None no token is in the vocabulary: xyzzy
>>> record = next(ctxembed.embed_lines(["apple is the phone"], vectors="notes-toy", preset="notes"))
>>> record["weights"].shape  # (layers, heads, tokens, tokens), a NumPy array
(1, 1, 4, 4)
>>> line = next(ctxembed.embed_lines(["the phone"], start=41, encoded=True, vectors="notes-toy", preset="notes",
...      weights=False))
>>> line[:99]
b'{"line":41,"text":"the phone","tokens":["the","phone"],"in_vocab":[true,true],"attended_positions":'
>>> line[99:]
b'[0,1],"sources":["vocabulary","vocabulary"]}\\n'

Each record is a dict whose arrays (``weights``, ``static``, ``contextual``) are NumPy arrays;
``encoded=True`` gives each record as the JSON line ``ctxembed batch`` writes, byte for byte
(both go through :func:`ctxembed.batch.records.chunk_records`, the per-chunk unit of batch). Keywords
are batch's options: ``weights=False`` is ``--no-weights``, ``with_vectors``, ``word``, ``chunk``,
and every :class:`ctxembed.Explorer` keyword (``vectors``, ``preset``, ``oov``, ``max_tokens``,
``heads=2``, ...). ``start`` numbers the first line (batch numbers from 1): a worker given the
lines from 1,001 on passes ``start=1001`` and its records carry the numbers batch would give.

The function is picklable (a module-level function; ``functools.partial`` of it too) and cheap to
start in a worker process: the Explorer is built once per process and set of keywords, the store
is memory-mapped (pages shared by every process on the machine), its statistics are read from the
store, and the word index is built once (~50 ms for 200k words). See docs/scale.md for Dask.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from ctxembed.batch.driver import chunk_table, line_limit, prepare_bulk, safe_process, safe_records
from ctxembed.batch.records import LongLine, chunk_records
from ctxembed.engine import ContextEngine, open_engine, refuse_window
from ctxembed.errors import UsageError
from ctxembed.options import OPTIONS, default


def embed_lines(
    lines: Iterable[str | bytes],
    *,
    start: int = 1,
    weights: bool = True,
    with_vectors: bool = default("with_vectors"),
    word: str | None = None,
    encoded: bool = False,
    chunk: int = default("chunk"),
    explorer=None,
    **keywords: Any,
) -> Iterator[dict | bytes]:
    """One record per line of ``lines`` (str or bytes, line ends optional), in order.

    ``encoded=True`` yields ``bytes`` (a JSON line with its newline) instead of dicts. ``explorer``
    reuses an existing :class:`ctxembed.Explorer` (then ``keywords`` must be empty). A bad line
    gives an error record, never an exception; bad settings raise :class:`ctxembed.UsageError`
    before any line is read.
    """
    engine, options, blocks = _chunks(lines, start, chunk, explorer, keywords, weights, with_vectors, word)
    for block in blocks:
        if encoded:
            yield from safe_records(engine, block, options)
        else:
            yield from chunk_records(engine, block, options)


def embed_columns(
    lines: Iterable[str | bytes],
    *,
    start: int = 1,
    weights: bool = True,
    with_vectors: bool = default("with_vectors"),
    word: str | None = None,
    chunk: int = default("chunk"),
    explorer=None,
    **keywords: Any,
) -> Iterator:
    """:func:`embed_lines` a chunk at a time, as one ``pyarrow.RecordBatch`` per chunk: the columns of
    ``ctxembed batch --format parquet`` (see :mod:`ctxembed.batch.columnar`), a row per line, in order.
    Needs pyarrow (``ctxembed[parquet]``)."""
    from ctxembed.batch.columnar import parquet_batch  # the columnar formats only

    engine, options, blocks = _chunks(lines, start, chunk, explorer, keywords, weights, with_vectors, word)
    for block in blocks:
        yield parquet_batch(chunk_table(engine, block, options | {"format": "parquet"}), options, engine)


def word_arrays(
    lines: Iterable[str | bytes],
    word: str,
    *,
    start: int = 1,
    chunk: int = default("chunk"),
    explorer=None,
    **keywords: Any,
) -> dict:
    """One word's contextual vectors across ``lines``, as NumPy arrays (what ``--format npz`` holds):
    ``vectors`` (n, d_out) float32, ``line`` (n,) and ``position`` (n,) int64, ``text`` (n,) str, for
    the n lines that hold ``word`` (its first occurrence; ``bank#2``: its second), in order."""
    from ctxembed.batch.column_chunk import from_records  # the columnar formats only
    from ctxembed.batch.columnar import word_rows

    engine, options, blocks = _chunks(lines, start, chunk, explorer, keywords, False, False, word)
    parts = [word_rows(chunk_table(engine, block, options | {"format": "npz"})) for block in blocks]
    if not parts:  # no line at all: the columns of no row
        parts = [word_rows(from_records([], options, engine))]
    return {name: np.concatenate([part[name] for part in parts]) for name in ("vectors", "line", "position", "text")}


def embed_chunks(
    lines: Iterable[str | bytes],
    *,
    start: int = 1,
    weights: bool = True,
    with_vectors: bool = default("with_vectors"),
    word: str | None = None,
    chunk: int = default("chunk"),
    explorer=None,
    **keywords: Any,
) -> Iterator[bytes]:
    """:func:`embed_lines` with ``encoded=True``, a chunk at a time: each item is the JSON lines of
    up to ``chunk`` input lines, newlines included, as one ``bytes``. It is the unit every runner
    shares: ``ctxembed batch``'s workers write these blocks, and a Dask partition joins them,
    with no step per record. ``b"".join(embed_chunks(lines))`` is what ``ctxembed batch`` writes."""
    engine, options, blocks = _chunks(lines, start, chunk, explorer, keywords, weights, with_vectors, word)
    for block in blocks:
        yield safe_process(engine, block, options)


def _chunks(lines, start, chunk, explorer, keywords, weights, with_vectors, word):
    """Checked settings -> (engine, record options, chunks of numbered input lines)."""
    if explorer is not None and keywords:
        raise UsageError(f"give explorer= or settings, not both ({', '.join(sorted(keywords))})")
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise UsageError(f"start must be a line number >= 0, not {start!r}")
    OPTIONS["chunk"].check(chunk)
    if word is None:  # a window crops around --word: asked for without one, it is refused
        refuse_window(explorer.window if explorer is not None else keywords.get("window"), "batch")
    engine = explorer.engine if explorer is not None else shared_engine(**keywords)
    prepare_bulk(engine)  # bulk lookups for the run, as batch does for big input
    options = {"with_vectors": with_vectors, "weights": weights, "word": word, "digits": None, "format": "jsonl"}
    limit = line_limit(engine.max_tokens)  # batch refuses longer lines unread; so does this

    def numbered() -> Iterator[tuple[int, bytes | LongLine]]:
        for number, line in enumerate(lines, start=start):
            raw = line if isinstance(line, bytes) else _to_bytes(line)
            yield number, (LongLine(limit) if len(raw) > limit else raw)

    source = numbered()
    blocks = iter(lambda: list(itertools.islice(source, chunk)), [])  # lists of up to chunk lines
    return engine, options, blocks


@functools.lru_cache(maxsize=4)
def _cached_engine(frozen: tuple) -> ContextEngine:
    return open_engine(**dict(frozen))


def shared_engine(**keywords: Any) -> ContextEngine:
    """The process's engine for these keywords (:func:`ctxembed.engine.open_engine`'s): built on first
    use, then reused (each worker of a pool or cluster builds it once, not once per task)."""
    try:
        return _cached_engine(tuple(sorted(keywords.items())))
    except TypeError:  # an unhashable keyword value: no sharing
        return open_engine(**keywords)


def _to_bytes(line: str) -> bytes:
    """A str line back to the bytes batch would read. Text read with errors="surrogateescape" gets its
    undecodable bytes back, so they become the same "not valid UTF-8" record as in batch."""
    try:
        return line.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that no file held: invalid UTF-8 on purpose
        return line.encode("utf-8", "surrogatepass")
