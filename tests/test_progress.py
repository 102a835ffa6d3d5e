"""Progress bars: drawn on stderr only when it is a terminal, never in a pipe."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

from ctxembed import progress

SCRIPT = """
import time
from ctxembed.progress import steps
with steps("evaluating ladder", total=3) as bar:
    for _ in range(3):
        time.sleep(0.15)
        bar.done()
print("done")
"""


def _stderr_of(script: str, *, terminal: bool) -> str:
    env = {k: v for k, v in os.environ.items() if k != "CTXEMBED_NO_PROGRESS"} | {"TERM": "xterm", "COLUMNS": "80"}
    if not terminal:
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
        return proc.stderr
    primary, secondary = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", script], stderr=secondary, stdout=subprocess.PIPE, env=env)
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait()
    os.close(primary)
    return b"".join(chunks).decode(errors="replace")


def test_a_bar_is_drawn_on_a_terminal():
    assert "evaluating ladder" in _stderr_of(SCRIPT, terminal=True)


def test_a_description_cannot_drive_the_terminal():
    # a file name with an escape sequence (here: set the window title) is shown escaped, not obeyed
    script = SCRIPT.replace('"evaluating ladder"', '"reading evil\\x1b]0;pwned\\x07.txt"')
    shown = _stderr_of(script, terminal=True)
    assert "\x1b]0;pwned" not in shown and "\x07" not in shown
    assert "reading evil\\x1b]0;pwned\\x07.txt" in shown


def test_nothing_is_drawn_in_a_pipe():
    assert _stderr_of(SCRIPT, terminal=False) == ""


def test_a_quick_step_shows_nothing_even_on_a_terminal():
    script = "from ctxembed.progress import slow\nwith slow('quick'):\n    pass\n"
    assert "quick" not in _stderr_of(script, terminal=True)


def test_a_slow_step_shows_a_spinner_on_a_terminal():
    script = "import time\nfrom ctxembed.progress import slow\nwith slow('a slow step'):\n    time.sleep(1.5)\n"
    assert "a slow step" in _stderr_of(script, terminal=True)


def test_the_read_offset_of_an_open_file_is_followed(tmp_path):
    path = tmp_path / "vectors.txt"
    path.write_bytes(b"x" * 1000)
    with open(path, "rb", buffering=0) as fh:
        fh.read(300)
        assert progress._read_offset(path.resolve()) in (300, None)  # None off Linux
        if sys.platform.startswith("linux"):
            assert progress._read_offset(path.resolve()) == 300
