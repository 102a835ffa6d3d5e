"""The model view (attend --all-layers [--all-heads]): a small map per layer and head, in the terminal
and in the SVG, HTML and PNG pictures, read from the document."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ctxembed.views.figures import View, build_figure, model_view
from ctxembed.views.layout import model_lines
from tests.cli_helpers import TOY, fails, run_json, succeeds

TOY_NOTES = ["--vectors", TOY, "--preset", "notes"]  # apple [5,2,0], is [0,0,5], phone [0,5,0], the [0,0,6]
TEXTBOOK = ["--preset", "textbook", "--heads", "2", "--layers", "3"]


def test_model_lines_in_colour_put_two_rows_of_a_map_in_each_line():
    maps = np.eye(3)[None, None]  # (1, 1, 3, 3): each token on itself
    lines = model_lines(maps, ["layer 0"], ["head 0"], 80, colour=True)
    cells = [line[2:5] for line in lines if line and line[0][1] == "label"]  # after the label and the gap
    assert len(cells) == 2  # rows 0-1, then row 2 alone
    assert [style for _, style in cells[0]] == ["cells:8:0", "cells:0:8", "cells:0:0"]
    assert [style for _, style in cells[1]] == ["cells:0:", "cells:0:", "cells:8:"]  # no row below the map
    assert {text for text, _ in cells[0] + cells[1]} == {"▀"}


def test_model_lines_without_colour_draw_a_glyph_per_cell_and_mark_masks():
    maps = np.array([[[[0.0, 1.0], [0.5, 0.5]]]])
    masked = np.array([[True, False], [False, False]])
    lines = model_lines(maps, ["layer 0"], ["head 0"], 80, masked=masked, colour=False)
    rows = ["".join(text for text, _ in line[2:4]) for line in lines if line and line[0][1] == "label"]
    assert rows == ["·█", "▄▄"]


def test_model_lines_wrap_heads_into_bands_that_fit_the_width():
    maps = np.zeros((1, 6, 10, 10))
    lines = model_lines(maps, ["layer 0"], [f"head {h}" for h in range(6)], 40, colour=True)
    headers = ["".join(text for text, _ in line) for line in lines if line and line[1][1] == "header"]
    assert len(headers) == 3  # a label of 8, then 12 per map: 8 + 3 x 12 = 44 > 40, two maps per band
    assert all(len(h) <= 40 for h in headers)


def test_terminal_model_view_shows_every_layer_and_head():
    out = succeeds("attend", "the cat sat on the mat", *TEXTBOOK, "--all-layers", "--all-heads").stdout
    assert "attention weights, every layer and head" in out
    assert [line.split()[:2] for line in out.splitlines() if line.startswith("layer ")] == [
        ["layer", str(layer)] for layer in range(3)
    ]
    assert out.count("head 0") == 3 and out.count("head 1") == 3
    assert "columns 0 the  1 cat  2 sat" in out  # the token order of every map


def test_terminal_model_view_of_the_toy_sentence_by_hand():
    # the notes' example: "phone" attends to itself alone (its only non-zero dot product), in every layer
    out = succeeds("attend", "apple is the phone", *TOY_NOTES, "--layers", "2", "--all-layers").stdout
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if "layer 0  layer 1" in line) + 1
    phone_row = lines[start + 2]  # rows: apple, is, the, phone; "the" and "is" both point at "the"
    assert re.fullmatch(r"\s+\S\S█\S\s+\S\S\S\S\s*", lines[start + 1])
    assert phone_row.split()[0][2] == "█"


def test_svg_model_view_has_one_map_per_layer_and_head(tmp_path):
    path = tmp_path / "model.svg"
    succeeds("attend", "the cat sat on the mat", *TEXTBOOK, "--all-layers", "--all-heads", "--save", path)
    svg = path.read_text(encoding="utf-8")
    assert svg.count("<image ") == 3 * 2
    for layer in range(3):
        for head in range(2):
            assert f"<title>layer {layer}, head {head}</title>" in svg


def test_html_model_view_is_the_figure_not_the_interactive_page(tmp_path):
    path = tmp_path / "model.html"
    succeeds("attend", "the cat sat on the mat", *TEXTBOOK, "--all-layers", "--save", path)
    page = path.read_text(encoding="utf-8")
    assert page.count("<image ") == 3 and "&quot;all_layers&quot;: true" in page
    assert 'class="app"' not in page


def test_model_view_of_a_reading_reads_the_document():
    doc = run_json("attend", "the cat sat on the mat", *TEXTBOOK, "--attention", "value-norm", "--json")
    _, rows, columns, maps = model_view(doc, View(all_heads=True, all_layers=True))
    assert (rows, columns) == (["layer 0", "layer 1", "layer 2"], ["head 0", "head 1"])
    np.testing.assert_array_equal(maps, np.array(doc["attention"]["heads"]))
    _, rows, columns, maps = model_view(doc, View(all_layers=True))
    assert rows == [""] and maps.shape == (1, 3, 6, 6)
    np.testing.assert_array_equal(maps[0], np.array(doc["attention"]["layers"]))
    figure = build_figure(doc, View(all_layers=True))
    assert figure.title == "value-norm, every layer"


def test_model_view_of_rollout_per_head_is_refused():
    line = fails(2, "attend", "apple is the phone", *TOY_NOTES, "--attention", "rollout", "--all-layers", "--all-heads")
    assert "one map per layer" in line


@pytest.mark.parametrize("tokens", [5, 24, 50])
def test_png_model_view_at_several_lengths(tmp_path, tokens):
    pytest.importorskip("matplotlib")
    words = ("the old fisherman sat on the muddy river bank " * 6).split()[:tokens]
    path = tmp_path / "model.png"
    succeeds("attend", " ".join(words), "--preset", "learned", "--all-layers", "--all-heads", "--save", path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
