"""``--explain``'s steps as HTML: the same named steps the terminal draws (:func:`ctxembed.views.render.
render_explain`), in the page's own style (the blue ramp of every view's matrix, labelled tables), for
the live page's explain tab and for ``attend --explain --save x.html``. Reads the explain document only.
"""

from __future__ import annotations

from html import escape

import numpy as np

from ctxembed.views.figures import colour, ink_on, marked

SHOWN = 6  # numbers of a vector shown, as in the terminal

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


def _vector(values) -> str:
    vector = np.asarray(values, dtype=np.float64)
    head = ", ".join(f"{x:.2f}" for x in vector[:SHOWN])
    return f"[{head}{', ...' if len(vector) > SHOWN else ''}]"


def _array(doc: dict, key: str):
    for part in key.split("."):
        doc = doc[part]
    return doc


def _matrix(values: np.ndarray, masked: np.ndarray | None, tokens: list[str], low: float, high: float, digits: int):
    rows = ["<tr><th></th>" + "".join(f"<th>{escape(t)}</th>" for t in tokens) + "</tr>"]
    span = high - low
    for i, label in enumerate(tokens):
        cells = []
        for j in range(len(tokens)):
            if masked is not None and masked[i, j]:
                cells.append('<td class="masked">·</td>')
                continue
            value = float(values[i, j])
            share = 0.0 if span <= 0 else min(1.0, max(0.0, (value - low) / span))
            rgb = colour(share)
            cells.append(
                f'<td style="background:rgb{rgb};color:{ink_on(rgb)}" title="{escape(label)} → {escape(tokens[j])}: '
                f'{value:.{digits}f}">{value:.{digits}f}</td>'
            )
        rows.append(f"<tr><th>{escape(label)}</th>{''.join(cells)}</tr>")
    grey = "; grey: masked" if masked is not None else ""
    scale = f'<p class="scale">white {low:.{digits}f} to dark blue {high:.{digits}f}{grey}</p>'
    return f'<table class="matrix">{"".join(rows)}</table>{scale}'


def _vectors(labels: list[str], vectors) -> str:
    rows = "".join(
        f'<tr><th>{escape(label)}</th><td class="text">{escape(_vector(v))}</td></tr>'
        for label, v in zip(labels, vectors, strict=True)
    )
    return f"<table>{rows}</table>"


def _neuron(neuron: dict, tokens: list[str], raw: np.ndarray, shown: int = 3) -> str:
    row, word = neuron["query"], neuron["token"]
    terms = np.asarray(neuron["terms"], dtype=np.float64)  # (T, d_k)
    whose = neuron.get("word") or word
    of = "" if whose == word else f" (the first piece of {whose!r})"
    parts = [
        f"<h4>{escape(repr(word))}{escape(of)}: q . k_j = sum over its {terms.shape[1]} dimensions d of "
        "q_d k_jd (largest terms)</h4>",
        f"<p>q_{escape(word)} = {escape(_vector(neuron['q']))}</p>",
        "<table><tr><th>key</th><th>q . k</th><th>adds most</th><th>takes most</th></tr>",
    ]
    for j, label in enumerate(tokens):
        order = np.argsort(terms[j], kind="stable")  # (d_k,) ascending
        plus = [f"d{d} {terms[j, d]:+.2f}" for d in order[::-1][:shown] if terms[j, d] > 0]
        minus = [f"d{d} {terms[j, d]:+.2f}" for d in order[:shown] if terms[j, d] < 0]
        parts.append(
            f"<tr><th>{escape(label)}</th><td>{raw[row, j]:.3f}</td><td class='text'>{escape(', '.join(plus) or '-')}"
            f"</td><td class='text'>{escape(', '.join(minus) or '-')}</td></tr>"
        )
    return "".join(parts) + "</table>"


def _nan(values) -> np.ndarray:
    return np.array(
        [[np.nan if v is None else v for v in row] for row in np.asarray(values, dtype=object)], dtype=np.float64
    )


def _draw(steps: dict, draw: dict) -> str:
    tokens = list(steps["tokens"])
    parts = []
    if "vectors" in draw:
        rows = draw.get("rows")
        if rows == "sources":
            sources = steps.get("sources") or ["vocabulary"] * len(tokens)
            labels = [marked(t, s) for t, s in zip(tokens, sources, strict=True)]
        else:
            labels = list((_array(steps, rows) if rows else None) or tokens)
        parts.append(_vectors(labels, _array(steps, draw["vectors"])))
    for name in draw.get("each", ()):
        parts.append(f"<h4>{escape(name)}</h4>{_vectors(tokens, steps[name])}")
    if "matrix" in draw:
        values = _nan(steps[draw["matrix"]])
        masked = ~np.isfinite(_nan(steps[draw["mask"]])) if draw.get("mask") else None
        low, high = 0.0, 1.0
        finite = values[np.isfinite(values)]
        if draw.get("range") in ("all", "finite") and finite.size:
            low, high = float(finite.min()), float(finite.max())
        if masked is not None and not masked.any():
            masked = None
        parts.append(_matrix(values, masked, tokens, low, high, draw.get("digits", 2)))
    if "terms" in draw:
        weights = np.asarray(steps["weights"], dtype=np.float64)
        context = np.asarray(steps[draw["terms"]], dtype=np.float64)
        rows = []
        for i, row in enumerate(tokens):
            terms = " + ".join(f"{weights[i, j]:.2f}·{tokens[j]}" for j in range(len(tokens)) if weights[i, j] >= 0.005)
            rows.append(
                f"<tr><th>{escape(row)}</th><td class='text'>= {escape(terms or '0')}<br>= "
                f"{escape(_vector(context[i]))}</td></tr>"
            )
        parts.append(f"<table>{''.join(rows)}</table>")
    if "neuron" in draw:
        parts.append(_neuron(steps[draw["neuron"]], tokens, np.asarray(steps["raw_scores"], dtype=np.float64)))
    return "".join(parts)


def explain_html(steps: dict) -> str:
    """The explain document's steps as one HTML section (with its own style), in the steps' order."""
    parts = [f'<section class="ctxembed-explain"><style>{STYLE}</style>']
    for step in steps["steps"]:
        if "rule" in step:
            parts.append(f"<h3>{escape(step['rule'])}</h3>")
            parts += [f'<p class="note">({escape(note)})</p>' for note in step["notes"]]
            continue
        draw = step["draw"] or {}
        if step["label"] is not None:
            shown = "; first 6 shown" if np.shape(steps["inputs"])[1] > SHOWN else ""
            parts.append(f"<h4>{escape(step['label'].replace('{shown}', shown))}</h4>")
        parts += [f"<p>{escape(line['text'])}</p>" for line in step["lines"]]
        parts.append(_draw(steps, draw))
    parts.append("</section>")
    return "".join(parts)
