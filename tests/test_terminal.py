"""What a person sees in a real terminal: ctxembed run under a pseudo-terminal (``pty``), where
stdout is a tty and rich decides about colour itself, unlike CliRunner's pipe."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys

from tests.cli_helpers import SHARED_CACHE, TOY

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
GLYPH_CHARS = set("▁▂▃▄▅▆▇█")


def run_in_terminal(*args: str, env: dict | None = None, columns: int = 100) -> str:
    """Run ``python -m ctxembed ARGS`` with stdout on a pseudo-terminal; its output, ANSI codes kept."""
    main, child = pty.openpty()
    environment = {key: value for key, value in os.environ.items() if key not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS")}
    environment.update({"TERM": "xterm-256color", "CTXEMBED_CACHE_DIR": str(SHARED_CACHE), **(env or {})})
    import fcntl
    import struct
    import termios

    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-m", "ctxembed", *args],
        stdin=subprocess.DEVNULL,
        stdout=child,
        stderr=subprocess.PIPE,
        env=environment,
    )
    os.close(child)
    chunks = []
    while True:
        ready, _, _ = select.select([main], [], [], 60)
        if not ready:
            process.kill()
            raise AssertionError("no output for 60 s")
        try:
            data = os.read(main, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(main)
    assert process.wait(timeout=60) == 0, process.stderr.read().decode()
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_no_color_in_a_terminal_keeps_the_glyphs_and_says_so():
    out = run_in_terminal(
        "attend", "apple is the phone", "--vectors", TOY, "--preset", "textbook", env={"NO_COLOR": "1"}
    )
    assert not re.search(r"\x1b\[[0-9;]*[34]8;", out), "NO_COLOR must not colour anything"
    plain = ANSI.sub("", out)
    matrix = plain[plain.index("attention weights") : plain.index("per token")]
    assert GLYPH_CHARS & set(matrix), matrix
    assert "eighths of the largest weight" in matrix
    assert "shading" not in matrix  # the legend speaks of glyphs, not of a shading that is not there


def test_colour_in_a_terminal_shades_the_cells_and_says_so():
    out = run_in_terminal("attend", "apple is the phone", "--vectors", TOY, "--preset", "textbook")
    assert re.search(r"\x1b\[[0-9;]*48;", out), "a colour terminal shades the cells"
    plain = ANSI.sub("", out)
    assert "shading in eighths" in plain
