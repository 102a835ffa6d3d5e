"""Figures as PNG through matplotlib, the optional extra ``plot`` (``pip install 'ctxembed[plot]'``)."""

from __future__ import annotations

import importlib.util
import io
import math
import textwrap

import numpy as np

from ctxembed.errors import DataError
from ctxembed.views.figures import (
    DIVERGING,
    MASKED_FILL,
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
)

INSTALL_HINT = (
    "PNG needs matplotlib: pip install 'ctxembed[plot]' (in a checkout: .venv/bin/pip install -e '.[plot]'), "
    "or save as .svg or .html"
)


def require_matplotlib() -> None:
    if importlib.util.find_spec("matplotlib") is None:
        raise DataError(INSTALL_HINT)


def figure_png(figure: Figure, dpi: int = 150) -> bytes:
    """The figure as PNG bytes."""
    import matplotlib.pyplot as plt  # matplotlib: PNG only

    fig = draw(figure)
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=dpi, bbox_inches="tight", pad_inches=0.15)  # no empty margins
    plt.close(fig)
    return out.getvalue()


def draw(figure: Figure):
    """The figure as a matplotlib Figure (the caller closes it)."""
    require_matplotlib()
    import matplotlib  # matplotlib: PNG only

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # matplotlib: PNG only

    per_row = figure.columns or len(figure.panels)
    rows = math.ceil(len(figure.panels) / per_row)
    side = max(3.5, max(_panel_size(p) for p in figure.panels))
    width = max(6.5, side * per_row + 1)  # inches: room for the header of a small figure
    # Wrap text to the figure's width, so no header or note runs off a small picture's edge,
    # and give the wrapped text its own height above and below the panels.
    lines = _wrap(figure.lines, width, fontsize=9)
    notes = _wrap(figure.notes, width, fontsize=7)
    header, footer = 0.2 * (len(lines) + 1) + 0.3, 0.14 * len(notes) + 0.1  # inches
    height = side * rows + 0.9 + header + footer
    fig, axes = plt.subplots(rows, per_row, figsize=(width, height), squeeze=False)
    for ax, panel in zip(axes.flat, figure.panels, strict=False):
        _DRAW[type(panel)](ax, panel)
    for ax in list(axes.flat)[len(figure.panels) :]:
        ax.axis("off")
    fig.tight_layout(rect=(0, footer / height, 1, 1 - header / height))
    # The header sits right above the panels, wherever their aspect left them: a square heatmap in a
    # wide figure would otherwise leave an empty band between the two (the saved picture is cropped).
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    shown = [ax for ax in fig.axes if ax.get_visible() and ax.axison]
    top = max(ax.get_tightbbox(renderer).y1 for ax in shown) / fig.bbox.height
    bottom = min(ax.get_tightbbox(renderer).y0 for ax in shown) / fig.bbox.height
    fig.text(0.01, top + 0.01, "\n".join([figure.title, *lines]), fontsize=9, ha="left", va="bottom")
    if notes:
        fig.text(0.01, bottom - 0.01, "\n".join(notes), fontsize=7, va="top")
    return fig


def _wrap(texts, width_inches: float, *, fontsize: float) -> list[str]:
    """Lines of ``texts`` wrapped to the figure's width (a character is about 0.6 em wide)."""
    per_line = max(20, int(width_inches * 72 / (0.62 * fontsize)) - 2)  # characters that fit
    return [piece for text in texts for piece in textwrap.wrap(text, per_line, subsequent_indent="    ") or [""]]


# Size budget of a PNG: a heatmap panel is at most MAX_PANEL inches wide, labelled by at most
# MAX_TICKS of its tokens (docs/robustness.md)
MAX_PANEL = 24.0
MAX_TICKS = 70


def _panel_size(panel) -> float:
    if isinstance(panel, Heatmap):  # at most MAX_PANEL inches: 512 tokens would ask for 165 (a 1 GB bitmap)
        return min(MAX_PANEL, 1.5 + 0.32 * max(len(panel.rows), len(panel.columns)))
    if isinstance(panel, Bars):
        return 1.5 + 0.3 * len(panel.labels)
    if isinstance(panel, Points):
        return 5.0
    if isinstance(panel, Grid):  # about an inch per map, the longer side of the grid at most MAX_PANEL
        return min(MAX_PANEL, 1.0 + 1.0 * max(panel.maps.shape[:2]))
    return 4.0


def _colour_map(diverging: bool):
    """The figures' scale (figures.SEQUENTIAL or DIVERGING) as a matplotlib colour map; masked cells grey."""
    from matplotlib.colors import LinearSegmentedColormap  # matplotlib: PNG only

    stops = DIVERGING if diverging else SEQUENTIAL
    cmap = LinearSegmentedColormap.from_list("ctxembed", [(at, tuple(c / 255 for c in rgb)) for at, rgb in stops])
    return cmap.with_extremes(bad=tuple(c / 255 for c in MASKED_FILL))  # set_bad is deprecated


def _grid(ax, panel: Grid) -> None:
    """The model view in one axes: the maps side by side, transparent gaps between them, masked cells grey."""
    n_rows, n_cols, T = panel.maps.shape[0], panel.maps.shape[1], panel.maps.shape[-1]
    gap = max(1, T // 8)
    step = T + gap
    mosaic = np.ma.masked_all((n_rows * step - gap, n_cols * step - gap))  # the gaps stay masked: transparent
    above = panel.high + 1.0  # masked cells: past the scale, drawn in the "over" colour (grey)
    for r in range(n_rows):
        for c in range(n_cols):
            block = np.array(panel.maps[r, c], dtype=np.float64)  # (T, T)
            if panel.masked is not None:
                block[np.asarray(panel.masked, dtype=bool)] = above
            mosaic[r * step : r * step + T, c * step : c * step + T] = block
    grey = tuple(c / 255 for c in MASKED_FILL)
    cmap = _colour_map(False).with_extremes(bad=(1, 1, 1, 0), over=grey)
    image = ax.imshow(mosaic, cmap=cmap, vmin=panel.low, vmax=panel.high, interpolation="nearest")
    bar = ax.figure.colorbar(image, ax=ax, fraction=0.03, pad=0.02)
    bar.ax.tick_params(labelsize=7)
    centres = [k * step + (T - 1) / 2 for k in range(max(n_rows, n_cols))]
    ax.set_xticks(centres[:n_cols], panel.columns if n_cols > 1 else [""], fontsize=7)
    ax.set_yticks(centres[:n_rows], panel.rows, fontsize=7)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.xaxis.set_ticks_position("top")
    if panel.tokens and T <= 40:  # the tokens: queries beside each row's first map, keys under the last row's
        longest = max(len(t) for t in panel.tokens)
        ax.set_yticks([r * step + k for r in range(n_rows) for k in range(T)], panel.tokens * n_rows, minor=True)
        bottom = (n_rows - 1) * step + T - 0.5
        ax.set_xticks(list(range(T)), panel.tokens, minor=True)
        ax.tick_params(axis="y", which="minor", labelsize=5, length=0)
        ax.tick_params(axis="y", which="major", pad=4 + 3.2 * longest)
        ax.tick_params(axis="x", which="minor", labelsize=5, length=0, rotation=90, top=False, labeltop=False,
                       bottom=True, labelbottom=True)  # fmt: skip
        ax.set_ylim(bottom, -0.5)


def _heatmap(ax, panel: Heatmap) -> None:
    values = np.ma.masked_array(panel.values, mask=panel.masked) if panel.masked is not None else panel.values
    image = ax.imshow(values, cmap=_colour_map(panel.diverging), vmin=panel.low, vmax=panel.high)
    bar = ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    bar.ax.tick_params(labelsize=7)
    step = max(1, math.ceil(max(len(panel.rows), len(panel.columns)) / MAX_TICKS))  # every step-th label
    columns, rows = range(0, len(panel.columns), step), range(0, len(panel.rows), step)
    ax.set_xticks(columns, [panel.columns[j] for j in columns], rotation=55, ha="right", fontsize=7)
    ax.set_yticks(rows, [panel.rows[i] for i in rows], fontsize=7)
    ax.set_title(panel.title, fontsize=9)
    ax.set_xlabel(panel.x_label, fontsize=8)
    ax.set_ylabel(panel.y_label, fontsize=8)
    if max(len(panel.rows), len(panel.columns)) <= 16:
        for i in range(len(panel.rows)):
            for j in range(len(panel.columns)):
                masked = panel.masked is not None and panel.masked[i, j]
                value = float(panel.values[i, j])
                share = 0 if panel.high <= panel.low else (value - panel.low) / (panel.high - panel.low)
                ink = "#000" if masked else ink_on(colour(share, panel.diverging))
                text = "·" if masked else cell_number(value)
                ax.text(j, i, text, ha="center", va="center", fontsize=6, color=ink)


def _bars(ax, panel: Bars) -> None:
    y = np.arange(len(panel.labels))
    span = panel.high - panel.low if panel.high > panel.low else 1.0
    shades = [bar_colour((v - panel.low) / span) for v in panel.values]
    ax.barh(y, panel.values, color=[tuple(c / 255 for c in rgb) for rgb in shades])  # the SVG's shades
    ax.set_yticks(y, panel.labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(panel.low, panel.high)
    ax.set_title(panel.title, fontsize=9)
    ax.set_xlabel(panel.x_label, fontsize=8)
    for i, value in enumerate(panel.values):
        ax.text(value, i, f" {value:.3f}", va="center", fontsize=7)


def _curves(ax, panel: Curves) -> None:
    for name, xs, ys in panel.series:
        ax.plot(xs, ys, label=name)
    ax.set_xlabel(panel.x_label)
    ax.set_ylabel(panel.y_label)
    ax.legend(fontsize=7)
    ax.set_title(panel.title, fontsize=9)


def _points(ax, panel: Points) -> None:
    groups = sorted(set(panel.groups)) if panel.groups else [""]
    for group in groups:
        chosen = [i for i in range(len(panel.x)) if not panel.groups or panel.groups[i] == group]
        ax.scatter([panel.x[i] for i in chosen], [panel.y[i] for i in chosen], label=group or None, s=12)
    ax.margins(0.05)  # every point inside the frame
    ax.set_title(panel.title, fontsize=9)
    ax.set_xlabel(panel.x_label, fontsize=8)
    ax.set_ylabel(panel.y_label, fontsize=8)
    if panel.groups:  # beside the plot, never over its points
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    ax.figure.canvas.draw()
    renderer, placed = ax.figure.canvas.get_renderer(), []
    for x, y, label in zip(panel.x, panel.y, panel.labels, strict=True):
        if not label:
            continue
        note = ax.annotate(label, (x, y), fontsize=6, xytext=(3, 2), textcoords="offset points")
        box = note.get_window_extent(renderer)
        if any(box.overlaps(other) for other in placed):
            note.remove()  # a label over another one is left out: hover the SVG or HTML for it
        else:
            placed.append(box)


_DRAW = {Heatmap: _heatmap, Bars: _bars, Curves: _curves, Points: _points, Grid: _grid}
