"""Pictures a person would put on a slide: checked by arithmetic on what is drawn.

- An SVG's horizontal texts never overlap one another (boxes from position, size and anchor).
- Every point of a map lies inside its frame (SVG and PNG), e.g. senses of "plant" in the shipped Brown text.
- A PNG has no empty band between its header and its panels; masked cells are not drawn like 0.
- Every view takes its colours from the same scale (figures.SEQUENTIAL), the HTML page's script too.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from ctxembed.views.figures import MASKED_FILL, SEQUENTIAL, build_figure, colour
from ctxembed.views.svg import CHAR, figure_svg
from tests.cli_helpers import run_json, succeeds
from tests.conftest import REPO

SVG = "{http://www.w3.org/2000/svg}"
S24 = (
    "the old fisherman slowly walked along the muddy river bank near the village while his two sons "
    "carried the heavy nets down to the boat"
)
S50 = (
    S24 + " and the morning sun rose over the quiet water as the birds sang in the tall trees beside the old "
    "stone bridge where children played every day"
)
SENTENCES = {5: "we sat on the river bank", 24: S24, 50: S50}


@pytest.fixture(scope="module")
def documents():
    docs = {f"attend {n}": run_json("attend", text, "--json") for n, text in SENTENCES.items()}
    docs["compare"] = run_json(
        "compare", "we sat on the river bank", "I deposited money in the bank", "the bank raised rates", "--json"
    )
    docs["neighbors"] = run_json("neighbors", "we sat on the river bank", "--word", "bank", "--json")
    docs["senses plant"] = run_json("senses", "plant", "--json")  # the shipped Brown text
    docs["senses bass"] = run_json("senses", "bass", "--json")  # few occurrences: every point labelled
    return docs


def text_boxes(svg: str) -> list[tuple[float, float, float, float, str]]:
    """(x0, y0, x1, y1, text) of every horizontal text, in the picture's coordinates."""
    boxes = []

    def walk(node, dx, dy):
        found = re.match(r"translate\(([-\d.]+) ([-\d.]+)\)", node.get("transform") or "")
        if found:
            dx, dy = dx + float(found[1]), dy + float(found[2])
        if node.tag == f"{SVG}text" and "rotate" not in (node.get("transform") or "") and node.text:
            size = float(node.get("font-size"))
            width = len(node.text) * CHAR * size
            x = float(node.get("x")) + dx + float(node.get("dx") or 0)
            x0 = {"start": x, "middle": x - width / 2, "end": x - width}[node.get("text-anchor") or "start"]
            y = float(node.get("y")) + dy
            boxes.append((x0, y - 0.75 * size, x0 + width, y + 0.2 * size, node.text))
        for child in node:
            walk(child, dx, dy)

    walk(ET.fromstring(svg), 0.0, 0.0)
    return boxes


def overlaps(boxes) -> list[tuple[str, str]]:
    """Pairs of boxes that overlap (a sweep over x, so 2,500 cell numbers stay fast)."""
    found, active = [], []
    for box in sorted(boxes):
        active = [other for other in active if other[2] > box[0]]
        found += [(other[4], box[4]) for other in active if other[1] < box[3] and box[1] < other[3]]
        active.append(box)
    return found


@pytest.mark.parametrize(
    "name", ["attend 5", "attend 24", "attend 50", "compare", "neighbors", "senses plant", "senses bass"]
)
def test_svg_texts_never_overlap(documents, name):
    boxes = text_boxes(figure_svg(build_figure(documents[name])))
    assert len(boxes) > 5
    assert overlaps(boxes) == []


@pytest.mark.parametrize("name", ["senses plant", "senses bass"])
def test_every_point_of_a_map_lies_inside_its_frame(documents, name):
    root = ET.fromstring(figure_svg(build_figure(documents[name])))
    panel = next(g for g in root.iter(f"{SVG}g") if g.get("class") == "panel")
    frame = next(panel.iter(f"{SVG}rect"))
    x0, y0 = float(frame.get("x")), float(frame.get("y"))
    x1, y1 = x0 + float(frame.get("width")), y0 + float(frame.get("height"))
    circles = list(panel.iter(f"{SVG}circle"))
    assert len(circles) == len(documents[name]["words"][0]["occurrences"])
    for circle in circles:
        cx, cy, r = (float(circle.get(k)) for k in ("cx", "cy", "r"))
        assert x0 <= cx - r and cx + r <= x1 and y0 <= cy - r and cy + r <= y1, (cx, cy, (x0, y0, x1, y1))


def test_png_map_points_lie_inside_the_axes_and_the_header_sits_on_the_panels(documents):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from ctxembed.views.png import draw

    fig = draw(build_figure(documents["senses plant"]))
    ax = fig.axes[0]
    (x_low, x_high), (y_low, y_high) = ax.get_xlim(), ax.get_ylim()
    for collection in ax.collections:
        for x, y in collection.get_offsets():
            assert x_low < x < x_high and y_low < y < y_high
    assert ax.get_legend() is not None and ax.get_legend().get_window_extent().x0 > ax.get_window_extent().x1
    header = fig.texts[0].get_window_extent(fig.canvas.get_renderer())
    top = max(a.get_tightbbox(fig.canvas.get_renderer()).y1 for a in fig.axes)
    assert 0 <= header.y0 - top <= 0.3 * fig.dpi  # no empty band: at most 0.3 inch between them
    plt.close(fig)


def test_png_masked_cells_are_grey_not_white(documents):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from ctxembed.views.png import draw

    fig = draw(build_figure(documents["attend 5"]))
    image = fig.axes[0].images[0]
    cmap = image.get_cmap()
    masked = tuple(round(255 * c) for c in cmap.get_bad()[:3])
    assert masked == MASKED_FILL and masked != tuple(round(255 * c) for c in cmap(0.0)[:3])
    assert np.ma.getmaskarray(image.get_array()).diagonal().all()  # the self mask: the diagonal
    plt.close(fig)


def test_every_view_uses_the_one_sequential_scale():
    from ctxembed.views.palette import heat_colour
    from ctxembed.views.png import _colour_map

    script = (REPO / "ctxembed" / "views" / "web" / "view.js").read_text(encoding="utf-8")
    stops = re.search(r"var stops = (\[\[.*?\]\]);", script)[1]
    assert [tuple(s) for s in eval(stops)] == [rgb for _, rgb in SEQUENTIAL]  # noqa: S307 (a literal)
    assert tuple(round(255 * c) for c in _colour_map(False)(1.0)[:3]) == SEQUENTIAL[-1][1]
    assert heat_colour(8, "truecolor").triplet == colour(1.0)  # the terminal, with 24-bit colour


def test_bars_have_the_same_shades_in_svg_and_png(documents):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from ctxembed.views.figures import bar_colour
    from ctxembed.views.png import draw

    figure = build_figure(documents["neighbors"])
    svg = figure_svg(figure)
    fig = draw(figure)
    try:
        png = [tuple(round(255 * c) for c in bar.get_facecolor()[:3]) for bar in fig.axes[0].patches]
    finally:
        plt.close(fig)
    panel = figure.panels[0]
    expected = [bar_colour((v - panel.low) / (panel.high - panel.low)) for v in panel.values]
    assert png == expected
    assert all("#{:02x}{:02x}{:02x}".format(*rgb) in svg for rgb in expected)


def test_a_neighbours_picture_says_what_its_lists_were_searched_among_as_the_terminal_does():
    """The page and the saved pictures name the contextual column's space and what was left out, in the
    terminal's words (one function, views.figures.neighbour_search)."""
    from ctxembed.views.figures import neighbour_search

    doc = run_json("neighbors", "we sat on the river bank", "--word", "bank", "-k", "5", "--json")
    nearest, left = neighbour_search(doc)
    notes = build_figure(doc).notes
    assert notes[:2] == [f"nearest {nearest}", f"left out {left}"]
    assert doc["space"] in nearest and "we, sat, on, the, river" in left
    out = succeeds("neighbors", "we sat on the river bank", "--word", "bank", "-k", "5", env={"COLUMNS": "300"}).stdout
    assert f"nearest  {nearest}" in out and f"left out {left}" in out
