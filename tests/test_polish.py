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
