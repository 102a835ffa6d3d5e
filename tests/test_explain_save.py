"""attend --explain --save keeps the steps: a page a learner can hand in (.html), and the steps' matrices
with every heading in a picture (.svg); the live page's explain tab draws the same HTML."""

from __future__ import annotations

import pytest

from ctxembed.errors import UsageError
from ctxembed.serve.endpoints import drawing
from tests.cli_helpers import TOY, run_json, succeeds

ARGS = ["attend", "apple is the phone", "--vectors", TOY, "--preset", "notes", "--explain"]


def test_an_explain_page_holds_every_step(tmp_path):
    succeeds(*ARGS, "--save", str(tmp_path / "e.html"))
    page = (tmp_path / "e.html").read_text(encoding="utf-8")
    for step in ("step by step", "1. inputs x", "3. raw scores", "6. weights", "7. context_i"):
        assert step in page
    assert page.count('<table class="matrix">') >= 2 and "background:rgb(" in page


def test_an_explain_picture_draws_the_step_matrices_and_names_every_step(tmp_path):
    succeeds(*ARGS, "--save", str(tmp_path / "e.svg"))
    picture = (tmp_path / "e.svg").read_text(encoding="utf-8")
    for step in ("3. raw scores", "6. weights", "7. context_i"):
        assert step in picture


def test_without_explain_a_saved_page_has_no_steps(tmp_path):
    succeeds("attend", "apple is the phone", "--vectors", TOY, "--preset", "notes", "--save", str(tmp_path / "a.html"))
    assert "ctxembed-explain" not in (tmp_path / "a.html").read_text(encoding="utf-8")


def test_the_page_draws_explain_as_html_in_its_own_style():
    doc = run_json(*ARGS, "--json")
    html = drawing(doc, "html")
    assert html.startswith('<section class="ctxembed-explain">') and "<pre" not in html
    assert "3. raw scores" in html
    with pytest.raises(UsageError, match="explain"):
        drawing(run_json("attend", "apple is the phone", "--vectors", TOY, "--preset", "notes", "--json"), "html")
