"""Fitting attention matrices into a terminal: choose a layout from the tokens and the width, then
draw it as lines of (text, style name) segments. Pure: no rich console, no I/O, no attention maths.

Layouts, most detailed first (:func:`choose_layout` takes the first that fits):

- ``full``: token labels on both axes, every cell a number (``0.13``);
- ``numbers``: numbered columns, cells ``.13``, rows ``12 fisherman`` (or only numbers, with a legend);
- ``glyphs``: numbered columns (digits stacked vertically), cells one eighth-block glyph ``▁▂▃▄▅▆▇█``;
- a window: ``glyphs`` on as many tokens as fit, with a note saying which are shown.

Without colour every numeric cell also carries its glyph, so the heat stays visible. A masked cell is
``·``; a weight of exactly 0 is unshaded. No label and no number is ever cut: a layout fits or is not
chosen, and a label too long for any layout moves to the legend, which folds it over lines.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from rich.cells import cell_len

GLYPHS = "▁▂▃▄▅▆▇█"  # eighths of the largest weight shown
MASKED = "·"
HEAT_LEVELS = len(GLYPHS)
_FIRST_LEAD, _PANEL_LEAD = 1, 3  # spaces before the first panel of a band, and between panels


@dataclass(frozen=True)
class Layout:
    """How to draw ``count`` tokens from ``start``: the cells, the labels and the panels per band."""

    cells: str  # "full" | "numbers" | "glyphs"
    labels: str  # row labels: "tokens" | "numbered" (number and token) | "numbers" (legend below)
    start: int  # first shown token (index into the tokens)
    count: int  # tokens shown, as rows and as columns
    total: int  # tokens in the sentence
    column_widths: tuple[int, ...]  # per shown column, in terminal cells
    column_gap: int  # spaces between columns
    label_width: int
    panel_width: int  # one panel: its columns and gaps, at least its title
    per_band: int  # panels side by side
    with_glyph: bool  # numeric cells end in a glyph (no colour)

    @property
    def windowed(self) -> bool:
        return self.count < self.total

    @property
    def legend(self) -> bool:
        return self.labels == "numbers"

    def band_width(self, panels: int) -> int:
        """Width of a line holding ``panels`` panels side by side."""
        return self.label_width + _FIRST_LEAD + panels * self.panel_width + (panels - 1) * _PANEL_LEAD


def text_width(text: str) -> int:
    return cell_len(text)


def _pad(text: str, width: int, *, right: bool = False) -> str:
    space = " " * max(0, width - cell_len(text))
    return space + text if right else text + space


def _numeric_width(cells: str, with_glyph: bool) -> int:
    return (4 if cells == "full" else 3) + (1 if with_glyph else 0)  # "0.13" or ".13", then a glyph


def _candidate(
    cells: str,
    labels: str,
    tokens: Sequence[str],
    numbers: Sequence[int],
    start: int,
    count: int,
    titles: Sequence[str],
    with_glyph: bool,
    glyph_width: int = 1,
) -> Layout:
    shown = tokens[start : start + count]
    shown_numbers = numbers[start : start + count]
    digits = len(str(max(shown_numbers)))
    if cells == "full":
        widths = tuple(max(text_width(t), _numeric_width(cells, with_glyph)) for t in shown)
        gap = 1
    elif cells == "numbers":
        widths = (max(digits + with_glyph, _numeric_width(cells, with_glyph)),) * count
        gap = 1  # a space between cells: ".00▁.12▅" would run numbers and glyphs together
    else:
        widths, gap = (glyph_width,) * count, 0
    longest = max(text_width(t) for t in shown)
    label_width = {"tokens": longest, "numbered": digits + 1 + longest, "numbers": digits}[labels]
    cells_width = sum(widths) + gap * (count - 1)
    panel_width = max(cells_width, max(text_width(t) for t in titles))
    return Layout(cells, labels, start, count, len(tokens), widths, gap, label_width, panel_width, 1, with_glyph)


def choose_layout(
    tokens: Sequence[str],
    width: int,
    *,
    numbers: Sequence[int] | None = None,
    titles: Sequence[str] = ("",),
    colour: bool = False,
    start: int = 0,
    limit: int | None = None,
) -> Layout:
    """The most detailed layout of ``len(titles)`` panels of ``tokens`` x ``tokens`` that fits ``width``.

    ``numbers`` label the columns (default 0..n-1); without ``colour`` numeric cells carry a glyph.
    ``start`` and ``limit`` ask for a window (the first shown token, and at most this many tokens).
    Several panels prefer the most detailed layout where all of them fit side by side."""
    n = len(tokens)
    if n == 0:
        raise ValueError("no tokens to lay out")
    numbers = list(range(n)) if numbers is None else list(numbers)
    start = min(max(0, start), n - 1)
    count = n - start if limit is None else max(1, min(limit, n - start))
    with_glyph = not colour
    panels = len(titles)
    options = [
        ("full", "tokens", 1),
        ("numbers", "numbered", 1),
        ("numbers", "numbers", 1),
        ("glyphs", "numbered", 2),
        ("glyphs", "numbers", 2),
        ("glyphs", "numbered", 1),
        ("glyphs", "numbers", 1),
    ]
    if count < n:  # a window needs numbered columns to say where it is
        options = options[1:]
    fitting = []
    for cells, labels, glyph_width in options:
        layout = _candidate(cells, labels, tokens, numbers, start, count, titles, with_glyph, glyph_width)
        if layout.band_width(1) <= width:
            per_band = min(panels, 1 + (width - layout.band_width(1)) // (layout.panel_width + _PANEL_LEAD))
            fitting.append(_with(layout, per_band=per_band))
    if fitting:
        together = [layout for layout in fitting if layout.per_band == panels]
        return (together or fitting)[0]
    # a window: one-cell glyphs, numbers as row labels, as many tokens as the width allows
    digits = len(str(max(numbers[start : start + count])))
    fit = max(1, min(count, width - digits - _FIRST_LEAD))
    return _candidate("glyphs", "numbers", tokens, numbers, start, fit, titles, with_glyph, 1)


def _with(layout: Layout, **changes) -> Layout:
    return replace(layout, **changes)


# ------------------------------------------------------------------------------ drawing
Segment = tuple[str, str]  # (text, style name): "label", "header", "title", "masked", "zero", "heat1".."heat8"
Line = list[Segment]


def heat_level(value: float, top: float) -> int:
    """1..8 for a positive value (its share of ``top`` in eighths, rounded up), 0 for zero."""
    if not value > 0 or not top > 0:
        return 0
    return min(HEAT_LEVELS, max(1, math.ceil(HEAT_LEVELS * value / top - 1e-9)))


def shading_key(mode: str | None, scale: str) -> str:
    """How the matrix's shading reads, in eighths of ``scale`` whatever the colours (16 colours give two
    eighths a colour: light grey, cyan, bright blue, and blue for the top eighth)."""
    if mode == "16":
        colours = "16 colours: light grey, cyan, bright blue, blue"
        return f"shading in eighths of {scale} ({colours}), the lowest eighth unshaded"
    return f"shading in eighths of {scale}, the lowest eighth unshaded"


def cell_text(value: float, masked: bool, cells: str, level: int, with_glyph: bool) -> str:
    """The text of one cell (without padding)."""
    if masked:
        return MASKED
    if cells == "glyphs":
        return GLYPHS[level - 1] if level else " "
    if value == 0:
        number = "0"
    elif cells == "full":
        number = f"{value:.2f}"
    else:
        number = "1.0" if value >= 0.995 else f"{value:.2f}".lstrip("0")
    if with_glyph:
        number += GLYPHS[level - 1] if level else " "
    return number


def draw(
    layout: Layout,
    tokens: Sequence[str],
    numbers: Sequence[int],
    panels: Sequence[tuple[str, np.ndarray, np.ndarray | None]],
    top: float,
) -> list[Line]:
    """Lines of segments for ``panels`` = (title, values (T, T), masked (T, T) bool or None), banded
    ``layout.per_band`` at a time. ``top`` is the value of a full glyph."""
    lines: list[Line] = []
    stop = layout.start + layout.count
    shown = range(layout.start, stop)
    for band_start in range(0, len(panels), layout.per_band):
        band = panels[band_start : band_start + layout.per_band]
        if band_start:
            lines.append([])
        if any(title for title, _, _ in band):
            line: Line = [(" " * layout.label_width, "label")]
            for index, (title, _, _) in enumerate(band):
                line.append((" " * (_PANEL_LEAD if index else _FIRST_LEAD), ""))
                line.append((_pad(title, layout.panel_width), "title"))
            lines.append(line)
        for header in _headers(layout, tokens, numbers):
            line = [(" " * layout.label_width, "label")]
            for index in range(len(band)):
                line.append((" " * (_PANEL_LEAD if index else _FIRST_LEAD), ""))
                line.append((_pad(header, layout.panel_width), "header"))
            lines.append(line)
        digits = len(str(max(numbers[layout.start : stop])))
        for i in shown:
            label = {
                "tokens": tokens[i],
                "numbered": f"{numbers[i]:>{digits}} {tokens[i]}",
                "numbers": f"{numbers[i]:>{digits}}",
            }[layout.labels]
            line = [(_pad(label, layout.label_width), "label")]
            for index, (_, values, masked) in enumerate(band):
                line.append((" " * (_PANEL_LEAD if index else _FIRST_LEAD), ""))
                used = 0
                for column, j in enumerate(shown):
                    if column:
                        line.append((" " * layout.column_gap, ""))
                        used += layout.column_gap
                    is_masked = bool(masked[i, j]) if masked is not None else False
                    value = float(values[i, j])
                    level = 0 if is_masked else heat_level(value, top)
                    text = cell_text(value, is_masked, layout.cells, level, layout.with_glyph)
                    style = "masked" if is_masked else (f"heat{level}" if level else "zero")
                    width = layout.column_widths[column]
                    line.append((_pad(text, width, right=layout.cells != "glyphs"), style))
                    used += width
                if used < layout.panel_width:
                    line.append((" " * (layout.panel_width - used), ""))
            lines.append(line)
    return [_rstrip(line) for line in lines]


def _headers(layout: Layout, tokens: Sequence[str], numbers: Sequence[int]) -> list[str]:
    """Column header lines of one panel (not padded to the panel's width)."""
    shown = range(layout.start, layout.start + layout.count)
    gap = " " * layout.column_gap
    if layout.cells == "full":
        widths = zip(shown, layout.column_widths, strict=True)
        return [gap.join(_pad(tokens[j], w, right=True) for j, w in widths)]
    if layout.cells == "numbers":
        return [
            gap.join(_pad(str(numbers[j]), w, right=True) for j, w in zip(shown, layout.column_widths, strict=True))
        ]
    digits = len(str(max(numbers[j] for j in shown)))
    texts = [str(numbers[j]).rjust(digits) for j in shown]
    return [
        gap.join(text[row] + " " * (w - 1) for text, w in zip(texts, layout.column_widths, strict=True))
        for row in range(digits)
    ]


def _rstrip(line: Line) -> Line:
    """Drop trailing blanks, so lines end with their last character."""
    while line and not line[-1][0].strip():
        line = line[:-1]
    if line:
        text, style = line[-1]
        line = [*line[:-1], (text.rstrip(), style)]
    return line


def legend_lines(tokens: Sequence[str], numbers: Sequence[int], width: int, prefix: str = "columns ") -> list[str]:
    """``number token`` entries wrapped to ``width``; an entry wider than a line is folded, never cut."""
    indent = " " * len(prefix)
    room = max(1, width - len(prefix))
    lines, current = [], ""
    for number, token in zip(numbers, tokens, strict=True):
        entry = f"{number} {token}"
        pieces = _fold(entry, room)
        for piece in pieces:
            candidate = f"{current}  {piece}" if current else piece
            if text_width(candidate) <= room:
                current = candidate
            else:
                lines.append(current)
                current = piece
    if current:
        lines.append(current)
    return [(prefix if k == 0 else indent) + line for k, line in enumerate(lines)]


def _fold(text: str, width: int) -> list[str]:
    pieces, current = [], ""
    for char in text:
        if text_width(current + char) > width:
            pieces.append(current)
            current = ""
        current += char
    return [*pieces, current] if current else pieces


def wrap_parts(prefix: str, parts: Sequence[str], width: int, separator: str = " | ") -> list[str]:
    """``prefix`` then ``parts`` joined by ``separator``, breaking lines only between parts (a part
    wider than a line is folded)."""
    indent = " " * len(prefix)
    room = max(1, width - len(prefix))
    lines, current = [], ""
    for part in parts:
        for piece in _fold(part, room):
            candidate = f"{current}{separator}{piece}" if current else piece
            if text_width(candidate) + len(separator.rstrip()) <= room:
                current = candidate
            else:
                lines.append(current + separator.rstrip())
                current = piece
    lines.append(current)
    return [(prefix if k == 0 else indent) + line for k, line in enumerate(lines)]


# ------------------------------------------------------------------------------ the model view
def _half_cell(top: str, bottom: str) -> tuple[str, str]:
    """One terminal cell holding two map cells, the upper and the lower: each a heat level ("0".."8"),
    "m" (masked) or "" (below the map's last row: the terminal's own background). Returns
    (character, style "cells:FG:BG"). A map is painted whole, white to dark blue, so it reads as a
    picture on a dark terminal as on a light one."""
    return "▀", f"cells:{top}:{bottom}"


def _level(value: float, masked: bool) -> str:
    """A map cell's shade for :func:`_half_cell`, on a scale of 0 to 1 (rows of weights sum to 1)."""
    return "m" if masked else str(heat_level(value, 1.0))


def model_lines(
    maps: np.ndarray,
    rows: Sequence[str],
    columns: Sequence[str],
    width: int,
    *,
    masked: np.ndarray | None = None,
    colour: bool = True,
) -> list[list[tuple[str, str]]]:
    """The model view as lines of (text, style) segments: maps (R, C, T, T), one small map per layer
    (row) and head (column), as many side by side as ``width`` allows. In colour each terminal cell
    shows two rows of a map (half blocks), shaded 0 to 1; without colour each map cell is a glyph
    (eighths of 1), ``·`` masked."""
    n_rows, n_cols, T = maps.shape[0], maps.shape[1], maps.shape[-1]
    label_width = max(text_width(r) for r in rows) + 1
    # one form for every label of a view ("head 9" beside "h10" reads as two kinds of thing)
    short = any(text_width(c) > T for c in columns)
    shown_columns = [c.replace("head ", "h") if short else c for c in columns]
    map_width = max(T, max(text_width(c) for c in shown_columns))
    per_band = max(1, (width - label_width) // (map_width + 2))
    blocked = np.zeros((T, T), dtype=bool) if masked is None else np.asarray(masked, dtype=bool)
    lines: list[list[tuple[str, str]]] = []
    for r in range(n_rows):
        for first in range(0, n_cols, per_band):
            band = range(first, min(n_cols, first + per_band))
            if n_cols > 1:
                header = [(" " * label_width, "")]
                for c in band:
                    header.append(("  " + _pad(shown_columns[c], map_width), "header"))
                lines.append(header)
            height = (T + 1) // 2 if colour else T
            for line in range(height):
                label = rows[r] if line == 0 and first == 0 else ""
                segments = [(_pad(label, label_width), "label")]
                for c in band:
                    segments.append(("  ", ""))
                    for j in range(T):
                        if colour:
                            i = 2 * line
                            top = _level(float(maps[r, c, i, j]), bool(blocked[i, j]))
                            bottom = "" if i + 1 >= T else _level(float(maps[r, c, i + 1, j]), bool(blocked[i + 1, j]))
                            segments.append(_half_cell(top, bottom))
                        else:
                            value, is_masked = float(maps[r, c, line, j]), bool(blocked[line, j])
                            level = heat_level(value, 1.0)
                            segments.append((MASKED if is_masked else GLYPHS[level - 1] if level else " ", ""))
                    segments.append((" " * (map_width - T), ""))
                lines.append(segments)
        lines.append([])
    return lines
