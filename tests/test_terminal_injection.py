"""Text from the user's input never acts on a terminal: control characters (C0, DEL, C1) and bidi
overrides in a sentence, a corpus or a file name show as visible escapes (``\\x1b``, ``\\u202e``) in
every terminal view and stderr message, through a pipe and through a pseudo-terminal; rich markup
in a sentence prints as typed; ordinary text (accents, CJK, emoji) is unchanged; JSON keeps the
text exactly."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from ctxembed.output import printable, printable_document
from tests.cli_helpers import SHARED_CACHE, TOY
from tests.test_terminal import run_in_terminal

# A title change (OSC ... BEL), a clear screen (CSI 2J), a C1 CSI, DEL and a right-to-left override
HOSTILE = "the \x1b]0;pwned\x07 apple \x1b[2J \x9b\x7f \u202eevil\u2066 phone"
ORDINARY = "café 银行 🏦"
MARKUP = "[bold red]phone[/]"
SENTENCE = f"{HOSTILE} {MARKUP} {ORDINARY}"
# Raw bytes that must never reach a stream: C0 but newline (and the pty's carriage return), DEL, C1, bidi
RAW = re.compile("[\x00-\x09\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# What rich itself writes on a colour terminal: SGR colour and style codes, nothing else here
RICH_SGR = re.compile(r"\x1b\[[0-9;]*m")


def test_printable_escapes_controls_c1_and_bidi_and_keeps_ordinary_text():
    assert printable("a\x1b[31mb") == "a\\x1b[31mb"
    assert printable("\x00\t\n\x7f\x9b") == "\\x00\\x09\\x0a\\x7f\\x9b"
    assert printable("\u202a\u202e\u2066\u2069") == "\\u202a\\u202e\\u2066\\u2069"
    assert printable(ORDINARY) == ORDINARY
    assert printable("x\ny\x1b", keep="\n") == "x\ny\\x1b"
    assert printable_document({"k\x1b": ["\u202e", 1.5, None], "n": 3}) == {"k\\x1b": ["\\u202e", 1.5, None], "n": 3}


def run_piped(*args: str, expect: int = 0) -> subprocess.CompletedProcess:
    """``python -m ctxembed ARGS`` with stdout and stderr on pipes, as bytes decoded strictly."""
    env = {k: v for k, v in os.environ.items() if k != "FORCE_COLOR"}
    env.update(CTXEMBED_CACHE_DIR=str(SHARED_CACHE), COLUMNS="400")  # long lines stay whole
    result = subprocess.run(
        [sys.executable, "-m", "ctxembed", *args], capture_output=True, env=env, timeout=120, stdin=subprocess.DEVNULL
    )
    assert result.returncode == expect, result.stderr.decode()
    result.stdout, result.stderr = result.stdout.decode(), result.stderr.decode()
    return result


# Bidi overrides and isolates are format characters (Unicode Cf): the tokenizer reads them as spaces, so
# views that show tokens (attend, explain) show "evil" as a word of its own and no override at all;
# views that also print the sentence as typed (compare, neighbors) show them escaped.
TOKEN_VIEWS = {"attend", "explain"}


def assert_harmless(text: str, *, escapes: bool = True, bidi: bool = True) -> None:
    assert not RAW.search(text), repr(RAW.search(text).group())
    if escapes:  # the hostile characters are shown, not dropped
        shown = ("\\x1b", "\\x07", "\\x9b", "\\x7f", *(("\\u202e", "\\u2066") if bidi else ()))
        assert all(escape in text for escape in shown), text


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A corpus without C0 bytes (they make a file binary) but with bidi overrides, markup and CJK."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    lines = [f"the \u202eevil\u2066 apple is the phone {MARKUP} {ORDINARY}", "apple is the phone", "the apple is"]
    path.write_text("\n".join(lines * 3) + "\n", encoding="utf-8")
    return path


COMMANDS = {
    "attend": ["attend", SENTENCE, "--vectors", TOY],
    "explain": ["attend", SENTENCE, "--vectors", TOY, "--explain"],
    "compare": ["compare", SENTENCE, "the apple is a phone", "--vectors", TOY],
    "neighbors": ["neighbors", SENTENCE, "--word", "apple", "-k", "3", "--vectors", TOY],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_views_in_a_pipe_show_hostile_input_as_escapes(command):
    result = run_piped(*COMMANDS[command])
    assert_harmless(result.stdout, bidi=command not in TOKEN_VIEWS)
    if command in TOKEN_VIEWS:
        assert "'evil'@" in result.stdout  # the word between the overrides is a token (skipped: no toy vector)
    assert_harmless(result.stderr, escapes=False)
    assert ORDINARY.split()[0] in result.stdout and "银行" in result.stdout and "🏦" in result.stdout


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_views_in_a_terminal_show_hostile_input_as_escapes(command):
    out = run_in_terminal(*COMMANDS[command], columns=400)
    assert "\\x1b" in out and ("\\u202e" in out or command in TOKEN_VIEWS)
    assert_harmless(
        RICH_SGR.sub("", out), bidi=command not in TOKEN_VIEWS
    )  # rich's own colour codes aside, no ESC at all
    assert "银行" in out


def test_compare_prints_markup_in_a_sentence_as_typed():
    in_terminal = RICH_SGR.sub("", run_in_terminal(*COMMANDS["compare"], columns=400))
    for out in (run_piped(*COMMANDS["compare"]).stdout, in_terminal):
        assert f"{MARKUP} {ORDINARY}" in out


def test_senses_examples_show_bidi_as_escapes(corpus):
    args = ["senses", "apple", str(corpus), "--vectors", TOY, "-k", "2"]
    for out in (run_piped(*args).stdout, RICH_SGR.sub("", run_in_terminal(*args, columns=400))):
        assert not RAW.search(out), repr(RAW.search(out).group())
        assert "\\u202eevil\\u2066" in out and "银行" in out


def test_json_keeps_the_text_exactly():
    doc = json.loads(run_piped(*COMMANDS["compare"], "--json").stdout)
    assert doc["sentences"][0] == SENTENCE


def test_an_error_quoting_a_hostile_file_name_shows_it_escaped(tmp_path):
    name = tmp_path / "x\x1b]0;pwned\x07\u202e.txt"
    result = run_piped("senses", "apple", str(name), "--vectors", TOY, expect=1)
    assert "\\x1b]0;pwned\\x07\\u202e.txt" in result.stderr
    assert_harmless(result.stderr, escapes=False)
    assert len([line for line in result.stderr.splitlines() if "error" in line]) == 1  # still one line


def test_an_error_quoting_a_hostile_output_folder_shows_it_escaped(tmp_path):
    folder = tmp_path / "d\x1b[2J\u202e"
    result = run_piped("attend", "apple is the phone", "--vectors", TOY, "--save", str(folder / "a.svg"), expect=1)
    assert "d\\x1b[2J\\u202e" in result.stderr and not RAW.search(result.stderr), result.stderr
