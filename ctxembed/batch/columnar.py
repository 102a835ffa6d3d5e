"""Batch output as columns: Parquet (one row per input line), npz and the TensorBoard Projector pair
(one row per line that holds ``--word``), beside the JSON Lines records of :mod:`ctxembed.batch.records`.

A worker turns its chunk into the records batch always makes (:func:`ctxembed.batch.records.chunk_records`,
so the numbers are the JSON records' float32 values), then into columns, and hands the parent those
columns as bytes: an Arrow IPC stream for Parquet, a NumPy ``.npy`` bundle for npz and the Projector. The
parent writes them as they arrive, in input order (a Parquet row group per chunk), to a temporary file
beside ``--out`` that is renamed over it only once the run is complete: a run that is killed or fails
leaves no file at ``--out``.

Parquet columns (one row per input line, none dropped):

- ``line`` int64; ``id`` the line's JSON ``id`` as JSON text (any JSON value), null when none;
  ``text``; ``error`` (null for a result row, the reason for a bad line: its other columns are null);
- ``tokens``, ``sources`` list<string>; ``in_vocab`` list<bool>; ``attended_positions`` list<int32>;
- ``weights``: the attention weights as ONE flat list<float32> in C order, with ``weights_shape``
  list<int32> ``[layers, heads, T, T]`` beside it (``np.reshape(row.weights, row.weights_shape)``).
  Why flat: a chunk's weights go into Arrow as one buffer and one offsets array (the worker builds
  them with a single ``np.concatenate``), where ``[layer][head][query][key]`` nesting needs three
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
import io
import itertools
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import orjson

from ctxembed.batch.records import Encoded, chunk_records
from ctxembed.errors import DataError, UsageError
from ctxembed.options import OPTIONS
from ctxembed.output import PROJECTOR_HEADER, metadata_tsv, vectors_tsv

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
        raise UsageError(f"{{format}} must be one of {', '.join(FORMATS)}, not {fmt!r}", "format")
    if fmt != "jsonl" and not out:
        raise UsageError(f"{{format}} {fmt} writes a file: give {{out}} PATH", "format", "out")
    if fmt in ("npz", "projector") and word is None:
        raise UsageError(
            f"{{format}} {fmt} holds one word's vectors across the corpus: give {{word}} W", "format", "word"
        )
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401 - only to say plainly when it is missing
        except ImportError:
            raise UsageError("{format} parquet needs pyarrow: pip install 'ctxembed[parquet]'", "format") from None
    if out:
        folder = Path(out).parent if fmt != "projector" else Path(out)
        if fmt != "projector" and not folder.is_dir():
            raise UsageError(f"{{out}} {out}: the folder {folder} does not exist", "out")


# ------------------------------------------------------------------------------ worker side
def record_dicts(engine, chunk: list, options: dict) -> list[dict]:
    """The chunk's records as dicts (see chunk_records). Their arrays are views of their groups', so
    the chunk's groups live until its columns are built: no copy, and memory the chunk's weights'
    size, as the JSON path holds its text (the chunk is capped at 1 MiB of input, see the driver)."""
    return chunk_records(engine, chunk, options)


def error_dict(number: int, message: str) -> dict:
    return {"line": number, "error": message}


def counts(records: list[dict]) -> tuple[int, int]:
    """(error records, result records whose word is missing)."""
    errors = sum("error" in r for r in records)
    lacking = sum(r.get("word", 0) is None and "error" not in r for r in records)
    return errors, lacking


def column_block(engine, records: list[dict], options: dict) -> Encoded:
    """A chunk's records -> the bytes a worker hands the parent for ``options["format"]``."""
    errors, lacking = counts(records)
    if options["format"] == "parquet":
        payload = _ipc_bytes(parquet_batch(records, options, engine))
    else:
        payload = _npy_bundle(word_rows(records))
    return Encoded([payload], len(records), errors, lacking)


def lost_block(block: list, reason: str) -> list[dict]:
    return [error_dict(number, reason) for number, _ in block]


def word_rows(records: list[dict]) -> dict:
    """The rows of the records that hold the word: vectors (n, d_out), lines, positions, texts."""
    found = [r for r in records if r.get("word")]
    dim = found[0]["word"]["contextual"].shape[0] if found else 0
    return {
        "vectors": np.array([r["word"]["contextual"] for r in found], np.float32).reshape(len(found), dim),
        "line": np.array([r["line"] for r in found], np.int64),
        "position": np.array([r["word"]["position"] for r in found], np.int64),
        "text": np.array([r["text"] for r in found], dtype=str),
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
    """What a file says about the run that wrote it: its schema, settings, vectors and batch options."""
    from ctxembed.vectors.weights import vectors_record

    return {
        "schema": schema,
        "settings": engine.describe(),
        "vectors": vectors_record(engine.store),
        "options": {key: options.get(key) for key in ("weights", "with_vectors", "word", "digits")},
    }


def parquet_metadata(engine, options: dict) -> dict[str, str]:
    """The Parquet file's key-value metadata: ``ctxembed`` -> :func:`run_document` as JSON."""
    return {"ctxembed": json.dumps(run_document(engine, options, PARQUET_SCHEMA))}


def _lists(pa, arrays: list, kind, *, inner: int | None = None):
    """A list column from per-row arrays (None: a null row): one concatenate, one offsets array.
    ``inner``: each row is (n, inner), stored as a list of fixed-size lists."""
    sizes = [0 if a is None else (a.size if inner is None else a.shape[0]) for a in arrays]
    offsets = np.zeros(len(arrays) + 1, np.int32)
    np.cumsum(sizes, out=offsets[1:])
    present = [a for a in arrays if a is not None]
    if present:
        flat = np.concatenate([np.ravel(a) for a in present]).astype(kind, copy=False)  # (sum n*inner,)
    else:
        flat = np.zeros(0, kind)
    values = pa.array(flat)
    if inner is not None:
        values = pa.FixedSizeListArray.from_arrays(values, inner)
    mask = pa.array([a is None for a in arrays])
    return pa.ListArray.from_arrays(pa.array(offsets), values, mask=mask)


def _flat_lists(pa, rows: list, kind):
    """A list column from per-row lists of numbers (None: a null row), through one flat NumPy array:
    pa.array of nested Python lists converts each number on its own."""
    sizes = np.fromiter((0 if row is None else len(row) for row in rows), np.int64, len(rows))  # (n,)
    offsets = np.zeros(len(rows) + 1, np.int32)
    np.cumsum(sizes, out=offsets[1:])
    flat = np.fromiter(itertools.chain.from_iterable(row for row in rows if row is not None), kind, int(offsets[-1]))
    mask = pa.array([row is None for row in rows])
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat), mask=mask)


def parquet_batch(records: list[dict], options: dict, engine):
    """The records of a chunk as one Arrow record batch (one row each, in order)."""
    import pyarrow as pa  # the parquet extra: loaded for --format parquet alone

    schema = _schema(engine, options)
    ok = ["error" not in r for r in records]

    def field(name):
        return [r.get(name) for r in records]

    columns = {
        "line": pa.array(field("line"), pa.int64()),
        "id": pa.array([orjson.dumps(r["id"]).decode() if "id" in r else None for r in records], pa.string()),
        "text": pa.array(field("text"), pa.string()),
        "error": pa.array(field("error"), pa.string()),
        "tokens": pa.array(field("tokens"), pa.list_(pa.string())),
        "sources": pa.array(field("sources"), pa.list_(pa.string())),
        "in_vocab": _flat_lists(pa, field("in_vocab"), np.bool_),
        "attended_positions": _flat_lists(pa, field("attended_positions"), np.int32),
    }
    if options["weights"]:
        weights = [r["weights"] if good else None for r, good in zip(records, ok, strict=True)]
        columns["weights"] = _lists(pa, weights, np.float32)
        shapes = [np.array(w.shape, np.int32) if w is not None else None for w in weights]  # (4,) each
        columns["weights_shape"] = _lists(pa, shapes, np.int32)
    if options["with_vectors"]:
        columns["static"] = _lists(pa, [r.get("static") for r in records], np.float32, inner=engine.dim)
        columns["contextual"] = _lists(pa, [r.get("contextual") for r in records], np.float32, inner=engine.out_dim)
    if options["word"] is not None:
        found = [r.get("word") for r in records]
        columns["word_position"] = pa.array([None if w is None else w["position"] for w in found], pa.int32())
        vectors = [None if w is None else w["contextual"] for w in found]
        flat = [v for v in vectors if v is not None]
        values = pa.array(np.concatenate(flat).astype(np.float32) if flat else np.zeros(0, np.float32))
        # a null row still takes its d_out slots in a fixed-size list: fill them, then mask the row
        full = np.zeros((len(vectors), engine.out_dim), np.float32)
        rows = [i for i, v in enumerate(vectors) if v is not None]
        if rows:
            full[rows] = np.asarray(values).reshape(len(rows), engine.out_dim)
        columns["word_vector"] = pa.FixedSizeListArray.from_arrays(
            pa.array(full.ravel()), engine.out_dim, mask=pa.array([v is None for v in vectors])
        )
    return pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)


def _ipc_bytes(batch):
    """The batch as an Arrow IPC stream, in a pyarrow Buffer: the pipe and the sink read it in place
    (the buffer protocol), with no copy into a ``bytes``."""
    import pyarrow as pa  # the parquet extra: loaded for --format parquet alone

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue()


# ------------------------------------------------------------------------------ parent side
@contextlib.contextmanager
def _writing(path: Path):
    """A full disk (or any write error) as one DataError naming --out, never a traceback."""
    try:
        yield
    except OSError as exc:  # pyarrow's ArrowIOError is one too
        raise DataError(f"cannot write {{out}} {path}: {exc.strerror or exc}", "out") from None


class AtomicFile:
    """A temporary file beside ``path``, renamed over it by :meth:`commit`; :meth:`abort` removes it."""

    def __init__(self, path: str, suffix: str = ""):
        self.path = Path(path)
        folder = self.path.parent
        try:
            fd, temp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".partial", dir=folder)
        except OSError as exc:
            raise DataError(f"cannot write {path}: {exc.strerror}") from None
        os.close(fd)
        self.temp = Path(temp)

    def commit(self) -> None:
        os.replace(self.temp, self.path)

    def abort(self) -> None:
        try:
            self.temp.unlink()
        except OSError:
            pass


class ParquetSink:
    """Row groups of Arrow IPC blocks, in order, to ``--out`` (atomically)."""

    def __init__(self, path: str, engine, options: dict):
        import pyarrow.compute  # noqa: F401 - the workers build columns with it: loaded once, before they fork
        import pyarrow.parquet as pq  # the parquet extra: loaded for --format parquet alone

        self.file = AtomicFile(path)
        schema = _schema(engine, options).with_metadata(parquet_metadata(engine, options))
        self.writer = pq.ParquetWriter(str(self.file.temp), schema, **WRITER_OPTIONS)

    def write(self, parts: list) -> None:
        import pyarrow as pa  # the parquet extra: loaded for --format parquet alone

        data = parts[0] if len(parts) == 1 else b"".join(parts)
        with pa.ipc.open_stream(data) as reader, _writing(self.file.path):
            for batch in reader:
                self.writer.write_batch(batch)  # a row group per chunk: memory stays one chunk's

    def close(self, complete: bool) -> None:
        self.writer.close()
        self.file.commit() if complete else self.file.abort()


class WordSink:
    """One word's rows, in order: an npz (``vectors``, ``line``, ``position``, ``text``, ``meta``) or
    the Projector pair (``vectors.tsv``, ``metadata.tsv`` in the ``--out`` folder)."""

    def __init__(self, fmt: str, path: str, engine, options: dict):
        self.fmt, self.path = fmt, path
        self.meta = run_document(engine, options, NPZ_SCHEMA)
        self.columns: list[dict] = []
        if fmt == "projector":
            try:
                Path(path).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise DataError(f"cannot make the folder {path}: {exc.strerror}") from None
            self.files = [AtomicFile(Path(path) / "vectors.tsv"), AtomicFile(Path(path) / "metadata.tsv")]
            self.streams = [open(f.temp, "w", encoding="utf-8", newline="\n") for f in self.files]  # noqa: SIM115
            self.streams[1].write(metadata_tsv(PROJECTOR_HEADER))
        else:
            self.files = [AtomicFile(path)]

    def write(self, parts: list) -> None:
        columns = _read_bundle(parts[0] if len(parts) == 1 else b"".join(parts))
        if self.fmt == "projector":
            vectors, metadata = self.streams
            vectors.write(vectors_tsv(columns["vectors"]))
            metadata.write(metadata_tsv(*zip(columns["line"], columns["position"], columns["text"], strict=True)))
        else:
            self.columns.append(columns)  # one vector per matching line: the matrix is the output

    def close(self, complete: bool) -> None:
        if self.fmt == "projector":
            for stream in self.streams:
                stream.close()
        elif complete:
            joined = {
                name: np.concatenate([c[name] for c in self.columns]) if self.columns else np.zeros(0)
                for name in ("vectors", "line", "position", "text")
            }
            if not self.columns:
                joined["vectors"] = np.zeros((0, 0), np.float32)
                joined["text"] = np.zeros(0, str)
            with open(self.files[0].temp, "wb") as stream:
                np.savez(stream, **joined, meta=np.array(json.dumps(self.meta)))
        for file in self.files:
            file.commit() if complete else file.abort()


class JsonLinesSink:
    """batch's JSON lines to ``--out`` instead of stdout, made whole at the end like the other formats."""

    def __init__(self, path: str):
        self.file = AtomicFile(path)
        self.stream = open(self.file.temp, "wb")  # noqa: SIM115 - closed in close()

    def write(self, parts: list) -> None:
        with _writing(self.file.path):
            for part in parts:
                self.stream.write(part)

    def close(self, complete: bool) -> None:
        self.stream.close()
        self.file.commit() if complete else self.file.abort()


def open_sink(fmt: str, path: str, engine, options: dict):
    if fmt == "jsonl":
        return JsonLinesSink(path)
    return ParquetSink(path, engine, options) if fmt == "parquet" else WordSink(fmt, path, engine, options)
