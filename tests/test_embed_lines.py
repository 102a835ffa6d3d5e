"""`ctxembed.embed_lines`: the records of `ctxembed batch`, from Python, in order, numbered as batch numbers them."""

from __future__ import annotations

import doctest
import functools
import pickle

import orjson
import pytest

import ctxembed
from ctxembed.batch import embed as embed_module
from tests.cli_helpers import invoke, succeeds
from tests.conftest import FIXTURES

LINES = FIXTURES / "batch" / "lines.txt"


def batch_output(*args: str) -> bytes:
    return succeeds("batch", LINES, *args).stdout_bytes


def raw_lines() -> list[bytes]:
    return LINES.read_bytes().splitlines(keepends=True)


def test_module_example_runs():
    failures, tried = doctest.testmod(embed_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert tried >= 3 and failures == 0


@pytest.mark.parametrize(
    ("args", "keywords"),
    [
        ((), {}),
        (("--no-weights", "--with-vectors", "--word", "bank"), {
            "weights": False, "with_vectors": True, "word": "bank",
        }),
        (("--preset", "textbook", "--heads", "2", "--causal", "--oov", "zero"), {
            "preset": "textbook", "heads": 2, "causal": True, "oov": "zero",
        }),
    ],
)  # fmt: skip
def test_encoded_records_are_batch_output_byte_for_byte(args, keywords):
    records = list(ctxembed.embed_lines(raw_lines(), encoded=True, **keywords))
    assert b"".join(records) == batch_output(*args)
    assert all(r.endswith(b"\n") and r.count(b"\n") == 1 for r in records)


def test_dict_records_encode_to_batch_lines():
    records = list(ctxembed.embed_lines(raw_lines(), with_vectors=True, word="bank"))
    encoded = b"".join(orjson.dumps(r, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE) for r in records)
    assert encoded == batch_output("--with-vectors", "--word", "bank")
    good = next(r for r in records if "error" not in r)
    assert good["weights"].shape[-1] == len(good["attended_positions"])  # arrays stay NumPy


def test_text_lines_read_with_surrogateescape_give_the_same_records_as_bytes():
    text = LINES.read_text(encoding="utf-8", errors="surrogateescape").split("\n")
    records = list(ctxembed.embed_lines(text, encoded=True, weights=False))
    assert b"".join(records) == batch_output("--no-weights")
    assert b"not valid UTF-8" in records[42]


def test_start_numbers_lines_so_that_partitions_join_into_the_whole():
    lines = raw_lines()
    whole = list(ctxembed.embed_lines(lines, encoded=True, weights=False))
    parts = [
        record
        for first in range(0, len(lines), 10)
        for record in ctxembed.embed_lines(lines[first : first + 10], start=first + 1, encoded=True, weights=False)
    ]
    assert parts == whole
    assert next(ctxembed.embed_lines(["the bank"], start=41))["line"] == 41


def test_error_records_name_settings_as_keywords_where_batch_names_flags():
    [record] = ctxembed.embed_lines(["the river bank was wide"], max_tokens=3)
    assert record == {"line": 1, "error": record["error"]}
    assert "more than max_tokens 3" in record["error"]
    batch = invoke("batch", "-", "--max-tokens", "3", input="the river bank was wide")
    assert b"more than --max-tokens 3" in batch.stdout_bytes
    assert batch.exit_code == 1 and "no line could be used" in batch.stderr  # only error records: a failure


def test_chunk_size_never_changes_a_byte():
    one = b"".join(ctxembed.embed_lines(raw_lines(), encoded=True, chunk=1))
    assert one == b"".join(ctxembed.embed_lines(raw_lines(), encoded=True, chunk=1024))


@pytest.mark.parametrize("chunk", [1, 7, 1024])
def test_embed_chunks_are_batch_output_a_chunk_at_a_time(chunk):
    blocks = list(ctxembed.embed_chunks(raw_lines(), chunk=chunk, word="bank"))
    assert b"".join(blocks) == batch_output("--word", "bank")
    assert all(0 < block.count(b"\n") <= chunk and block.endswith(b"\n") for block in blocks)
    assert len(blocks) == -(-len(raw_lines()) // chunk)


def test_picklable_and_the_explorer_is_built_once_per_process():
    job = pickle.loads(pickle.dumps(functools.partial(ctxembed.embed_lines, preset="textbook", weights=False)))
    assert [r["line"] for r in job(["the bank", "a river"])] == [1, 2]
    embed_module._cached_engine.cache_clear()
    list(ctxembed.embed_lines(["the bank"], preset="textbook"))
    list(ctxembed.embed_lines(["the river"], preset="textbook"))
    assert embed_module._cached_engine.cache_info().misses == 1


def test_explorer_method_gives_the_same_records():
    explorer = ctxembed.Explorer(preset="textbook")
    via_method = list(explorer.embed_lines(["we sat on the river bank"], weights=False, encoded=True))
    assert via_method == list(
        ctxembed.embed_lines(["we sat on the river bank"], preset="textbook", weights=False, encoded=True)
    )


def test_bad_arguments_are_usage_errors_before_any_line_is_read():
    with pytest.raises(ctxembed.UsageError, match="unknown"):
        next(ctxembed.embed_lines(["the bank"], no_such_setting=1))
    with pytest.raises(ctxembed.UsageError, match="start"):
        next(ctxembed.embed_lines(["the bank"], start=-1))


@pytest.mark.parametrize("enabled", [True, False])
def test_a_chunk_leaves_the_garbage_collector_as_it_found_it(enabled):
    """Batch pauses the collector for a chunk (speed); a caller's setting survives, even a failing chunk."""
    import gc

    from ctxembed.batch import records

    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        got = list(ctxembed.embed_lines(["we sat on the river bank", "", "the bank raised rates"]))
        assert len(got) == 3 and gc.isenabled() is enabled
        with pytest.raises(KeyError):  # options without their keys: the chunk fails midway
            records.chunk_records(ctxembed.Explorer().engine, [(1, b"the bank")], {})
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_a_batch_process_runs_blas_on_one_thread():
    """records.one_blas_thread (through threadpoolctl, as train and senses) leaves every BLAS at 1 thread."""
    import subprocess
    import sys

    probe = (
        "import numpy\nfrom threadpoolctl import threadpool_info\nfrom ctxembed.batch import records\n"
        "records.one_blas_thread()\n"
        "print([i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'])"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    threads = eval(out.stdout)  # a printed list of ints
    assert threads and set(threads) == {1}, out
