"""Save a document as a picture or a page: ``save_document(doc, "bank.svg")``.

The suffix picks the format:

- ``.svg``  vector graphics for papers (:mod:`ctxembed.views.svg`, no dependency);
- ``.html`` one self-contained page, no network: the interactive attention view for ``attend``
  (tokens on both sides, hover or click one to see its weights), the figure with hover and click
  read-outs for other documents;
- ``.png``  through matplotlib, the optional extra ``plot`` (``pip install 'ctxembed[plot]'``);
- ``.json`` the same document as ``--json``.

What a picture of each document type shows is registered in :mod:`ctxembed.views.figures` by its
"schema"; adding a document type there is enough for SVG, PNG and HTML. Files are written
atomically: a failed save never leaves a half-written file (a FIFO or device is written through,
never replaced; docs/robustness.md).
"""

from __future__ import annotations

import html
import json
import secrets
from importlib import resources
from pathlib import Path

from ctxembed.errors import UsageError
from ctxembed.output import check_output_path, dumps, write_output
from ctxembed.views.figures import View, build_figure
from ctxembed.views.png import figure_png, require_matplotlib
from ctxembed.views.svg import figure_svg, json_markup_safe, markup_safe

FORMATS = (".svg", ".html", ".png", ".json")
ATTEND_SCHEMAS = ("ctxembed.attend/3", "ctxembed.attend/4", "ctxembed.attend/5")  # the page draws each


def check_path(path: str | Path) -> str:
    """The format of ``path`` (its suffix); UsageError for an unknown one, DataError when the PNG extra
    is missing or the file could not be written (:func:`ctxembed.output.check_output_path`). Cheap:
    run it before any work."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".htm":
        suffix = ".html"
    if suffix not in FORMATS:
        shown = f"suffix {path.suffix!r}" if path.suffix else "no suffix"
        raise UsageError(f"{{save}} {path}: {shown}; use one of {', '.join(FORMATS)}", "save")
    if suffix == ".png":
        require_matplotlib()
    check_output_path(path, "save")
    return suffix


def render_bytes(doc: dict, suffix: str, view: View | None = None) -> bytes:
    """The file contents of ``doc`` in the format of ``suffix``."""
    if suffix == ".json":
        return (dumps(doc, indent=2) + "\n").encode()
    if suffix == ".html":
        return html_page(doc, view).encode()
    figure = build_figure(doc, view)
    if suffix == ".svg":
        return ('<?xml version="1.0" encoding="UTF-8"?>\n' + figure_svg(figure) + "\n").encode()

    return figure_png(figure)


def save_document(
    doc: dict,
    path: str | Path,
    *,
    layer: int | None = None,
    head: int | None = None,
    all_heads: bool = False,
    all_layers: bool = False,
    cosine_scale: str = "fitted",
) -> None:
    """Write ``doc`` to ``path`` in the format its suffix names (see the module doc).

    ``layer``, ``head`` and ``all_heads`` choose what an attention picture shows (default: the last
    layer, mean of heads). Raises UsageError for an unknown suffix, DataError when the file cannot be
    written or the PNG extra is missing."""
    path = Path(path)
    suffix = check_path(path)
    view = View(layer=layer, head=head, all_heads=all_heads, all_layers=all_layers, cosine_scale=cosine_scale)
    data = render_bytes(doc, suffix, view)
    write_output(path, data, "save")  # a file replaced whole, or a FIFO or device written through


# ------------------------------------------------------------------------------ HTML
def _asset(name: str) -> str:
    return resources.files("ctxembed.views").joinpath("web", name).read_text(encoding="utf-8")


def _script_json(doc: dict) -> str:
    """The document as JSON that is safe inside a <script> element."""
    return json_markup_safe(dumps(doc)).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def html_fragment(doc: dict, view: View | None = None) -> str:
    """An embeddable interactive view of ``doc`` (a <div> with its own style and script), for a page or
    a notebook's ``_repr_html_``. Several fragments can live on one page."""
    view = view or View()
    root = f"ctxembed-{secrets.token_hex(6)}"
    interactive = doc.get("schema") in ATTEND_SCHEMAS and not view.all_layers  # the model view is a figure
    too_big = interactive and _weight_count(doc) > PAGE_WEIGHTS
    if interactive and not too_big:
        body = '<div class="app"></div>'
    else:
        figure = build_figure(doc, view)
        kinds = {type(panel).__name__ for panel in figure.panels}
        what = "a bar" if kinds == {"Bars"} else "a point" if kinds == {"Points"} else "a cell"
        # under the figure, so it never sits between the figure and its title
        body = figure_svg(figure) + f'<div class="readout">hover or click {what} to read its value</div>'
    if too_big:  # past the budget the page is the static figure (its heatmap one image), without the weights
        doc = {key: value for key, value in doc.items() if key != "weights"}
        doc["weights_dropped"] = f"more than {PAGE_WEIGHTS:,} attention weights: shown as the figure"
    settings = {"layer": view.layer, "head": view.head, "all_heads": view.all_heads, "all_layers": view.all_layers}
    return (
        f'<div class="ctxembed-view" id="{root}" data-view="{html.escape(json.dumps(settings))}">'
        f"<style>{_asset('view.css')}</style>"
        f'<script type="application/json" class="ctxembed-data">{_script_json(doc)}</script>'
        f"{body}<script>{_asset('view.js')}\nctxembedView(document.getElementById({json.dumps(root)}));</script></div>"
    )


# Size budget of a page: an attend document with more attention weights than this (layers x heads x
# tokens x tokens; 512 tokens in one head is 262,144) is shown as the static figure, without the
# weights in the page, so a 4,096-token page is a few MB instead of 237 MB (docs/robustness.md).
PAGE_WEIGHTS = 1 << 20


def _weight_count(doc: dict) -> int:
    """How many numbers ``doc["weights"]`` holds (nested lists or an array)."""
    level, count = doc.get("weights"), 1
    while isinstance(level, list | tuple):
        if not level:
            return 0
        count *= len(level)
        level = level[0]
    return count * int(getattr(level, "size", 1)) if doc.get("weights") is not None else 0


def html_page(doc: dict, view: View | None = None) -> str:
    """One self-contained HTML page (no network, no CDN) holding the interactive view of ``doc``."""
    title = {
        "ctxembed.attend/3": "attention",
        "ctxembed.attend/4": "attention",
        "ctxembed.attend/5": "attention",
        "ctxembed.compare/2": "compare",
        "ctxembed.compare/3": "compare",
        "ctxembed.compare/4": "compare",
        "ctxembed.compare/5": "compare",
        "ctxembed.neighbors/2": "neighbours",
        "ctxembed.neighbors/3": "neighbours",
    }
    name = title.get(doc.get("schema"), str(doc.get("schema")))
    subject = doc.get("text") or doc.get("word") or ""
    subject = markup_safe(str(subject))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>ctxembed {html.escape(name)}: {html.escape(str(subject))}</title></head>"
        f"<body>{html_fragment(doc, view)}{_steps(doc)}</body></html>\n"
    )


def _steps(doc: dict) -> str:
    """An explain document's steps under its view (``attend --explain --save x.html``), else nothing."""
    if not isinstance(doc.get("explain"), dict):
        return ""
    from ctxembed.views.explain_html import explain_html  # an explain page only

    return f'<div class="ctxembed-view">{explain_html(doc["explain"])}</div>'
