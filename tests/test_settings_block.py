"""Every document of one model carries the same ``settings`` block and ``settings_summary``: the one
its engine describes itself with (report.settings_block), whichever command wrote it, with the window
its sentences were cropped to when a command that reads one word's vector cropped them (--window)."""

from __future__ import annotations

import pytest

from tests.cli_helpers import run_json
from tests.test_json_schema import assert_valid

RIVER, MONEY = "we sat on the river bank", "I deposited money in the bank"


def blocks(*model: str, corpus) -> dict[str, tuple[dict, str]]:
    docs = {
        "ctxembed.attend/5": run_json("attend", RIVER, *model, "--json"),
        "ctxembed.compare/5": run_json("compare", RIVER, MONEY, "--word", "bank", *model, "--json"),
        "ctxembed.neighbors/3": run_json("neighbors", MONEY, "--word", "bank", *model, "--json"),
        "ctxembed.senses/2": run_json("senses", "bank", str(corpus), *model, "--json"),
    }
    for schema, doc in docs.items():
        assert doc["schema"] == schema
        assert_valid(doc, schema)
    return {schema: (doc["settings"], doc["settings_summary"]) for schema, doc in docs.items()}


def without_window(block: tuple[dict, str], window: int) -> tuple[dict, str]:
    """A block as a document that read no word has it: its window (what a word-reading command says) out."""
    settings, summary = block
    assert settings["window"] == window and summary.endswith(f" | window ±{window} tokens"), block
    return {k: v for k, v in settings.items() if k != "window"}, summary.removesuffix(f" | window ±{window} tokens")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "banks.txt"
    lines = [RIVER, MONEY, "the bank raised its rates", "fishermen lined the grassy bank", "she paid the bank"]
    path.write_text("\n".join(lines * 4) + "\n")
    return path


def test_every_document_of_the_trained_model_carries_its_own_description(minilm_folder, corpus):
    found = blocks("--model", "minilm", corpus=corpus)
    settings, summary = found["ctxembed.attend/5"]  # attend reads no one word: no window
    assert settings["model"] == "minilm" and settings["layers"] == 6 and settings["heads"] == 12
    assert "attention" not in settings  # no textbook attention setting claims to describe a trained model
    for schema in ("ctxembed.compare/5", "ctxembed.neighbors/3", "ctxembed.senses/2"):  # minilm reads ±10
        assert without_window(found[schema], 10) == (settings, summary), found


def test_every_document_of_the_glove_model_carries_the_attention_settings(corpus):
    found = blocks(corpus=corpus)
    settings, summary = found["ctxembed.attend/5"]
    assert settings["preset"] == "default" and "attention" in settings
    assert all(block == (settings, summary) for block in found.values()), found


def test_the_parquet_file_of_batch_records_the_same_block(minilm_folder, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    import json

    from tests.cli_helpers import succeeds

    out = tmp_path / "out.parquet"
    succeeds("batch", "--model", "minilm", "--format", "parquet", "--out", out, input=RIVER + "\n")
    recorded = json.loads(pq.read_metadata(out).metadata[b"ctxembed"])["settings"]
    assert recorded == run_json("attend", RIVER, "--model", "minilm", "--json")["settings"]


def test_a_word_split_into_wordpieces_says_pieces_not_vocabulary(minilm_folder):
    doc = run_json("attend", "the unbelievable riverbank flooded", "--model", "minilm", "--json")
    sources = {t["text"]: t["source"] for t in doc["tokens"]}
    assert sources == {
        "the": "vocabulary", "unbelievable": "vocabulary", "riverbank": "pieces", "flooded": "vocabulary"
    }  # fmt: skip
    assert doc["warnings"] == []  # pieces are the model's own vectors, not character n-gram guesses
    assert_valid(doc, "ctxembed.attend/5")
    compared = run_json("compare", "the riverbank", "a riverbank", "--word", "riverbank", "-m", "minilm", "--json")
    assert compared["words"][0]["sources"] == ["pieces", "pieces"]


def test_the_pieces_mark_and_its_legend_in_the_terminal(minilm_folder):
    from tests.cli_helpers import succeeds

    shown = succeeds("compare", "the riverbank", "a riverbank", "--word", "riverbank", "-m", "minilm").stdout
    assert "'riverbank' vectors: S1 pieces, S2 pieces" in shown
    assert "+ the mean of the word's wordpieces" in shown


def test_an_eval_row_of_the_trained_model_carries_the_same_block(minilm_folder):
    from tests.conftest import FIXTURES

    doc = run_json("eval", "pairs", FIXTURES / "scws_tiny.txt", "--model", "minilm", "-c", "minilm", "-c", "minilm@3",
                   "--json")  # fmt: skip
    assert_valid(doc, "ctxembed.eval-pairs/2")
    rows = {row["name"]: row["settings"] for row in doc["configs"]}
    attend = run_json("attend", RIVER, "--model", "minilm", "--json")["settings"]
    assert without_window((rows["minilm"], " | window ±10 tokens"), 10)[0] == attend
    assert rows["minilm@3"]["preset"] == "minilm@3" and rows["minilm@3"]["readout"] != rows["minilm"]["readout"]


def test_the_trained_models_summary_names_its_read_out_and_fits_80_columns(minilm_folder):
    from ctxembed.engine.registry import engine_for, open_engine
    from ctxembed.evaluation.evaluate import model_settings, named_settings
    from tests.cli_helpers import invoke

    at_layer_3 = engine_for(named_settings("minilm@3", model_settings("minilm")), None, max_tokens=512)
    assert "read-out 1·h3 |" in at_layer_3.summary()  # not the default's mean
    assert "read-out mean of h0..h6 |" in open_engine(model="minilm").summary()
    shown = invoke(
        "neighbors", MONEY, "--word", "bank", "-m", "minilm", "--space", "input", env={"COLUMNS": "80"}
    ).stdout
    assert "(rows renormalised over the words)" in shown  # each part on a line of its own, never cut inside a word


def test_a_word_read_as_unk_says_unknown(minilm_folder):
    doc = run_json("attend", "I love 🦜 at the bank", "--model", "minilm", "--json")
    assert [t["source"] for t in doc["tokens"]] == ["vocabulary", "vocabulary", "unknown", "vocabulary", "vocabulary",
                                                    "vocabulary"]  # fmt: skip
    assert_valid(doc, "ctxembed.attend/5")


def test_the_mix_fit_document_of_the_trained_model_carries_its_block(minilm_folder, tmp_path):
    from tests.conftest import FIXTURES

    out = tmp_path / "mix.json"
    from tests.cli_helpers import invoke, strict_json

    result = invoke("eval", "fit-mix", FIXTURES / "scws_tiny.txt", "--model", "minilm", "--out", out, "--json")
    assert result.exit_code == 0, result.stderr
    doc = strict_json(result.stdout)
    assert_valid(doc, "ctxembed.mix-fit/1")
    attend = run_json("attend", RIVER, "--model", "minilm", "--json")
    assert without_window((doc["settings"], doc["settings_summary"]), 10) == (
        attend["settings"],
        attend["settings_summary"],
    )
