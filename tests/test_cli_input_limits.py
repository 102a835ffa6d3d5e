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
