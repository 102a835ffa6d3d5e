"""Every view of --explain's steps reads them through ctxembed.views.explain: the terminal and the page
shade the same cells of a step's matrix in the same eighth of the same range, and an explain document
without its steps (written by an older ctxembed) is one clear data error wherever it is drawn."""

from __future__ import annotations

import copy
import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from ctxembed.errors import DataError
from ctxembed.views.explain_html import explain_html
from ctxembed.views.figures import colour
from ctxembed.views.render import render_attend_explained, render_explain
from tests import test_serve

RIVER = "we sat on the river bank"
SGR = re.compile(r"\x1b\[([0-9;]*)m")
UNSHADED = colour(0.0)  # the page's lightest: a cell the terminal leaves unshaded
server = test_serve.server  # the fixture: a real server on 127.0.0.1, any free port


@pytest.fixture(scope="module")
def document() -> dict:
    import ctxembed

    return ctxembed.Explorer().explain(RIVER).document()


def terminal_cells(explained: dict) -> list[tuple[str, tuple[int, ...] | None]]:
    """Each matrix cell the terminal draws, in order: its text and its background (None: unshaded)."""
    console = Console(file=io.StringIO(), width=200, color_system="truecolor", force_terminal=True, highlight=False)
    render_explain(console, explained)
    tokens = set(explained["tokens"])
    cells = []
    for line in console.file.getvalue().splitlines():
        parts = line.split("│")
        if len(parts) < 3 or SGR.sub("", parts[1]).strip() not in tokens:
            continue  # not a row of a matrix (the neuron view's table has 4 columns and no shading)
        for cell in parts[2:-1]:
            codes = SGR.findall(cell)
            background = None
            for code in codes:
                numbers = code.split(";")
                if "48" in numbers:
                    at = numbers.index("48")
                    background = tuple(int(n) for n in numbers[at + 2 : at + 5])
            cells.append((SGR.sub("", cell).strip(), background))
    return cells


def page_cells(explained: dict) -> list[tuple[str, tuple[int, ...] | None]]:
    """Each matrix cell the page draws, in order: its text and its background (None: unshaded or masked)."""
    cells = []
    for table in re.findall(r'<table class="matrix">(.*?)</table>', explain_html(explained)):
        for attributes, text in re.findall(r"<td([^>]*)>([^<]*)</td>", table):
            found = re.search(r"background:rgb\((\d+), (\d+), (\d+)\)", attributes)
            background = tuple(int(n) for n in found.groups()) if found else None
            cells.append((text, None if background == UNSHADED else background))
    return cells


def test_the_terminal_and_the_page_shade_every_cell_alike(document):
    explained = document["explain"]
    cells = terminal_cells(explained)
    assert len(cells) == 4 * len(explained["tokens"]) ** 2  # raw, scaled, masked scores and weights
    assert any(background for _, background in cells) and any(not background for _, background in cells)
    assert cells == page_cells(explained)


def test_a_matrix_with_a_missing_number_is_shaded_on_the_range_of_the_others(document):
    """A cell with no number (null in the document) is drawn masked by both views, the others on the
    range of the numbers there are: the terminal's range was NaN (nothing shaded) and the page's not."""
    explained = copy.deepcopy(document["explain"])
    explained["raw_scores"][0][0] = None
    cells = terminal_cells(explained)
    assert cells[0] == ("·", None)
    assert any(background for _, background in cells[1 : len(explained["tokens"]) ** 2])
    assert cells == page_cells(explained)


def test_a_finite_range_without_a_mask_is_drawn_by_both_views(document):
    explained = copy.deepcopy(document["explain"])
    step = next(s for s in explained["steps"] if (s.get("draw") or {}).get("matrix") == "scaled_scores")
    step["draw"] = {"matrix": "scaled_scores", "range": "finite"}  # the terminal raised TypeError here
    assert terminal_cells(explained) == page_cells(explained)


def test_the_terminal_states_the_range_it_shades_as_the_page_does(document):
    explained = document["explain"]
    console = Console(file=io.StringIO(), width=200, color_system="256", force_terminal=True, highlight=False)
    render_explain(console, explained)
    keys = [line.strip() for line in SGR.sub("", console.file.getvalue()).splitlines() if "shading in" in line]
    page = re.findall(r'<p class="scale">([^<]*)</p>', explain_html(explained))
    assert len(keys) == 4 and keys == page
    assert keys[-1] == "shading in eighths of 0.000 to 1.000, the lowest eighth unshaded; · masked"


def test_the_shared_reader_examples():
    import doctest

    from ctxembed.views import explain

    failures, tried = doctest.testmod(explain)
    assert tried >= 3 and failures == 0


# ------------------------------------------------------------------------------ a document without its steps
OLD = Path(__file__).parent / "fixtures" / "explain_no_steps.json"
NO_STEPS = "this explain document names no steps (written by an older ctxembed): explain the sentence again"


def test_an_explain_document_without_steps_is_one_data_error_in_every_view(tmp_path):
    from ctxembed.views.export import save_document

    doc = json.loads(OLD.read_text(encoding="utf-8"))
    assert "steps" not in doc["explain"] and doc["explain"]["raw_scores"]  # written before the steps were named
    console = Console(file=io.StringIO(), width=100)
    for draw in (
        lambda: render_attend_explained(console, doc),
        lambda: render_explain(console, doc["explain"]),
        lambda: explain_html(doc["explain"]),
    ):
        with pytest.raises(DataError, match=re.escape(NO_STEPS)):
            draw()
    assert console.file.getvalue() == ""  # refused before anything is drawn
    for name in ("steps.html", "steps.svg"):
        with pytest.raises(DataError, match=re.escape(NO_STEPS)):
            save_document(doc, tmp_path / name)
    assert list(tmp_path.iterdir()) == []  # no file written
    save_document(doc, tmp_path / "again.json")  # its data can still be saved as it is
    assert json.loads((tmp_path / "again.json").read_text(encoding="utf-8")) == doc


@pytest.mark.parametrize("kind", ["svg", "terminal", "html"])
def test_the_live_pages_draw_refuses_it_with_one_line(server, kind):
    status, answer = test_serve.request(server, "POST", f"/api/draw?as={kind}", json.loads(OLD.read_text()))
    assert status == 422 and answer == {"error": NO_STEPS + " (--explain) to draw its steps"}
