"""The eval commands through the CLI: tables, JSON documents, and their errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ctxembed.cli import app
from tests.conftest import FIXTURES

runner = CliRunner()


def test_eval_wic_json_has_splits_and_every_config():
    result = runner.invoke(app, ["eval", "wic", str(FIXTURES / "wic"), "-c", "static", "-c", "default", "--json"])
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema"] == "ctxembed.eval-wic/1" and doc["config"] == "default"
    assert set(doc["splits"]) == {"train", "dev"}
    assert doc["splits"]["dev"]["n"] == 8 and 0 <= doc["splits"]["dev"]["accuracy"] <= 1
    assert [c["name"] for c in doc["configs"]] == ["static", "default"]
    assert "evaluating static" in result.stderr


def test_eval_wic_table_lists_configurations():
    result = runner.invoke(
        app,
        ["eval", "wic", str(FIXTURES / "wic"), "-c", "textbook", "-c", "custom", "--preset", "textbook", "--abtt", "2"],
    )
    assert result.exit_code == 0, result.stderr
    assert "textbook" in result.stdout and "custom" in result.stdout and "dev accuracy" in result.stdout


def test_eval_wic_errors():
    missing = runner.invoke(app, ["eval", "wic", "/nonexistent/wic"])
    assert missing.exit_code == 1 and "not a directory" in missing.stderr and missing.stdout == ""
    bad_split = runner.invoke(app, ["eval", "wic", str(FIXTURES / "wic"), "--tune-on", "test", "-c", "static"])
    assert bad_split.exit_code == 2 and "cannot tune on 'test'" in bad_split.stderr
    bad_config = runner.invoke(app, ["eval", "wic", str(FIXTURES / "wic"), "-c", "bogus"])
    assert bad_config.exit_code == 2 and "unknown configuration" in bad_config.stderr


def test_eval_senses_json():
    result = runner.invoke(app, ["eval", "senses", "-c", "static", "-c", "default", "--json"])
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    static, default = doc["configs"]
    assert static["separated"] == 0.0 and default["separated"] > 0.2 and default["words"] == 24


def test_eval_pairs_scws_and_word_pairs():
    scws = runner.invoke(app, ["eval", "pairs", str(FIXTURES / "scws_tiny.txt"), "--json"])
    assert scws.exit_code == 0, scws.stderr
    doc = json.loads(scws.stdout)
    names = [c["name"] for c in doc["configs"]]
    assert doc["layout"] == "scws" and names == ["static", "textbook", "previous-default", "default", "learned"]
    pairs = runner.invoke(app, ["eval", "pairs", str(FIXTURES / "wordpairs_tiny.tsv")])
    assert pairs.exit_code == 0 and "Pearson" in pairs.stdout and "Spearman" in pairs.stdout
    wordsim = runner.invoke(app, ["eval", "pairs", "wordsim353", "--json"])
    assert wordsim.exit_code == 0, wordsim.stderr
    assert 0.3 < json.loads(wordsim.stdout)["configs"][0]["spearman"] < 0.8
    assert json.loads(wordsim.stdout)["skipped"] == []


def test_eval_pairs_on_word_pairs_says_which_configurations_it_skipped():
    result = runner.invoke(app, ["eval", "pairs", "wordsim353", "-c", "static", "-c", "default", "--json"])
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert [c["name"] for c in doc["configs"]] == ["static"]
    assert [s["name"] for s in doc["skipped"]] == ["default"] and "no sentences" in doc["skipped"][0]["reason"]
    assert "skipped default" in result.stderr and "no sentences" in result.stderr
    scws = runner.invoke(app, ["eval", "pairs", str(FIXTURES / "scws_tiny.txt"), "-c", "default", "--json"])
    assert json.loads(scws.stdout)["skipped"] == [] and "skipped" not in scws.stderr


def test_eval_pairs_missing_file():
    missing = runner.invoke(app, ["eval", "pairs", "nope.tsv"])
    assert missing.exit_code == 1 and "no such file" in missing.stderr


@pytest.mark.parametrize(
    ("config", "says"), [("nope", "unknown configuration 'nope'"), ("default@9", "default has no hidden state 9")]
)
def test_eval_pairs_on_word_pairs_refuses_a_name_that_is_no_configuration(config, says):
    """A word-pair file scores only the static vectors, but a name that is no configuration at all is a
    mistake to say, as on an SCWS file (exit 2), not a configuration to skip."""
    for file in (FIXTURES / "wordpairs_tiny.tsv", FIXTURES / "scws_tiny.txt"):
        result = runner.invoke(app, ["eval", "pairs", str(file), "-c", "static", "-c", config])
        assert result.exit_code == 2 and says in result.stderr and "skipped" not in result.stderr
