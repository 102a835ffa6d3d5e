"""The trained model (all-MiniLM-L6-v2, ``model="minilm"``) through every path other than the command line:
the Python API (embed_lines, Explorer.embed_lines, embed_chunks, word_arrays, embed_columns), senses, eval
and serve give the records and vectors of ``ctxembed batch --model minilm`` (Dask: tests/test_scale.py).
Needs `make models`: skipped without it, failed with CTXEMBED_REQUIRE_MODELS=1."""

from __future__ import annotations

import re

import numpy as np
import orjson
import pytest

import ctxembed
from ctxembed.batch.embed import embed_chunks, embed_columns, word_arrays
from tests.cli_helpers import json_lines, succeeds

# sentences of several lengths in pieces (so the engine runs several groups), a JSON line with an id,
# a line that is not UTF-8, an empty line and a word that WordPiece splits
LINES = [
    b"we sat on the river bank\n",
    b"I deposited money in the bank\n",
    b'{"id": 3, "text": "the bank of the river"}\n',
    b"\xff not text\n",
    b"\n",
    b"the bank\n",
    b"an unbelievably overcrowded riverbank by the bank\n",
    b"nothing here is about money",
]


@pytest.fixture
def corpus(tmp_path, minilm_folder):
    path = tmp_path / "lines.txt"
    path.write_bytes(b"".join(LINES))
    return path


def batch(path, *args) -> bytes:
    return succeeds("batch", path, "--model", "minilm", *args).stdout_bytes


ASKED = [
    ((), {}),
    (("--no-weights", "--with-vectors", "--word", "bank"), {"weights": False, "with_vectors": True, "word": "bank"}),
]


@pytest.mark.parametrize(("args", "keywords"), ASKED)
def test_embed_lines_explorer_and_chunks_write_batch_bytes(corpus, args, keywords):
    expected = batch(corpus, *args)
    assert expected.count(b"\n") == len(LINES) and b'"error"' in expected and b'"weights"' in expected or args
    assert b"".join(ctxembed.embed_lines(LINES, encoded=True, model="minilm", **keywords)) == expected
    explorer = ctxembed.Explorer(model="minilm")
    assert b"".join(explorer.embed_lines(LINES, encoded=True, **keywords)) == expected
    assert b"".join(embed_chunks(LINES, model="minilm", **keywords)) == expected
    # a chunk of one line: each sentence runs alone, and its numbers are the same bytes
    assert b"".join(embed_chunks(LINES, chunk=1, model="minilm", **keywords)) == expected


def test_records_as_dicts_hold_the_arrays_batch_writes(corpus):
    expected = json_lines(batch(corpus, "--with-vectors", "--word", "bank").decode())
    records = list(ctxembed.embed_lines(LINES, model="minilm", with_vectors=True, word="bank"))
    assert [r["line"] for r in records] == [r["line"] for r in expected] == list(range(1, len(LINES) + 1))
    for record, written in zip(records, expected, strict=True):
        assert record.keys() == written.keys()
        if "error" in record:
            assert record["error"] == written["error"]
            continue
        T = len(record["attended_positions"])
        assert record["weights"].shape == (6, 12, T, T) and record["contextual"].shape == (T, 384)
        assert orjson.loads(orjson.dumps(record, option=orjson.OPT_SERIALIZE_NUMPY)) == written


def test_word_arrays_equal_the_npz_of_batch(corpus, tmp_path):
    out = tmp_path / "bank.npz"
    batch(corpus, "--word", "bank", "--format", "npz", "--out", out)
    written = np.load(out, allow_pickle=False)
    got = word_arrays(LINES, "bank", model="minilm")
    assert list(got["line"]) == [1, 2, 3, 6, 7]
    for name in ("vectors", "line", "position", "text"):
        assert got[name].dtype == written[name].dtype and np.array_equal(got[name], written[name]), name


def test_embed_columns_equal_the_parquet_of_batch(corpus, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "bank.parquet"
    batch(corpus, "--word", "bank", "--format", "parquet", "--out", out)
    written = pq.read_table(out)
    got = pa.Table.from_batches(list(embed_columns(LINES, model="minilm", word="bank")))
    assert got.num_rows == len(LINES) and got.schema.remove_metadata() == written.schema.remove_metadata()
    assert got.to_pylist() == written.to_pylist()


def word_records(corpus) -> list[dict]:
    """Batch's records with the static and contextual vectors, as float32 arrays."""
    records = json_lines(batch(corpus, "--no-weights", "--with-vectors").decode())
    return [
        {**r, "static": np.array(r["static"], np.float32), "contextual": np.array(r["contextual"], np.float32)}
        for r in records
        if "error" not in r
    ]


def test_senses_vectors_are_batch_vectors_less_the_model_input_share(corpus):
    from ctxembed.engine import open_engine
    from ctxembed.senses.induce import occurrence_vectors
    from ctxembed.senses.occurrences import Occurrence

    records = [r for r in word_records(corpus) if "bank" in r["tokens"]]
    starts = [re.search(r"\bbank\b", r["text"]).start() for r in records]
    occurrences = [
        Occurrence("bank", "bank", r["line"], start, start + 4, r["text"])
        for r, start in zip(records, starts, strict=True)
    ]
    engine = open_engine(model="minilm")
    rows = [r["tokens"].index("bank") for r in records]
    kept = occurrence_vectors(engine, occurrences, drop_own=False)
    assert len(kept.occurrences) == len(records) == 5
    assert np.array_equal(kept.vectors, np.stack([r["contextual"][row] for r, row in zip(records, rows, strict=True)]))
    # senses drops the word's own input: the read-out's h0 term (the mean of 7 hidden states: h0 / 7)
    dropped = occurrence_vectors(engine, occurrences).vectors
    expected = np.stack([r["contextual"][row] - r["static"][row] / 7 for r, row in zip(records, rows, strict=True)])
    np.testing.assert_allclose(dropped, expected, rtol=0, atol=2e-7)


def test_eval_vectors_are_batch_vectors(corpus):
    from ctxembed.evaluation.evaluate import Occurrence, model_settings, target_vectors
    from ctxembed.vectors.sources import open_vectors

    records = [r for r in word_records(corpus) if r["tokens"] == r["text"].split()]  # eval reads split words
    occurrences = [Occurrence(r["tokens"], r["tokens"].index("bank"), "bank") for r in records if "bank" in r["tokens"]]
    vectors, found, coverage = target_vectors(open_vectors(None), model_settings("minilm"), occurrences)
    assert found.all() and len(occurrences) == 5 and coverage["no_vector"] == 0
    words = [r for r in records if "bank" in r["tokens"]]
    assert np.array_equal(vectors, np.stack([r["contextual"][r["tokens"].index("bank")] for r in words]))


def test_serve_answers_batch_vectors_and_weights(corpus):
    from ctxembed.output import dumps
    from ctxembed.serve.endpoints import Explorers, answer

    records = json_lines(batch(corpus, "--with-vectors").decode())
    explorers = Explorers()
    for record in (r for r in records if "error" not in r):
        body = {"sentence": record["text"], "model": "minilm", "with_vectors": True}
        doc = orjson.loads(dumps(answer("attend", body, explorers)))  # as the server sends it
        assert doc["contextual"] == record["contextual"] and doc["static"] == record["static"]
        assert doc["weights"] == record["weights"]


def test_a_trained_model_runs_batch_without_loading_the_glove_engine(minilm_folder):
    """Batch asks the engine for its declared column kernel; it never imports a model's engine itself."""
    import subprocess
    import sys

    code = (
        "import sys, ctxembed; record = next(ctxembed.embed_lines(['the bank'], model='minilm', weights=False)); "
        "print(record['tokens'], 'ctxembed.engine.glove' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "['the', 'bank'] False\n"
