"""Command-line input that cannot be used: non-UTF-8 argv bytes, a runaway stdin."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.cli_helpers import fails


def test_non_utf8_argv_bytes_are_one_usage_line():
    done = subprocess.run(
        [sys.executable, "-m", "ctxembed", "attend", os.fsdecode(b"the bank \xff"), "--json"],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == b""
    assert done.stderr == "ctxembed: error: argument 2 is not valid UTF-8: 'the bank \ufffd'\n".encode()


def test_a_runaway_stdin_is_refused_without_reading_it_all():
    message = fails(1, "attend", "-", input=b"the bank " * 600_000)  # 5.4 MB
    assert "stdin is longer than 4,194,304 bytes" in message


def test_numbers_out_of_an_options_limits_are_one_usage_line():
    """NaN, an integer too big for C, a float at float32's edge, absurd sizes: each is one usage line
    (option limits are declared with the settings)."""
    from tests.cli_helpers import invoke

    for args in (["--sif", "nan"], ["--seed", "99999999999999999999999"], ["--temperature", "3.4e38"],
                 ["--layers", "100000000"], ["--residual-scale", "1e308"]):  # fmt: skip
        result = invoke("attend", "the bank", *args)
        assert result.exit_code == 2, args
        assert result.stdout == "" and result.stderr.count("\n") == 1 and result.stderr.startswith("ctxembed: error:")


def test_closed_stdin_is_one_clean_line():
    for args, code in ((["batch", "-"], 1), (["attend"], 2)):
        done = subprocess.run([sys.executable, "-m", "ctxembed", *args], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=60, preexec_fn=lambda: os.close(0))  # fmt: skip
        assert done.returncode == code, done.stderr
        assert done.stderr.count(b"\n") == 1 and b"stdin is closed" in done.stderr


def test_a_word_position_of_5000_digits_is_one_usage_line():
    # int() refuses strings of over 4,300 digits: this was "internal error: ValueError", exit 1
    word = "#" + "1" * 5000
    for args in (
        ["compare", "the river bank", "the money bank", "--word", word],
        ["attend", "the river bank", "--word", word],
        ["neighbors", "the river bank", "--word", word],
        ["compare", "the river bank", "the money bank", "--word", "bank#" + "9" * 10],
    ):
        message = fails(2, *args)
        assert "digits; a position or occurrence takes at most 9 digits" in message and len(message) < 200
    message = fails(2, "batch", "--word", word, "--no-weights", input="the bank\n")  # once, not a record per line
    assert "the number after '#' has 5,000 digits" in message
