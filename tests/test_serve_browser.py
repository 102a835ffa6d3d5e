"""The live page of `ctxembed serve` in Debian's headless Chromium (Playwright), against a real server on
127.0.0.1: typing redraws the matrix, the head selector follows --heads, compare reads out the values,
and every view's command line prints the document the page drew. Skipped as tests/test_browser.py is."""

from __future__ import annotations

import shlex
import time

import pytest

from tests import test_browser, test_serve
from tests.cli_helpers import run_json
from tests.test_browser import screenshot
from tests.test_serve import post

browser = test_browser.browser  # the fixtures: Debian's chromium, a server on 127.0.0.1
server = test_serve.server

WAIT = 20  # seconds for the page to show something


@pytest.fixture
def page(browser, server):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.requests, page.errors = [], []
    page.on("request", lambda request: page.requests.append(request.url))
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.on("console", lambda message: message.type == "error" and page.errors.append(message.text))
    page.goto(server.url)
    page.wait_for_selector("table.matrix td", timeout=WAIT * 1000)
    yield page
    # a sentence typed half-way may have no word with a vector yet: a 4xx the page shows, which Chromium notes
    assert [e for e in page.errors if "responded with a status of 4" not in e] == []
    assert all(url.startswith(server.url) or url.startswith("data:") for url in page.requests), page.requests
    page.close()


def wait_until(page, expression: str) -> None:
    """Poll a page expression (the page's Content-Security-Policy forbids Playwright's eval-based waits)."""
    end = time.monotonic() + WAIT
    while not page.evaluate(expression):
        assert time.monotonic() < end, f"timed out waiting for {expression}"
        time.sleep(0.02)


def draws(page) -> int:
    return page.evaluate("window.ctxembedLive.draws")


def settled(page, before: int, also: str = "true") -> None:
    """Wait for a draw after ``before`` draws, with no answer still coming (and ``also`` true)."""
    wait_until(page, f"window.ctxembedLive.draws > {before} && !window.ctxembedLive.busy && ({also})")


def type_sentence(page, text: str) -> None:
    before = draws(page)
    page.locator("#sentence").fill("")
    page.locator("#sentence").press_sequentially(text, delay=15)
    settled(page, before, "document.getElementById('sentence').value === window.ctxembedLive.lastBody.sentence")
    wait_until(page, f"document.querySelector('#view .meta') && document.querySelector('#view .meta').textContent "
               f"=== {text!r}")  # fmt: skip


def the_command(page) -> list[str]:
    words = shlex.split(page.locator("#command-line").text_content())
    assert words[0] == "ctxembed"
    return words[1:]


def test_typing_a_sentence_redraws_the_matrix_with_its_tokens(page, server, tmp_path):
    type_sentence(page, "Apple makes phones")
    doc = run_json("attend", "Apple makes phones", "--json")
    tokens = [doc["tokens"][p]["text"] for p in doc["attended_positions"]]
    assert page.locator("table.matrix th.row").all_text_contents() == tokens
    assert page.locator("svg.lines text.tok.q").all_text_contents() == tokens
    # a cell's title carries the exact weight of the JSON document (one head: the mean is the head)
    title = page.locator("table.matrix tr").nth(1).locator("td").nth(2).get_attribute("title")
    assert title == f"Apple \u2192 phones: {doc['weights'][-1][0][0][2]:.3f}"  # read out with three decimals
    assert page.locator("#view .meta").nth(1).text_content() == "settings: " + doc["settings_summary"]
    # the command line shown prints the document drawn
    assert the_command(page) == ["attend", "Apple makes phones"]
    screenshot(page, "live-attend.png", tmp_path)


def test_changing_heads_makes_the_head_selector_follow(page, server):
    type_sentence(page, "the bank raised interest rates")
    assert page.locator("select.head").count() == 0  # one head: no selector
    for heads in (2, 4):
        before = draws(page)
        page.locator("#setting-heads").fill(str(heads))
        settled(page, before, f"document.querySelectorAll('select.head option').length === {heads + 1}")
    assert page.locator("select.head option").all_text_contents() == ["mean of 4 heads"] + [
        f"head {h}" for h in range(4)
    ]
    assert "4 heads" in page.locator("#view .meta").nth(1).text_content()
    command = the_command(page)
    assert command == ["attend", "the bank raised interest rates", "--heads", "4"]
    assert post(server, "attend", page.evaluate("window.ctxembedLive.lastBody"))[1] == run_json(*command, "--json")
    # a chosen head survives the next keystroke
    page.select_option("select.head", "2")
    type_sentence(page, "the bank raised interest rates again")
    assert page.locator("select.head").input_value() == "2"


def test_the_controls_come_from_the_settings_registry(page, server):
    from ctxembed.presets import SETTINGS

    names = page.evaluate("Array.from(document.querySelectorAll('#controls .setting')).map(e => e.name)")
    assert sorted(names) == sorted(set(SETTINGS) - {"weights_file"})
    assert page.locator("#setting-heads").get_attribute("max") == str(SETTINGS["heads"].maximum)
    assert page.locator("#setting-normalization option").all_text_contents() == ["softmax", "sum"]
    before = draws(page)
    page.select_option("#preset", "textbook")
    settled(page, before)
    assert not page.locator("#setting-mix").input_value()  # the textbook preset has no mix
    before = draws(page)
    page.locator("#setting-causal").check()
    settled(page, before)
    command = the_command(page)
    assert command[-3:] == ["--preset", "textbook", "--causal"]
    assert "causal" in page.locator("#view .meta").nth(1).text_content()


def test_compare_the_bank_sentences_and_read_the_values(page, server, tmp_path):
    page.click("#tabs button[data-tab=compare]")
    before = draws(page)
    page.click("button.example[data-example=bank]")
    settled(page, before, "document.querySelector('#view svg g.cell')")
    command = the_command(page)
    assert command[0] == "compare" and command[-2:] == ["--word", "bank"]
    doc = run_json(*command, "--json")
    n = len(doc["sentences"])
    cells = page.locator("#view g.cell")
    pairs = n * (n - 1) // 2
    rows = len(doc["layers"]) + 1  # each layer (0: the input) and the read-out
    assert cells.count() == 2 * n * n + rows * pairs  # static and contextual, side by side, then per layer
    cells.nth(2 * n * n + pairs + 1).hover()  # layer 1, S1 against S3
    at_layer = page.locator("#view .readout").text_content()
    assert at_layer.rsplit(": ", 1)[1] == f"{doc['layers'][1][0][2]:.3f}"
    cells.nth(n * n + 2).hover()  # contextual, S1 against S3: the river bank against the money bank
    readout = page.locator("#view .readout").text_content()
    assert readout.startswith("contextual cosine of 'bank', S1 and S3: ")  # a symmetric cosine: no arrow
    assert readout.rsplit(": ", 1)[1] == f"{doc['contextual_similarity'][0][2]:.3f}"
    cells.nth(2).hover()
    static = page.locator("#view .readout").text_content().rsplit(": ", 1)[1]
    assert static == f"{doc['static_similarity'][0][2]:.3f}"
    screenshot(page, "live-compare.png", tmp_path)


def test_explain_shows_the_numbered_steps(page, server):
    type_sentence(page, "Apple makes phones")
    before = draws(page)
    page.click("#tabs button[data-tab=explain]")
    settled(page, before, "document.querySelector('#view .ctxembed-explain')")
    text = page.locator("#view .ctxembed-explain").text_content()
    for step in ("1. inputs x", "3. raw scores", "6. weights", "7. context_i"):
        assert step in text
    assert the_command(page) == ["attend", "Apple makes phones", "--explain"]
    # drawn in the page's own style: matrices as tables on the blue ramp, not a terminal dump
    assert page.locator("#view pre").count() == 0
    cells = page.locator("#view .ctxembed-explain table.matrix td")
    assert cells.count() >= 9 and "rgb(" in cells.first.get_attribute("style")


def test_neighbors_lists_a_chosen_tokens_neighbours(page, server):
    type_sentence(page, "we sat on the river bank")
    page.click("#tabs button[data-tab=neighbors]")
    page.wait_for_selector("#token-choices button.token", timeout=WAIT * 1000)
    before = draws(page)
    page.locator("#token-choices button.token", has_text="river").click()
    settled(page, before, "window.ctxembedLive.lastBody.word === 'river'")
    command = the_command(page)
    assert command == ["neighbors", "we sat on the river bank", "--word", "river"]
    doc = run_json(*command, "--json")
    texts = page.locator("#view svg text").all_text_contents()
    assert doc["contextual"][0]["word"] in texts and doc["static"][0]["word"] in texts


def test_a_token_clicked_as_the_sentence_changes_leaves_the_new_sentences_tokens(page, server):
    """A token of the old row clicked just after another sentence is typed (before its row came) draws that
    word in the new sentence and then offers the new sentence's tokens (the row went empty: the tokens were
    looked up only when no word was chosen)."""
    page.click("#tabs button[data-tab=neighbors]")
    page.locator("#sentence").fill("we sat on the river bank")
    wait_until(page, "document.querySelectorAll('#token-choices button.token').length === 6")
    page.locator("#sentence").fill("the river was cold today")
    page.locator("#token-choices button.token", has_text="river").click()  # the old row's, at once
    wait_until(page, "window.ctxembedLive.lastBody.sentence === 'the river was cold today' && "
                     "window.ctxembedLive.lastBody.word === 'river' && !window.ctxembedLive.busy")  # fmt: skip
    wait_until(page, "document.querySelectorAll('#token-choices button.token').length === 5")
    assert page.locator("#token-choices button.token").all_text_contents() == ["the", "river", "was", "cold", "today"]
    assert the_command(page) == ["neighbors", "the river was cold today", "--word", "river"]


def test_a_window_around_the_word_crops_the_sentence_and_its_command_line(page, server, tmp_path):
    type_sentence(page, "far away in the hills we sat on the grassy river bank and watched the slow water")
    page.click("#tabs button[data-tab=neighbors]")
    page.wait_for_selector("#token-choices button.token", timeout=WAIT * 1000)
    page.locator("#token-choices button.token", has_text="bank").click()
    before = draws(page)
    page.locator("#window").fill("2")
    settled(page, before, "window.ctxembedLive.lastBody.window === 2")
    command = the_command(page)
    assert command[-4:] == ["--word", "bank", "--window", "2"]
    doc = run_json(*command, "--json")
    assert doc["settings"]["window"] == 2
    texts = page.locator("#view svg text").all_text_contents()
    assert doc["contextual"][0]["word"] in texts
    assert any("window ±2 tokens" in text for text in page.locator("#view").all_text_contents())
    assert page.locator("#token-choices button.token").count() == 17  # the whole sentence's, to choose from
    screenshot(page, "live-neighbors-window.png", tmp_path)


def test_a_bad_setting_shows_the_command_lines_message(page, server):
    before = page.locator("#status").text_content()
    page.locator("#setting-heads").fill("3")  # 100 dimensions do not split into 3 heads
    wait_until(page, "!window.ctxembedLive.busy && document.getElementById('status').className === 'error'")
    message = page.locator("#status").text_content()
    assert message != before and "3 heads" in message
