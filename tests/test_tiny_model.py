"""A second BERT-family model through the registry alone: the tiny random BERT of tests/tiny_model.py
(2 layers, 4 heads, width 32, its own vocabulary) is one registry entry, and every command runs it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.cli_helpers import invoke, json_lines, run_json

RIVER = "we sat on the river bank"
MONEY = "she paid money into the bank today"


def test_attend_runs_the_tiny_model_at_its_own_sizes(tiny_model):
    doc = run_json("attend", RIVER, "--model", tiny_model.name, "--json")
    T = len(doc["attended_positions"])
    assert np.array(doc["weights"]).shape == (2, 4, T, T)
    assert doc["settings"]["model"] == "tiny" and doc["settings"]["upstream"] == "ctxembed-tests/tiny-bert"
    assert doc["settings"]["layers"] == 2 and doc["settings"]["heads"] == 4 and doc["settings"]["dim"] == 32
    assert doc["masked_keys"] == [[] for _ in range(T)]  # BERT masks no key: [CLS] and [SEP] are hidden
    rows = np.array(doc["weights"]).sum(axis=-1)
    np.testing.assert_allclose(rows, 1.0, atol=1e-5)  # each word's row renormalised over the words


def test_the_tiny_models_words_are_its_own_pieces(tiny_model):
    doc = run_json("attend", "the riverbank", "--model", tiny_model.name, "--json")
    assert [t["source"] for t in doc["tokens"]] == ["vocabulary", "pieces"]  # river ##b ##a ##n ##k


def test_compare_and_neighbors_run_the_tiny_model(tiny_model):
    built = invoke("models", "space", tiny_model.name)  # as `make models` builds minilm's, once per install
    assert built.exit_code == 0 and "building tiny's contextual neighbour space" in built.stderr, built.stderr
    doc = run_json("compare", RIVER, MONEY, "--word", "bank", "--model", tiny_model.name, "--json")
    assert doc["settings"]["model"] == "tiny"
    doc = run_json("neighbors", RIVER, "--word", "bank", "--model", tiny_model.name, "-k", "3", "--json")
    assert len(doc["contextual"]) == 3 and all(w["word"] != "bank" for w in doc["contextual"])


def test_batch_jsonl_and_parquet_run_the_tiny_model(tiny_model, tmp_path):
    lines = [RIVER, "", MONEY]
    out = invoke("batch", "-", "--model", tiny_model.name, "--word", "bank", input="\n".join(lines) + "\n")
    assert out.exit_code == 0, out.stderr
    records = json_lines(out.stdout)
    assert [r["line"] for r in records] == [1, 2, 3] and "error" in records[1]
    attend = run_json("attend", RIVER, "--model", tiny_model.name, "--json")
    np.testing.assert_allclose(records[0]["weights"], attend["weights"], atol=2e-6)
    pq = pytest.importorskip("pyarrow.parquet")
    source = tmp_path / "lines.txt"
    source.write_text("\n".join(lines) + "\n")
    target = tmp_path / "out.parquet"
    done = invoke("batch", str(source), "--model", tiny_model.name, "--format", "parquet", "-o", str(target))
    assert done.exit_code == 0, done.stderr
    table = pq.read_table(target)
    assert table.num_rows == 3
    assert json.loads(table.schema.metadata[b"ctxembed"])["settings"]["model"] == "tiny"


def test_embed_lines_runs_the_tiny_model(tiny_model):
    import ctxembed

    [record] = list(ctxembed.embed_lines([RIVER], model=tiny_model.name, weights=False))
    assert len(record["tokens"]) == 6


def test_serve_attend_runs_the_tiny_model(tiny_model):
    from ctxembed.serve.endpoints import Explorers, answer

    doc = answer("attend", {"sentence": RIVER, "model": tiny_model.name}, Explorers())
    assert doc["settings"]["model"] == "tiny" and np.array(doc["weights"]).shape[:2] == (2, 4)


def test_eval_pairs_reads_the_tiny_model_at_each_layer(tiny_model, tmp_path):
    path = tmp_path / "scws.txt"
    river, money = "we sat on the river <b> bank </b> all day", "she paid money into the <b> bank </b> today"
    shore, shop = "waves broke on the <b> shore </b> at dusk", "i paid in <b> cash </b> at the shop"
    rows = [("bank", "bank", river, money, "2"), ("bank", "shore", river, shore, "7")]
    rows.append(("cash", "shore", shop, shore, "0.5"))
    path.write_text("".join(f"{n}\t{a}\tn\t{b}\tn\t{c1}\t{c2}\t{r}\n" for n, (a, b, c1, c2, r) in enumerate(rows)))
    doc = run_json("eval", "pairs", path, "--model", "tiny", "-c", "tiny", "-c", "tiny@2", "--json")
    by_name = {row["name"]: row for row in doc["configs"]}
    assert list(by_name) == ["tiny", "tiny@2"] and all(row["covered"] == 3 for row in by_name.values())
    assert by_name["tiny"]["settings"]["layers"] == 2


def test_the_tiny_package_names_its_own_upstream_never_another_models(tiny_model):
    import struct

    from ctxembed.vectors.store import VectorStore

    data = (tiny_model.folder / "encoder.safetensors").read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    metadata = json.loads(data[8 : 8 + size])["__metadata__"]
    assert metadata["source"] == "ctxembed-tests/tiny-bert"
    assert VectorStore.open(tiny_model.folder / "words.ctxv").meta["name"] == "tiny-bert input embeddings"
    record = json.loads((tiny_model.folder / "installed.json").read_text())
    assert "MiniLM" not in json.dumps(record) and record["upstream"] == "ctxembed-tests/tiny-bert"
