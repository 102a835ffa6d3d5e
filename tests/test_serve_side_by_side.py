"""The live page's side-by-side view: /api/side-by-side answers the document the command prints."""

from __future__ import annotations

import numpy as np
import pytest

from ctxembed.errors import UsageError
from ctxembed.serve.endpoints import Explorers, answer, drawing, registry
from tests.test_side_by_side import side_json

BODY = {"sentences": ["I deposited money in the bank", "we sat on the river bank"], "word": "bank"}


@pytest.fixture(scope="module")
def explorers():
    return Explorers()


def test_the_answer_is_the_commands_json_document(explorers):
    doc = answer("side-by-side", BODY, explorers)
    cli = side_json(*BODY["sentences"], "--word", "bank")
    assert doc["schema"] == "ctxembed.side-by-side/1"
    assert [(v["model"], v["preset"]) for v in doc["models"]] == [(v["model"], v["preset"]) for v in cli["models"]]
    for mine, theirs in zip(doc["models"], cli["models"], strict=True):
        np.testing.assert_allclose(mine["word_attention"], theirs["word_attention"], rtol=1e-6)
        np.testing.assert_allclose(
            mine["across"]["contextual_similarity"], theirs["across"]["contextual_similarity"], rtol=1e-6
        )


def test_it_takes_no_settings_and_needs_its_keys(explorers):
    with pytest.raises(UsageError, match="it takes no heads"):
        answer("side-by-side", {**BODY, "heads": 2}, explorers)
    with pytest.raises(UsageError, match="/api/side-by-side needs word"):
        answer("side-by-side", {"sentences": BODY["sentences"]}, explorers)


def test_the_page_can_draw_it_and_knows_the_endpoint(explorers):
    doc = answer("side-by-side", BODY, explorers)
    assert "glove · learned: what" in drawing(doc, "svg")
    assert "attends to in S1" in drawing(doc, "terminal")
    assert set(registry(explorers)["endpoints"]["side-by-side"]) == {"sentences", "word"}
