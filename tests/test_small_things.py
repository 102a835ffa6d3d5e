"""Small things a new user met (issue 25, item 10), each checked where a person sees it."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.cli_helpers import TOY, run_json, succeeds

GLYPHS = "▁▂▃▄▅▆▇█"


def test_help_panels_read_as_titles():
    help_text = succeeds("attend", "--help").stdout
    assert "Ingredients of the default preset options" not in help_text
    assert "Ingredients of the default preset:" in help_text


def test_train_help_does_not_call_the_learned_output_projection_random():
    help_text = " ".join(succeeds("train", "--help").stdout.split())
    assert "Random W_out" not in help_text
    assert "learned by `ctxembed train`" in help_text


def test_causal_mode_help_says_the_weights_are_the_same():
    help_text = " ".join(succeeds("attend", "--help").stdout.split())
    assert "the weights are the same either way" in help_text


def test_causal_modes_give_the_same_weights_as_the_help_says():
    before = run_json("attend", "apple is the phone", "--vectors", TOY, "--preset", "textbook", "--causal", "--json")
    after = run_json(
        "attend",
        "apple is the phone",
        "--vectors",
        TOY,
        "--preset",
        "textbook",
        "--causal",
        "--causal-mode",
        "after",
        "--json",
    )
    assert np.allclose(before["weights"], after["weights"], atol=1e-6)


def test_the_vectors_line_gives_the_word_count_once():
    header = succeeds("attend", "we sat on the river bank").stdout.split("settings")[0]
    assert header.count("400,000 words") == 1, header


def test_a_one_token_sentence_says_why_it_attends_to_nothing():
    stdout = succeeds("attend", "bank", env={"COLUMNS": "160"}).stdout
    assert "no token to attend to: every key is masked" in stdout


@pytest.mark.parametrize("columns", [48, 49, 62, 63, 94, 95, 187, 188])  # where "marked ·" used to wrap
def test_explain_never_leaves_a_lone_masked_mark_on_a_line(columns):
    stdout = succeeds("attend", "we sat on the river bank", "--explain", env={"COLUMNS": str(columns)}).stdout
    assert "·" not in [line.strip() for line in stdout.splitlines()]


def test_matrix_tables_pad_their_last_column():
    stdout = succeeds("attend", "we sat on the river bank", "--explain", env={"COLUMNS": "120"}).stdout
    rows = [line for line in stdout.splitlines() if line.startswith("│ we ")]
    assert rows and all(line.endswith(" │") for line in rows), rows


def test_png_install_hint_speaks_to_a_checkout_too():
    from ctxembed.views.png import INSTALL_HINT

    assert "pip install 'ctxembed[plot]'" in INSTALL_HINT and ".venv/bin/pip install -e '.[plot]'" in INSTALL_HINT


def test_piped_numbers_layout_keeps_cells_apart():
    long = "the old fisherman slowly walked along the muddy river bank near the village while his sons slept"
    stdout = succeeds("attend", long, env={"COLUMNS": "100"}).stdout
    matrix = stdout[stdout.index("attention weights") : stdout.index("per token")]
    assert re.search(rf"\.\d\d[{GLYPHS}]", matrix), matrix  # the numbers layout, with glyphs
    assert not re.search(rf"[{GLYPHS}·]\.\d", matrix), matrix  # never "·.00▁.12▅": a space between cells


def test_senses_are_numbered_from_1_in_json_as_in_the_text(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text(
        "\n".join(
            ["we sat on the river bank", "the muddy bank of the stream", "grass grew on the bank of the river"]
            + ["I deposited money in the bank", "the bank raised interest rates", "she works at the bank downtown"]
        )
        + "\n"
    )
    doc = run_json("senses", "bank", corpus, "-k", "2", "--json")
    entry = doc["words"][0]
    assert [s["sense"] for s in entry["senses"]] == [1, 2]
    assert {o["sense"] for o in entry["occurrences"]} == {1, 2}
    text = succeeds("senses", "bank", corpus, "-k", "2").stdout
    assert re.search(r"^\s+sense 1 ", text, re.M) and re.search(r"^\s+sense 2 ", text, re.M)
    assert not re.search(r"1 head, 1\s*$", text, re.M)  # the settings line breaks between settings only
