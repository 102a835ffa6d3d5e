"""``--explain``'s steps as HTML: the same named steps the terminal draws (:func:`ctxembed.views.render.
render_explain`), in the page's own style (the blue ramp of every view's matrix, labelled tables), for
the live page's explain tab and for ``attend --explain --save x.html``. Reads the explain document through
:mod:`ctxembed.views.explain`, as the terminal does: the same labels, numbers and shading.
"""

from __future__ import annotations

from html import escape

from ctxembed.views import explain as read
from ctxembed.views.figures import colour, ink_on, marked

STYLE = """
.ctxembed-explain { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; color: #222; font-size: 13px; }
.ctxembed-explain h3 { font-size: 16px; margin: 14px 0 4px; border-bottom: 1px solid #ccc; }
.ctxembed-explain h4 { font-size: 14px; margin: 12px 0 4px; }
.ctxembed-explain p { margin: 2px 0; white-space: pre-wrap; }
.ctxembed-explain p.note { color: #555; }
.ctxembed-explain table { border-collapse: collapse; margin: 4px 0 8px; font-size: 12px; }
.ctxembed-explain th { font-weight: normal; color: #444; padding: 1px 6px; text-align: right; }
.ctxembed-explain td { padding: 1px 6px; font-family: "DejaVu Sans Mono", monospace; text-align: right; }
.ctxembed-explain table.matrix td { border: 1px solid #fff; min-width: 36px; }
.ctxembed-explain table.matrix td.masked { background: rgb(200,200,200); color: #444; text-align: center; }
.ctxembed-explain td.text { text-align: left; font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; }
.ctxembed-explain .scale { color: #555; font-size: 12px; }
"""


def _matrix(m: read.Matrix, tokens: list[str]) -> str:
    levels = m.levels()  # (T, T): the terminal's heat levels, drawn on the page's ramp
    rows = ["<tr><th></th>" + "".join(f"<th>{escape(t)}</th>" for t in tokens) + "</tr>"]
    for i, label in enumerate(tokens):
        cells = []
        for j in range(len(tokens)):
            if m.masked is not None and m.masked[i, j]:
                cells.append('<td class="masked">·</td>')
                continue
            value = f"{float(m.values[i, j]):.{m.digits}f}"
            rgb = colour(levels[i, j] / 8 if levels[i, j] >= 2 else 0.0)  # level 1 unshaded, as in the terminal
            cells.append(
                f'<td style="background:rgb{rgb};color:{ink_on(rgb)}" title="{escape(label)} → {escape(tokens[j])}: '
                f'{value}">{value}</td>'
            )
        rows.append(f"<tr><th>{escape(label)}</th>{''.join(cells)}</tr>")
    return f'<table class="matrix">{"".join(rows)}</table><p class="scale">{escape(m.key())}</p>'


def _vectors(labels: list[str], vectors) -> str:
    rows = "".join(
        f'<tr><th>{escape(label)}</th><td class="text">{escape(read.vector_text(v))}</td></tr>'
        for label, v in zip(labels, vectors, strict=True)
    )
    return f"<table>{rows}</table>"


def _neuron(neuron: read.Neuron) -> str:
    parts = [
        f"<h4>{escape(neuron.heading)}</h4><p>{escape(neuron.query)}</p>",
        "<table><tr><th>key</th><th>q . k</th><th>adds most</th><th>takes most</th></tr>",
    ]
    for label, score, plus, minus in neuron.rows:
        parts.append(
            f"<tr><th>{escape(label)}</th><td>{score}</td><td class='text'>{escape(', '.join(plus) or '-')}"
            f"</td><td class='text'>{escape(', '.join(minus) or '-')}</td></tr>"
        )
    return "".join(parts) + "</table>"


def _draw(steps: dict, draw: dict) -> str:
    tokens = list(steps["tokens"])
    parts = []
    if "vectors" in draw:
        parts.append(_vectors(read.row_labels(steps, draw, marked), read.array_at(steps, draw["vectors"])))
    for name in draw.get("each", ()):
        parts.append(f"<h4>{escape(name)}</h4>{_vectors(tokens, steps[name])}")
    if "matrix" in draw:
        parts.append(_matrix(read.matrix_of(steps, draw), tokens))
    if "terms" in draw:
        rows = [
            f"<tr><th>{escape(row)}</th><td class='text'>= {escape(terms)}<br>= {escape(context)}</td></tr>"
            for row, terms, context in read.weighted_sums(steps, draw)
        ]
        parts.append(f"<table>{''.join(rows)}</table>")
    if "neuron" in draw:
        parts.append(_neuron(read.neuron_of(steps, draw)))
    return "".join(parts)


def explain_html(steps: dict) -> str:
    """The explain document's steps as one HTML section (with its own style), in the steps' order."""
    parts = [f'<section class="ctxembed-explain"><style>{STYLE}</style>']
    for step in read.explain_steps(steps):
        if "rule" in step:
            parts.append(f"<h3>{escape(step['rule'])}</h3>")
            parts += [f'<p class="note">({escape(note)})</p>' for note in step["notes"]]
            continue
        label = read.step_label(steps, step)
        if label is not None:
            parts.append(f"<h4>{escape(label)}</h4>")
        parts += [f"<p>{escape(line['text'])}</p>" for line in step["lines"]]
        parts.append(_draw(steps, step["draw"] or {}))
    parts.append("</section>")
    return "".join(parts)
