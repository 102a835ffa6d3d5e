"""The small things a first-time user met (issue 34's list): each test fails on the old output."""

from __future__ import annotations

import re

import pytest
import typer

from ctxembed.cli import app
from tests.cli_helpers import succeeds
from tests.test_settings import _commands


@pytest.mark.parametrize("command", sorted(_commands(typer.main.get_command(app))))
def test_usage_lines_name_arguments_without_braces(command):
    usage = succeeds(*command, "--help").stdout.splitlines()[0]
    assert "{" not in usage and "}" not in usage, usage


def test_usage_of_train_and_senses():
    assert succeeds("train", "--help").stdout.splitlines()[0].endswith(" train [OPTIONS] CORPUS")
    assert succeeds("senses", "--help").stdout.splitlines()[0].endswith(" senses [OPTIONS] WORD... [CORPUS|-]")


def test_the_example_is_never_broken_inside_a_flag():
    help_text = succeeds("attend", "--help", env={"COLUMNS": "60"}).stdout
    assert "--all-heads" in help_text.split("Example:")[1].splitlines()[0]


def test_the_vectors_line_says_the_dimension_once():
    header = succeeds("attend", "we sat on the river bank").stdout.split("settings")[0]
    assert header.count("100d") == 1, header


def test_before_after_marks_masked_cells():
    out = succeeds("before-after", "we sat on the bank", env={"COLUMNS": "200"}).stdout
    rows = [line for line in out.splitlines() if re.match(r"│ we +│ +[·0-9]", line)]  # the two matrices' rows
    assert rows and all(row.split("│")[2].strip() == "·" for row in rows)  # we's own column: the self mask


def test_settings_lines_break_between_settings_only():
    out = succeeds("before-after", "we sat on the bank", env={"COLUMNS": "80"}).stdout
    block = out.split("before training")[0]
    assert all(line.count("(") == line.count(")") for line in block.splitlines()), block


def test_table_captions_carry_no_trailing_spaces():
    out = succeeds("vectors", "info", env={"COLUMNS": "120"}).stdout
    assert out.splitlines()[0] == "vectors: default"


def test_explain_says_which_layer_each_h_is():
    out = succeeds("attend", "we sat on the bank", "--explain", "--layers", "2", env={"COLUMNS": "200"}).stdout
    step = re.search(r"^9\. .*$", out, re.M)[0]
    assert "h0 is the attention input" in step and "h1 ... h2 the outputs of layers 0 ... 1" in step


def test_svg_canvas_fits_the_figure_not_its_settings_line(tmp_path):
    succeeds("attend", "the bank raised interest rates", "--save", tmp_path / "a.svg")
    svg = (tmp_path / "a.svg").read_text(encoding="utf-8")
    width = float(re.search(r'<svg [^>]*width="([0-9.]+)"', svg)[1])
    assert width < 700  # 1,328 px before, for a 5-token matrix about 250 px wide
    assert "twins masked" in svg or "self masked" in svg  # the settings are still all there, wrapped
    assert svg.count("100d") == 1


def test_attend_says_why_rows_lean_to_rare_words_when_sif_is_on():
    on = succeeds("attend", "the bank raised interest rates", env={"COLUMNS": "200"}).stdout
    off = succeeds("attend", "the bank raised interest rates", "--sif", "0", env={"COLUMNS": "200"}).stdout
    assert "SIF key bias (--sif 0.0001)" in on and "rarer words" in on
    assert "SIF key bias (--sif" not in off
