"""`ctxembed vectors info` and `vectors convert`: the default store, a gensim-written file, round trips."""

from __future__ import annotations

import numpy as np
import pytest
from gensim.models import KeyedVectors

from tests.cli_helpers import fails, invoke, run_json, succeeds, table

WORDS = ["the", "river", "bank", "money"]
VECTORS = np.array([[0.5, -1, 2], [1, 0, 0.25], [-3, 1.5, 1], [0, 2, -0.75]], dtype=np.float32)


@pytest.fixture
def gensim_file(tmp_path):
    kv = KeyedVectors(vector_size=3)
    kv.add_vectors(WORDS, VECTORS)
    path = tmp_path / "tiny.txt"
    kv.save_word2vec_format(str(path))
    return path


def static_vectors(vectors_path, *args) -> np.ndarray:
    doc = run_json(
        "attend", " ".join(WORDS), "--vectors", vectors_path, "--preset", "notes", "--with-vectors", *args, "--json"
    )
    return np.array(doc["static"])


def test_info_on_the_default_store():
    info = run_json("vectors", "info", "--json")
    assert (info["words"], info["dim"]) == (400_000, 100)
    assert (info["kind"], info["format"], info["cache_state"]) == ("default", "ctxembed-store", "not needed")
    assert info["lowercase"] is True


def test_info_table_on_the_default_store():
    rows = dict(table(succeeds("vectors", "info").stdout, "vectors: default")[1])
    assert rows["words"] == "400,000" and rows["dim"] == "100" and rows["format"] == "ctxembed-store"


def test_info_on_an_unread_file_has_a_missing_cache(gensim_file):
    info = run_json("vectors", "info", gensim_file, "--json")
    assert (info["format"], info["cache_state"]) == ("word2vec-text", "missing")
    # sizes come from the word2vec header line; the dtype is only known once the file is converted
    assert (info["words"], info["dim"], info["dtype"]) == (4, 3, None)


def test_info_after_use_has_a_fresh_cache(gensim_file):
    succeeds("attend", "the bank", "--vectors", gensim_file, "--preset", "notes")
    info = run_json("vectors", "info", gensim_file, "--json")
    assert info["cache_state"] == "fresh"
    assert (info["words"], info["dim"], info["dtype"]) == (4, 3, "float32")


def test_first_use_notes_the_conversion_on_stderr(gensim_file):
    result = succeeds("attend", "the bank", "--vectors", gensim_file, "--preset", "notes", "--json")
    assert result.stderr.startswith(f"converting {gensim_file.resolve()} (word2vec-text) once into the cache ")
    assert succeeds("attend", "the bank", "--vectors", gensim_file, "--preset", "notes", "--json").stderr == ""


def test_info_with_limit(gensim_file):
    assert run_json("vectors", "info", "--limit", "1000", "--json")["words"] == 1000


def test_convert_then_load_gives_equal_vectors(gensim_file, tmp_path):
    out = tmp_path / "tiny.ctxv"
    doc = run_json("vectors", "convert", gensim_file, out, "--json")
    assert (doc["words"], doc["dim"], doc["dtype"], doc["format"]) == (4, 3, "float32", "word2vec-text")
    assert doc["bytes"] == out.stat().st_size
    assert np.array_equal(static_vectors(out), VECTORS)


def test_converted_store_reports_itself_as_a_store(gensim_file, tmp_path):
    out = tmp_path / "tiny.ctxv"
    run_json("vectors", "convert", gensim_file, out, "--json")
    info = run_json("vectors", "info", out, "--json")
    assert (info["format"], info["cache_state"], info["words"]) == ("ctxembed-store", "not needed", 4)


def test_convert_prints_a_summary_on_stderr(gensim_file, tmp_path):
    out = tmp_path / "tiny.ctxv"
    result = invoke("vectors", "convert", gensim_file, out)
    assert result.exit_code == 0 and result.stdout == ""
    assert result.stderr == f"wrote {out}: 4 words x 3 dimensions (float32, {out.stat().st_size:,} bytes)\n"


def test_quantize_stores_int8_within_half_a_step(gensim_file, tmp_path):
    out = tmp_path / "tiny-q.ctxv"
    assert run_json("vectors", "convert", gensim_file, out, "--quantize", "--json")["dtype"] == "int8"
    loaded = static_vectors(out)
    step = np.abs(VECTORS).max(axis=1, keepdims=True) / 127  # one scale per row
    assert np.all(np.abs(loaded - VECTORS) <= step / 2 + 1e-6)
    assert not np.array_equal(loaded, VECTORS)  # it really was quantised


def test_convert_with_limit_keeps_the_most_frequent_words(gensim_file, tmp_path):
    out = tmp_path / "two.ctxv"
    assert run_json("vectors", "convert", gensim_file, out, "--limit", "2", "--json")["words"] == 2
    doc = run_json("attend", "the river bank", "--vectors", out, "--preset", "notes", "--json")
    assert doc["skipped"] == [{"text": "bank", "position": 2}]


def test_convert_the_default_store_with_limit(tmp_path):
    out = tmp_path / "small.ctxv"
    doc = run_json("vectors", "convert", "default", out, "--limit", "500", "--json")
    assert (doc["words"], doc["dim"], doc["format"]) == (500, 100, "ctxembed-store")
    small = run_json("attend", "the city of", "--vectors", out, "--preset", "notes", "--with-vectors", "--json")
    full = run_json("attend", "the city of", "--preset", "notes", "--with-vectors", "--json")
    assert small["skipped"] == [] and np.allclose(small["static"], full["static"], atol=1e-6)


def test_info_on_a_missing_file_is_a_data_error(tmp_path):
    assert "no such file" in fails(1, "vectors", "info", tmp_path / "none.txt")


def test_convert_into_a_directory_is_a_usage_error(gensim_file, tmp_path):
    assert "is a directory" in fails(1, "vectors", "convert", gensim_file, tmp_path)


def test_vectors_without_subcommand_shows_help_not_an_error():
    result = invoke("vectors")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("Usage: ") and "ctxembed: error" not in result.stderr
    assert "info" in result.stderr and "convert" in result.stderr
