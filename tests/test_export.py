"""Export: --save writes SVG, HTML, PNG and JSON; the figure registry; errors are one line, files are whole."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from ctxembed.errors import DataError, UsageError
from ctxembed.views.export import html_fragment, html_page, save_document
from ctxembed.views.figures import FIGURES, Bars, Curves, Figure, Heatmap, Points, figure_for
from ctxembed.views.svg import figure_svg
from tests.cli_helpers import TOY, fails, run_json, succeeds

SENTENCE = "the old fisherman walked along the muddy river bank"
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def attend_doc() -> dict:
    return run_json("attend", SENTENCE, "--heads", "2", "--layers", "2", "--json")


def svg_texts(path) -> list[str]:
    root = ET.parse(path).getroot()
    return [t.text for t in root.iter(f"{SVG}text")]


# ------------------------------------------------------------------------------ SVG
def test_attend_svg_parses_and_holds_every_token(tmp_path, attend_doc):
    save_document(attend_doc, tmp_path / "a.svg")
    texts = svg_texts(tmp_path / "a.svg")
    for token in SENTENCE.split():
        assert texts.count(token) >= 2  # a row label and a column label
    assert "attention weights, layer 1, mean of 2 heads" in texts


def test_svg_cells_carry_the_weights_to_three_decimals(tmp_path, attend_doc):
    save_document(attend_doc, tmp_path / "a.svg", layer=0, head=1)
    root = ET.parse(tmp_path / "a.svg").getroot()
    cells = [g for g in root.iter(f"{SVG}g") if g.get("class") == "cell"]
    weights = np.array(attend_doc["weights"])[0, 1]  # (T, T)
    assert len(cells) == weights.size
    for cell in cells:
        i, j = int(cell.get("data-row")), int(cell.get("data-col"))
        value = cell.get("data-value")
        masked = j in attend_doc["masked_keys"][i]  # the default preset masks self and twins ("the" ... "the")
        assert value == "masked" if masked else value == f"{weights[i, j]:.3f}"


def test_all_heads_svg_draws_a_panel_per_head(tmp_path, attend_doc):
    save_document(attend_doc, tmp_path / "a.svg", all_heads=True)
    texts = svg_texts(tmp_path / "a.svg")
    assert "head 0" in texts and "head 1" in texts


def test_compare_and_neighbors_svgs(tmp_path):
    compare = run_json("compare", "we sat on the river bank", "I paid the bank", "--word", "bank", "--json")
    save_document(compare, tmp_path / "c.svg")
    texts = svg_texts(tmp_path / "c.svg")
    # two sentences: one cosine off the diagonal, nothing to fit, so the absolute scale
    assert "static cosine: 'bank' (colours -1 to 1)" in texts and "contextual cosine: 'bank' (colours -1 to 1)" in texts
    assert "S2: I paid the bank" in texts
    neighbors = run_json("neighbors", "we sat on the river bank", "--word", "bank", "-k", "5", "--json")
    save_document(neighbors, tmp_path / "n.svg")
    texts = svg_texts(tmp_path / "n.svg")
    for entry in neighbors["static"] + neighbors["contextual"]:
        assert entry["word"] in texts


# ------------------------------------------------------------------------------ HTML
def test_html_is_one_offline_page_holding_the_document(tmp_path, attend_doc):
    save_document(attend_doc, tmp_path / "a.html")
    page = (tmp_path / "a.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert not re.search(r"url\(|@import|<link|<iframe", page, re.I)
    data = re.search(r'<script type="application/json" class="ctxembed-data">(.*?)</script>', page, re.S).group(1)
    assert json.loads(data) == attend_doc


def test_html_escapes_a_script_end_inside_the_document():
    doc = run_json("compare", "we sat on the bank", "the bank </script><b>", "--word", "bank", "--json")
    page = html_page(doc)
    assert page.count("</script>") == 2  # the data and the view's script, nothing from the sentence
    data = re.search(r'class="ctxembed-data">(.*?)</script>', page, re.S).group(1)
    assert json.loads(data)["sentences"][1] == "the bank </script><b>"


def test_fragments_have_their_own_ids(attend_doc):
    first, second = html_fragment(attend_doc), html_fragment(attend_doc)
    ids = [re.search(r'id="(ctxembed-[0-9a-f]+)"', f).group(1) for f in (first, second)]
    assert ids[0] != ids[1] and ids[0] in first and f'getElementById("{ids[0]}")' in first


# ------------------------------------------------------------------------------ PNG and JSON
def test_png_is_a_png(tmp_path, attend_doc):
    pytest.importorskip("matplotlib")
    save_document(attend_doc, tmp_path / "a.png")
    assert (tmp_path / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("cells", [1, 3, 24])
def test_png_text_stays_inside_the_picture(cells):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from ctxembed.views.png import draw

    words = [f"w{i}" for i in range(cells)]
    long = "settings: " + " | ".join(f"ingredient number {i} on" for i in range(12))
    figure = Figure("attention weights", ["Apple makes phones", long], [Heatmap("h", words, words, np.eye(cells))])
    figure.notes = ["rows: how much each token attends to each column (rows sum to 1); darkest = 0.758; · masked"]
    fig = draw(figure)
    try:
        renderer = fig.canvas.get_renderer()
        texts = fig.texts  # the header and the notes
        assert len(texts) == 2
        for text in texts:
            box = text.get_window_extent(renderer)
            assert 0 <= box.x0 and box.x1 <= fig.bbox.x1, text.get_text()  # not cut at the right edge
            assert 0 <= box.y0 and box.y1 <= fig.bbox.y1, text.get_text()
    finally:
        plt.close(fig)


def test_missing_matplotlib_is_one_line_naming_the_extra(tmp_path, attend_doc, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    with pytest.raises(DataError, match=r"pip install 'ctxembed\[plot\]'"):
        save_document(attend_doc, tmp_path / "a.png")
    assert not (tmp_path / "a.png").exists()


def test_json_is_the_json_document(tmp_path, attend_doc):
    save_document(attend_doc, tmp_path / "a.json")
    assert json.loads((tmp_path / "a.json").read_text()) == attend_doc


# ------------------------------------------------------------------------------ errors and atomic writes
def test_unknown_suffix_is_a_usage_error(tmp_path, attend_doc):
    with pytest.raises(UsageError, match=r"\.pdf"):
        save_document(attend_doc, tmp_path / "a.pdf")


def test_unwritable_path_is_a_data_error_leaving_nothing(tmp_path, attend_doc):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(DataError):
        save_document(attend_doc, blocker / "a.svg")
    (tmp_path / "d.svg").mkdir()
    with pytest.raises(DataError, match="is a directory"):
        save_document(attend_doc, tmp_path / "d.svg")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.svg", "file"] and not any((tmp_path / "d.svg").iterdir())


def test_a_failed_write_keeps_the_old_file_whole(tmp_path, attend_doc, monkeypatch):
    target = tmp_path / "a.svg"
    target.write_text("old")

    def broken(*_):
        raise RuntimeError("drawing failed halfway")

    monkeypatch.setitem(FIGURES, "ctxembed.attend/5", broken)
    with pytest.raises(RuntimeError):
        save_document(attend_doc, target)
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["a.svg"]


# ------------------------------------------------------------------------------ the registry
def test_a_new_document_type_is_one_registered_function(tmp_path, monkeypatch):
    monkeypatch.setattr("ctxembed.views.figures.FIGURES", dict(FIGURES))

    @figure_for("ctxembed.train/1")
    def train_figure(doc, view):
        return Figure(
            "training",
            [],
            [
                Curves("loss", "step", "loss", [("train", doc["steps"], doc["loss"])]),
                Points("map", [0.0, 1.0], [1.0, 0.0], ["bank#1", "bank#2"], ["river", "money"]),
                Bars("scores", ["a", "b"], [0.2, 0.9]),
                Heatmap("h", ["x"], ["y"], np.array([[0.5]])),
            ],
        )

    doc = {"schema": "ctxembed.train/1", "steps": [0, 1, 2], "loss": [1.0, 0.5, 0.25]}
    save_document(doc, tmp_path / "t.svg")
    texts = svg_texts(tmp_path / "t.svg")
    assert {"loss", "map", "bank#1", "river", "scores"} <= set(texts)
    assert "hover or click" in html_page(doc)


def test_a_document_without_a_figure_says_so(tmp_path):
    with pytest.raises(UsageError, match="save it as .json"):
        save_document({"schema": "ctxembed.unknown/1"}, tmp_path / "x.svg")
    save_document({"schema": "ctxembed.unknown/1"}, tmp_path / "x.json")


def test_svg_escapes_markup_in_tokens():
    figure = Figure("<t&>", ["a<b"], [Heatmap("x", ["<i>"], ["&"], np.array([[0.5]]))])
    root = ET.fromstring(figure_svg(figure))
    assert {"<t&>", "a<b", "<i>", "&"} <= {t.text for t in root.iter(f"{SVG}text")}


# ------------------------------------------------------------------------------ the CLI
def test_save_is_repeatable_and_keeps_the_table(tmp_path):
    svg, html, js = tmp_path / "a.svg", tmp_path / "a.html", tmp_path / "a.json"
    result = succeeds("attend", SENTENCE, "--save", svg, "--save", html, "--save", js)
    assert "attention weights" in result.stdout
    assert svg.exists() and html.exists()
    assert json.loads(js.read_text()) == run_json("attend", SENTENCE, "--json")


def test_save_json_equals_json_output_for_every_command(tmp_path):
    for args in (
        ["compare", "we sat on the river bank", "I paid the bank", "--word", "bank"],
        ["neighbors", "we sat on the river bank", "--word", "bank", "-k", "3"],
        ["attend", "apple phone", "--vectors", TOY, "--preset", "textbook", "--explain"],
    ):
        out = tmp_path / f"{args[0]}.json"
        succeeds(*args, "--save", out)
        assert json.loads(out.read_text()) == run_json(*args, "--json")


def test_cli_unknown_suffix_exits_2_before_any_work(tmp_path):
    message = fails(2, "attend", SENTENCE, "--save", tmp_path / "x.gif", "--vectors", tmp_path / "missing.vec")
    assert "x.gif" in message and ".svg" in message


def test_cli_unwritable_path_exits_1(tmp_path):
    (tmp_path / "file").write_text("x")
    message = fails(1, "compare", "a bank", "the bank", "--save", tmp_path / "file" / "x.svg")
    assert "x.svg" in message
    fails(1, "neighbors", "the river bank", "--word", "bank", "--save", tmp_path / "nowhere" / "x.html")
    assert not (tmp_path / "nowhere").exists()
