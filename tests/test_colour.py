"""Terminal colour: every shaded cell's text reaches WCAG contrast 4.5:1 in each colour mode, computed
from the escape sequences ctxembed writes to a real pty; each mode's ramp is ordered by luminance;
--color never writes no escape sequence; --scale-max shades on an absolute scale; pipes are 80 columns."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys

import pytest
from rich.color import EIGHT_BIT_PALETTE

from ctxembed.views.palette import MODES, VGA_16, XTERM_16, contrast, heat_colour, luminance, rgb_of
from tests.cli_helpers import SHARED_CACHE, TOY, succeeds

SENTENCE = "we walked along the bank to the river bank and sat down by the water"
SGR = re.compile(r"\x1b\[([0-9;]*)m")
TERMS = {  # colour mode -> environment that makes rich pick it
    "16": {"TERM": "xterm", "COLORTERM": ""},
    "256": {"TERM": "screen-256color", "COLORTERM": ""},
    "truecolor": {"TERM": "xterm-256color", "COLORTERM": "truecolor"},
}


def run_in_pty(args: list[str], env: dict[str, str]) -> str:
    """Run ``ctxembed ARGS`` with stdout and stderr on a pseudo-terminal; what it wrote there."""
    leader, follower = pty.openpty()
    environment = {**os.environ, "CTXEMBED_CACHE_DIR": str(SHARED_CACHE), "COLUMNS": "120", **env}
    environment.pop("NO_COLOR", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "ctxembed", *args], stdout=follower, stderr=follower, env=environment
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert process.wait(timeout=120) == 0
    return b"".join(chunks).decode()


def _colour(params: list[int], palette: tuple) -> tuple[tuple | None, tuple | None, list[int]]:
    """(fg, bg) set by one SGR sequence's parameters (None: unchanged), and whether it resets."""
    fg = bg = None
    resets = []
    i = 0
    while i < len(params):
        p = params[i]
        if p in (38, 48) and params[i + 1] == 5:
            rgb = tuple(EIGHT_BIT_PALETTE[params[i + 2]]) if params[i + 2] >= 16 else palette[params[i + 2]]
            fg, bg = (rgb, bg) if p == 38 else (fg, rgb)
            i += 3
            continue
        if p in (38, 48) and params[i + 1] == 2:
            rgb = tuple(params[i + 2 : i + 5])
            fg, bg = (rgb, bg) if p == 38 else (fg, rgb)
            i += 5
            continue
        if 30 <= p <= 37 or 90 <= p <= 97:
            fg = palette[p - 30 if p < 90 else p - 90 + 8]
        elif 40 <= p <= 47 or 100 <= p <= 107:
            bg = palette[p - 40 if p < 100 else p - 100 + 8]
        elif p in (0, 39, 49):
            resets.append(p)
        i += 1
    return fg, bg, resets


def shaded_cells(output: str, palette: tuple) -> list[tuple[str, tuple, tuple]]:
    """(text, foreground, background) of every piece of text written on a set background."""
    cells, fg, bg, position = [], None, None, 0
    for match in SGR.finditer(output):
        text = output[position : match.start()]
        if bg is not None and text.strip():
            cells.append((text, fg, bg))
        params = [int(p) for p in match.group(1).split(";") if p] or [0]
        new_fg, new_bg, resets = _colour(params, palette)
        if 0 in resets:
            fg = bg = None
        if 39 in resets:
            fg = None
        if 49 in resets:
            bg = None
        fg, bg = new_fg or fg, new_bg or bg
        position = match.end()
    return cells


@pytest.mark.parametrize("mode", MODES)
def test_attend_cells_reach_contrast_4_5_in_a_pty(mode):
    output = run_in_pty(["attend", SENTENCE], TERMS[mode])
    palettes = (XTERM_16, VGA_16) if mode == "16" else (XTERM_16,)
    for palette in palettes:
        cells = shaded_cells(output, palette)
        assert len(cells) > 20, output  # the matrix and the cosine column are shaded
        worst = min(contrast(fg, bg) for _, fg, bg in cells if fg is not None)
        assert all(fg is not None for _, fg, _ in cells), "a shaded cell left its text in the terminal's colour"
        assert worst >= 4.5, (mode, worst)
    if mode == "16":
        assert "\x1b[38;" not in output and "\x1b[48;" not in output  # 16 colours only
    if mode == "256":
        assert ";2;" not in output  # no 24-bit colour


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("side", [0, 1, -1])
def test_each_ramp_darkens_monotonically(mode, side):
    palettes = (XTERM_16, VGA_16) if mode == "16" else (XTERM_16,)
    for palette in palettes:
        lights = [luminance(rgb_of(heat_colour(level, mode, side), palette)) for level in range(2, 9)]
        assert all(a >= b for a, b in zip(lights, lights[1:], strict=False)), (mode, side, lights)
        assert lights[0] > lights[-1]


def test_color_never_writes_no_escape_sequence_even_on_a_terminal():
    output = run_in_pty(["attend", SENTENCE, "--color", "never"], TERMS["truecolor"])
    assert "\x1b" not in output
    assert "▁▂▃▄▅▆▇█" in output  # the heat is still there, as glyphs


def test_color_always_colours_a_pipe_and_auto_does_not():
    assert (
        "\x1b["
        in succeeds("attend", "apple is a phone", "--vectors", TOY, "--preset", "textbook", "--color", "always").stdout
    )
    assert "\x1b" not in succeeds("attend", "apple is a phone", "--vectors", TOY, "--preset", "textbook").stdout


def test_no_color_still_drops_colour_on_a_terminal():
    output = run_in_pty(["attend", SENTENCE], {**TERMS["truecolor"], "NO_COLOR": "1"})
    assert "\x1b[48;" not in output and "\x1b[4" not in output.replace("\x1b[4m", "")


def test_scale_max_shades_on_an_absolute_scale():
    """Uniform attention (softmax over 5 equal scores) is 0.25 a cell: full with the default relative
    scale, a quarter (level 2 of 8) with --scale-max 1."""
    args = [
        "attend",
        "apple apple apple apple apple",
        "--vectors",
        TOY,
        "--preset",
        "textbook",
        "--color",
        "never",
        "--max-display",
        "5",
    ]
    relative = succeeds(*args, env={"COLUMNS": "60"}).stdout
    absolute = succeeds(*args, "--scale-max", "1", env={"COLUMNS": "60"}).stdout

    def cells(output: str) -> set[str]:
        rows = [line.split()[1:] for line in output.splitlines() if re.match(r"^apple(#\d)? +0", line)]
        assert len(rows) == 5, output
        return {cell for row in rows for cell in row}

    assert cells(relative) == {"0.20█"}  # uniform weights drawn full: relative to the largest
    assert cells(absolute) == {"0.20▂"}  # 0.2 of 1: the second eighth
    assert "eighths of 1 (--scale-max)" in absolute


def test_a_pipe_without_columns_is_80_wide():
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["CTXEMBED_CACHE_DIR"] = str(SHARED_CACHE)
    out = subprocess.run(
        [sys.executable, "-m", "ctxembed", "attend", SENTENCE + " " + SENTENCE],
        env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=True,
    ).stdout  # fmt: skip
    widths = [len(line) for line in out.splitlines()]
    assert max(widths) <= 80 and max(widths) > 60
