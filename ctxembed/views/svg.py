"""Figures as SVG, written by hand: vector graphics for papers, with no dependency.

Every number cell carries a ``<title>`` (its exact value, shown on hover by browsers) and
``data-label``/``data-value`` attributes (read by the HTML page's script).
"""

from __future__ import annotations

import base64
import math
import re
import struct
import zlib
from xml.sax.saxutils import escape, quoteattr

import numpy as np

from ctxembed.views.figures import (
    DIVERGING,
    MASKED_FILL,
    MASKED_INK,
    SEQUENTIAL,
    Bars,
    Curves,
    Figure,
    Grid,
    Heatmap,
    Points,
    bar_colour,
    cell_number,
    colour,
    ink_on,
    nice_ticks,
    readout,
)

FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
CELL = 30  # heatmap cell size (px)
CHAR = 0.62  # width of a character, as a share of the font size (a safe upper estimate)
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]


def hex_colour(rgb: tuple[int, int, int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def text_width(text: str, size: float) -> float:
    return len(text) * size * CHAR


def _text(x, y, text, size=12, anchor="start", weight="normal", fill="#222", extra="") -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" font-weight="{weight}" '
        f'fill="{fill}"{extra}>{escape(text)}</text>'
    )


def exact_text(value: float) -> str:
    """A number as the JSON documents write it: the shortest decimal that reads back as the same float32."""
    return str(np.float32(value))


def _share(value: float, low: float, high: float) -> float:
    return 0.0 if high <= low else (value - low) / (high - low)


# ------------------------------------------------------------------------------ panels: (width, height, svg)
# Size budget: a heatmap of more cells than this is drawn as one embedded image of its cells (no
# per-cell number, hover title or data attributes), so a 512-token attention map stays a few MB
# instead of 90 MB. Labels are kept. See docs/robustness.md.
DETAILED_CELLS = 64 * 64


def _heatmap(panel: Heatmap) -> tuple[float, float, str]:
    n_rows, n_cols = len(panel.rows), len(panel.columns)
    size = 11
    y_title = 16 if panel.y_label else 0  # room for the rotated y-axis title
    left = y_title + max(text_width(r, size) for r in panel.rows) + 8
    top_labels = max(text_width(c, size) for c in panel.columns) * math.sin(math.radians(55)) + 10
    top = 22 + top_labels
    grid_w, grid_h = n_cols * CELL, n_rows * CELL
    parts = [_text(0, 14, panel.title, 13, weight="bold")]
    for j, label in enumerate(panel.columns):
        x, y = left + j * CELL + CELL / 2, top - 6
        parts.append(_text(x, y, label, size, extra=f' transform="rotate(-55 {x:.1f} {y:.1f})"'))
    for i, label in enumerate(panel.rows):
        parts.append(_text(left - 6, top + i * CELL + CELL / 2 + 4, label, size, anchor="end"))
    if n_rows * n_cols > DETAILED_CELLS:
        parts.append(_cells_image(panel, left, top))
    for i in range(n_rows) if n_rows * n_cols <= DETAILED_CELLS else ():
        for j in range(n_cols):
            x, y = left + j * CELL, top + i * CELL
            value = float(panel.values[i, j])
            masked = panel.masked is not None and bool(panel.masked[i, j])
            where = (
                f"{panel.rows[i]} and {panel.columns[j]}"
                if panel.symmetric
                else f"{panel.rows[i]} → {panel.columns[j]}"
            )
            if masked:
                fill, ink, shown, said = MASKED_FILL, hex_colour(MASKED_INK), "·", "masked"
            else:
                fill = colour(_share(value, panel.low, panel.high), panel.diverging)
                ink, shown, said = ink_on(fill), cell_number(value), readout(value)
            attributes = (
                f' class="cell" data-row="{i}" data-col="{j}" data-label={quoteattr(f"{panel.label}, {where}")}'
                f" data-value={quoteattr(said)}"
            )
            parts.append(
                f'<g{attributes}><rect x="{x:.1f}" y="{y:.1f}" width="{CELL}" height="{CELL}" '
                f'fill="{hex_colour(fill)}" stroke="#fff" stroke-width="1"/>'
                f"<title>{escape(panel.label)}, {escape(where)}: {escape(said)}</title>"
                + _text(x + CELL / 2, y + CELL / 2 + 3.5, shown, 9, anchor="middle", fill=ink)
                + "</g>"
            )
    bottom = top + grid_h + 6
    if panel.x_label:
        parts.append(_text(left + grid_w / 2, bottom + 11, panel.x_label, 11, anchor="middle", fill="#444"))
        bottom += 16
    if panel.y_label:
        x, y = 11, top + grid_h / 2
        parts.append(
            _text(x, y, panel.y_label, 11, anchor="middle", fill="#444", extra=f' transform="rotate(-90 {x} {y:.1f})"')
        )
    key, key_height = _colour_key(panel, left, bottom + 4)
    parts.append(key)
    width = max(left + grid_w + 4, text_width(panel.title, 13) + 4, left + 8 * 14 + 90)
    return width, bottom + 4 + key_height, "".join(parts)


def _colour_key(panel: Heatmap, left: float, top: float) -> tuple[str, float]:
    """A strip of the scale from ``panel.low`` to ``panel.high``, labelled at both ends (and "· masked")."""
    steps, step = 8, 14
    parts = [_text(left, top + 9, readout(panel.low), 9, anchor="end", fill="#444", extra=' dx="-4"')]
    for k in range(steps):
        fill = hex_colour(colour((k + 0.5) / steps, panel.diverging))
        parts.append(f'<rect x="{left + k * step:.1f}" y="{top:.1f}" width="{step}" height="10" fill="{fill}"/>')
    end = left + steps * step
    parts.append(_text(end + 4, top + 9, readout(panel.high), 9, fill="#444"))
    if panel.masked is not None and panel.masked.any():
        x = end + 8 + text_width(readout(panel.high), 9)
        parts.append(f'<rect x="{x:.1f}" y="{top:.1f}" width="{step}" height="10" fill="{hex_colour(MASKED_FILL)}"/>')
        parts.append(_text(x + step + 4, top + 9, "masked", 9, fill="#444"))
    return "".join(parts), 14


def _cells_image(panel: Heatmap, left: float, top: float) -> str:
    """The cells of a large heatmap as one PNG (a pixel a cell, scaled up without smoothing)."""
    rgb = colours(panel.values, panel.low, panel.high, panel.diverging)  # (rows, columns, 3) uint8
    if panel.masked is not None:
        rgb[np.asarray(panel.masked, dtype=bool)] = MASKED_FILL
    data = base64.b64encode(png_bytes(rgb)).decode("ascii")
    n_rows, n_cols = rgb.shape[:2]
    return (
        f'<image x="{left:.1f}" y="{top:.1f}" width="{n_cols * CELL}" height="{n_rows * CELL}" '
        f'preserveAspectRatio="none" style="image-rendering:pixelated" href="data:image/png;base64,{data}">'
        f"<title>{escape(panel.label)}: {n_rows} x {n_cols} cells, drawn without per-cell values "
        f"past {DETAILED_CELLS:,} cells</title></image>"
    )


THUMB = 120  # the model view's map size (px), for any sentence length: 5 tokens or 50 fit the same grid
GRID_WIDTH = 1150  # px the model view's columns aim to fit: the HTML page's width


def _grid(panel: Grid) -> tuple[float, float, str]:
    """The model view: one small map per (row, column), each an image of its cells, labelled by layer
    and head; hovering a map names it."""
    n_rows, n_cols, T = panel.maps.shape[0], panel.maps.shape[1], panel.maps.shape[-1]
    gap = 10
    left = max(text_width(r, 11) for r in panel.rows) + 10
    # as large as THUMB, smaller when the columns would pass GRID_WIDTH (12 heads fit a page), never
    # under 2 pixels a cell; whole pixels per cell, so every cell is drawn the same size
    side = min(THUMB, max(2 * T, (GRID_WIDTH - left) / n_cols - gap))
    cell = max(1, int(side // T))
    side = cell * T
    # the tokens label the first map of each row (queries, left) and the first row's first map (keys,
    # above) when a cell is tall enough for a line of text
    size = min(9, cell - 1)
    labelled = size >= 6 and bool(panel.tokens)
    room = max(text_width(t, size) for t in panel.tokens) + 6 if labelled else 0
    left += room
    top = (24 if panel.title else 4) + (16 if n_cols > 1 else 0) + room
    parts = [_text(0, 14, panel.title, 13, weight="bold")] if panel.title else []
    if labelled:
        for k, token in enumerate(panel.tokens):
            x = left + k * cell + cell / 2 + size / 3
            parts.append(
                f'<text x="{x:.1f}" y="{top - 4}" font-size="{size}" fill="#444" '
                f'transform="rotate(-90 {x:.1f} {top - 4})">{escape(token)}</text>'
            )
    for c, label in enumerate(panel.columns if n_cols > 1 else ()):
        parts.append(_text(left + c * (side + gap) + side / 2, top - 6 - room, label, 11, anchor="middle", fill="#444"))
    for r, row_label in enumerate(panel.rows):
        y = top + r * (side + gap)
        parts.append(_text(left - 8 - room, y + side / 2 + 4, row_label, 11, anchor="end", fill="#444"))
        for k, token in enumerate(panel.tokens if labelled else ()):
            parts.append(_text(left - 3, y + k * cell + cell / 2 + size / 3, token, size, anchor="end", fill="#444"))
        for c, column_label in enumerate(panel.columns):
            rgb = colours(panel.maps[r, c], panel.low, panel.high, False)  # (T, T, 3)
            if panel.masked is not None:
                rgb[np.asarray(panel.masked, dtype=bool)] = MASKED_FILL
            data = base64.b64encode(png_bytes(rgb)).decode("ascii")
            x = left + c * (side + gap)
            name = f"{row_label}, {column_label}"
            parts.append(
                f'<g class="cell" data-label={quoteattr(name)} data-value={quoteattr(f"{T} x {T}")}>'
                f'<rect x="{x - 0.5:.1f}" y="{y - 0.5:.1f}" width="{side + 1}" height="{side + 1}" fill="none" '
                f'stroke="#bbb"/><image x="{x}" y="{y}" width="{side}" height="{side}" preserveAspectRatio="none" '
                f'style="image-rendering:pixelated" href="data:image/png;base64,{data}"/>'
                f"<title>{escape(name)}</title></g>"
            )
    bottom = top + n_rows * (side + gap)
    key, key_height = _colour_key(
        Heatmap("", [], [], np.zeros((0, 0)), low=panel.low, high=panel.high, masked=panel.masked), left, bottom
    )
    parts.append(key)
    width = max(left + n_cols * (side + gap), text_width(panel.title, 13) + 4, left + 8 * 14 + 90)
    return width, bottom + key_height + 4, "".join(parts)


def colours(values: np.ndarray, low: float, high: float, diverging: bool) -> np.ndarray:
    """(..., 3) uint8: :func:`colour` of every value's share of [low, high], at once."""
    stops = DIVERGING if diverging else SEQUENTIAL
    span = high - low
    share = np.zeros(values.shape) if span <= 0 else np.clip((np.asarray(values, np.float64) - low) / span, 0, 1)
    share = np.nan_to_num(share)
    positions = [p for p, _ in stops]
    channels = [np.interp(share, positions, [c[k] for _, c in stops]) for k in range(3)]
    return np.rint(np.stack(channels, axis=-1)).astype(np.uint8)


def png_bytes(rgb: np.ndarray) -> bytes:
    """A PNG file of an (h, w, 3) uint8 image: the standard library's zlib and CRC-32 suffice."""
    h, w = rgb.shape[:2]
    raw = np.concatenate([np.zeros((h, 1), np.uint8), rgb.reshape(h, w * 3)], axis=1)  # filter 0 per row

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw.tobytes(), 6))
        + chunk(b"IEND", b"")
    )


def _bars(panel: Bars) -> tuple[float, float, str]:
    size, row, bar = 11, 20, 160
    left = max([text_width(label, size) for label in panel.labels] + [10]) + 8
    width = max(left + bar + 60, text_width(panel.title, 13) + 4)
    parts = [_text(0, 14, panel.title, 13, weight="bold")]
    top = 24
    for i, (label, value) in enumerate(zip(panel.labels, panel.values, strict=True)):
        y = top + i * row
        share = float(np.clip(_share(value, panel.low, panel.high), 0, 1))
        parts.append(
            f'<g class="cell" data-row="{i}" data-label={quoteattr(f"{panel.label}: {label}")} '
            f"data-value={quoteattr(readout(value))}>"
            + _text(left - 6, y + 14, label, size, anchor="end")
            + f'<rect x="{left:.1f}" y="{y + 3:.1f}" width="{bar * share:.1f}" height="{row - 6}" '
            f'fill="{hex_colour(bar_colour(share))}"/>'
            + _text(left + bar * share + 4, y + 14, readout(value), 10)
            + f"<title>{escape(label)}: {readout(value)}</title></g>"
        )
    height = top + len(panel.labels) * row + 4
    if panel.x_label:
        title = f"{panel.x_label} ({readout(panel.low)} to {readout(panel.high)})"
        parts.append(_text(left + bar / 2, height + 12, title, 11, anchor="middle", fill="#444"))
        height += 18
    return width, height, "".join(parts)


def _axes(x_values, y_values, width, height, left, top, *, pad: float = 0.0):
    """A frame, round ticks printed alike on each axis, and ``place(x, y)`` -> pixels; ``pad`` widens
    the data's range by that share on each side, so marks drawn at the extremes stay inside."""
    x_low, x_high = float(min(x_values)), float(max(x_values))
    y_low, y_high = float(min(y_values)), float(max(y_values))
    x_high = x_high if x_high > x_low else x_low + 1
    y_high = y_high if y_high > y_low else y_low + 1
    x_pad, y_pad = pad * (x_high - x_low), pad * (y_high - y_low)
    x_low, x_high, y_low, y_high = x_low - x_pad, x_high + x_pad, y_low - y_pad, y_high + y_pad

    def place(x, y):
        return left + (x - x_low) / (x_high - x_low) * width, top + height - (y - y_low) / (y_high - y_low) * height

    parts = [f'<rect x="{left}" y="{top}" width="{width}" height="{height}" fill="none" stroke="#999"/>']
    ticks, decimals = nice_ticks(x_low, x_high)
    for tick in ticks:
        px, _ = place(tick, y_low)
        parts.append(f'<line x1="{px:.1f}" y1="{top + height}" x2="{px:.1f}" y2="{top + height + 4}" stroke="#999"/>')
        parts.append(_text(px, top + height + 15, f"{tick:.{decimals}f}", 10, anchor="middle"))
    ticks, decimals = nice_ticks(y_low, y_high)
    for tick in ticks:
        _, py = place(x_low, tick)
        parts.append(f'<line x1="{left - 4}" y1="{py:.1f}" x2="{left}" y2="{py:.1f}" stroke="#999"/>')
        parts.append(_text(left - 6, py + 3.5, f"{tick:.{decimals}f}", 10, anchor="end"))
    return place, "".join(parts)


def _boxes_overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _curves(panel: Curves) -> tuple[float, float, str]:
    left, top, plot_w, plot_h = 50, 24, 320, 200
    xs = [x for _, s, _ in panel.series for x in s]
    ys = [y for _, _, s in panel.series for y in s]
    place, frame = _axes(xs, ys, plot_w, plot_h, left, top)
    parts = [_text(0, 14, panel.title, 13, weight="bold"), frame]
    for k, (name, sx, sy) in enumerate(panel.series):
        points = " ".join("{:.1f},{:.1f}".format(*place(x, y)) for x, y in zip(sx, sy, strict=True))
        parts.append(f'<polyline points="{points}" fill="none" stroke="{PALETTE[k % 10]}" stroke-width="1.5"/>')
        parts.append(_text(left + plot_w + 8, top + 12 + 14 * k, name, 10, fill=PALETTE[k % 10]))
    parts.append(_text(left + plot_w / 2, top + plot_h + 28, panel.x_label, 11, anchor="middle"))
    parts.append(_text(0, top + plot_h / 2, panel.y_label, 11))
    names = max([text_width(n, 10) for n, _, _ in panel.series] + [0])
    return left + plot_w + 12 + names, top + plot_h + 34, "".join(parts)


def _points(panel: Points) -> tuple[float, float, str]:
    left, top, plot_w, plot_h = 62, 24, 360, 260
    place, frame = _axes(panel.x, panel.y, plot_w, plot_h, left, top, pad=0.05)
    groups = sorted(set(panel.groups or [])) if panel.groups else []
    parts = [_text(0, 14, panel.title, 13, weight="bold"), frame]
    placed = []  # boxes of the labels drawn so far: a label that would overlap one is left out
    for i, (x, y, label) in enumerate(zip(panel.x, panel.y, panel.labels, strict=True)):
        group = panel.groups[i] if panel.groups else ""
        fill = PALETTE[groups.index(group) % 10] if groups else PALETTE[0]
        px, py = place(x, y)
        box = (px + 6, py - 5, px + 6 + text_width(label, 9), py + 4)
        fits = label and box[2] <= left + plot_w and not any(_boxes_overlap(box, other) for other in placed)
        if fits:
            placed.append(box)
        parts.append(
            f'<g class="cell" data-label={quoteattr(label or group)} data-value={quoteattr(group)}>'
            f'<circle cx="{px:.1f}" cy="{py:.1f}" r="4" fill="{fill}"/>'
            + (_text(px + 6, py + 4, label, 9) if fits else "")
            + f"<title>{escape(label)} {escape(group)}</title></g>"
        )
    if panel.x_label:
        parts.append(_text(left + plot_w / 2, top + plot_h + 32, panel.x_label, 11, anchor="middle", fill="#444"))
    if panel.y_label:
        x, y = 11, top + plot_h / 2
        parts.append(
            _text(x, y, panel.y_label, 11, anchor="middle", fill="#444", extra=f' transform="rotate(-90 {x} {y:.1f})"')
        )
    names = max([text_width(g, 10) for g in groups] + [0])
    for k, group in enumerate(groups):
        parts.append(_text(left + plot_w + 10, top + 12 + 14 * k, group, 10, fill=PALETTE[k % 10]))
    return left + plot_w + 16 + names, top + plot_h + 40, "".join(parts)


_DRAW = {Heatmap: _heatmap, Bars: _bars, Curves: _curves, Points: _points, Grid: _grid}


MIN_TEXT_WIDTH = 480  # px: text lines of a small figure still get a readable measure


def wrap_text(text: str, size: float, room: float) -> list[str]:
    """``text`` in lines of at most ``room`` px at font ``size``, broken between " | " parts (a settings
    summary) or else between words; a word longer than a line stays whole."""
    separator = " | " if " | " in text else " "
    lines, current = [], ""
    for part in text.split(separator):
        candidate = f"{current}{separator}{part}" if current else part
        if current and text_width(candidate + separator.rstrip(), size) > room:
            lines.append(current + separator.rstrip())
            current = part
        else:
            current = candidate
    return [*lines, current]


def figure_svg(figure: Figure) -> str:
    """The whole figure as one SVG document (a string). Its text (the title, settings, notes) is wrapped to
    the drawing's width, so a long sentence in the title or a long settings line does not widen the canvas
    past the figure (the page showed such a figure cut off at its right edge)."""
    margin, gap = 16, 28
    per_row = figure.columns or len(figure.panels)
    drawn = [_DRAW[type(panel)](panel) for panel in figure.panels]
    rows = [drawn[start : start + per_row] for start in range(0, len(drawn), per_row)]
    content = max((sum(w for w, _, _ in row) + gap * (len(row) - 1) for row in rows), default=0.0)
    room = max(content, MIN_TEXT_WIDTH)  # width the text lines may take
    y, body, width = margin - 4, [], 0.0
    for line in wrap_text(figure.title, 16, room):
        y += 22
        body.append(_text(margin, y, line, 16, weight="bold"))
        width = max(width, margin * 2 + text_width(line, 16))
    for line in (piece for text in figure.lines for piece in wrap_text(text, 11, room)):
        y += 16
        body.append(_text(margin, y, line, 11, fill="#444"))
        width = max(width, margin * 2 + text_width(line, 11))
    y += gap
    for row in rows:
        x = margin
        for panel_width, _, svg in row:
            body.append(f'<g class="panel" transform="translate({x:.1f} {y:.1f})">{svg}</g>')
            x += panel_width + gap
        width = max(width, x - gap + margin)
        y += max(h for _, h, _ in row) + gap
    for note in (piece for text in figure.notes for piece in wrap_text(text, 11, room)):
        body.append(_text(margin, y, note, 11, fill="#444"))
        width = max(width, margin * 2 + text_width(note, 11))
        y += 16
    height = y + margin
    return markup_safe(
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="{FONT}">'
        f'<rect width="100%" height="100%" fill="#fff"/>{"".join(body)}</svg>'
    )


# Code points XML 1.0 forbids (C0 controls but tab, newline and return; U+FFFE, U+FFFF; surrogates)
# and those HTML5 calls parse errors (DEL, C1 controls, the noncharacters of every plane). Our own
# markup never contains them, so they can only come from text (tokens, sentences, labels).
_NOT_IN_MARKUP = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufdd0-\ufdef"
    + "".join(f"{chr(plane * 0x10000 + 0xFFFE)}{chr(plane * 0x10000 + 0xFFFF)}" for plane in range(17))
    + "]"
)


def markup_safe(text: str) -> str:
    """``text`` without the code points XML and HTML forbid (see :data:`_NOT_IN_MARKUP`): a sentence
    holding ``\\x01`` or U+FFFE still gives a well-formed SVG and an HTML page without parse errors."""
    return _NOT_IN_MARKUP.sub("", text)


def json_markup_safe(text: str) -> str:
    """JSON text with those code points written as ``\\uXXXX`` escapes (they can only be inside
    strings there), so the data keeps them and the page holding it stays valid."""
    return _NOT_IN_MARKUP.sub(lambda match: _json_escape(ord(match[0])), text)


def _json_escape(code: int) -> str:
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # past the BMP: JSON writes a surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
