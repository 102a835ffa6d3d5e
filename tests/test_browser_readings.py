"""The interactive page of a document with a reading (--attention) in headless chromium: it shows the
reading's numbers, and its 'show' selector goes back to the raw weights. Skipped without chromium."""

from __future__ import annotations

from tests.cli_helpers import run_json, succeeds
from tests.test_browser import as_numbers, browser, open_page, rounded, screenshot, shown_numbers  # noqa: F401

SENTENCE = "I deposited money in the bank"
ARGS = ["--preset", "learned", "--attention", "value-norm"]


def test_the_page_shows_the_reading_then_the_raw_weights(browser, tmp_path):  # noqa: F811
    path = tmp_path / "reading.html"
    succeeds("attend", SENTENCE, *ARGS, "--save", path)
    doc = run_json("attend", SENTENCE, *ARGS, "--json")
    bank = 5
    page = open_page(browser, path)
    assert page.locator("select.reading").input_value() == "value-norm"
    page.locator("svg.lines text.tok.q").nth(bank).hover()
    assert "value-norm, layer 1, whole layer" in page.locator(".info").text_content()
    row = doc["attention"]["layers"][1][bank]
    assert as_numbers(shown_numbers(page)) == rounded(row[:bank]) + ["masked"]
    screenshot(page, "reading-value-norm.png", tmp_path)

    page.select_option("select.head", "2")  # value-norm has a map per head too
    assert as_numbers(shown_numbers(page)) == rounded(doc["attention"]["heads"][1][2][bank][:bank]) + ["masked"]

    page.select_option("select.reading", "raw")
    page.locator("svg.lines text.tok.q").nth(bank).hover()
    assert as_numbers(shown_numbers(page)) == rounded(doc["weights"][1][2][bank][:bank]) + ["masked"]
    assert page.errors == []
    page.close()
