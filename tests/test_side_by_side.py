"""ctxembed side-by-side: one sentence and one word under every view the model registry lists."""

from __future__ import annotations

import numpy as np
import pytest

from ctxembed.engine import registry
from tests.cli_helpers import TOY, fails, invoke, run_json, strict_json
from tests.test_json_schema import assert_valid

MONEY, RIVER = "I deposited money in the bank", "we sat on the river bank"


def side_json(*args) -> dict:
    """The side-by-side document; on stderr at most the notes of views left out (a model not installed)."""
    result = invoke("side-by-side", *args, "--json")
    assert result.exit_code == 0, result.stderr
    notes = ("side-by-side: ", "converting ", "note: ")  # views left out, foreign vectors, presets fitted to them
    assert all(line.startswith(notes) for line in result.stderr.splitlines()), result.stderr
    return strict_json(result.stdout)


@pytest.fixture(autouse=True)
def glove_views_only(monkeypatch):
    """These tests are about the GloVe views; whether the trained model is installed must not change them."""
    monkeypatch.delitem(registry.MODELS, "minilm", raising=False)


def test_the_views_come_from_the_registry_in_order():
    assert registry.side_by_side_views()[:2] == [("glove", "default"), ("glove", "learned")]


def test_each_view_equals_what_attend_and_compare_give_for_its_preset():
    doc = side_json(MONEY, RIVER, "--word", "bank")
    assert_valid(doc, "ctxembed.side-by-side/1")
    shown = [(v["model"], v["preset"]) for v in doc["models"]] + [(v["model"], v["preset"]) for v in doc["missing"]]
    assert sorted(shown) == sorted(registry.side_by_side_views())
    for view in doc["models"]:
        attend = run_json("attend", MONEY, "--model", view["model"], "--preset", view["preset"], "--json")
        weights = np.array(attend["weights"])[-1].mean(axis=0)  # the last layer, mean of heads
        np.testing.assert_allclose(view["attention"], weights, rtol=1e-6)
        assert view["word_attention"] == view["attention"][view["row"]]
        assert view["tokens"][view["row"]] == "bank" and view["position"] == 5
        compare = run_json(
            "compare", MONEY, RIVER, "--word", "bank", "--model", view["model"], "--preset", view["preset"], "--json"
        )
        assert view["across"]["contextual_similarity"] == compare["contextual_similarity"]
        assert view["word_cosines"][view["row"]] == pytest.approx(1.0)


def test_the_textbook_and_the_learned_attention_differ():
    doc = side_json(MONEY, "--word", "bank")
    default, learned = doc["models"][:2]
    assert default["across"] is None  # one sentence: nothing across
    assert not np.allclose(default["word_attention"], learned["word_attention"], atol=0.05)


def test_a_model_that_cannot_open_is_left_out_with_a_note(monkeypatch, tmp_path):
    fake = registry.Model("fake", "bert", "a model that is not installed")  # a registry entry, no folder
    monkeypatch.setitem(registry.MODELS, "fake", fake)
    monkeypatch.setenv("CTXEMBED_MODELS", str(tmp_path))
    result = invoke("side-by-side", MONEY, "--word", "bank", "--json")
    assert result.exit_code == 0
    reason = "model 'fake' is not installed: run `ctxembed models install fake`"
    assert f"side-by-side: fake default left out: {reason}" in result.stderr
    doc = strict_json(result.stdout)
    assert doc["missing"] == [{"model": "fake", "preset": "default", "reason": reason}]
    assert [v["model"] for v in doc["models"]] == ["glove", "glove"]


def test_terminal_and_pictures_show_every_view(tmp_path):
    svg = tmp_path / "side.svg"
    result = invoke("side-by-side", MONEY, RIVER, "--word", "bank", "--save", svg)
    assert result.exit_code == 0
    out = result.stdout
    assert "glove · default" in out and "glove · learned" in out
    assert "what 'bank' attends to in S1" in out and "across the sentences" in out
    picture = svg.read_text(encoding="utf-8")
    assert (
        "glove · learned: what &apos;bank&apos; attends to" in picture
        or "glove · learned: what 'bank' attends to" in picture
    )


def test_a_word_not_in_the_sentence_is_one_line_and_exit_1():
    line = fails(1, "side-by-side", MONEY, "--word", "river")
    assert "'river' is not among the words of sentence 1" in line


def test_a_preset_that_cannot_run_on_the_vectors_is_left_out():
    doc = side_json("apple is the phone", "--word", "phone", "--vectors", TOY)
    assert [(v["model"], v["preset"]) for v in doc["models"] if v["model"] == "glove"] == [("glove", "default")]
    learned = next(v for v in doc["missing"] if v["preset"] == "learned")
    assert "trained on 100-dimensional vectors" in learned["reason"]
    assert doc["models"][0]["vectors"]["source"] == TOY
