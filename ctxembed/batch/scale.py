"""Batch on a Dask cluster: a file cut into partitions whose first line numbers are known.

    from ctxembed.batch.scale import embed_file
    bag = embed_file("corpus.txt", blocksize="64MiB", preset="default", weights=False)
    bag.to_textfiles("out/*.jsonl", last_endline=True)   # batch's output, one file per partition

Each partition is a byte range of the file that starts and ends at a line boundary; one pass over
the file (bytes.count, about 1 GB/s) counts its lines, so every partition knows the number of its
first line and its records carry the numbers ``ctxembed batch`` gives. Partitions are read as bytes,
exactly like batch (bad UTF-8, CRLF and lone CR stay as they are), through fsspec, so a path can be
anything fsspec opens (a shared file system path, ``s3://...`` with s3fs installed). Dask is
imported only here; see docs/scale.md.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ctxembed.batch.embed import embed_chunks

# fsspec and dask are the optional extra `scale` (pip install 'ctxembed[scale]'): imported inside the
# functions that use them, so this module (and its error messages) load without them.

_COUNT_BYTES = 1 << 22  # the line-counting pass reads this much at a time


class Partition(NamedTuple):
    """Bytes [start, stop) of ``path``: whole lines, the first of them line number ``first_line``."""

    path: str
    start: int
    stop: int
    first_line: int


def partitions(path: str, blocksize: int | str = "64MiB") -> list[Partition]:
    """Cut ``path`` into partitions of about ``blocksize`` bytes at line ends, numbering their lines."""
    import fsspec  # the dask extra: the cluster path alone
    from dask.utils import parse_bytes

    size = parse_bytes(blocksize) if isinstance(blocksize, str) else int(blocksize)
    if size < 1:
        raise ValueError(f"blocksize must be at least 1 byte, not {blocksize!r}")
    parts: list[Partition] = []
    start, first_line, position, counted = 0, 1, 0, 0  # counted: lines of the partition being cut
    with fsspec.open(path, "rb") as stream:
        while data := stream.read(_COUNT_BYTES):
            i = 0
            while i < len(data):
                still = start + size - (position + i)  # bytes to go before this partition may end
                newline = data.find(b"\n", max(i, i + still - 1)) if still <= len(data) - i else -1
                if newline < 0:
                    counted += data.count(b"\n", i)
                    break
                counted += data.count(b"\n", i, newline + 1)
                stop = position + newline + 1
                parts.append(Partition(path, start, stop, first_line))
                start, first_line, counted, i = stop, first_line + counted, 0, newline + 1
            position += len(data)
    if position > start:  # the rest, with or without a final newline
        parts.append(Partition(path, start, position, first_line))
    return parts


def read_partition(part: Partition) -> list[bytes]:
    """The lines of one partition, as bytes with their line ends."""
    import fsspec  # the dask extra: the cluster path alone

    with fsspec.open(part.path, "rb") as stream:
        stream.seek(part.start)
        data = stream.read(part.stop - part.start)
    # split at b"\n" only, as batch does (bytes.splitlines would also cut at a lone b"\r")
    lines = data.split(b"\n")
    last = lines.pop()
    return [line + b"\n" for line in lines] + ([last] if last else [])


def embed_partition(part: Partition, **keywords: Any) -> list[str]:
    """The batch records of one partition, numbered as batch numbers them: JSON lines without their
    newline (what ``dask.bag.Bag.to_textfiles`` writes one per line)."""
    lines = read_partition(part)
    text = b"".join(embed_chunks(lines, start=part.first_line, **keywords)).decode("utf-8")
    return text.split("\n")[:-1]  # every record ends with a newline, and none holds one


def parquet_partition(part: Partition, folder: str, number: int, **keywords: Any) -> str:
    """Write one partition's rows as ``folder/part.NNNNN.parquet`` (the columns of ``ctxembed batch
    --format parquet``, a row group per chunk); returns the file's path."""
    import fsspec  # the dask extra: the cluster path alone
    import pyarrow.parquet as pq  # the parquet extra: this writer only

    from ctxembed.batch.columnar import WRITER_OPTIONS, parquet_metadata
    from ctxembed.batch.embed import embed_columns, shared_engine

    path = f"{folder.rstrip('/')}/part.{number:05d}.parquet"
    writer = None
    with fsspec.open(path, "wb") as stream:
        for batch in embed_columns(read_partition(part), start=part.first_line, **keywords):
            if writer is None:
                engine = shared_engine(**{k: v for k, v in keywords.items() if k not in _RECORD_OPTIONS})
                options = {k: keywords.get(k, d) for k, d in _RECORD_OPTIONS.items()} | {"digits": None}
                schema = batch.schema.with_metadata(parquet_metadata(engine, options))
                writer = pq.ParquetWriter(stream, schema, **WRITER_OPTIONS)
            writer.write_batch(batch)
        if writer is not None:
            writer.close()
    return path


_RECORD_OPTIONS = {"weights": True, "with_vectors": False, "word": None}  # embed_lines' own keywords, and defaults


def check_keywords(keywords: dict[str, Any]) -> None:
    """On the client, before any partition is cut or task made: refuse an option the model does not take
    (:func:`ctxembed.engine.registry.check_options`, as every worker's engine would)."""
    from ctxembed.engine.registry import DEFAULT_MODEL, check_options, given_options

    opened = {k: v for k, v in keywords.items() if k not in _RECORD_OPTIONS and k not in ("start", "chunk")}
    vectors, preset = opened.pop("vectors", None), opened.pop("preset", "default")
    check_options(opened.pop("model", DEFAULT_MODEL), given_options(vectors, preset, opened), preset=preset)


def to_parquet(path: str, folder: str, *, blocksize: int | str = "64MiB", **keywords: Any):
    """A dask.bag whose computing writes ``folder/part.00000.parquet``, ... one file per partition, in
    order (``pyarrow.parquet.read_table(folder)`` reads them back as one table, the rows of
    ``ctxembed batch --format parquet``). Computing it returns the files' paths."""
    import dask.bag as db  # the dask extra: the cluster path alone
    import fsspec

    check_keywords(keywords)
    fs, _, (root,) = fsspec.get_fs_token_paths(folder)
    fs.makedirs(root, exist_ok=True)
    parts = partitions(path, blocksize)
    numbered = db.from_sequence(list(enumerate(parts)), npartitions=max(1, len(parts)))
    return numbered.map(lambda item: parquet_partition(item[1], folder, item[0], **keywords))


def embed_file(path: str, *, blocksize: int | str = "64MiB", **keywords: Any):
    """A dask.bag of the file's batch records (JSON lines, str, no newline), in order.

    ``keywords`` are :func:`ctxembed.embed_lines`'s (``weights=False``, ``preset=...``, ``vectors=...``).
    ``"\\n".join(bag.compute()) + "\\n"`` is what ``ctxembed batch`` writes, and
    ``bag.to_textfiles("out/*.jsonl", last_endline=True)`` writes it in one file per partition."""
    import dask.bag as db  # the dask extra: the cluster path alone

    check_keywords(keywords)
    parts = partitions(path, blocksize)
    if not parts:
        return db.from_sequence([], npartitions=1)
    return db.from_sequence(parts, npartitions=len(parts)).map(embed_partition, **keywords).flatten()
