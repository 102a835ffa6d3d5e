"""Batch output as columns: Parquet (one row per input line), npz and the TensorBoard Projector pair
(one row per line that holds ``--word``), beside the JSON Lines records of :mod:`ctxembed.batch.records`.

A worker turns its chunk into flat columns straight from the group arrays batch always computes
(:func:`ctxembed.batch.column_chunk.chunk_columns`, so the numbers are the JSON records' float32
values), and hands the parent those columns as bytes: an Arrow IPC stream for Parquet, a NumPy
``.npy`` bundle for npz and the Projector. The parent writes them as they arrive, in input order (a
Parquet row group per chunk), to a temporary file beside ``--out`` that is renamed over it only once
the run is complete: a run that is killed or fails leaves no file at ``--out``.

Parquet columns (one row per input line, none dropped):

- ``line`` int64; ``id`` the line's JSON ``id`` as JSON text (any JSON value), null when none;
  ``text``; ``error`` (null for a result row, the reason for a bad line: its other columns are null);
- ``tokens``, ``sources`` list<string>; ``in_vocab`` list<bool>; ``attended_positions`` list<int32>;
- ``weights``: the attention weights as ONE flat list<float32> in C order, with ``weights_shape``
  list<int32> ``[layers, heads, T, T]`` beside it (``np.reshape(row.weights, row.weights_shape)``).
  Why flat: a chunk's weights go into Arrow as one buffer and one offsets array (the worker copies
  each group's weights into their lines' places in it), where ``[layer][head][query][key]`` nesting needs three
  more offset arrays per chunk, and every reader reshapes to an array anyway; see docs/scale.md;
- with ``--with-vectors``: ``static`` list<fixed_size_list<float32, d>>, ``contextual``
  list<fixed_size_list<float32, d_out>> (a vector per token);
- with ``--word``: ``word_position`` int32 and ``word_vector`` fixed_size_list<float32, d_out>
  (null when the line lacks the word).

The file's key-value metadata ``ctxembed`` holds a JSON document: the schema name, the settings
(:meth:`Engine.describe`), the vectors (name, dimension, fingerprint) and batch's options.
pyarrow is imported only here and only for Parquet (the optional extra ``ctxembed[parquet]``).
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import sys
from pathlib import Path

import numpy as np

from ctxembed.batch.column_chunk import ChunkColumns
from ctxembed.batch.records import Encoded, chunk_records
from ctxembed.errors import DataError, UsageError
from ctxembed.options import OPTIONS
from ctxembed.output import PROJECTOR_HEADER, OutputFile, check_output_path, finish_outputs, metadata_tsv, vectors_tsv
from ctxembed.vectors.lexicon import TOKEN_SOURCES, offsets

FORMATS = OPTIONS["output_format"].choices  # jsonl, parquet, npz, projector
PARQUET_SCHEMA = "ctxembed.batch.parquet/1"
NPZ_SCHEMA = "ctxembed.batch.npz/1"


def leaf(name: str, lists: int = 1) -> str:
    """The Parquet path of a column's values: ``tokens`` -> ``tokens.list.element``. The writer's
    per-column options are keyed by these paths; a bare list column's name matches nothing."""
    return name + ".list.element" * lists


# The Parquet writer's options, here and for Dask's parts. The parent process writes every row group, so
# its CPU time is batch's (benchmarks/probes/parquet_writer.py measures each choice, docs/performance.md):
# - Snappy for the text, the token lists and the small number lists (attended_positions shrinks 8x), and
#   no compression for the float columns: the weights shrank 17% for half the writer's time, a vector 1%;
# - a dictionary for tokens and sources, whose values repeat (on the floats, pyarrow's default, it cost
#   4x the whole write and saved nothing);
# - write_batch_size: how many values the writer turns into levels and pages at a time (pyarrow's 1,024
#   is a few hundred calls a chunk for the weights' list column);
# - min/max statistics only for the columns a reader filters row groups on.
COMPRESSED_COLUMNS = [
    "line", "id", "text", "error", "word_position",
    *map(leaf, ["tokens", "sources", "in_vocab", "attended_positions", "weights_shape"]),
]  # fmt: skip
DICTIONARY_COLUMNS = [leaf("tokens"), leaf("sources")]
WRITER_OPTIONS = {
    "compression": dict.fromkeys(COMPRESSED_COLUMNS, "snappy"),  # a column not named here: none
    "use_dictionary": DICTIONARY_COLUMNS,
    "write_batch_size": 1 << 17,
    "write_statistics": ["line", "id", "text", "error", "word_position"],
}


def check_format(fmt: str, out: str | None, word: str | None) -> None:
    """Refuse a format/--out/--word combination before any work is done (a UsageError, exit 2)."""
    if fmt not in FORMATS:
        raise UsageError(f"{{output_format}} must be one of {', '.join(FORMATS)}, not {fmt!r}", "output_format")
    if fmt != "jsonl" and not out:
        raise UsageError(f"{{output_format}} {fmt} writes a file: give {{out}} PATH", "output_format", "out")
    if fmt in ("npz", "projector") and word is None:
        raise UsageError(
            f"{{output_format}} {fmt} holds one word's vectors across the corpus: give {{word}} W",
            "output_format",
            "word",
        )
    if fmt == "parquet":
        # pyarrow's memory pool is chosen when it is first used, from this variable (a user's choice stands).
        # Its default, mimalloc, kept 34 MB more of the parent's memory than jemalloc while it wrote row
        # groups of --word the (67 MB more with weights), for the same CPU time (docs/performance.md);
        # Linux only: pyarrow's Windows builds have no jemalloc (and would say so on stderr).
        if sys.platform.startswith("linux"):
            os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")
        try:
            import pyarrow  # noqa: F401 - only to say plainly when it is missing
        except ImportError:
            raise UsageError(
                "{output_format} parquet needs pyarrow: pip install 'ctxembed[parquet]'", "output_format"
            ) from None
    if out:
        folder = Path(out)
        if fmt != "projector":  # a directory, a missing folder, an unwritable one, a full disk: now, not after the run
            check_output_path(out, "out")
        else:
            check_projector_folder(folder)


def check_projector_folder(folder: Path) -> None:
    """DataError when ``--out`` of ``--format projector`` (a folder it writes) is a file."""
    if folder.exists() and not folder.is_dir():
        raise DataError(
            f"{{out}} {folder}: {{output_format}} projector writes a folder, and this is a file", "out", "output_format"
        )


# ------------------------------------------------------------------------------ worker side
def record_dicts(engine, chunk: list, options: dict) -> list[dict]:
    """The chunk's records as dicts (see chunk_records): the columns' path when :func:`chunk_columns`
    cannot serve (an engine without batch's column machinery, a chunk redone line by line)."""
    return chunk_records(engine, chunk, options)


def error_dict(number: int, message: str) -> dict:
    return {"line": number, "error": message}


def column_block(engine, chunk: ChunkColumns, options: dict) -> Encoded:
    """A chunk's columns -> the bytes a worker hands the parent for ``options["format"]``."""
    if options["format"] == "parquet":
        payload = _ipc_bytes(parquet_batch(chunk, options, engine))
    else:
        payload = _npy_bundle(word_rows(chunk))
    return Encoded([payload], len(chunk), chunk.errors, chunk.lacking)


def lost_block(block: list, reason: str) -> list[dict]:
    return [error_dict(number, reason) for number, _ in block]


def word_rows(chunk: ChunkColumns) -> dict:
    """The rows that hold the word: vectors (n, d_out), lines, positions, texts."""
    holds = np.flatnonzero(chunk.word_position >= 0)  # (n,)
    return {
        "vectors": chunk.word_vector[holds],
        "line": chunk.line[holds],
        "position": chunk.word_position[holds],
        "text": np.array([chunk.text[i] for i in holds.tolist()], dtype=str),
    }


def _npy_bundle(columns: dict) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **columns)  # plain .npy arrays, no pickle: read back with allow_pickle=False
    return buffer.getvalue()


def _read_bundle(data: bytes) -> dict:
    with np.load(io.BytesIO(data), allow_pickle=False) as bundle:
        return {name: bundle[name] for name in bundle.files}


# ------------------------------------------------------------------------------ Arrow
def _schema(engine, options: dict):
    import pyarrow as pa  # the parquet extra: loaded for --format parquet alone

    fields = [
        ("line", pa.int64()),
        ("id", pa.string()),
        ("text", pa.string()),
        ("error", pa.string()),
        ("tokens", pa.list_(pa.string())),
        ("sources", pa.list_(pa.string())),
        ("in_vocab", pa.list_(pa.bool_())),
        ("attended_positions", pa.list_(pa.int32())),
    ]
    if options["weights"]:
        fields += [("weights", pa.list_(pa.float32())), ("weights_shape", pa.list_(pa.int32()))]
    if options["with_vectors"]:
        fields += [
            ("static", pa.list_(pa.list_(pa.float32(), engine.dim))),
            ("contextual", pa.list_(pa.list_(pa.float32(), engine.out_dim))),
        ]
    if options["word"] is not None:
        fields += [("word_position", pa.int32()), ("word_vector", pa.list_(pa.float32(), engine.out_dim))]
    return pa.schema(fields)


def run_document(engine, options: dict, schema: str) -> dict:
    """What a file says about the run that wrote it: its schema, settings (with the window each line was
    cropped to around --word, when one was: records.cropped), vectors and batch options."""
    from ctxembed.report import settings_block
    from ctxembed.vectors.weights import vectors_record

    window = engine.window if options.get("word") is not None else 0
    return {
        "schema": schema,
        "settings": settings_block(engine, window=window)["settings"],
        "vectors": vectors_record(engine.store),
        "options": {key: options.get(key) for key in ("weights", "with_vectors", "word", "digits")},
    }


def parquet_metadata(engine, options: dict) -> dict[str, str]:
    """The Parquet file's key-value metadata: ``ctxembed`` -> :func:`run_document` as JSON."""
    return {"ctxembed": json.dumps(run_document(engine, options, PARQUET_SCHEMA))}


# Arrays are built from their buffers (Array.from_buffers) and strings gathered with NumPy: Arrow's take and
# its masked constructors load pyarrow.compute, which the parent then imported before the fork, a serial
# start, for the workers' sake alone.
def _validity(pa, valid: np.ndarray) -> tuple:
    """(n,) bool -> (Arrow's validity bitmap, bit k set where row k holds a value; the null count), or
    (None, 0) when no row is null."""
    nulls = len(valid) - int(np.count_nonzero(valid))
    if not nulls:
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), nulls


def _lists(pa, counts: np.ndarray, values, filled: np.ndarray):
    """A list column: row k holds ``counts[k]`` of the flat ``values`` (an Arrow array), null where
    not ``filled``: one offsets array, the values as they are."""
    validity, nulls = _validity(pa, filled)
    buffers = [validity, pa.py_buffer(offsets(counts, np.int32))]  # (n + 1,) where each row's values begin
    return pa.Array.from_buffers(pa.list_(values.type), len(counts), buffers, nulls, children=[values])


def _vectors(pa, values: np.ndarray, dim: int, valid: np.ndarray | None = None):
    """(n * dim,) float32 -> a fixed_size_list<float32, dim> column of n rows, null where not ``valid``."""
    validity, nulls = (None, 0) if valid is None else _validity(pa, valid)
    n = len(values) // dim
    return pa.Array.from_buffers(pa.list_(pa.float32(), dim), n, [validity], nulls, children=[pa.array(values)])


def _take_strings(pa, texts, index: np.ndarray):
    """``texts`` (an Arrow string array) at ``index`` (k,), gathered with NumPy from its offsets and bytes."""
    _, offsets_buffer, data_buffer = texts.buffers()
    bounds = np.frombuffer(offsets_buffer, np.int32)[texts.offset : texts.offset + len(texts) + 1]  # (m + 1,)
    data = np.frombuffer(data_buffer, np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    starts = bounds[index]  # (k,) where each picked string begins
    lengths = bounds[index + 1] - starts  # (k,)
    out = offsets(lengths, np.int32)  # (k + 1,) the picked strings' offsets
    picked = data[np.repeat(starts - out[:-1], lengths) + np.arange(out[-1])]  # (bytes,) each byte's source
    return pa.Array.from_buffers(pa.string(), len(index), [None, pa.py_buffer(out), pa.py_buffer(picked)])


@functools.cache
def _SOURCE_NAMES(pa):  # noqa: N802 - a constant, made once pyarrow is loaded
    return pa.array(TOKEN_SOURCES, pa.string())


_PIECE_TEXTS: list = [None, None]  # [TokenTable, its piece texts as an Arrow string array]: a worker's one table


def _token_texts(pa, chunk: ChunkColumns):
    """The chunk's tokens as an Arrow string array: gathered by piece id from the table's texts (each
    piece's text converted to Arrow once a process, as the table grows), or converted one by one."""
    if chunk.pieces is None:
        return pa.array(chunk.tokens, pa.string())
    known, texts = _PIECE_TEXTS
    if known is not chunk.table or texts is None:
        known, texts = chunk.table, pa.array([], pa.string())
    count = len(chunk.table.keys)  # pieces so far (its NumPy columns grow by doubling, ahead of them)
    if len(texts) < count:  # pieces the table added since: appended, never changed
        texts = pa.concat_arrays([texts, pa.array(chunk.table.text[len(texts) : count].tolist(), pa.string())])
    _PIECE_TEXTS[:] = [known, texts]
    return _take_strings(pa, texts, chunk.pieces)


def parquet_batch(chunk: ChunkColumns, options: dict, engine):
    """A chunk's columns as one Arrow record batch (one row per line, in order): each list column is
    its flat NumPy values (no copy) and one offsets array."""
    import pyarrow as pa  # the parquet extra: loaded for --format parquet alone

    schema = _schema(engine, options)
    filled = chunk.filled  # (n,)
    columns = {
        "line": pa.array(chunk.line),
        "id": pa.array(chunk.id, pa.string()),
        "text": pa.array(chunk.text, pa.string()),
        "error": pa.array(chunk.error, pa.string()),
        "tokens": _lists(pa, chunk.token_counts, _token_texts(pa, chunk), filled),
        "sources": _lists(pa, chunk.token_counts, _take_strings(pa, _SOURCE_NAMES(pa), chunk.sources), filled),
        "in_vocab": _lists(pa, chunk.token_counts, pa.array(chunk.in_vocab), filled),
        "attended_positions": _lists(pa, chunk.attended_counts, pa.array(chunk.attended), filled),
    }
    if options["weights"]:
        shape = chunk.weights_shape  # (n, 4)
        sizes = np.prod(shape, axis=1, dtype=np.int64)  # (n,) 0 where not filled
        columns["weights"] = _lists(pa, sizes, pa.array(chunk.weights), filled)
        columns["weights_shape"] = _lists(pa, 4 * filled, pa.array(shape[filled].ravel()), filled)
    if options["with_vectors"]:
        for name, dim in (("static", engine.dim), ("contextual", engine.out_dim)):
            values = _vectors(pa, getattr(chunk, name).ravel(), dim)  # (A,) rows of dim
            columns[name] = _lists(pa, chunk.attended_counts, values, filled)
    if options["word"] is not None:
        lacks = chunk.word_position < 0  # (n,)
        columns["word_position"] = pa.array(chunk.word_position.astype(np.int32), mask=lacks)
        # a null row still takes its d_out slots in a fixed-size list: zeros, masked
        columns["word_vector"] = _vectors(pa, chunk.word_vector.ravel(), engine.out_dim, valid=~lacks)  # (n,)
    return pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)


_IPC_SLACK = 1 << 12  # bytes beyond the schema and batch messages: the stream's end marker and padding


def _ipc_bytes(batch):
    """The batch as an Arrow IPC stream, in a pyarrow Buffer: the pipe and the sink read it in place
    (the buffer protocol), with no copy into a ``bytes``. Written into one buffer of the stream's size:
    a growing output stream copies its bytes at each doubling, into fresh pages (on a chunk of Brown
    lines' weights, 1-4.6 against 0.6-0.7 us a line)."""
    import pyarrow as pa  # the parquet extra: loaded for --format parquet alone

    size = batch.schema.serialize().size + pa.ipc.get_record_batch_size(batch) + _IPC_SLACK
    buffer = pa.allocate_buffer(size)
    sink = pa.FixedSizeBufferWriter(buffer)
    try:
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
    except (pa.ArrowException, OSError):  # larger than reckoned: a stream that grows as it needs
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
        return sink.getvalue()
    return buffer.slice(0, sink.tell())


_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter (malloc.h)


def lean_memory() -> None:
    """Allocators for a worker of a long columnar run: every block of 1 MiB or more is its own mapping,
    returned to the system when freed, and pyarrow allocates through the same malloc (its default pool,
    mimalloc, keeps what it freed). glibc otherwise raises that threshold to the largest block freed so
    far (up to 32 MiB), and a chunk's freed arrays then stay in its heap, fragmented: measured, a worker's
    peak RSS over 14 chunks of --word the fell from 257 to 231 MB (docs/performance.md). Without glibc
    (mallopt missing), nothing changes."""
    import ctypes  # here: only workers of the columnar formats call it

    try:
        ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, 1 << 20)
    except (OSError, AttributeError):
        pass
    pa = sys.modules.get("pyarrow")  # loaded before the fork for Parquet; npz and the Projector need none
    if pa is not None:
        pa.set_memory_pool(pa.system_memory_pool())


# ------------------------------------------------------------------------------ parent side
# Every sink writes its file(s) through ctxembed.output.OutputFile: a temporary file beside --out renamed
# over it once the run is complete (a device, FIFO or /dev/stdout written through, never replaced), each
# error one DataError naming --out, and on any failure (a full disk at the last flush included) no
# temporary file left behind.
class ParquetSink:
    """Row groups of Arrow IPC blocks, in order, to ``--out`` (atomically)."""

    def __init__(self, path: str, engine, options: dict):
        import pyarrow.parquet as pq  # the parquet extra: loaded for --format parquet alone

        schema = _schema(engine, options).with_metadata(parquet_metadata(engine, options))
        self.file, self.stream = OutputFile(path, "out"), None
        try:
            if self.file.temp is None:  # written through: Arrow writes to the open file
                self.stream = self.file.open("wb")
            with self.file.writing():
                where = str(self.file.temp) if self.stream is None else self.stream  # a path: Arrow's own file
                self.writer = pq.ParquetWriter(where, schema, **WRITER_OPTIONS)
        except BaseException:
            finish_outputs(False, [(self.file, self.stream)])
            raise

    def write(self, parts: list) -> None:
        import pyarrow as pa  # the parquet extra: loaded for --format parquet alone

        data = parts[0] if len(parts) == 1 else b"".join(parts)
        with pa.ipc.open_stream(data) as reader, self.file.writing():
            for batch in reader:
                self.writer.write_batch(batch)  # a row group per chunk: memory stays one chunk's

    def close(self, complete: bool) -> None:
        try:
            with self.file.writing():
                self.writer.close()  # the footer: a full disk can fail here
        except BaseException:
            finish_outputs(False, [(self.file, self.stream)])
            raise
        finish_outputs(complete, [(self.file, self.stream)])


class WordSink:
    """One word's rows, in order: an npz (``vectors``, ``line``, ``position``, ``text``, ``meta``) or
    the Projector pair (``vectors.tsv``, ``metadata.tsv`` in the ``--out`` folder)."""

    def __init__(self, fmt: str, path: str, engine, options: dict):
        self.fmt, self.path = fmt, path
        self.meta = run_document(engine, options, NPZ_SCHEMA)
        self.columns: list[dict] = []
        self.outputs: list = []  # (OutputFile, its open stream or None)
        self.made: Path | None = None  # the folder this run made, removed again if the run fails
        try:
            if fmt == "projector":
                folder = Path(path)
                check_projector_folder(folder)  # again: a file may have been put there during the run
                self.made = None if folder.exists() else folder
                try:
                    folder.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise DataError(f"{{out}} {path}: cannot make the folder ({exc.strerror})", "out") from None
                for name in ("vectors.tsv", "metadata.tsv"):
                    file = OutputFile(folder / name, "out")
                    self.outputs.append((file, file.open("w", encoding="utf-8", newline="\n")))
                with self.outputs[1][0].writing():
                    self.outputs[1][1].write(metadata_tsv(PROJECTOR_HEADER))
            else:
                self.outputs.append((OutputFile(path, "out"), None))  # written whole at the end
        except BaseException:
            self._discard()
            raise

    def _discard(self) -> None:
        finish_outputs(False, self.outputs)
        if self.made is not None:
            with contextlib.suppress(OSError):
                self.made.rmdir()  # only when empty: what the run made, nothing else

    def write(self, parts: list) -> None:
        columns = _read_bundle(parts[0] if len(parts) == 1 else b"".join(parts))
        if self.fmt == "projector":
            (vectors_file, vectors), (metadata_file, metadata) = self.outputs
            with vectors_file.writing():
                vectors.write(vectors_tsv(columns["vectors"]))
            with metadata_file.writing():
                metadata.write(metadata_tsv(*zip(columns["line"], columns["position"], columns["text"], strict=True)))
        else:
            self.columns.append(columns)  # one vector per matching line: the matrix is the output

    def close(self, complete: bool) -> None:
        try:
            if self.fmt == "npz" and complete:
                self._write_npz()
            finish_outputs(complete, self.outputs)
        except BaseException:
            self._discard()
            raise
        if not complete:
            self._discard()

    def _write_npz(self) -> None:
        joined = {
            name: np.concatenate([c[name] for c in self.columns]) if self.columns else np.zeros(0)
            for name in ("vectors", "line", "position", "text")
        }
        if not self.columns:
            joined["vectors"] = np.zeros((0, 0), np.float32)
            joined["text"] = np.zeros(0, str)
        file, _ = self.outputs[0]
        stream = file.open("wb")
        self.outputs[0] = (file, stream)
        with file.writing():
            np.savez(stream, **joined, meta=np.array(json.dumps(self.meta)))


class JsonLinesSink:
    """batch's JSON lines to ``--out`` instead of stdout, made whole at the end like the other formats."""

    def __init__(self, path: str):
        self.file = OutputFile(path, "out")
        try:
            self.stream = self.file.open("wb")
        except BaseException:
            self.file.abort()
            raise

    def write(self, parts: list) -> None:
        with self.file.writing():
            for part in parts:
                self.stream.write(part)

    def close(self, complete: bool) -> None:
        finish_outputs(complete, [(self.file, self.stream)])


def open_sink(fmt: str, path: str, engine, options: dict):
    if fmt == "jsonl":
        return JsonLinesSink(path)
    return ParquetSink(path, engine, options) if fmt == "parquet" else WordSink(fmt, path, engine, options)
