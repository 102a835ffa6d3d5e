"""The live page's model selector in Debian's headless Chromium (Playwright), against a real server on
127.0.0.1: picking minilm redraws attend, compare and neighbours under the trained model, with --model in
the command line the page shows (which prints, with --json, the document drawn); a model that is not
installed shows the command that installs it and sends nothing. Skipped as tests/test_browser.py is; the
MiniLM tests are skipped without the model, as tests/test_minilm.py's are."""

from __future__ import annotations

import pytest

from tests import test_serve_browser
from tests.cli_helpers import run_json
from tests.test_browser import screenshot
from tests.test_serve import post
from tests.test_serve_browser import WAIT, draws, settled, the_command, type_sentence, wait_until

browser, server, page = test_serve_browser.browser, test_serve_browser.server, test_serve_browser.page

SENTENCE = "I deposited money in the bank"


def pick_model(page, name: str, also: str = "true") -> None:
    before = draws(page)
    page.select_option("#model", name)
    settled(page, before, also)


def meta(page) -> str:
    return page.locator("#view .meta").nth(1).text_content()


# minilm_folder comes first: the page reads /api/settings (what is installed) as it loads
def test_picking_minilm_redraws_attend_under_the_trained_model(minilm_folder, page, server, tmp_path):
    type_sentence(page, SENTENCE)
    assert page.locator("select.head").count() == 0  # glove's default: one layer, one head
    assert "model minilm" not in meta(page)
    assert page.locator("#model option").all_text_contents() == ["glove", "minilm"]
    pick_model(page, "minilm", "document.querySelectorAll('select.head option').length === 13")
    assert page.locator("select.head option").all_text_contents() == ["mean of 12 heads"] + [
        f"head {h}" for h in range(12)
    ]
    assert page.locator("select.layer option").count() == 6
    assert meta(page).startswith("settings: model minilm (all-MiniLM-L6-v2, 6 layers x 12 heads)")
    assert page.locator("#controls").is_hidden() and page.locator("#model-note").is_visible()
    command = the_command(page)
    assert command == ["attend", SENTENCE, "--model", "minilm"]
    drawn = post(server, "attend", page.evaluate("window.ctxembedLive.lastBody"))[1]
    assert drawn == run_json(*command, "--json")
    tokens = [drawn["tokens"][p]["text"] for p in drawn["attended_positions"]]
    assert page.locator("table.matrix th.row").all_text_contents() == tokens
    screenshot(page, "live-minilm-attend.png", tmp_path)
    # back to glove: its settings again, and no --model in the command
    pick_model(page, "glove", "document.querySelectorAll('select.head').length === 0")
    assert the_command(page) == ["attend", SENTENCE]
    assert page.locator("#controls").is_visible()


def test_compare_neighbours_and_explain_under_minilm(minilm_folder, page, server, tmp_path):
    pick_model(page, "minilm")
    page.click("#tabs button[data-tab=compare]")
    before = draws(page)
    page.click("button.example[data-example=bank]")
    settled(page, before, "document.querySelector('#view svg g.cell')")
    command = the_command(page)
    assert command[0] == "compare" and command[-4:] == ["--word", "bank", "--model", "minilm"]
    doc = run_json(*command, "--json")
    assert doc["settings_summary"].startswith("model minilm")
    page.locator("#view g.cell").nth(16 + 2).hover()  # contextual, S1 against S3
    readout = page.locator("#view .readout").text_content()
    assert readout.rsplit(": ", 1)[1] == f"{doc['contextual_similarity'][0][2]:.3f}"
    screenshot(page, "live-minilm-compare.png", tmp_path)

    page.click("#tabs button[data-tab=neighbors]")
    page.locator("#sentence").fill(SENTENCE)
    page.wait_for_selector("#token-choices button.token", timeout=WAIT * 1000)
    before = draws(page)
    page.locator("#token-choices button.token", has_text="bank").click()
    settled(page, before, "window.ctxembedLive.lastBody.word === 'bank'")
    command = the_command(page)
    assert command == ["neighbors", SENTENCE, "--word", "bank", "--model", "minilm"]
    doc = run_json(*command, "--json")
    assert doc["contextual"][0]["word"] in page.locator("#view svg text").all_text_contents()

    # explain: the selectors learn MiniLM's 6 layers x 12 heads, and the chosen layer's steps over the pieces
    before = draws(page)
    page.click("#tabs button[data-tab=explain]")
    settled(page, before, "document.querySelector('#view .ctxembed-explain')")
    assert page.locator("#explain-layer option").count() == 6 and page.locator("#explain-head option").count() == 12
    text = page.locator("#view .ctxembed-explain").text_content()
    assert "step by step: layer 5, head 0, over word pieces" in text and "[CLS]" in text
    assert the_command(page) == ["attend", SENTENCE, "--explain", "--model", "minilm"]
    before = draws(page)
    page.select_option("#explain-layer", "2")
    settled(page, before, "window.ctxembedLive.lastBody.layer === 2")
    before = draws(page)
    page.select_option("#explain-head", "3")
    settled(page, before, "window.ctxembedLive.lastBody.head === 3")
    text = page.locator("#view .ctxembed-explain").text_content()
    assert "step by step: layer 2, head 3, over word pieces" in text
    for step in ("1. inputs x", "q = x W_q + b_q", "6. weights", "8. a = ", "9. output = feed-forward"):
        assert step in text
    assert the_command(page) == ["attend", SENTENCE, "--explain", "--layer", "2", "--head", "3", "--model", "minilm"]
    # the neuron view of a typed word: its q . k_j term by term, and --word in the command line
    before = draws(page)
    page.locator("#explain-word").fill("bank")
    settled(page, before, "window.ctxembedLive.lastBody.word === 'bank'")
    assert "'bank': q . k_j = sum over its 32 dimensions" in page.locator("#view .ctxembed-explain").text_content()
    command = the_command(page)
    assert command == [
        "attend",
        SENTENCE,
        "--explain",
        "--layer",
        "2",
        "--head",
        "3",
        "--word",
        "bank",
        "--model",
        "minilm",
    ]
    assert run_json(*command, "--json")["explain"]["neuron"]["token"] == "bank"
    screenshot(page, "live-minilm-explain.png", tmp_path)


@pytest.fixture
def no_models(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXEMBED_MODELS", str(tmp_path / "models"))  # nothing installed


def test_a_model_not_installed_shows_the_install_command(no_models, page, server, tmp_path):
    type_sentence(page, "we sat on the river bank")
    assert page.locator("#model option").all_text_contents() == ["glove", "minilm (not installed)"]
    asked = len([url for url in page.requests if "/api/" in url])
    page.select_option("#model", "minilm")
    wait_until(page, "document.getElementById('command-line').textContent === 'ctxembed models install minilm'")
    wait_until(page, "!window.ctxembedLive.busy")
    assert "minilm is not installed here" in page.locator("#status").text_content()
    page.locator("#sentence").fill("we sat on the river bank again")
    wait_until(page, "!window.ctxembedLive.busy")
    assert len([url for url in page.requests if "/api/" in url]) == asked  # nothing sent, nothing failed
    assert page.locator("#command-line").text_content() == "ctxembed models install minilm"
    screenshot(page, "live-minilm-not-installed.png", tmp_path)
    pick_model(page, "glove")  # and back: the drawing follows the sentence again
    assert the_command(page) == ["attend", "we sat on the river bank again"]


def test_the_page_shows_the_share_hidden_on_cls_and_sep(minilm_folder, page, server):
    type_sentence(page, "we sat on the river bank")
    pick_model(page, "minilm", "document.querySelectorAll('select.head option').length === 13")
    page.select_option("#view select.layer", "2")
    page.select_option("#view select.head", "7")
    page.locator("svg.lines text.tok.q").nth(5).click()  # bank
    row = page.locator(".info tr.hidden-share").inner_text()
    assert "[CLS]+[SEP]" in row and "0.951" in row
    header = page.locator("#view .per-token tr").first.inner_text()
    assert "[CLS]+[SEP]" in header
    assert page.locator("#view .per-token h3").inner_text() == "per token (layer 2, head 7)"
    assert page.locator("table.matrix th.hidden-share").count() == 1


def test_a_trained_models_read_out_is_chosen_on_the_page_as_name_at_n(minilm_folder, page, server):
    """The read-out a trained model is read at, spelled on the page as on the command line: --model minilm@3
    in the command the page shows, which prints the document drawn; GloVe has no such choice."""
    assert page.locator("#readout-field").is_hidden()
    page.click("#tabs button[data-tab=compare]")
    pick_model(page, "minilm", "window.ctxembedLive.lastBody.model === 'minilm'")
    assert page.locator("#readout-field").is_visible()
    assert page.locator("#readout option").all_text_contents() == ["mean of h0..h6"] + [f"h{n}" for n in range(7)]
    before = draws(page)
    page.select_option("#readout", "3")
    settled(page, before, "window.ctxembedLive.lastBody.model === 'minilm@3'")
    command = the_command(page)
    assert command[-2:] == ["--model", "minilm@3"]
    doc = run_json(*command, "--json")
    assert "read-out 1·h3" in doc["settings_summary"]
    assert (
        doc["contextual_similarity"]
        == post(server, "compare", page.evaluate("window.ctxembedLive.lastBody"))[1]["contextual_similarity"]
    )
    pick_model(page, "glove", "window.ctxembedLive.lastBody.model === undefined")
    assert page.locator("#readout-field").is_hidden()
