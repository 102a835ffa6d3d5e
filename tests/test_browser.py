"""The saved HTML page in a real browser: Debian's headless Chromium, driven by Playwright.

`make test` installs chromium when it is missing and the machine allows it. Without it this test is
skipped with a loud reason (set CTXEMBED_REQUIRE_BROWSER=1 to make that a failure instead).
Set CTXEMBED_SCREENSHOTS=DIR to keep screenshots of the pages.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from ctxembed.views.figures import token_labels
from tests.cli_helpers import run_json, succeeds

SENTENCE = "the fisherman sat on the muddy river bank"
ARGS = ["--heads", "2", "--layers", "2"]
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-sync",
    "--disable-background-networking",
    "--disable-component-update",
]


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        message = (
            "BROWSER TEST SKIPPED: Debian's chromium is not installed "
            "(`make test` installs it as root: apt-get install chromium)"
        )
        if os.environ.get("CTXEMBED_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="module")
def browser():
    executable = chromium()
    sync_api = pytest.importorskip("playwright.sync_api", reason="BROWSER TEST SKIPPED: pip install playwright")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True, args=FLAGS)
        yield browser
        browser.close()


def open_page(browser, path: Path):
    """A page showing ``path``, with every request and script error recorded."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.requests, page.errors = [], []
    page.on("request", lambda request: page.requests.append(request.url))
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.on("console", lambda message: message.type == "error" and page.errors.append(message.text))
    page.goto(path.as_uri())
    return page


def screenshot(page, name: str, tmp_path: Path, *, full_page: bool = True) -> None:
    folder = Path(os.environ.get("CTXEMBED_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / name), full_page=full_page)  # a bare SVG document: the viewport
    assert (folder / name).read_bytes()[:4] == b"\x89PNG"


def shown_numbers(page) -> list[str]:
    return page.locator(".info table.numbers td.w").all_text_contents()


def expected(row_or_column) -> list[str]:
    return ["masked" if value is None else value for value in row_or_column]


def as_numbers(texts: list[str]) -> list:
    return [text if text == "masked" else float(text) for text in texts]


def rounded(values: list) -> list:
    """The page reads numbers out with three decimals."""
    return [value if value == "masked" else round(value, 3) for value in values]


def test_attention_page_in_chromium(browser, tmp_path):
    path = tmp_path / "attend.html"
    succeeds("attend", SENTENCE, *ARGS, "--save", path)
    doc = run_json("attend", SENTENCE, *ARGS, "--json")
    tokens = token_labels(doc)[0]  # as the CLI labels them: a repeated word's later copies are the#2, ...
    weights = doc["weights"]  # [layer][head][query][key]; the default preset masks the diagonal
    page = open_page(browser, path)

    # every token renders, on both sides
    assert page.locator("svg.lines text.tok.q").all_text_contents() == tokens
    assert page.locator("svg.lines text.tok.k").all_text_contents() == tokens
    assert page.locator("svg.lines text.tok.q").first.bounding_box()["width"] > 0
    assert page.locator("select.layer option").count() == 2 and page.locator("select.head option").count() == 3
    before = page.locator("svg.lines line[stroke-opacity='0']").count()
    assert before == 0  # no token selected: every line is drawn
    screenshot(page, "attend-initial.png", tmp_path)

    # layer 0, head 1; hovering "river" shows its row, exactly the JSON weights
    page.select_option("select.layer", "0")
    page.select_option("select.head", "1")
    river = tokens.index("river")
    page.locator("svg.lines text.tok.q").nth(river).hover()
    assert "river" in page.locator(".info .selected").text_content()
    row = [None if i == river else w for i, w in enumerate(weights[0][1][river])]
    assert shown_numbers(page) == [v if v == "masked" else f"{v:.3f}" for v in expected(row)]
    assert as_numbers(shown_numbers(page)) == rounded(expected(row))
    hidden = page.locator("svg.lines line[stroke-opacity='0']").count()
    assert hidden == len(tokens) ** 2 - len(tokens)  # only the hovered token's lines stay
    assert "active" in page.locator("svg.lines text.tok.q").nth(river).get_attribute("class")
    screenshot(page, "attend-hover.png", tmp_path)

    # clicking a key pins its column: what attends to "bank"; it stays when the mouse leaves
    bank = tokens.index("bank")
    page.locator("svg.lines text.tok.k").nth(bank).click()
    page.mouse.move(5, 5)
    assert page.locator(".info table.numbers").get_attribute("data-side") == "k"
    column = [None if i == bank else weights[0][1][i][bank] for i in range(len(tokens))]
    assert as_numbers(shown_numbers(page)) == rounded(expected(column))
    assert page.locator("table.matrix td.sel").count() == len(tokens)
    screenshot(page, "attend-pinned.png", tmp_path)

    # the last layer's mean of heads is the default view of a fresh page
    assert page.errors == []
    assert all(url.startswith(("file:", "data:", "about:")) for url in page.requests), page.requests
    page.close()


def test_compare_page_reads_out_a_cell(browser, tmp_path):
    path = tmp_path / "compare.html"
    args = ["compare", "we sat on the river bank", "I deposited money in the bank", "the bank was muddy"]
    succeeds(*args, "--word", "bank", "--save", path)
    doc = run_json(*args, "--word", "bank", "--json")
    page = open_page(browser, path)
    cells = page.locator("g.cell")
    pairs = 3  # S1-S2, S1-S3, S2-S3, at each layer (the input, layer 1) and at the read-out
    assert cells.count() == 2 * 9 + pairs * (len(doc["layers"]) + 1)  # static and contextual 3 x 3, then per layer
    target = cells.nth(9 + 1)  # contextual, S1 against S2
    target.hover()
    readout = page.locator(".readout").text_content()
    assert readout.startswith("contextual cosine of 'bank', S1 and S2: ")  # a symmetric cosine: no arrow
    assert readout.rsplit(": ", 1)[1] == f"{doc['contextual_similarity'][0][1]:.3f}"  # three decimals
    target.click()
    page.mouse.move(5, 5)
    assert page.locator(".readout").text_content() == readout
    screenshot(page, "compare.png", tmp_path)
    assert page.errors == [] and all(url.startswith("file:") for url in page.requests)
    page.close()


def test_svg_renders_in_chromium(browser, tmp_path):
    path = tmp_path / "attend.svg"
    succeeds("attend", SENTENCE, "--save", path)
    page = open_page(browser, path)
    texts = page.locator("text").all_text_contents()
    for token in SENTENCE.split():
        assert token in texts
    box = page.locator("svg").bounding_box()
    assert box["width"] > 200 and box["height"] > 200
    screenshot(page, "attend-svg.png", tmp_path, full_page=False)
    page.close()


def test_notebook_fragment_works_twice_on_one_page(browser, tmp_path):
    from ctxembed.views.export import html_fragment

    doc = run_json("attend", SENTENCE, "--json")
    path = tmp_path / "two.html"
    path.write_text(f"<!DOCTYPE html><html><body>{html_fragment(doc)}{html_fragment(doc)}</body></html>")
    page = open_page(browser, path)
    assert page.locator("svg.lines").count() == 2
    page.locator("svg.lines").nth(1).locator("text.tok.q").nth(1).hover()
    assert page.locator(".info .selected").count() == 1  # only the hovered view changed
    assert page.errors == []
    json.dumps(page.requests)
    page.close()


def test_a_long_sentence_draws_only_the_selected_tokens_lines(browser, tmp_path):
    sentence = " ".join(["the river bank was wide and the water was cold"] * 20)  # 200 tokens
    path = tmp_path / "long.html"
    succeeds("attend", sentence, "--preset", "textbook", "--save", path)
    doc = run_json("attend", sentence, "--preset", "textbook", "--json")
    page = open_page(browser, path)
    assert page.locator("svg.lines text.tok.q").count() == 200
    assert page.locator("svg.lines line").count() == 0  # 40,000 pairs: no line until a token is chosen
    page.locator("svg.lines text.tok.q").nth(150).hover()
    assert page.locator("svg.lines line").count() == 200
    assert as_numbers(shown_numbers(page)) == rounded(doc["weights"][0][0][150])
    assert "up to 80 tokens" in page.locator("table.matrix").text_content()
    assert page.errors == []
    page.close()


def test_the_page_marks_estimated_tokens_and_says_what_the_mark_means(browser, tmp_path):
    from ctxembed.vectors.store import ROW_SOURCE_SECTION, write_store

    words = ["the", "river", "bank"]
    codes = np.array([0, 1, 0], np.uint8)  # "river" estimated
    store = write_store(
        tmp_path / "s.ctxv",
        words,
        np.eye(3, 4, dtype=np.float32) + 0.1,
        sections={ROW_SOURCE_SECTION: {"estimated": codes}},
    )
    path = tmp_path / "a.html"
    succeeds("attend", "the river bank", "--vectors", store, "--preset", "textbook", "--save", path)
    page = open_page(browser, path)
    assert page.locator("svg.lines text.tok.q").all_text_contents() == ["the", "river°", "bank"]
    assert "° vector estimated" in page.locator(".hint.sources").text_content()
    assert page.errors == []
    page.close()
