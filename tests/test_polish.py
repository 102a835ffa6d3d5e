"""The new user's small things, each pinned: labels and indents of wrapped lines, no trailing spaces,
the flag an error names, help texts that say what the command does."""

from __future__ import annotations

import re

import pytest

from tests.cli_helpers import fails, invoke, succeeds

LONG = "the old fisherman slowly walked along the muddy river bank near the village at dawn"


def test_the_tokens_line_wraps_under_itself_without_a_trailing_space():
    lines = succeeds("attend", LONG, "--color", "never", env={"COLUMNS": "80"}).stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("tokens   "))
    assert lines[at] == lines[at].rstrip()
    assert lines[at + 1].startswith(" " * 9) and lines[at + 1].strip().endswith("dawn")


@pytest.mark.parametrize(
    "args",
    [
        ["before-after", "we sat on the river bank"],
        ["senses", "bass", "--examples", "1"],
    ],
)
def test_settings_carry_their_label_and_indent(args):
    lines = invoke(*args, "--color", "never", env={"COLUMNS": "80"}).stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("settings "))
    assert lines[at + 1].startswith(" " * 9)  # the summary runs over more than one line at 80 columns


def test_an_error_names_the_flag_the_user_typed():
    assert "--word 'money' is not among" in fails(1, "attend", "the bank", "--word", "money")


def _help(*command: str) -> str:
    return re.sub(r"\s+", " ", succeeds(*command, "--help", env={"COLUMNS": "200"}).stdout)


def test_help_texts_say_what_the_command_does():
    assert "One JSON line per input line" not in _help()
    assert "textbook attention" not in _help("side-by-side")
    assert "--explain" not in _help("before-after")
    assert ".tsv or a folder" in _help("senses")


def test_batch_npz_says_missing_words_have_no_row(tmp_path):
    result = invoke(
        "batch", "--format", "npz", "--no-weights", "--word", "bank", "--out", str(tmp_path / "b.npz"),
        input="we sat on the river bank\nthe sun rose\n",
    )  # fmt: skip
    assert result.exit_code == 0
    assert "1 of 2 sentences lack 'bank': they have no row" in result.stderr and "null" not in result.stderr


def test_eval_senses_under_a_trained_model_does_not_claim_glove_vectors():
    from ctxembed.views.render import _eval_vectors

    doc = {"vectors": {"name": "GloVe 6B 100d"}, "configs": [{"name": "minilm", "settings": {"model": "minilm"}}]}
    assert _eval_vectors(doc) == "each model's own"
    doc["configs"].append({"name": "default", "settings": {"preset": "default"}})
    assert _eval_vectors(doc) == "GloVe 6B 100d (minilm: the model's own)"
    assert _eval_vectors({"vectors": {"name": "GloVe"}, "configs": [{"name": "static"}]}) == "GloVe"


def test_sixteen_colour_legends_speak_of_eighths_and_name_their_colours():
    from ctxembed.views.render import shading_key

    key = shading_key("16", "0.5")
    assert "quarters" not in key and "eighths of 0.5" in key and "light grey, cyan, bright blue, blue" in key
    import io

    from rich.console import Console

    from ctxembed.views.render import render_attend
    from tests.cli_helpers import run_json

    doc = run_json("attend", "we sat on the river bank", "--heads", "2", "--layers", "2", "--json")
    console = Console(file=io.StringIO(), width=100, force_terminal=True, color_system="standard", record=True)
    render_attend(console, doc, all_layers=True)
    out = console.export_text()
    assert "white 0 to dark blue 1" not in out and "16 colours: light grey, cyan, bright blue, blue" in out


def test_before_after_says_its_settings_are_the_weights_files():
    out = succeeds("before-after", "we sat on the river bank", "--color", "never", env={"COLUMNS": "100"}).stdout
    settings = [line for line in out.splitlines() if line.startswith("settings ")]
    assert settings[0].startswith("settings as the weights file records them") and "preset " not in out.split("┏")[0]


def test_a_variation_selector_belongs_to_its_symbol():
    from ctxembed.vectors.tokenize import tokenize

    assert [t.text for t in tokenize("I \u2764\ufe0f the river bank")] == ["I", "\u2764\ufe0f", "the", "river", "bank"]
    assert [t.text for t in tokenize("bank\ufe0f x")][-1] == "x"  # a selector after a word never swallows the next


def test_the_model_view_labels_its_heads_in_one_form():
    import numpy as np

    from ctxembed.views.layout import model_lines

    lines = model_lines(np.zeros((1, 12, 6, 6)), ["layer 0"], [f"head {h}" for h in range(12)], 400)
    header = "".join(text for text, _ in lines[0])
    assert "head" not in header and "h9" in header and "h10" in header
    lines = model_lines(np.zeros((1, 2, 8, 8)), ["layer 0"], ["head 0", "head 1"], 400)
    assert "head 1" in "".join(text for text, _ in lines[0])


def test_model_is_the_first_panel_after_the_commands_own_options():
    text = succeeds("attend", "--help", env={"COLUMNS": "100"}).stdout
    panels = [line.strip("╭─ ").split(" ─")[0] for line in text.splitlines() if line.startswith("╭")]
    if not panels:  # rich's plain fallback: "Model options:" headings
        panels = [line[:-1] for line in text.splitlines() if line.endswith("options:") or line == "Options:"]
    assert panels.index("Model options" if "Model options" in panels else "Model") == 1, panels


def test_explain_text_wraps_under_itself_and_neuron_terms_stay_whole():
    args = ["attend", LONG, "--preset", "learned", "--explain", "--layer", "1", "--head", "2", "--word", "bank"]
    lines = succeeds(*args, "--color", "never", env={"COLUMNS": "60"}).stdout.splitlines()
    for k, line in enumerate(lines[:-1]):
        if re.match(r"^\d\. ", line) and lines[k + 1] and not lines[k + 1].startswith(("┏", " ", "─")):
            raise AssertionError(f"a step heading's continuation at column 0: {lines[k + 1]!r}")
    _, rows = __import__("tests.cli_helpers", fromlist=["table"]).table("\n".join(lines), "q . k_j = sum")
    for row in rows:
        for cell in row[2:]:
            assert not re.match(r"^[+-]\d", cell) and not re.search(r"d\d+$", cell), cell


def test_the_model_view_picture_labels_its_maps_with_the_tokens(tmp_path):
    from tests.test_export import svg_texts

    succeeds("attend", "we sat on the river bank", "--heads", "2", "--layers", "2", "--all-layers", "--all-heads",
             "--save", str(tmp_path / "m.svg"))  # fmt: skip
    texts = svg_texts(tmp_path / "m.svg")
    assert texts.count("river") >= 3  # the keys above the first map, the queries beside each row's first map
