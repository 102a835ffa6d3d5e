"""The live page's model selector, server side: a body's ``model`` picks an engine of the model registry,
the answer is the document of ``--model NAME --json``, and an unknown model, a model not installed or
settings sent to a trained model are each one line. The real MiniLM runs here (skipped without it, as in
tests/test_minilm.py)."""

from __future__ import annotations

import pytest

from ctxembed.errors import UsageError
from ctxembed.serve.endpoints import Explorers, _light, answer
from tests import test_serve
from tests.cli_helpers import run_json
from tests.test_serve import post, request

server = test_serve.server  # a real server on 127.0.0.1, started once for the module

SENTENCE = "I deposited money in the bank"


def one_line_error(server, endpoint: str, body, status: int) -> str:
    got, answer_ = post(server, endpoint, body)
    assert got == status, answer_
    assert list(answer_) == ["error"] and "\n" not in answer_["error"]
    return answer_["error"]


def test_the_settings_endpoint_lists_the_registry_with_what_is_installed(server, minilm_folder):
    status, settings = request(server, "GET", "/api/settings")
    assert status == 200 and settings["schema"] == "ctxembed.serve-settings/2"
    assert settings["model"] == "glove"
    models = {m["name"]: m for m in settings["models"]}
    assert list(models) == ["glove", "minilm"]
    assert models["glove"] | {"summary": None} == {
        "name": "glove", "summary": None, "installed": True, "install": None, "settings": True,
        "hidden_states": None,
    }  # fmt: skip
    assert models["minilm"]["installed"] is True and models["minilm"]["settings"] is False
    assert models["minilm"]["hidden_states"] == 7  # h0 ... h6: the page's read-out choice
    assert models["minilm"]["install"] == "ctxembed models install minilm"


def test_minilm_selected_answers_the_commands_document(server, minilm_folder):
    status, doc = post(server, "attend", {"sentence": SENTENCE, "model": "minilm"})
    assert status == 200
    assert doc["settings"]["preset"] == "minilm"
    assert doc["settings_summary"].startswith("model minilm (all-MiniLM-L6-v2, 6 layers x 12 heads)")
    tokens = len(doc["attended_positions"])
    assert [len(doc["weights"]), len(doc["weights"][0]), len(doc["weights"][0][0])] == [6, 12, tokens]
    assert doc == run_json("attend", SENTENCE, "--model", "minilm", "--json")


@pytest.mark.parametrize(
    "endpoint, body, command",
    [
        (
            "compare",
            {"sentences": ["we sat on the river bank", SENTENCE], "word": "bank"},
            ["compare", "we sat on the river bank", SENTENCE, "--word", "bank"],
        ),
        (
            "neighbors",
            {"sentence": SENTENCE, "word": "bank", "space": "input"},
            ["neighbors", SENTENCE, "--word", "bank", "--space", "input"],
        ),
    ],
)
def test_compare_and_neighbors_run_under_minilm(server, minilm_folder, endpoint, body, command):
    status, doc = post(server, endpoint, {**body, "model": "minilm"})
    assert status == 200
    assert doc["settings_summary"].startswith("model minilm (all-MiniLM-L6-v2, 6 layers x 12 heads)")
    assert doc == run_json(*command, "--model", "minilm", "--json")


def test_explain_under_minilm_answers_the_commands_document(server, minilm_folder):
    status, doc = post(server, "explain", {"sentence": SENTENCE, "model": "minilm", "layer": 2, "head": 3})
    assert status == 200
    assert (doc["explain"]["layer"], doc["explain"]["head"], doc["explain"]["level"]) == (2, 3, "pieces")
    assert doc == run_json(
        "attend", SENTENCE, "--explain", "--layer", "2", "--head", "3", "--model", "minilm", "--json"
    )
    status, doc = post(server, "explain", {"sentence": SENTENCE, "model": "minilm", "word": "bank"})
    assert status == 200 and doc["explain"]["neuron"]["word"] == "bank"
    line = one_line_error(server, "explain", {"sentence": SENTENCE, "model": "minilm", "word": "river"}, 422)
    assert "'river' is not among the words of the sentence" in line


def test_an_unknown_model_is_400_in_one_line(server):
    line = one_line_error(server, "attend", {"sentence": SENTENCE, "model": "gpt-9"}, 400)
    assert line == "model must be one of glove, minilm, not 'gpt-9'"
    assert one_line_error(server, "attend", {"sentence": SENTENCE, "model": ["minilm"]}, 400).startswith(
        "model must be one of glove, minilm, not a JSON list"
    )


@pytest.fixture
def fresh_server():
    """A server of its own: no explorer of the module's server (one of MiniLM, maybe) is cached in it."""
    yield from test_serve.server.__wrapped__()


def test_a_model_not_installed_is_one_line_naming_the_install_command(fresh_server, tmp_path, monkeypatch):
    server = fresh_server
    monkeypatch.setenv("CTXEMBED_MODELS", str(tmp_path))  # no model installed here
    line = one_line_error(server, "compare", {"sentences": ["a bank", "the bank"], "model": "minilm"}, 422)
    assert line == "model 'minilm' is not installed: run `ctxembed models install minilm`"
    minilm = request(server, "GET", "/api/settings")[1]["models"][1]
    assert (minilm["name"], minilm["installed"], minilm["install"]) == (
        "minilm",
        False,
        "ctxembed models install minilm",
    )
    assert post(server, "attend", {"sentence": SENTENCE})[0] == 200  # the default model is untouched


def test_a_trained_model_takes_no_settings(server, minilm_folder):
    line = one_line_error(
        server, "attend", {"sentence": SENTENCE, "model": "minilm", "heads": 2, "preset": "notes"}, 400
    )
    assert line == "--model minilm is a trained model: the page runs it as trained, with no --heads, preset"
    query = {"sentence": SENTENCE, "word": "bank", "model": "minilm", "max_tokens": 20}
    assert one_line_error(server, "neighbors", query, 400).endswith("with no --max-tokens")


def test_minilm_requests_pass_the_budgets_before_any_work(server, minilm_folder):
    # 130 words x 6 layers x 12 heads: more weights than the page draws, refused after tokenising only
    line = one_line_error(server, "attend", {"sentence": " ".join(["bank"] * 130), "model": "minilm"}, 400)
    assert line.startswith("130 tokens x 12 head(s) x 6 layer(s) give 1,216,800 attention weights")
    # two 400-word sentences, 402 pieces each: 6 x 12 x 402² x 2 weights over the pieces, past the cost budget
    # of the command line (a trained model's layers and heads are its own: the input is what to change, 422)
    long = " ".join(["money"] * 400)
    line = one_line_error(server, "compare", {"sentences": [long, long], "word": "bank", "model": "minilm"}, 422)
    assert line.startswith("2 sentence(s) of 804 word pieces (6 layers x 12 heads) need 23,270,976 attention")
    # the word found, minilm reads the 10 tokens either side of it (its --window): 21 words each, well within
    got, answer_ = post(server, "compare", {"sentences": [long, long], "word": "money", "model": "minilm"})
    assert got == 200 and answer_["sentences"] == [" ".join(["money"] * 11)] * 2, answer_
    assert _light({"sentence": "a bank"}, {"model": "minilm"}) is False  # all 72 heads run: the heavy lane
    assert _light({"sentence": "a bank"}, {}) is True


def test_one_cached_explorer_per_trained_model_shared_with_side_by_side(minilm_folder):
    explorers = Explorers()
    answer("attend", {"sentence": SENTENCE, "model": "minilm"}, explorers)
    minilm = explorers.get({"model": "minilm"})[0]
    answer("side-by-side", {"sentences": [SENTENCE], "word": "bank"}, explorers)
    keys = list(explorers._entries)  # (lane, settings): the page's GloVe (light), side by side's three (heavy)
    assert [settings for _, settings in keys].count((("model", "str", "'minilm'"),)) == 1 and len(keys) == 4
    assert explorers.get({"model": "minilm", "preset": "default"})[0] is minilm
    assert explorers.get({"model": "glove"})[0] is explorers.default
    with pytest.raises(UsageError, match="it takes no model"):
        answer("side-by-side", {"sentences": [SENTENCE], "word": "bank", "model": "minilm"}, explorers)
