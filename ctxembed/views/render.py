"""Rich rendering of results for people. It lays out documents from :mod:`ctxembed.report`;
the only arithmetic here is picking what to show (a head, the mean of heads, a window).

Colour comes from cell backgrounds (a heatmap); rich drops it under NO_COLOR or when stdout is
not a terminal, and every cell still prints its number.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rich.color import Color
from rich.columns import Columns
from rich.console import Console, Group
from rich.measure import Measurement
from rich.style import Style
from rich.table import Table
from rich.text import Text

from ctxembed.budget import check_drawn
from ctxembed.output import say, terminal_view
from ctxembed.views.explain import (
    Neuron,
    array_at,
    explain_steps,
    matrix_of,
    neuron_of,
    row_labels,
    step_label,
    vector_text,
    weighted_sums,
)
from ctxembed.views.figures import (
    View,
    as_given,
    attention_masks,
    attention_view,
    cosine_range,
    hidden_view,
    marked,
    model_view,
    neighbour_search,
    scale_note,
    source_notes,
    table_view,
    token_labels,
    top_keys,
)
from ctxembed.views.layout import (
    GLYPHS,
    choose_layout,
    draw,
    heat_level,
    legend_lines,
    model_lines,
    shading_key,
    text_width,
    wrap_parts,
)
from ctxembed.views.palette import heat_style, map_colour, masked_colour, mode_of


def render_converted(console: Console, doc: dict) -> None:
    """``vectors convert``: what was written, one line on stderr (a note: stdout stays empty)."""
    size = f"{doc['words']:,} words x {doc['dim']} dimensions ({doc['dtype']}, {doc['bytes']:,} bytes)"
    say(f"wrote {doc['out']}: {size}")


def render_installed(console: Console, doc: dict) -> None:
    """``models install``: the model installed, one line on stderr (a note: stdout stays empty); nothing
    more when it was already there (the install said so)."""
    if doc.get("installed", True):
        say(f"installed {doc['model']} ({doc['upstream']}, {doc['licence']}) in {doc['path']}")


def render_space(console: Console, doc: dict) -> None:
    """``models space``: one line on stdout, what the space holds, where, its size and what its build cost."""
    peak = "" if doc["build_peak_mb"] is None else f", peak memory {doc['build_peak_mb']:,} MB"
    console.print(
        f"{doc['model']}: {doc['words']:,} words ({doc['templated']:,} from the template sentence) over "
        f"{doc['lines']:,} Brown sentences, {doc['bytes'] / 1e6:.0f} MB in {doc['folder']}, built in "
        f"{doc['build_seconds']:.0f} s ({doc['build_cpu_seconds']:.0f} CPU s{peak})",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def render_verified(console: Console, doc: dict) -> None:
    """``models verify``: one line on stderr saying what was checked."""
    files = len(doc["files"])
    say(f"{doc['model']} in {doc['path']}: {files} files have their recorded sha256, every weight is finite")


def render_cache(console: Console, doc: dict) -> None:
    """``ctxembed cache``: the folder, what it holds by kind, and what --clear freed."""
    table = Table()
    table.add_column("kind")
    table.add_column("files", justify="right")
    table.add_column("size", justify="right")
    for kind in doc["kinds"]:
        table.add_row(kind["kind"], f"{kind['files']:,}", f"{kind['bytes'] / 2**20:,.1f} MB")
    console.print(Text(f"cache {doc['folder']}"), overflow="fold")
    console.print(table)
    total = f"{doc['files']:,} files, {doc['bytes'] / 2**20:,.1f} MB"
    if doc["cleared"]:
        console.print(Text(f"cleared: {total} deleted (rebuilt when next needed)"))
    else:
        console.print(
            Text(
                f"{total}; it grows by a converted store per vector file and a few statistics files per vectors, "
                "settings and model; ctxembed cache --clear empties it",
                style="dim",
            ),
            overflow="fold",
        )


def render_models(console: Console, doc: dict) -> None:
    """``models list``: a line per installed model; with none, a note on stderr saying how to install one."""
    if not doc["models"]:
        say(f"no model installed in {doc['folder']} (try `ctxembed models install minilm`)")
    for folder in doc.get("stale", []):
        say(f"{folder}: left by an install or a training that was stopped (the next one removes it)")
    width = max([8, *(len(m["model"]) for m in doc["models"])])
    for m in doc["models"]:
        origin = m["upstream"] if m.get("parent") is None else f"derived from {m['parent']} ({m['way']})"
        console.print(
            f"{m['model']:<{width}} {m['bytes'] / 1e6:6.1f} MB  {m['licence']:<11} {origin}  {m['path']}",
            markup=False,
            highlight=False,
            soft_wrap=True,  # one line a model, whatever the width (a pipe's 80 columns cut the path off)
        )
        if m.get("parent") is not None:  # a derived model: what it was trained on, and how well
            figures, data = m["figures"], m["data"]
            held = figures.get("held_out_accuracy")
            epochs = figures.get("epochs")
            console.print(
                f"{'':<{width}} trained on {data['name']} (sha256 {data['sha256']}), train accuracy "
                f"{figures['train_accuracy']:.3f}"
                + ("" if held is None else f", held-out {held:.3f}")
                + ("" if epochs is None else f", {epochs} epoch{'s' if epochs != 1 else ''}"),
                markup=False,
                highlight=False,
                soft_wrap=True,
            )


@terminal_view
def render_info(console: Console, info: dict) -> None:
    caption(console, f"vectors: {info['source']}")
    table = Table(show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    for field in (
        "name",
        "path",
        "kind",
        "format",
        "words",
        "dim",
        "dtype",
        "lowercase",
        "subwords",
        "cache",
        "cache_state",
    ):
        value = info.get(field)
        if field == "words" and isinstance(value, int):
            value = f"{value:,}"
        table.add_row(field.replace("_", " "), "-" if value is None else str(value))
    console.print(table)


# ------------------------------------------------------------------------------ helpers
def _heat(value: float, mode: str | None, low: float = 0.0, high: float = 1.0) -> Style:
    """The heatmap's shading for a value in [low, high] (eighths of the range; the lowest eighth unshaded)."""
    share = 0.0 if high <= low else float(np.clip((value - low) / (high - low), 0, 1))
    return heat_style(heat_level(share, 1.0), mode) if share > 0 else Style()


def _diverging(value: float, mode: str | None) -> Style:
    """Cosine in [-1, 1] on the diverging scale (red below 0, blue above), in eighths of each side;
    within 1/8 of 0 unshaded."""
    if not -1.0 <= value <= 1.0 or abs(value) <= 0.125:
        return Style()
    level = min(8, int(np.ceil(8 * abs(value) - 1e-9)))  # 2..8
    return heat_style(level, mode, 1 if value > 0 else -1)


def _fmt(value: float, digits: int = 2) -> str:
    return "nan" if value is None or not np.isfinite(value) else f"{value:.{digits}f}"


def _print_vectors(console: Console, v: dict) -> None:
    """The vectors line, broken only between its name, its size and its source."""
    size = f"{v['words']:,} words, " if f"{v['words']:,} words" not in v["name"] else ""  # the name may say it
    dim = f"{v['dim']}d, " if f"{v['dim']}d" not in v["name"] else ""  # "GloVe 6B 100d" says it too
    parts = [v["name"], f"({size}{dim}source: {v['source']})"]
    for line in wrap_parts("vectors  ", parts, console.width, separator=" "):
        console.print(Text(line, style="bold"), overflow="fold", crop=False)


def _print_settings(console: Console, doc: dict) -> None:
    print_settings(console, doc["settings_summary"])


def print_settings(console: Console, summary: str, prefix: str = "settings ", style: str = "") -> None:
    """A settings summary, broken only between settings (never inside "projection file(...)")."""
    for line in wrap_parts(prefix, summary.split(" | "), console.width):
        console.print(Text(line, style=style), overflow="fold", crop=False)


def labelled(console: Console, label: str | Text, text: Text, width: int = 9) -> None:
    """``label`` in a column of ``width`` (or its own width, when wider), then ``text``, whose continuation
    lines start under its first character (not at column 0), with no trailing space."""
    head = Text(label) if isinstance(label, str) else label.copy()
    width = max(width, head.cell_len)
    head.pad_right(width - head.cell_len)
    for k, line in enumerate(text.wrap(console, max(1, console.width - width), overflow="fold")):
        line.rstrip()
        console.print((head if k == 0 else Text(" " * width)) + line, overflow="ignore", crop=False)


def caption(console: Console, text: str) -> None:
    """A table's caption on its own line: as a rich table title it would be padded with trailing
    spaces (or wrapped) to the table's width."""
    console.print(Text(text, style="italic"), overflow="fold")


def _source_legend(console: Console, sources) -> None:
    """The legend of the source marks among ``sources`` (nothing when every vector is the vocabulary's)."""
    shown = source_notes(sources)
    if shown:
        console.print(Text("; ".join(shown), style="dim"), overflow="fold")


def _header(console: Console, doc: dict) -> None:
    _print_vectors(console, doc["vectors"])
    _print_settings(console, doc)
    skipped = doc.get("skipped")
    if skipped and isinstance(skipped[0], dict):
        shown = ", ".join(f"{s['text']!r}@{s['position']}" for s in skipped)
        console.print(Text(f"skipped  out of vocabulary: {shown}", style="yellow"))


def matrix_table(
    title: str,
    rows: list[str],
    cols: list[str],
    values: np.ndarray,
    *,
    digits: int = 2,
    heat: bool = True,
    low: float = 0.0,
    high: float = 1.0,
    diverging: bool = False,
    masked: np.ndarray | None = None,
    split: bool = False,
    levels: np.ndarray | None = None,
) -> _MatrixTable:
    """A title line over a labelled matrix; with ``heat`` each cell is shaded by its value; ``masked``
    (bool, same shape) cells print ``·``. ``split``: a matrix wider than the console is drawn as blocks
    of whole columns, one under the other (else its cells are squeezed and folded). ``levels``: each
    cell's heat level 0..8 as the document's reader gave it (an explain step's), instead of its share of
    [low, high]."""
    return _MatrixTable(title, rows, cols, values, digits, heat, low, high, diverging, masked, split, levels)


@dataclass
class _MatrixTable:
    """:func:`matrix_table`'s result: shaded when drawn, in the colours of the console it is drawn on."""

    title: str
    rows: list[str]
    cols: list[str]
    values: np.ndarray
    digits: int
    heat: bool
    low: float
    high: float
    diverging: bool
    masked: np.ndarray | None
    split: bool = False
    levels: np.ndarray | None = None

    def __rich_console__(self, console: Console, options):
        blocks = self._blocks(options.max_width) if self.split else [range(len(self.cols))]
        tables = [self._table(console, columns) for columns in blocks]
        title = self.title
        if len(blocks) > 1:
            shown = [f"keys {c[0]}-{c[-1]}" for c in blocks]
            title = f"{title} (in {len(blocks)} blocks of columns: {', '.join(shown)})"
        yield from self._title_lines(console, title, options.max_width)
        yield from tables

    @staticmethod
    def _title_lines(console: Console, title: str, width: int):
        """The title wrapped to ``width``; an explain step's ("3. raw scores ...") under its words."""
        number = title.split(" ", 1)[0]
        indent = len(number) + 1 if number[:-1].isdigit() and number.endswith(".") else 0
        for k, line in enumerate(Text(title, style="bold").wrap(console, max(1, width - indent), overflow="fold")):
            line.rstrip()
            yield Text(" " * (indent if k else 0)) + line

    def __rich_measure__(self, console: Console, options) -> Measurement:
        """As wide as its table (a longer title wraps over it), not the whole console, so that rich's
        ``Columns`` can set two matrices side by side when they fit."""
        table = Measurement.get(console, options, self._table(console, range(len(self.cols))))
        return Measurement(table.minimum, table.maximum).clamp(max_width=options.max_width)

    def _blocks(self, width: int) -> list[range]:
        """Runs of whole columns that each fit ``width`` with the row labels: a rich table's column takes
        its widest cell plus 3 (padding and rule), and the table one more for its last rule."""
        values = np.asarray(self.values)  # (rows, cols)
        cell = [max(len(c), *(len(_fmt(v, self.digits)) for v in values[:, j])) + 3 for j, c in enumerate(self.cols)]
        room = width - 1 - (max(map(len, self.rows), default=0) + 3)
        blocks, start, used = [], 0, 0
        for j, w in enumerate(cell):
            if j > start and used + w > room:
                blocks.append(range(start, j))
                start, used = j, 0
            used += w
        blocks.append(range(start, len(cell)))
        return blocks

    def _table(self, console: Console, columns: range) -> Table:
        mode = mode_of(console)
        table = Table(show_lines=False)
        table.add_column("", style="bold", overflow="fold")
        for j in columns:
            table.add_column(self.cols[j], justify="right", overflow="fold")  # squeezed cells fold, never "…"
        for i, (label, whole) in enumerate(zip(self.rows, self.values, strict=True)):
            cells = []
            for j in columns:
                value = whole[j]
                if self.masked is not None and self.masked[i, j]:
                    cells.append(Text("·", style="dim"))
                    continue
                style = None
                if self.levels is not None:
                    style = heat_style(int(self.levels[i, j]), mode)
                elif self.heat:
                    style = _diverging(value, mode) if self.diverging else _heat(value, mode, self.low, self.high)
                cells.append(Text(_fmt(value, self.digits), style=style or ""))
            table.add_row(label, *cells)
        return table


# ------------------------------------------------------------------------------ attend
# Heat levels 2..8 as backgrounds on the colour mode's ramp (views/palette.py) with the text that
# contrasts most; level 0 (a weight of exactly 0), level 1 (the lowest eighth) and masked cells keep the
# terminal's own colours, so they never outshine real weights on a dark or a light terminal.
_SEGMENT_STYLES = {
    "label": Style(bold=True),
    "header": Style(bold=True),
    "title": Style(bold=True),
    "masked": Style(dim=True),
}


def _segment_style(name: str, mode: str | None) -> Style:
    if name.startswith("cells:"):
        return _cells_style(name, mode)
    if name.startswith("heat"):
        return heat_style(int(name[4:]), mode)
    return _SEGMENT_STYLES.get(name, Style())


def _cells_style(name: str, mode: str | None) -> Style:
    """The style of a model-view cell, "cells:FG:BG": each side a heat level 0..8, "m" masked or "" none."""
    _, fg, bg = name.split(":")

    def colour_of(level: str) -> Color | None:
        if not level or mode is None:
            return None
        return masked_colour(mode) if level == "m" else map_colour(int(level), mode)

    return Style(color=colour_of(fg), bgcolor=colour_of(bg))


def _segments_text(line, mode: str | None) -> Text:
    text = Text()
    for piece, style in line:
        text.append(piece, style=_segment_style(style, mode))
    return text


def _print_lines(console: Console, lines: list[str], style: str = "") -> None:
    for line in lines:
        console.print(Text(line, style=style), overflow="fold", crop=False)


@terminal_view
def render_attend(
    console: Console,
    doc: dict,
    *,
    layer: int | None = None,
    head: int | None = None,
    all_heads: bool = False,
    all_layers: bool = False,
    focus: int | None = None,
    max_display: int | None = None,
    start: int = 0,
    occurrence: tuple[int, int] | None = None,
    scale_max: float | None = None,
    specials: str = "hide",
) -> None:
    """The attention matrix of one layer laid out to fit the console, then the per-token table.

    ``focus`` (a row index, see :func:`ctxembed.report.focus_row`) shows that token's row and column
    instead of the matrix (``occurrence``: which of how many tokens of that word it is); ``start`` and
    ``max_display`` ask for a window; ``scale_max`` is the weight shaded full (default: the largest shown);
    ``specials`` "show" draws a subword model's [CLS] and [SEP] as columns of their own, every row as
    the model gave it (the words' shares not renormalised)."""
    width = console.width
    _header(console, doc)
    status = Text()
    for k, token in enumerate(doc["tokens"]):
        source = token.get("source")
        status.append(" " if k else "")
        status.append(token["text"], style="green" if token["in_vocab"] else "red strike")
        status.append(marked("", source) if source else "" if token["in_vocab"] else "(oov)")
    labelled(console, "tokens", status)
    split = [f"{t['text']} = {' '.join(t['pieces'])}" for t in doc["tokens"] if t.get("pieces")]
    if split:  # a subword model's pieces of the words it split
        labelled(console, "pieces", Text("; ".join(split), style="dim"))
    _source_legend(console, [t.get("source") for t in doc["tokens"]])
    labels, positions = token_labels(doc)
    n = len(labels)
    masked = attention_masks(doc, n)
    if all_layers:
        _render_model(console, doc, View(all_heads=all_heads, all_layers=True), labels, masked)
        title, panels = "", []
    else:
        title, panels = attention_view(doc, View(layer=layer, head=head, all_heads=all_heads))
    layer_shown = len(doc["weights"]) - 1 if layer is None else layer
    hidden = [hidden_view(doc, layer_shown, h if all_heads else head) for h in range(len(panels))]
    extra = None  # --specials show: (units, (T, S) shares) beside the one matrix, its rows as the model gave them
    if specials == "show" and len(panels) == 1 and hidden[0] is not None:
        units, share = hidden[0]
        panels = [(panels[0][0], as_given(panels[0][1], share))]
        hidden = [(units, share)]
        extra = (units, share)
    top = max((float(np.max(values, initial=0.0)) for _, values in panels), default=0.0)
    if extra is not None:
        top = max(top, float(np.max(extra[1], initial=0.0)))
    scale = f"{scale_max:g} (--scale-max)" if scale_max else f"the largest weight shown ({top:.2f})"
    top = scale_max or top
    if all_layers:
        pass
    elif focus is not None:
        _render_focus(console, labels, positions, title, panels, masked, focus, top, occurrence, hidden, extra)
    else:
        mode = mode_of(console)
        colour = mode is not None
        beside = 0 if extra is None else 2 + 6 * len(extra[0])  # the [CLS], [SEP] columns
        layout = choose_layout(
            labels,
            width - beside,
            numbers=positions,
            titles=[t for t, _ in panels],
            colour=mode in ("truecolor", "256"),  # 16 colours shade in 4 steps: cells keep their glyph
            start=start,
            limit=max_display,
        )
        what = title if "attention" in doc else f"attention weights, {title}"
        console.print(Text(f"{what} (row: how much that token attends to each column)", style="bold"), overflow="fold")
        if "attention" in doc:
            console.print(Text(doc["attention"]["about"], style="dim"), overflow="fold")
        lines = draw(layout, labels, positions, [(t, v, masked) for t, v in panels], top)
        if extra is not None:
            lines = _with_specials(lines, layout, extra, top)
        for line in lines:
            console.print(_segments_text(line, mode_of(console)), overflow="ignore", crop=False, no_wrap=True)
        shown = slice(layout.start, layout.start + layout.count)
        if layout.legend:
            _print_lines(console, legend_lines(labels[shown], positions[shown], width))
        key = []
        if layout.cells == "glyphs" or layout.with_glyph:
            key.append(f"▁▂▃▄▅▆▇█ eighths of {scale} (▁: above 0, up to an eighth)")
        if colour:
            key.append(shading_key(mode, scale))
        key.append("blank: exactly 0" if layout.cells == "glyphs" else "0 unshaded")
        if masked.any():
            key.append("· masked")
        if extra is not None:
            key.append(f"{', '.join(extra[0])}: the model's special pieces; each row sums to 1 with them")
        console.print(Text("; ".join(key), style="dim"), overflow="fold")
        sif = (doc.get("settings") or {}).get("sif")
        if sif:  # why every row leans to the same few columns
            console.print(
                Text(
                    f"SIF key bias (--sif {sif:g}): each key's weight is multiplied by a/(a + p(word)) before "
                    "normalising, so every row leans to the sentence's rarer words; --sif 0 turns it off",
                    style="dim",
                ),
                overflow="fold",
            )
        if layout.windowed:
            first, last = positions[layout.start], positions[layout.start + layout.count - 1]
            console.print(
                Text(
                    f"window: tokens #{first} to #{last} of {n} (rows and columns). --start N moves it; "
                    "--focus WORD shows one token's row and column whole; --save page.html or --json has every weight",
                    style="yellow",
                ),
                overflow="fold",
            )
    _token_table(console, doc, labels, positions, masked, View(layer=layer, head=head), drawn=extra is not None)


def _with_specials(lines: list, layout, extra: tuple[list[str], np.ndarray], top: float) -> list:
    """The matrix's lines with a column per special unit ([CLS], [SEP]) at their right: the unit names
    on the last header line, each shown row's shares, shaded on the matrix's scale."""
    units, share = extra  # (T, S)
    rows = range(layout.start, layout.start + layout.count)
    heads = len(lines) - len(rows)
    out = [list(line) for line in lines]
    width = layout.label_width + 1 + layout.panel_width  # where the matrix ends
    for index in range(heads):
        if index == heads - 1:
            used = sum(text_width(text) for text, _ in out[index])
            names = " ".join(f"{u:>5}" for u in units)
            out[index].append((" " * (width - used + 2) + names, "header"))
    for index, i in zip(range(heads, len(out)), rows, strict=True):
        used = sum(text_width(text) for text, _ in out[index])
        out[index].append((" " * (width - used + 2), ""))
        for s, value in enumerate(share[i]):
            level = heat_level(float(value), top)
            text = f"{value:.2f}" + ((GLYPHS[level - 1] if level else " ") if layout.with_glyph else "")
            out[index].append(((" " if s else "") + f"{text:>5}", f"heat{level}" if level else "zero"))
    return out


def _packed(parts: list[str], width: int, separator: str = ", ") -> str:
    """``parts`` joined, a new line before a part that would pass ``width``: no part is split."""
    lines = [""]
    for part in parts:
        joined = f"{lines[-1]}{separator}{part}" if lines[-1] else part
        if lines[-1] and text_width(joined) > width:
            lines[-1] += separator.rstrip()
            lines.append(part)
        else:
            lines[-1] = joined
    return "\n".join(lines)


def _token_table(
    console: Console, doc: dict, labels, positions, masked: np.ndarray, view: View, drawn: bool = False
) -> None:
    """What each token attends to most in the map shown above (its layer, head or mean, reading), with
    the share its row gave to [CLS]/[SEP] when the model has them, and how far context moved it."""
    reading = doc.get("attention")
    attended = doc["top_attended"] if reading is None else reading["top_attended"]
    top = max((len(row) for row in attended), default=0)  # the document's --top (a row lists fewer only for 0s)
    title, values = table_view(doc, view)
    layer = len(doc["weights"]) - 1 if view.layer is None else view.layer
    hidden = hidden_view(doc, layer, view.head)
    console.print(Text(f"per token ({title})", style="bold"), overflow="fold")
    table = Table()
    table.add_column("#", justify="right", overflow="fold")
    table.add_column("token", style="bold", overflow="fold")
    table.add_column("attends most to", overflow="fold")
    if hidden is not None:
        table.add_column("+".join(hidden[0]), justify="right", overflow="fold")
    table.add_column("cos(static,\ncontextual)", justify="right", overflow="fold")
    moved = doc["static_contextual_cosine"]
    keys = top_keys(values, top)
    # the list's width: what the other columns and the borders leave (a pair is never split over lines)
    others = len(str(max(positions, default=0))) + max(map(text_width, labels), default=0) + 11
    room = console.width - others - (6 if hidden is None else 11) - 3 * (5 if hidden is None else 6) - 1
    for row, (label, position, tops) in enumerate(zip(labels, positions, keys, strict=True)):
        listed = _packed([f"{labels[j]} {values[row, j]:.2f}" for j in tops], room)
        if not tops:  # every key masked: a one-token sentence with the self mask, or the first token, causal
            listed = "(no token to attend to: every key is masked)" if masked[row].all() else "(no weight above 0)"
        cos = moved[row]
        shade = _diverging(cos, mode_of(console)) if cos is not None and np.isfinite(cos) else ""
        special = [] if hidden is None else [f"{float(hidden[1][row].sum()):.2f}"]
        table.add_row(str(position), label, listed, *special, Text(_fmt(cos, 3), style=shade))
    console.print(table)
    if hidden is not None:
        console.print(
            Text(
                f"{'+'.join(hidden[0])}: the share of each word's attention that went to the model's special "
                "pieces, hidden from the word maps (their rows are renormalised over the words)"
                + ("" if drawn else "; --specials show draws them"),
                style="dim",
            ),
            overflow="fold",
        )


def _render_model(console: Console, doc: dict, view: View, labels: list[str], masked: np.ndarray) -> None:
    """The model view: a small map per layer (and head), rows attending to columns, shaded 0 to 1."""
    title, rows, columns, maps = model_view(doc, view)
    colour = console.color_system is not None and not console.no_color
    console.print(Text(f"{title} (each map: rows attend to columns, tokens in order)", style="bold"), overflow="fold")
    for line in model_lines(maps, rows, columns, console.width, masked=masked if masked.any() else None, colour=colour):
        console.print(_segments_text(line, mode_of(console)), overflow="ignore", crop=False, no_wrap=True)
    _print_lines(console, legend_lines(labels, list(range(len(labels))), console.width))
    if not colour:
        key = "▁▂▃▄▅▆▇█ eighths of 1, blank 0"
    elif mode_of(console) == "16":
        key = "0 to 1 in eighths, in 16 colours: light grey, cyan, bright blue, blue; two rows of a map per line"
    else:
        key = "white 0 to dark blue 1, in eighths, two rows of a map per line"
    console.print(
        Text(
            key
            + ("; · masked" if masked.any() and not colour else "; grey masked" if masked.any() else "")
            + "; --save model.svg or .html draws it larger",
            style="dim",
        ),
        overflow="fold",
    )


_BAR_EIGHTHS = "▏▎▍▌▋▊▉"


def _bar(value: float, top: float, width: int = 10) -> str:
    """A horizontal bar of ``width`` cells for ``value`` out of ``top``, in eighths of a cell."""
    eighths = min(8 * width, round(8 * width * value / top)) if top > 0 and value > 0 else 0
    full, rest = divmod(eighths, 8)
    return "█" * full + (_BAR_EIGHTHS[rest - 1] if rest else "")


def _render_focus(
    console, labels, positions, title, panels, masked, row, top, occurrence=None, hidden=None, shown=None
) -> None:
    """One token's row and column of each panel; ``hidden`` (per panel: the units of no word and the
    (T, S) shares of each word's attention to them, or None) adds what the word maps leave out, one row
    per unit when ``shown`` (--specials show: the panel is then as the model gave it)."""
    word = labels[row]
    which = f"#{positions[row]}"
    if occurrence is not None and occurrence[1] > 1:
        which += f", occurrence {occurrence[0]} of {occurrence[1]}"
    hidden = hidden or [None] * len(panels)
    for (panel_title, values), special in zip(panels, hidden, strict=True):
        heading = f"{title}{', ' + panel_title if panel_title else ''}"
        console.print(Text(f"attention of {word!r} ({which}), {heading}", style="bold"), overflow="fold")
        table = Table()
        table.add_column("#", justify="right", overflow="fold")
        table.add_column("token", style="bold", overflow="fold")
        table.add_column(f"{word} attends to it", overflow="fold")
        table.add_column(f"it attends to {word}", overflow="fold")
        for j, (label, position) in enumerate(zip(labels, positions, strict=True)):
            cells = []
            for value, is_masked in ((values[row, j], masked[row, j]), (values[j, row], masked[j, row])):
                cells.append("·" if is_masked else f"{value:.3f} {_bar(value, top)}")
            table.add_row(str(position), Text(label, style="reverse" if j == row else ""), *cells)
        if special is not None and shown is not None:  # --specials show: each unit a row, as the model gave it
            for unit, value in zip(shown[0], shown[1][row], strict=True):
                table.add_row("", unit, f"{value:.3f} {_bar(value, top)}", "")
        elif special is not None:
            units, share = special
            table.add_row("", "+".join(units), f"{float(share[row].sum()):.3f} before renormalising", "")
        console.print(table)
    console.print(Text("bars: share of the largest weight shown; · masked", style="dim"))
    if shown is not None:
        console.print(
            Text(f"{', '.join(shown[0])}: the model's special pieces; {word}'s row sums to 1 with them", style="dim")
        )
    elif any(special is not None for special in hidden):
        units = "+".join(next(s for s in hidden if s is not None)[0])
        console.print(
            Text(
                f"{units}: the share of {word}'s attention that went to the model's special pieces; the words' "
                f"shares above are of the rest (renormalised over the words); --specials show draws them",
                style="dim",
            ),
            overflow="fold",
        )


def _vectors(console: Console, labels: list[str], vectors) -> None:
    width = max(len(t) for t in labels)
    for label, vector in zip(labels, vectors, strict=True):
        console.print(f"   {label:>{width}} {vector_text(vector)}", overflow="fold")


def render_attend_explained(console: Console, doc: dict, **view) -> None:
    """:func:`render_attend` with ``view``'s options, then, for a document of ``attend --explain``, every
    step (:func:`render_explain`); a step-by-step view past the budget is refused before anything is drawn."""
    explained = doc.get("explain")
    if explained is not None:  # refused before anything is drawn: past the budget, or without its steps
        explain_steps(explained)
        check_drawn(len(explained["tokens"]))
    render_attend(console, doc, **view)
    if explained is not None:
        render_explain(console, explained)


@terminal_view
def render_explain(console: Console, steps: dict) -> None:
    """Every step of one layer and head, as the explain document names them (``steps["steps"]``: each a
    heading, lines under it and what to draw, by the name of one of the document's arrays); this only
    draws them, as :mod:`ctxembed.views.explain` reads them for every view."""
    named = explain_steps(steps)
    check_drawn(len(steps["tokens"]))
    for step in named:
        if "rule" in step:
            console.rule(step["rule"])
            for note in step["notes"]:
                _hanging(console, Text(f"({note})", style="dim"), 1, first=0)
            continue
        draw = step["draw"] or {}
        label = step_label(steps, step)
        if label is not None and "matrix" not in draw:
            number = label.split(" ", 1)[0]  # "6." : its words wrap under themselves, not at column 0
            _hanging(console, Text(label, style="bold"), len(number) + 1 if number.endswith(".") else 0, first=0)
        for line in step["lines"]:
            text = line["text"]
            _hanging(console, Text(text.lstrip(), style=line["style"] or ""), len(text) - len(text.lstrip()))
        _draw_step(console, steps, label, draw)


def _hanging(console: Console, text: Text, indent: int, *, first: int | None = None) -> None:
    """``text`` wrapped to the console, its first line after ``first`` spaces (default ``indent``), its
    continuation lines after ``indent``: under its own words, never at column 0."""
    start = indent if first is None else first
    width = max(1, console.width - max(start, indent))
    for k, line in enumerate(text.wrap(console, width, overflow="fold")):
        line.rstrip()
        console.print(Text(" " * (start if k == 0 else indent)) + line, overflow="ignore", crop=False)


def _draw_step(console: Console, steps: dict, label: str | None, draw: dict) -> None:
    """What one named step draws: vectors, a matrix, each context as its sum, or the neuron view."""
    tokens = steps["tokens"]
    if "vectors" in draw:
        _vectors(console, row_labels(steps, draw, marked), array_at(steps, draw["vectors"]))
        if draw.get("legend"):
            _source_legend(console, steps.get("sources") or ["vocabulary"] * len(tokens))
    for name in draw.get("each", ()):
        console.print(Text(f"   {name}", style="bold"))
        _vectors(console, tokens, steps[name])
    if "matrix" in draw:
        m = matrix_of(steps, draw)
        console.print(
            matrix_table(
                label, tokens, tokens, m.values, digits=m.digits, low=m.low, high=m.high, masked=m.masked,
                split=True, levels=m.levels(),
            )
        )  # fmt: skip
        if mode_of(console) is not None:  # the shading it names is drawn only in colour
            _hanging(console, Text(m.key(mode_of(console)), style="dim"), 3)
    if "terms" in draw:
        width = max(len(t) for t in tokens)
        for row, terms, context in weighted_sums(steps, draw):
            console.print(f"   {row:>{width}} = {terms}", overflow="fold")
            console.print(f"   {'':>{width}} = {context}", overflow="fold")
    if "neuron" in draw:
        _render_neuron(console, neuron_of(steps, draw), tokens)


def _render_neuron(console: Console, neuron: Neuron, tokens: list[str]) -> None:
    """One query's q . k_j term by term (the neuron view), a table row a key."""
    console.print(Text(f"   {neuron.heading}", style="bold"), overflow="fold")
    console.print(f"   {neuron.query}", overflow="fold")
    table = Table()
    table.add_column("key", style="bold", overflow="fold")
    table.add_column("q . k", justify="right")
    table.add_column("adds most", overflow="fold")
    table.add_column("takes most", overflow="fold")
    # each list's width: half of what the key and score columns and the borders leave (a term never splits)
    room = (console.width - max(map(text_width, tokens), default=0) - 9 - 13) // 2
    for label, score, plus, minus in neuron.rows:
        table.add_row(label, score, _packed(plus, room) or "-", _packed(minus, room) or "-")
    console.print(table)


# ------------------------------------------------------------------------------ compare
def _cosine_table(title: str, rows, cols, values, absolute: bool, symmetric: bool = True) -> _MatrixTable:
    """:func:`matrix_table` of cosines on :func:`cosine_range`'s scale, which its title states."""
    low, high, diverging = cosine_range(values, symmetric=symmetric, absolute=absolute)
    heading = f"{title} ({scale_note(low, high, diverging)})" if title else ""
    return matrix_table(heading, rows, cols, values, low=low, high=high, diverging=diverging, digits=3)


@terminal_view
def render_compare(console: Console, doc: dict, *, cosine_scale: str = "fitted") -> None:
    absolute = cosine_scale == "absolute"
    _header_compare(console, doc)
    labels = [f"S{i + 1}" for i in range(len(doc["sentences"]))]
    if doc.get("summary") is not None and doc["word"] is None:  # every shared word: one row each
        console.print(Text("contextual cosine of each shared word across the sentences", style="bold"))
        table = Table()
        table.add_column("word", style="bold", overflow="fold")
        table.add_column("mean over sentence pairs", justify="right")
        table.add_column("lowest pair", justify="right")
        for row in doc["summary"]:
            table.add_row(row["word"], f"{row['contextual_mean']:.3f}", f"{row['contextual_lowest']:.3f}")
        console.print(table)
        console.print(Text("--word WORD shows one word's static and contextual matrices", style="dim"))
        return
    for entry in doc["words"]:
        word = entry["word"]
        static = _cosine_table(f"static cosine: {word!r}", labels, labels, entry["static_similarity"], absolute)
        contextual = _cosine_table(
            f"contextual cosine: {word!r}", labels, labels, entry["contextual_similarity"], absolute
        )
        console.print(Group(static, contextual))
        if entry.get("layers") is not None:  # documents before ctxembed.compare/5 have none
            _layer_tables(console, entry, labels, absolute)
        if entry.get("same_sense") is not None:  # a derived model's head, beside each pair's cosine
            _same_sense(console, entry, labels)


def _same_sense(console: Console, entry: dict, labels: list[str]) -> None:
    """Each pair's read-out cosine and the derived model's probability that the word keeps its sense."""
    p = np.asarray(entry["same_sense"], dtype=np.float64)  # (N, N)
    cosine = np.asarray(entry["contextual_similarity"], dtype=np.float64)  # (N, N)
    table = Table(title=f"{entry['word']!r}: does it keep its sense? (the trained head's probability)")
    for column in ("pair", "cosine", "p(same sense)", ""):
        table.add_column(column, justify="right" if column else "left")
    for i in range(len(labels)):
        for j in range(i + 1, len(labels)):
            verdict = "same sense" if p[i, j] > 0.5 else "different senses"
            table.add_row(f"{labels[i]}-{labels[j]}", f"{cosine[i, j]:.3f}", f"{p[i, j]:.3f}", verdict)
    console.print(table)


PAIR_COLUMN = 9  # characters a pair's column takes in a table: "-0.123" with padding and border


def _layer_tables(console: Console, entry: dict, labels: list[str], absolute: bool = False) -> None:
    """The word's cosine for each pair of sentences (columns) at each layer and at the read-out (rows),
    split into tables of as many pairs as the console's width holds."""
    layers = [np.asarray(m, dtype=np.float64) for m in entry["layers"]]  # L + 1 matrices (N, N)
    readout = np.asarray(entry["contextual_similarity"], dtype=np.float64)  # (N, N)
    pairs = [(i, j) for i in range(len(labels)) for j in range(i + 1, len(labels))]
    rows = [str(layer) for layer in range(len(layers))] + ["read-out"]
    per_table = max(1, (console.width - 12) // PAIR_COLUMN)  # 12: the row labels' column
    every = np.array([[m[i, j] for i, j in pairs] for m in [*layers, readout]])  # (L + 2, pairs)
    low, high, diverging = cosine_range(every, absolute=absolute)  # one scale for all the blocks
    for start in range(0, len(pairs), per_table):
        shown = pairs[start : start + per_table]
        cells = np.array([[m[i, j] for i, j in shown] for m in [*layers, readout]])  # (L + 2, pairs)
        title = (
            f"cosine of {entry['word']!r} at each layer (0: the input to layer 1; {scale_note(low, high, diverging)})"
            if start == 0
            else ""
        )
        columns = [f"{labels[i]}-{labels[j]}" for i, j in shown]
        console.print(matrix_table(title, rows, columns, cells, low=low, high=high, diverging=diverging, digits=3))


def _header_compare(console: Console, doc: dict) -> None:
    _print_vectors(console, doc["vectors"])
    _print_settings(console, doc)
    for i, (sentence, skipped) in enumerate(zip(doc["sentences"], doc["skipped"], strict=True)):
        note = f"  (skipped: {', '.join(s['text'] for s in skipped)})" if skipped else ""
        console.print(Text(f"S{i + 1}  {sentence}{note}"))
    for entry in doc["words"]:
        occurrences, sources = entry.get("occurrences"), entry.get("sources") or []
        if occurrences and any(o["of"] > 1 for o in occurrences):
            listed = ", ".join(
                f"S{i + 1} #{p} ({o['occurrence']} of {o['of']})"
                for i, (p, o) in enumerate(zip(entry["positions"], occurrences, strict=True))
            )
            console.print(Text(f"{entry['word']!r} used at: {listed}"))
        if any(s != "vocabulary" for s in sources):
            listed = ", ".join(f"S{i + 1} {s}" for i, s in enumerate(sources))
            console.print(Text(f"{entry['word']!r} vectors: {listed}"))
            _source_legend(console, sources)


# ------------------------------------------------------------------------------ neighbors
@terminal_view
def render_neighbors(console: Console, doc: dict) -> None:
    _header(console, doc)
    moved = doc["static_contextual_cosine"]
    which = f"position {doc['position']}"
    if doc.get("occurrences", 1) > 1:
        which += f", occurrence {doc['occurrence']} of {doc['occurrences']}"
    labelled(
        console,
        "word",
        Text(
            f"{marked(doc['word'], doc.get('source'))!r} at {which} of: {doc['text']}"
            + (f"  (cos static/contextual {moved:.3f})" if moved is not None else "")
        ),
    )
    _source_legend(console, [doc.get("source")])
    nearest, left = neighbour_search(doc)
    labelled(console, "nearest", Text(nearest, style="bold"))
    if left:
        labelled(console, "left out", Text(left))
    table = Table()
    table.add_column("#", justify="right")
    table.add_column("static", style="bold")
    table.add_column("cos", justify="right")
    table.add_column("contextual", style="bold")
    table.add_column("cos", justify="right")
    static, contextual = doc["static"], doc["contextual"]
    for i in range(max(len(static), len(contextual))):
        s = static[i] if i < len(static) else {"word": "", "similarity": float("nan")}
        c = contextual[i] if i < len(contextual) else {"word": "", "similarity": float("nan")}
        table.add_row(str(i + 1), s["word"], _fmt(s["similarity"], 3), c["word"], _fmt(c["similarity"], 3))
    console.print(table)


# ------------------------------------------------------------------------------ eval
@terminal_view
def render_mix_fit(console: Console, doc: dict) -> None:
    console.print(Text(f"layer mix fitted: {doc['formula']}", style="bold"))
    console.print(Text(doc["settings_summary"]))
    table = Table()
    table.add_column("layer")
    table.add_column("s_j", justify="right")
    for j, weight in enumerate(doc["weights"]):
        table.add_row(f"h{j} ({'input' if j == 0 else f'attention layer {j}'})", f"{weight:.4f}")
    console.print(table)
    sign = "+" if doc["bias"] >= 0 else "-"
    console.print(
        Text(
            f"γ {doc['gamma']:.4f}  |  P(same) = σ(γ²·cos {sign} {abs(doc['bias']):.3f}): "
            f"threshold cos {doc['threshold']:.4f}  |  loss {doc['loss']:.4f} after {doc['iterations']} iterations"
            + ("" if doc["converged"] else " (not converged)")
        )
    )
    for source in doc["sources"]:
        figure = (
            f"accuracy {_pct(source['accuracy'])}"
            if source["kind"] == "wic"
            else f"Spearman {_pct(source['spearman'])}"
        )
        split = f" ({source['split']})" if source["split"] else ""
        console.print(Text(f"{source['path']}{split}: {source['covered']}/{source['pairs']} pairs, {figure}"))


def _pct(value) -> str:
    return "-" if value is None else f"{value:.4f}"


@terminal_view
def render_eval_wic(console: Console, doc: dict) -> None:
    console.print(
        Text(
            f"WiC: {doc['directory']}  |  vectors {_eval_vectors(doc)}  |  threshold tuned on {doc['tuned_on']}",
            style="bold",
        )
    )
    splits = list(doc["configs"][0]["splits"])
    table = Table()
    table.add_column("configuration", style="bold")
    for split in splits:
        table.add_column(f"{split} accuracy", justify="right")
    table.add_column("threshold", justify="right")
    table.add_column("pairs without vector", justify="right")
    for row in doc["configs"]:
        missing = ", ".join(f"{s} {row['splits'][s]['coverage']['pairs_without_vector']}" for s in splits)
        table.add_row(
            row["name"], *(_pct(row["splits"][s]["accuracy"]) for s in splits), f"{row['threshold']:.3f}", missing
        )
    console.print(table)
    console.print(
        Text("A pair whose target has no vector even through its lemma is predicted 'different sense'.", style="dim")
    )
    if (note := window_note(doc)) is not None:
        console.print(note)


def window_note(doc: dict) -> Text | None:
    """The windows an evaluation read its targets in, when one cropped them (a row's ``settings.window``):
    e.g. "targets read in a window: minilm ±10 tokens; default: whole sentences"; None when none did."""
    rows = [row for row in doc.get("configs", []) if row.get("settings") is not None]
    windows = {row["name"]: row["settings"].get("window") for row in rows}
    if not any(windows.values()):
        return None
    parts = [f"{name} ±{window} tokens" if window else f"{name}: whole sentences" for name, window in windows.items()]
    return Text(f"targets read in a window (--window): {'; '.join(parts)}", style="dim")


def _eval_vectors(doc: dict) -> str:
    """The vectors an evaluation read: the store's, except for configurations of a trained model (their
    settings name it), which read their model's own."""
    models = [c["name"] for c in doc.get("configs", []) if (c.get("settings") or {}).get("model")]
    store = doc["vectors"]["name"]
    if not models:
        return store
    if len(models) == len(doc["configs"]):
        return "each model's own"
    return f"{store} ({', '.join(models)}: the model's own)"


@terminal_view
def render_eval_senses(console: Console, doc: dict) -> None:
    console.print(Text(f"polysemy suite: {doc['file']}  |  vectors {_eval_vectors(doc)}", style="bold"))
    table = Table()
    table.add_column("configuration", style="bold")
    table.add_column("words separated", justify="right")
    table.add_column("mean margin (same - cross)", justify="right")
    for row in doc["configs"]:
        share = f"{row['separated']:.3f} ({round(row['separated'] * row['words'])}/{row['words']})"
        table.add_row(row["name"], share, _pct(row["mean_margin"]))
    console.print(table)
    console.print(
        Text(
            "A word is separated when every same-sense pair of its sentences is more similar than "
            "every cross-sense pair.",
            style="dim",
        )
    )
    if (note := window_note(doc)) is not None:
        console.print(note)


@terminal_view
def render_eval_pairs(console: Console, doc: dict) -> None:
    console.print(Text(f"{doc['layout']}: {doc['file']}  |  vectors {_eval_vectors(doc)}", style="bold"))
    table = Table()
    table.add_column("configuration", style="bold")
    if doc["layout"] == "scws":
        table.add_column("Spearman ρ", justify="right")
        table.add_column("pairs covered", justify="right")
        for row in doc["configs"]:
            table.add_row(row["name"], _pct(row["spearman"]), f"{row['covered']}/{row['n']}")
    else:
        for column in ("Pearson", "Spearman", "OOV %"):
            table.add_column(column, justify="right")
        for row in doc["configs"]:
            table.add_row(row["name"], _pct(row["pearson"]), _pct(row["spearman"]), f"{row['oov_percent']:.1f}")
    console.print(table)
    if (note := window_note(doc)) is not None:
        console.print(note)


# ------------------------------------------------------------------------------ side by side
def view_label(entry: dict) -> str:
    """How a side-by-side view is named: its model, and its preset when the model has several."""
    return f"{entry['model']} · {entry['preset']}"


@terminal_view
def render_side_by_side(console: Console, doc: dict, *, cosine_scale: str = "fitted") -> None:
    """The word's attention and cosines, one column per model (reads the side-by-side document)."""
    word, views = doc["word"], doc["models"]
    absolute = cosine_scale == "absolute"
    for i, sentence in enumerate(doc["sentences"]):
        console.print(Text(f"S{i + 1}  {sentence}", style="bold" if i == 0 else ""), overflow="fold")
    positions = sorted({p for entry in views for p in entry["attended_positions"]})
    texts = {p: t for entry in views for p, t in zip(entry["attended_positions"], entry["tokens"], strict=True)}
    for key, what in (
        ("word_attention", f"what {word!r} attends to in S1 (last layer, mean of heads)"),
        ("word_cosines", f"cosine of the contextual {word!r} to each word of S1"),
    ):
        console.print(Text(what, style="bold"), overflow="fold")
        table = Table()
        table.add_column("#", justify="right")
        table.add_column("word", style="bold")
        for entry in views:
            table.add_column(view_label(entry), overflow="fold")
        for position in positions:
            cells = []
            for entry in views:
                at = entry["attended_positions"]
                if position not in at:
                    cells.append(Text("-", style="dim"))
                    continue
                value = entry[key][at.index(position)]
                own = position == entry["position"]
                shown = "itself" if own and key == "word_cosines" else f"{value:.2f} {_bar(max(value, 0.0), 1.0)}"
                cells.append(Text(shown, style="dim" if own else ""))
            table.add_row(str(position), texts[position], *cells)
        console.print(table)
    across = [entry for entry in views if entry["across"] is not None]
    if across:
        labels = [f"S{i + 1}" for i in range(len(doc["sentences"]))]
        console.print(Text(f"contextual cosine of {word!r} across the sentences", style="bold"))
        tables = [
            _cosine_table(view_label(entry), labels, labels, entry["across"]["contextual_similarity"], absolute)
            for entry in across
        ]
        console.print(Columns(tables, padding=(0, 4)))  # model beside model when they fit
    for entry in views:
        console.print(Text(f"{view_label(entry)}: {entry['settings_summary']}", style="dim"), overflow="fold")
    for gone in doc["missing"]:
        console.print(
            Text(f"{gone['model']} · {gone['preset']}: not shown ({gone['reason']})", style="yellow"), overflow="fold"
        )
