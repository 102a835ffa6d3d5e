"""The live page's small things (issue 34's list), in headless Chromium: a preset keeps what the reader
changed where the presets agree, the command line carries the drawing's --head, an error dims the old
drawing, a one-token sentence says why its cell is grey, and the per-token table is there."""

from __future__ import annotations

from tests import test_browser, test_serve
from tests.test_serve_browser import draws, page, settled, type_sentence, wait_until  # noqa: F401 (fixtures)

browser = test_browser.browser
server = test_serve.server


def command(page) -> str:  # noqa: F811 (the fixture's name)
    return page.inner_text("#command-line")


def test_a_preset_keeps_heads_and_the_command_line_follows_the_head_shown(page):  # noqa: F811
    type_sentence(page, "the bank raised interest rates")
    before = draws(page)
    page.fill("#setting-heads", "2")
    settled(page, before)
    before = draws(page)
    page.select_option("#preset", "textbook")
    settled(page, before)
    assert page.input_value("#setting-heads") == "2"
    assert "--preset textbook --heads 2" in command(page)
    page.select_option("#view select.head", "1")
    wait_until(page, "document.getElementById('command-line').textContent.indexOf('--head 1') >= 0")


def test_an_error_dims_the_last_drawing_and_says_so(page):  # noqa: F811
    type_sentence(page, "the bank raised interest rates")
    page.fill("#setting-heads", "3")  # 100 dimensions do not split into 3 heads
    wait_until(page, "document.getElementById('view').classList.contains('stale')")
    assert "last sentence that worked" in page.inner_text("#status")


def test_one_token_and_the_per_token_table(page):  # noqa: F811
    type_sentence(page, "bank")
    assert "no other token to attend to" in page.inner_text("#view")
    table = page.inner_text("#view .per-token")
    assert "attends most to" in table and "every key is masked" in table


def test_the_per_token_table_follows_the_layer_and_head_shown(page):  # noqa: F811
    type_sentence(page, "the bank raised the interest rates")
    before = draws(page)
    page.fill("#setting-heads", "2")
    settled(page, before)
    assert page.inner_text("#view .per-token h3") == "per token (layer 0, mean of 2 heads)"
    page.select_option("#view select.head", "1")
    assert page.inner_text("#view .per-token h3") == "per token (layer 0, head 1)"
    # a repeated word is labelled as the CLI labels it
    assert page.locator("table.matrix th.row").all_text_contents()[3] == "the#2"


def test_the_page_shows_a_documents_warnings(page):  # noqa: F811
    page.click("#tabs button[data-tab=neighbors]")
    page.locator("#sentence").fill("I deposited cash at the bank and then sat on the river bank")
    page.locator("#token-choices button", has_text="bank#2").click()
    wait_until(page, "document.querySelector('#view .warnings') !== null")
    assert "share one contextual vector" in page.inner_text("#view .warnings")
