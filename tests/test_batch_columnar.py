"""`ctxembed batch --format parquet|npz|projector --out`: the JSON records' numbers, as columns.

Each file is read back with its own reader (pyarrow, numpy.load, plain text) and compared with the
JSONL records of the same input, value for value, bad lines included."""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from ctxembed.batch.embed import word_arrays
from tests.batch_lines import BAD_KINDS, GOOD
from tests.cli_helpers import fails, json_lines, succeeds
from tests.conftest import REPO

pq = pytest.importorskip("pyarrow.parquet")
CLI = [sys.executable, "-m", "ctxembed"]


def brown(count: int) -> list[bytes]:
    with gzip.open(REPO / "data" / "brown.txt.gz", "rb") as fh:
        return [next(fh).rstrip(b"\n") for _ in range(count)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Brown lines with every known bad kind and good JSON lines (with ids) mixed in."""
    lines = brown(120)
    for i, bad in enumerate(list(BAD_KINDS.values()) + GOOD):
        lines.insert(7 * i + 3, bad)
    path = tmp_path_factory.mktemp("columnar") / "in.txt"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def jsonl(corpus, *args) -> list[dict]:
    return json_lines(succeeds("batch", corpus, "--preset", "textbook", *args).stdout)


def f32(value) -> np.ndarray:
    return np.asarray(value, np.float32)  # the JSON text of a float32 reads back to that float32


@pytest.mark.parametrize("workers", ["1", "2"])
def test_parquet_rows_equal_the_json_records(corpus, tmp_path, workers):
    out = tmp_path / "out.parquet"
    args = ("--with-vectors", "--word", "bank", "--chunk", "16", "--workers", workers)
    succeeds("batch", corpus, "--preset", "textbook", *args, "--format", "parquet", "--out", out)
    records = jsonl(corpus, *args)
    table = pq.read_table(out)
    rows = table.to_pylist()
    assert len(rows) == len(records) and [r["line"] for r in rows] == [r["line"] for r in records]
    errors = sum(r["error"] is not None for r in rows)
    assert errors == sum("error" in r for r in records) >= 10  # bad lines kept as error rows, not dropped
    for row, record in zip(rows, records, strict=True):
        assert row["error"] == record.get("error")
        assert row["id"] == (json.dumps(record["id"], separators=(",", ":")) if "id" in record else None)
        if "error" in record:
            assert row["tokens"] is None and row["weights"] is None
            continue
        for name in ("text", "tokens", "sources", "in_vocab", "attended_positions"):
            assert row[name] == record[name], name
        weights = np.asarray(row["weights"], np.float32).reshape(row["weights_shape"])
        assert np.array_equal(weights, f32(record["weights"]))
        assert np.array_equal(f32(row["static"]), f32(record["static"]))
        assert np.array_equal(f32(row["contextual"]), f32(record["contextual"]))
        if record["word"] is None:
            assert row["word_vector"] is None and row["word_position"] is None
        else:
            assert row["word_position"] == record["word"]["position"]
            assert np.array_equal(f32(row["word_vector"]), f32(record["word"]["contextual"]))
    meta = json.loads(table.schema.metadata[b"ctxembed"])
    assert meta["schema"] == "ctxembed.batch.parquet/1" and meta["options"]["word"] == "bank"
    assert len(meta["vectors"]["fingerprint"]) == 16 and meta["settings"]["attention"]
    assert pq.ParquetFile(out).metadata.num_row_groups > 1  # written as the chunks arrived
    assert [p.name for p in tmp_path.iterdir()] == ["out.parquet"]  # no temporary file left


def test_parquet_compresses_text_not_floats_and_keeps_a_dictionary_of_tokens(corpus, tmp_path):
    """The writer's per-column options reach the columns they name: Parquet keys them by leaf path
    (``tokens.list.element``), and a name that matches no leaf is silently ignored."""
    from ctxembed.batch.columnar import COMPRESSED_COLUMNS, DICTIONARY_COLUMNS

    out = tmp_path / "out.parquet"
    args = ("--with-vectors", "--word", "bank", "--format", "parquet", "--out", out)
    succeeds("batch", corpus, "--preset", "textbook", *args)
    group = pq.ParquetFile(out).metadata.row_group(0)
    chunks = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    assert set(COMPRESSED_COLUMNS + DICTIONARY_COLUMNS) <= set(chunks)  # every name is a real column
    floats = ["weights.list.element", "static.list.element.list.element", "word_vector.list.element"]
    assert all(chunks[name].compression == "UNCOMPRESSED" for name in floats)
    assert all(chunks[name].compression == "SNAPPY" for name in COMPRESSED_COLUMNS)
    assert all("RLE_DICTIONARY" in chunks[name].encodings for name in DICTIONARY_COLUMNS)
    assert "RLE_DICTIONARY" not in chunks["weights.list.element"].encodings


def test_npz_holds_the_words_vectors_lines_and_positions(corpus, tmp_path):
    out = tmp_path / "the.npz"
    succeeds("batch", corpus, "--preset", "textbook", "--no-weights", "--word", "the", "--format", "npz", "--out", out)
    found = [r for r in jsonl(corpus, "--no-weights", "--word", "the") if r.get("word")]
    with np.load(out, allow_pickle=False) as npz:
        assert npz["vectors"].dtype == np.float32 and npz["vectors"].shape == (len(found), 100)
        assert np.array_equal(npz["vectors"], f32([r["word"]["contextual"] for r in found]))
        assert npz["line"].tolist() == [r["line"] for r in found]
        assert npz["position"].tolist() == [r["word"]["position"] for r in found]
        assert npz["text"].tolist() == [r["text"] for r in found]
        assert json.loads(str(npz["meta"]))["options"]["word"] == "the"
        lines = corpus.read_bytes().split(b"\n")[:-1]
        found = word_arrays(lines, "the", preset="textbook")  # the API gives the same arrays
        assert all(np.array_equal(found[name], npz[name]) for name in ("vectors", "line", "position", "text"))


def check_projector_pair(folder, count: int, dim: int, header: list[str]) -> list[list[str]]:
    """The Embedding Projector's rules: vectors.tsv has no header and d tab-separated numbers a row;
    metadata.tsv (more than one column) a header, then a row per vector, no tab or newline inside a field."""
    vectors = (folder / "vectors.tsv").read_text(encoding="utf-8").split("\n")
    metadata = (folder / "metadata.tsv").read_text(encoding="utf-8").split("\n")
    assert vectors.pop() == "" and metadata.pop() == ""  # each row ends with a newline
    assert len(vectors) == count and all(len(row.split("\t")) == dim for row in vectors)
    assert all(np.isfinite(float(x)) for row in vectors for x in row.split("\t"))
    assert metadata[0].split("\t") == header and len(metadata) == count + 1
    assert all(len(row.split("\t")) == len(header) for row in metadata)
    return [row.split("\t") for row in metadata[1:]]


def test_projector_pair_follows_the_format(corpus, tmp_path):
    folder = tmp_path / "proj"
    tabbed = tmp_path / "tabbed.txt"
    tabbed.write_bytes(corpus.read_bytes() + b'{"text": "the\\tbank of the river"}\n')
    succeeds("batch", tabbed, "--preset", "textbook", "--no-weights", "--word", "bank", "--format", "projector",
             "--out", folder)  # fmt: skip
    found = [r for r in jsonl(tabbed, "--no-weights", "--word", "bank") if r.get("word")]
    rows = check_projector_pair(folder, len(found), 100, ["line", "position", "text"])
    assert rows[-1][2] == "the bank of the river"  # the tab inside the text became a space
    values = np.loadtxt(folder / "vectors.tsv", delimiter="\t", dtype=np.float32, ndmin=2)
    assert np.array_equal(values, f32([r["word"]["contextual"] for r in found]))


def test_jsonl_out_writes_what_stdout_gets(corpus, tmp_path):
    stdout = succeeds("batch", corpus, "--preset", "textbook", "--chunk", "16").stdout_bytes
    succeeds("batch", corpus, "--preset", "textbook", "--chunk", "16", "--out", tmp_path / "out.jsonl")
    assert (tmp_path / "out.jsonl").read_bytes() == stdout


def test_format_needs_out_and_word(corpus, tmp_path):
    assert "--out" in fails(2, "batch", corpus, "--format", "parquet")
    assert "--word" in fails(2, "batch", corpus, "--format", "npz", "--out", tmp_path / "x.npz")
    assert "no such folder" in fails(1, "batch", corpus, "--format", "parquet", "--out", tmp_path / "no" / "x.parquet")


def test_digits_round_the_json_numbers(corpus):
    text = succeeds("batch", corpus, "--preset", "textbook", "--digits", "3", "--with-vectors").stdout
    rounded, exact = json_lines(text), jsonl(corpus, "--with-vectors")
    weights = re.search(r'"weights":(\[[^a-z]*\]),"static"', text).group(1)
    numbers = re.findall(r"[-0-9.e]+", weights)
    assert len(numbers) > 100 and all(re.fullmatch(r"-?\d+(\.\d{1,3})?", n) for n in numbers)  # 3 decimals at most
    record = next(r for r in rounded if "weights" in r)
    first = next(r for r in exact if "weights" in r)
    assert np.allclose(record["weights"], first["weights"], atol=5e-4) and record["weights"] != first["weights"]
    assert np.allclose(record["contextual"], first["contextual"], atol=5e-4)


def test_a_killed_run_leaves_no_file_at_out(tmp_path):
    source = tmp_path / "big.txt"
    source.write_bytes(b"\n".join(brown(2000)) * 20 + b"\n")
    out = tmp_path / "out.parquet"
    for sig in (signal.SIGTERM, signal.SIGKILL):
        env = dict(os.environ, PYTHONPATH=str(REPO))
        cmd = [*CLI, "batch", str(source), "--preset", "textbook", "--chunk", "64", "--format", "parquet", "--out", out]
        proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, env=env, start_new_session=True)
        deadline = time.monotonic() + 60
        while not any(p.name.endswith(".partial") for p in tmp_path.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)  # mid-run: row groups written
        if sig == signal.SIGTERM:  # `kill PID`: the parent alone, which stops its workers itself
            os.kill(proc.pid, sig)
        else:  # nothing can clean up: the whole group dies at once
            os.killpg(proc.pid, sig)
        err = proc.communicate(timeout=30)[1]
        assert proc.returncode != 0 and not out.exists(), (sig, proc.returncode, err[-400:])
        if sig == signal.SIGTERM:  # a run that can clean up leaves nothing behind
            assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def test_columnar_formats_take_larger_chunks_by_default(tmp_path):
    """A Parquet row group is a chunk: 4,096 lines unless --chunk says otherwise (JSON lines: 1,024),
    and the rows are the same whatever the chunk."""
    from ctxembed.batch.driver import COLUMNAR_CHUNK

    source = tmp_path / "in.txt"
    source.write_bytes(b"the river bank\n" * (COLUMNAR_CHUNK + 100))
    default, small = tmp_path / "default.parquet", tmp_path / "small.parquet"
    args = ("--preset", "textbook", "--no-weights", "--word", "bank", "--format", "parquet")
    succeeds("batch", source, *args, "--out", default)
    succeeds("batch", source, *args, "--chunk", "1024", "--out", small)
    groups = pq.ParquetFile(default).metadata
    assert [groups.row_group(i).num_rows for i in range(groups.num_row_groups)] == [COLUMNAR_CHUNK, 100]
    small_groups = pq.ParquetFile(small).metadata
    sizes = [small_groups.row_group(i).num_rows for i in range(small_groups.num_row_groups)]
    assert sizes[0] == 1024 and max(sizes) == 1024 and len(sizes) > 5  # chunks shrink near the end (share)
    assert pq.read_table(default).equals(pq.read_table(small))


# ------------------------------------------------------------------------------ a chunk's columns
@pytest.fixture(scope="module")
def engine2():
    from ctxembed.engine import open_engine

    engine = open_engine(None, "textbook", heads=2, layers=2)  # weights (2, 2, T, T): the shape column is read
    engine.lexicon.prepare_bulk()
    return engine


def numbered(lines: list[bytes]) -> list:
    from ctxembed.batch.driver import line_limit
    from ctxembed.batch.records import LongLine

    limit = line_limit(512)
    return [(k, LongLine(limit) if len(raw) > limit else raw) for k, raw in enumerate(lines, start=1)]


def same_columns(built, expected) -> None:
    from dataclasses import fields

    from ctxembed.batch.column_chunk import ChunkColumns

    assert built.token_texts() == expected.token_texts()
    for name in (f.name for f in fields(ChunkColumns) if f.name not in ("tokens", "pieces", "table")):
        got, want = getattr(built, name), getattr(expected, name)
        if isinstance(want, np.ndarray):
            assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want), name
        else:
            assert got == want, name


# bad lines mid-chunk, and a line past the tokenizer's window, prepared alone (tokens held as strings)
MIXED = brown(30)[:12] + list(BAD_KINDS.values()) + GOOD + [b"the river " + b"y" * 5000 + b" bank"] + brown(40)[30:]
# every line read on the fast path (tokens held as pieces of the table), bad lines mid-chunk
PARSED = brown(12) + list(BAD_KINDS.values()) + GOOD + brown(20)[12:]


@pytest.mark.parametrize(
    "options",
    [
        {"weights": True, "with_vectors": True, "word": "bank", "digits": None},
        {"weights": True, "with_vectors": False, "word": None, "digits": 3},
        {"weights": False, "with_vectors": False, "word": "the", "digits": None},  # the word's rows alone
        {"weights": False, "with_vectors": True, "word": "the#2", "digits": 2},
        {"weights": True, "with_vectors": False, "word": "#3", "digits": None},  # a position: index_of
    ],
)
def test_chunk_columns_equal_the_records_columns(engine2, options):
    """The columns built from the group arrays hold exactly what the record dicts hold, row for row:
    bad lines mid-chunk, a chunk of only bad lines, lines lacking the word, rounded numbers."""
    from ctxembed.batch.column_chunk import chunk_columns, from_records
    from ctxembed.batch.columnar import record_dicts

    options = options | {"format": "parquet"}
    for lines in (MIXED, PARSED, list(BAD_KINDS.values())[:6]):
        chunk = numbered(lines)
        built = chunk_columns(engine2, chunk, options)
        expected = from_records(record_dicts(engine2, chunk, options), options, engine2)
        same_columns(built, expected)
        assert built.errors >= 4 and len(built) == len(lines)
        assert (built.pieces is None) == (lines is MIXED)  # both ways of holding the tokens are read
    if options["word"] == "bank":
        assert 0 < built.lacking or expected.lacking == 0


def test_a_failing_group_costs_only_its_lines(engine2, monkeypatch):
    """An unexpected failure in a chunk redoes it line by line: only the lines that fail become errors."""
    from ctxembed.batch.column_chunk import chunk_columns
    from ctxembed.batch.driver import chunk_table

    options = {"weights": True, "with_vectors": False, "word": "the", "digits": None, "format": "parquet"}
    chunk = numbered(MIXED)
    good = chunk_columns(engine2, chunk, options)
    run_group = engine2.run_group
    length = int(good.attended_counts[good.filled][0])  # the first sentence's T fails, and any of that T

    def failing(static, *args, **kwargs):
        if static.shape[1] == length:
            raise ValueError("this length")
        return run_group(static, *args, **kwargs)

    monkeypatch.setattr(engine2, "run_group", failing)
    table = chunk_table(engine2, chunk, options)
    seven = good.attended_counts == length
    assert 1 <= seven.sum() < good.filled.sum()
    failed = np.array([e == "internal error: ValueError: this length" for e in table.error])  # (n,)
    assert np.array_equal(failed, seven)
    assert [e for e, f in zip(table.error, failed, strict=True) if not f] == [
        e for e, s in zip(good.error, seven, strict=True) if not s
    ]  # the other lines as before
    kept = good.filled & ~seven
    assert np.array_equal(table.word_vector[kept], good.word_vector[kept])
    assert table.errors == good.errors + seven.sum()


def test_parquet_digits_equal_the_rounded_json(corpus, tmp_path):
    out = tmp_path / "d.parquet"
    args = ("--digits", "3", "--with-vectors", "--chunk", "32")
    succeeds("batch", corpus, "--preset", "textbook", *args, "--format", "parquet", "--out", out)
    records = [r for r in jsonl(corpus, *args) if "error" not in r]
    rows = [r for r in pq.read_table(out).to_pylist() if r["error"] is None]
    assert len(rows) == len(records) > 100
    for row, record in zip(rows, records, strict=True):
        assert np.array_equal(f32(row["weights"]), f32(record["weights"]).ravel())
        assert np.array_equal(f32(row["contextual"]), f32(record["contextual"]))


def test_a_trained_models_parquet_rows_equal_its_json_records(minilm_folder, tmp_path):
    """A trained model has no batch columns: its chunks go through the records (from_records)."""
    source = tmp_path / "in.txt"
    source.write_bytes(b"we sat on the river bank\n\xff bad\nthe bank raised its rates\n")
    out = tmp_path / "m.parquet"
    args = ("--model", "minilm", "--word", "bank", "--with-vectors")
    succeeds("batch", source, *args, "--format", "parquet", "--out", out)
    records = json_lines(succeeds("batch", source, *args).stdout)
    rows = pq.read_table(out).to_pylist()
    assert [r["error"] is None for r in rows] == ["error" not in r for r in records] == [True, False, True]
    for row, record in zip(rows, records, strict=True):
        if "error" in record:
            continue
        assert row["tokens"] == record["tokens"] and row["word_position"] == record["word"]["position"]
        weights = np.asarray(row["weights"], np.float32).reshape(row["weights_shape"])
        assert weights.shape[:2] != (1, 1) and np.array_equal(weights, f32(record["weights"]))
        assert np.array_equal(f32(row["contextual"]), f32(record["contextual"]))
        assert np.array_equal(f32(row["word_vector"]), f32(record["word"]["contextual"]))


@pytest.mark.parametrize("preset", ["default", "textbook"])  # one softmax row (run_rows), or run_group's rows
def test_a_word_alone_gathers_only_the_sentences_that_hold_it(monkeypatch, preset):
    from ctxembed.batch import columns
    from ctxembed.engine import open_engine

    engine = open_engine(None, preset, layers=2) if preset == "textbook" else open_engine(None, preset)
    gathered = []
    slab_rows = columns._slab_rows

    def recording(engine, sentences, members):
        gathered.extend(members.tolist())
        return slab_rows(engine, sentences, members)

    monkeypatch.setattr(columns, "_slab_rows", recording)
    sentences = columns.prepare_many(engine, [line.decode() for line in brown(60)])
    found = columns.word_positions(sentences, "the")
    assert 0 < (found < 0).sum() < len(found)  # some lines lack it
    groups = list(columns.arrays(engine, sentences, weights=False, vectors=True, word="the"))
    assert sorted(gathered) == np.flatnonzero(found >= 0).tolist()
    assert sorted(i for members, _ in groups for i in members) == np.flatnonzero(sentences.lengths > 0).tolist()
    full = engine.run([sentences.sentence(i) for i in range(len(sentences))], weights=False)
    for members, group in groups:
        for b, i in enumerate(members):
            want = full[i].contextual[found[i]] if found[i] >= 0 else np.zeros(engine.out_dim, np.float32)
            assert np.array_equal(group.word_vectors[b], want)


def test_the_ipc_stream_is_the_same_when_its_size_was_reckoned_short(monkeypatch):
    """A worker's block is written into a buffer of the stream's reckoned size; short of room, it is
    written again into a growing stream: the same bytes either way, read back to the same rows."""
    import pyarrow as pa

    from ctxembed.batch import columnar

    batch = pa.RecordBatch.from_arrays(
        [pa.array(np.arange(1000, dtype=np.float32)), pa.array(["a"] * 1000)], ["x", "y"]
    )
    sized = columnar._ipc_bytes(batch)
    monkeypatch.setattr(columnar, "_IPC_SLACK", -64)  # too small: the fixed buffer overflows
    grown = columnar._ipc_bytes(batch)
    assert sized.equals(grown) and pa.ipc.open_stream(grown).read_next_batch().equals(batch)


def test_parquet_needs_no_pyarrow_compute(corpus, tmp_path):
    """Columns are built from their buffers (tokens gathered with NumPy, nulls as validity bitmaps), so a
    Parquet run never loads pyarrow.compute: the parent no longer imports it before the fork for the
    workers' sake (a serial start). Checked in a fresh process, every column kind asked for."""
    out = tmp_path / "out.parquet"
    code = (
        "import sys; from ctxembed.api import Explorer; from ctxembed.batch.driver import run_batch; "
        f"run_batch(Explorer().engine, {str(corpus)!r}, workers=1, fmt='parquet', out={str(out)!r}, "
        "with_vectors=True, word='bank'); print('pyarrow.compute' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO))
    )
    assert done.returncode == 0, done.stderr[-600:]
    assert done.stdout.split()[-1] == "False"
    assert pq.read_table(out).num_rows == len(corpus.read_bytes().splitlines())


def test_a_file_put_where_the_projector_folder_goes_during_the_run_is_one_line(corpus, tmp_path, monkeypatch):
    """--format projector writes a folder: a file in its place is refused before the run and, found when
    the writer opens it (put there during the run), with the same line naming both flags."""
    from ctxembed.batch import columnar

    taken = tmp_path / "vectors"
    taken.write_text("not a folder")
    before = fails(1, "batch", corpus, "--format", "projector", "--word", "the", "--out", taken)
    monkeypatch.setattr(columnar, "check_format", lambda *args: None)  # the file appears after the check
    during = fails(1, "batch", corpus, "--format", "projector", "--word", "the", "--out", taken)
    assert during == before == f"ctxembed: error: --out {taken}: --format projector writes a folder, and this is a file"
