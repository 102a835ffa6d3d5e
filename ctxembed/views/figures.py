"""Documents -> figures: what a picture of each JSON document shows, independent of the file format.

A :class:`Figure` is a title, a few lines of text and panels (a heatmap, bars, curves or labelled
points). :mod:`ctxembed.views.svg` and :mod:`ctxembed.views.png` draw any figure; the HTML page embeds the SVG
(or, for attention, its interactive view). Adding a document type is one function::

    @figure_for("ctxembed.train/1")
    def train_figure(doc: dict, view: View) -> Figure:
        return Figure("training loss", [], [Curves("loss", "step", "loss", [("train", steps, losses)])])

Builders only pick and arrange numbers of the document; they compute nothing new.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ctxembed.declarations import check_view
from ctxembed.errors import UsageError, counted

# ------------------------------------------------------------------------------ one visual language
# Every view draws a quantity on the same scale: the terminal's shading, the SVG, the PNG and the HTML
# page all take their colours from these stops. Weights (0 to the largest shown) are sequential, white
# to dark blue (matplotlib's "Blues"); cosines (-1 to 1) diverging, red below 0, white at 0, blue above
# ("RdBu"), so a cosine of 0.4 is the blue a weight at 70% of its scale would be. Masked cells are grey
# with a "·", never white like a weight of 0.
SEQUENTIAL = [
    (0.0, (247, 251, 255)),
    (0.25, (198, 219, 239)),
    (0.5, (107, 174, 214)),
    (0.75, (33, 113, 181)),
    (1.0, (8, 48, 107)),
]
DIVERGING = [
    (0.0, (178, 24, 43)),
    (0.25, (239, 138, 98)),
    (0.5, (247, 247, 247)),
    (0.75, (103, 169, 207)),
    (1.0, (33, 102, 172)),
]
MASKED_FILL = (200, 200, 200)  # masked cells: grey, with "·"
MASKED_INK = (80, 80, 80)


def colour(share: float, diverging: bool = False) -> tuple[int, int, int]:
    """The colour of ``share`` in [0, 1] on the sequential (light to dark) or diverging scale."""
    stops = DIVERGING if diverging else SEQUENTIAL
    share = min(1.0, max(0.0, float(share))) if share == share else 0.0  # NaN: the lightest
    for (a, ca), (b, cb) in zip(stops, stops[1:], strict=False):
        if share <= b:
            t = (share - a) / (b - a)
            return tuple(round(x + (y - x) * t) for x, y in zip(ca, cb, strict=True))  # type: ignore[return-value]
    return stops[-1][1]


def bar_colour(share: float) -> tuple[int, int, int]:
    """A bar's fill for its share of the axis: the sequential scale from 35% to 85%, so that a short
    bar stays visible on white and a long one never turns black."""
    return colour(0.35 + 0.5 * min(1.0, max(0.0, float(share))))


def ink_on(rgb: tuple[int, int, int]) -> str:
    """Black or white text, whichever reads better on ``rgb``."""
    luminance = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]
    return "#000" if luminance > 140 else "#fff"


def cell_number(value: float) -> str:
    """A number inside a cell: two decimals, the leading 0 dropped to fit (.13, -.42, 1.00, 0)."""
    if value == 0:
        return "0"
    text = f"{value:.2f}"
    return text.replace("0.", ".", 1) if text.lstrip("-").startswith("0.") else text


def readout(value: float) -> str:
    """A number read out for a person (hover text, labels): three decimals."""
    return f"{value:.3f}"


def nice_ticks(low: float, high: float, count: int = 5) -> tuple[list[float], int]:
    """Round tick values covering [low, high] (about ``count``) and the decimals that print them alike."""
    span = high - low if high > low else 1.0
    raw = span / max(1, count - 1)
    step = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * step:
            step *= factor
            break
    first = math.ceil(low / step - 1e-9) * step
    ticks = []
    tick = first
    while tick <= high + 1e-9 * span:
        ticks.append(round(tick, 10))
        tick += step
    decimals = max(0, -math.floor(math.log10(step) + 1e-9)) if step < 1 else 0
    if decimals and abs(step * 10**decimals - round(step * 10**decimals)) > 1e-6:
        decimals += 1  # 0.25 needs two decimals
    return ticks, decimals


@dataclass(frozen=True)
class View:
    """Which part of a document to draw (the CLI's --layer, --head, --all-heads)."""

    layer: int | None = None
    head: int | None = None
    all_heads: bool = False
    all_layers: bool = False  # every layer: with all_heads the model view (layers x heads)
    cosine_scale: str = "fitted"  # cosines' colours: "fitted" to the values shown, or "absolute" (-1 to 1)


@dataclass
class Heatmap:
    title: str
    rows: list[str]
    columns: list[str]
    values: np.ndarray  # (rows, columns)
    low: float = 0.0  # value of the lightest colour
    high: float = 1.0  # value of the darkest colour
    masked: np.ndarray | None = None  # (rows, columns) bool: drawn as "·", not as a value
    diverging: bool = False  # a scale centred on 0 (cosines) instead of a sequential one
    digits: int = 2
    label: str = "weight"  # what a cell's number is, for hover text
    x_label: str = ""  # the axes' titles
    y_label: str = ""
    symmetric: bool = False  # value(i, j) = value(j, i): a cell names its pair, not a direction


@dataclass
class Bars:
    title: str
    labels: list[str]
    values: list[float]
    low: float = 0.0
    high: float = 1.0
    digits: int = 3
    label: str = "value"
    x_label: str = ""


@dataclass
class Curves:
    title: str
    x_label: str
    y_label: str
    series: list[tuple[str, Sequence[float], Sequence[float]]]  # (name, x values, y values)


@dataclass
class Points:
    title: str
    x: Sequence[float]
    y: Sequence[float]
    labels: list[str]
    groups: list[str] | None = None  # one colour per group
    x_label: str = ""
    y_label: str = ""


@dataclass
class Grid:
    """Small maps without numbers, one per (row, column): the model view, layers down and heads across."""

    title: str
    rows: list[str]  # e.g. "layer 0"
    columns: list[str]  # e.g. "head 3"; one column: the layer's own map
    maps: np.ndarray  # (rows, columns, T, T)
    tokens: list[str]  # the T tokens: hover text, and the note that says the order
    low: float = 0.0
    high: float = 1.0
    masked: np.ndarray | None = None  # (T, T) bool, the same in every map


Panel = Heatmap | Bars | Curves | Points | Grid


@dataclass
class Figure:
    title: str
    lines: list[str]  # text under the title: the sentence, the settings
    panels: list[Panel]
    notes: list[str] = field(default_factory=list)  # text under the panels: legends
    columns: int = 0  # panels per row (0: all in one row)


Builder = Callable[[dict, View], Figure]
FIGURES: dict[str, Builder] = {}


def figure_for(schema: str) -> Callable[[Builder], Builder]:
    """Register the figure builder of a document type (its "schema" value)."""

    def register(builder: Builder) -> Builder:
        FIGURES[schema] = builder
        return builder

    return register


def build_figure(doc: dict, view: View | None = None) -> Figure:
    schema = doc.get("schema")
    if schema not in FIGURES:
        known = ", ".join(sorted(FIGURES))
        raise UsageError(f"cannot draw a {schema!r} document as a picture (drawable: {known}); save it as .json")
    return FIGURES[schema](doc, view or View())


# ------------------------------------------------------------------------------ the documents
def _settings_lines(doc: dict) -> list[str]:
    v = doc.get("vectors") or {}
    lines = [f"settings: {doc['settings_summary']}"] if "settings_summary" in doc else []
    if v:
        dim = f" ({v.get('dim')}d)" if f"{v.get('dim')}d" not in str(v.get("name")) else ""  # "GloVe 6B 100d"
        lines.append(f"vectors: {v.get('name')}{dim}")
    return lines


def attention_masks(doc: dict, n: int) -> np.ndarray:
    """(T, T) True where the settings forced the weight to 0, as the document's ``masked_keys`` lists
    them (the attention core computed them); a document without the list marks nothing."""
    masked = np.zeros((n, n), dtype=bool)
    listed = (doc.get("attention") or doc).get("masked_keys", [])  # a reading lists its own (rollout: none)
    for query, keys in enumerate(listed[:n]):
        masked[query, keys] = True
    return masked


def layer_weights(weights: np.ndarray, layer: int, head: int | None) -> np.ndarray:
    """(L, h, T, T) -> (T, T): one head of ``layer``, or the mean of its heads (head None)."""
    return weights[layer].mean(axis=0) if head is None else weights[layer, head]  # (h, T, T) -> (T, T)


def _floats(values) -> np.ndarray:
    """The document's numbers as an array (float32 stays float32)."""
    array = np.asarray(values)
    return array if array.dtype.kind == "f" else array.astype(np.float64)


def attention_view(doc: dict, view: View) -> tuple[str, list[tuple[str, np.ndarray]]]:
    """A title and (panel title, weights (T, T)) pairs of one layer: a head, the mean of heads, or every head.
    A document with a reading (``attention``, from ``--attention``) shows the reading's maps instead."""
    weights = _floats(doc["weights"])  # (L, h, T, T)
    layers, heads = weights.shape[:2]
    check_view(layers, heads, view.layer, view.head)
    layer = layers - 1 if view.layer is None else view.layer
    reading = doc.get("attention")
    if reading is not None:
        return _reading_view(reading, layer, view)
    if view.all_heads and heads > 1:
        return f"layer {layer}, every head", [(f"head {h}", weights[layer, h]) for h in range(heads)]
    if view.head is not None:
        return f"layer {layer}, head {view.head}", [("", weights[layer, view.head])]
    if heads > 1:
        return f"layer {layer}, mean of {heads} heads", [("", layer_weights(weights, layer, None))]
    return f"layer {layer}", [("", weights[layer, 0])]


def table_view(doc: dict, view: View) -> tuple[str, np.ndarray]:
    """The per-token table's map and its title: the map of the layer shown, its head (``view.head``) or
    the mean of its heads, or the reading's map of that layer, so the table agrees with the matrix."""
    weights = _floats(doc["weights"])  # (L, h, T, T)
    layers, heads = weights.shape[:2]
    layer = layers - 1 if view.layer is None else view.layer
    reading = doc.get("attention")
    if reading is not None:
        title, panels = _reading_view(reading, layer, View(layer=layer, head=view.head))
        return title, panels[0][1]
    if view.head is not None:
        return f"layer {layer}, head {view.head}", weights[layer, view.head]
    return (f"layer {layer}, mean of {heads} heads" if heads > 1 else f"layer {layer}"), layer_weights(
        weights, layer, None
    )


def top_keys(values: np.ndarray, top: int) -> list[list[int]]:
    """Per row of ``values`` (T, T), the columns of its ``top`` largest weights above 0, largest first
    (ties in column order), as the document's ``top_attended`` lists them."""
    order = np.argsort(-values, axis=1, kind="stable")[:, :top]  # (T, top)
    return [[int(j) for j in row if values[i, j] > 0] for i, row in enumerate(order)]


def hidden_view(doc: dict, layer: int, head: int | None) -> tuple[list[str], np.ndarray] | None:
    """The units of no word ([CLS], [SEP]) and each word's share of attention to each, (T, S), in
    ``layer``: one head or the mean of its heads; None for a document without them (or with a reading
    other than the mean, whose maps are not shares of the raw weights)."""
    hidden = doc.get("hidden")
    if hidden is None or (doc.get("attention") or {}).get("reading", "mean") != "mean":
        return None
    share = _floats(hidden["share"])[layer]  # (h, T, S)
    return list(hidden["units"]), (share.mean(axis=0) if head is None else share[head])  # (T, S)


def as_given(values: np.ndarray, share: np.ndarray) -> np.ndarray:
    """Word maps (T, T) renormalised over the words, back to the shares the model gave: each row times
    what its units of no word left (1 - the sum of its (T, S) ``share``)."""
    return values * (1 - share.sum(axis=1, keepdims=True))  # (T, T) x (T, 1) -> (T, T)


def model_view(doc: dict, view: View) -> tuple[str, list[str], list[str], np.ndarray]:
    """The model view's maps: (title, row labels, column labels, maps (rows, columns, T, T)): with
    ``all_heads`` one row per layer and one column per head, else one row of the layers' own maps (the
    mean of heads, or the reading's), side by side. A document with a reading shows the reading."""
    weights = _floats(doc["weights"])  # (L, h, T, T)
    layers, heads = weights.shape[:2]
    reading = doc.get("attention")
    name = "attention weights" if reading is None else reading["reading"]
    if reading is not None and (reading.get("heads") is not None or not view.all_heads):
        weights = _floats(reading["heads"] if view.all_heads else reading["layers"])  # (L, h, T, T) or (L, T, T)
    elif reading is not None:
        raise UsageError(f"{name} has one map per layer, not one per head: drop {{all_heads}}", "all_heads")
    rows = [f"layer {layer}" for layer in range(layers)]
    if view.all_heads:
        return f"{name}, every layer and head", rows, [f"head {h}" for h in range(heads)], weights
    whole = weights[None] if weights.ndim == 3 else weights.mean(axis=1)[None]  # (1, L, T, T) the layers side by side
    which = " (mean of heads)" if reading is None and heads > 1 else ""
    return f"{name}, every layer{which}", [""], rows, whole


def _reading_view(reading: dict, layer: int, view: View) -> tuple[str, list[tuple[str, np.ndarray]]]:
    """:func:`attention_view` of a reading: its map of the whole layer, or its maps per head when it has them."""
    name, per_head = reading["reading"], reading.get("heads")
    if per_head is not None and (view.all_heads or view.head is not None):
        maps = _floats(per_head)[layer]  # (h, T, T)
        if view.head is not None:
            return f"{name}, layer {layer}, head {view.head}", [("", maps[view.head])]
        return f"{name}, layer {layer}, every head", [(f"head {h}", m) for h, m in enumerate(maps)]
    if per_head is None and (view.all_heads or view.head is not None):
        raise UsageError(
            f"{name} has one map per layer, not one per head: drop {{head}} and {{all_heads}}", "head", "all_heads"
        )
    whole = {"mean": "mean of the heads", "rollout": "through the layers", "value-norm": "the heads added up"}
    return f"{name}, layer {layer} ({whole.get(name, 'the layer')})", [("", _floats(reading["layers"])[layer])]


# How every view marks a token whose vector is not the vocabulary's own (documents' "source"), and
# the legend that says so; a document from before sources were recorded has none.
SOURCE_MARKS = {"vocabulary": "", "estimated": "°", "subword": "*", "none": "∅", "pieces": "+", "unknown": "?"}
SOURCE_LEGEND = {
    "estimated": "° vector estimated (from a smaller model's vector of the word)",
    "subword": "* vector built from character n-grams (the word is not in the vocabulary)",
    "none": "∅ no vector (skipped, or a zero vector with --oov zero)",
    "pieces": "+ the mean of the word's wordpieces (the model's vocabulary splits it)",
    "unknown": "? read as [UNK]: the model's vocabulary cannot spell the word (one vector for all such words)",
}


def marked(text: str, source: str | None) -> str:
    """A token's text with the mark of its source."""
    return text + SOURCE_MARKS.get(source or "vocabulary", "")


def source_notes(sources) -> list[str]:
    """The legend lines of the marks among ``sources``."""
    present = set(sources)
    return [SOURCE_LEGEND[s] for s in ("estimated", "subword", "none", "pieces", "unknown") if s in present]


def token_labels(doc: dict) -> tuple[list[str], list[int]]:
    """Texts (with their source's mark) and positions of the tokens that took part in attention
    (the rows of every matrix). A word's second and later tokens are told apart as ``--word`` names
    them: the, ..., the#2."""
    positions = list(doc["attended_positions"])
    seen: dict[str, int] = {}
    labels = []
    for p in positions:
        token = doc["tokens"][p]
        seen[token["text"]] = count = seen.get(token["text"], 0) + 1
        text = token["text"] if count == 1 else f"{token['text']}#{count}"
        labels.append(marked(text, token.get("source")))
    return labels, positions


@figure_for("ctxembed.attend/5")  # explain's steps at the level the model ran (pieces for a subword model)
@figure_for("ctxembed.attend/4")
@figure_for("ctxembed.attend/3")  # documents saved before the "warnings" field
def attend_figure(doc: dict, view: View) -> Figure:
    labels, _ = token_labels(doc)
    if view.all_layers:
        return _model_figure(doc, view, labels)
    title, panels = attention_view(doc, view)
    masked = attention_masks(doc, len(labels))
    darkest = max(float(np.max(values, initial=0.0)) for _, values in panels) or 1.0
    heatmaps = [
        Heatmap(
            panel,
            labels,
            labels,
            values,
            high=darkest,
            masked=masked if masked.any() else None,
            x_label="key (attended to)",
            y_label="query (attending)",
        )
        for panel, values in panels
    ]
    steps, written = _explain_panels(doc["explain"]) if isinstance(doc.get("explain"), dict) else ([], [])
    return Figure(
        title if "attention" in doc else f"attention weights, {title}",
        [doc["text"], *_settings_lines(doc)],
        heatmaps + steps,
        notes=[
            f"rows: how much each token attends to each column (rows sum to 1); darkest = {darkest:.3g}"
            + ("; · masked" if masked.any() else ""),
            *source_notes(doc["tokens"][p].get("source") for p in doc["attended_positions"]),
            *written,
        ],
        columns=min(4, len(heatmaps)) if not steps else 2,
    )


def _explain_panels(steps: dict) -> tuple[list[Panel], list[str]]:
    """``--explain``'s steps for a picture (``--save x.svg|x.png``): a heatmap of each step that draws a
    matrix (scores, scaled scores, weights), over the units the layer ran on, and every step's heading
    and lines as notes, in order."""
    from ctxembed.views.explain import explain_steps, matrix_of  # (rich's cell widths): a picture of --explain only

    tokens = list(steps["tokens"])
    panels: list[Panel] = []
    notes: list[str] = []
    for step in explain_steps(steps):
        if "rule" in step:
            notes += [step["rule"], *(f"({note})" for note in step["notes"])]
            continue
        label = (step["label"] or "").replace("{shown}", "")
        notes += [label] * bool(label) + [line["text"].strip() for line in step["lines"]]
        draw = step["draw"] or {}
        if "matrix" not in draw:
            continue
        m = matrix_of(steps, draw)  # the range and masked cells every view of the steps draws
        panels.append(
            Heatmap(
                label, tokens, tokens, m.values if m.masked is None else np.where(m.masked, 0.0, m.values),
                low=m.low, high=m.high, masked=m.masked, digits=m.digits,
                label="score" if draw.get("range") else "weight", x_label="key", y_label="query",
            )
        )  # fmt: skip
    return panels, notes


def _model_figure(doc: dict, view: View, labels: list[str]) -> Figure:
    title, rows, columns, maps = model_view(doc, view)
    masked = attention_masks(doc, len(labels))
    grid = Grid("", rows, columns, maps, labels, masked=masked if masked.any() else None)  # the figure's title says it
    return Figure(
        title,
        [doc["text"], *_settings_lines(doc)],
        [grid],
        notes=[
            "each map: rows attend (query), columns are attended to (key), tokens in order: " + " ".join(labels),
            "white 0 to dark blue 1 in every map" + ("; grey: masked" if masked.any() else ""),
        ],
    )


@figure_for("ctxembed.compare/2")
@figure_for("ctxembed.compare/5")
@figure_for("ctxembed.compare/4")  # documents saved before the per-layer "layers" field
@figure_for("ctxembed.compare/3")  # documents saved before the "warnings" field
def compare_figure(doc: dict, view: View) -> Figure:
    labels = [f"S{i + 1}" for i in range(len(doc["sentences"]))]
    panels: list[Panel] = []
    for entry in doc["words"]:
        for kind in ("static", "contextual"):
            panels.append(
                _cosine_map(
                    f"{kind} cosine: {entry['word']!r}",
                    labels,
                    labels,
                    _floats(entry[f"{kind}_similarity"]),
                    f"{kind} cosine of {entry['word']!r}",
                    x_label="sentence",
                    y_label="sentence",
                    symmetric=True,
                    absolute=view.cosine_scale == "absolute",
                )
            )
        if entry.get("layers") is not None:  # ctxembed.compare/5: the cosines at each layer
            panels.append(_layers_heatmap(entry, labels, absolute=view.cosine_scale == "absolute"))
    return Figure(
        "static against contextual cosine",
        _settings_lines(doc),
        panels,
        notes=[f"{label}: {sentence}" for label, sentence in zip(labels, doc["sentences"], strict=True)],
        columns=2,
    )


def _layers_heatmap(entry: dict, labels: list[str], *, absolute: bool = False) -> Heatmap:
    """The word's cosine for each pair of sentences (columns) at each layer and at the read-out (rows)."""
    matrices = [*_floats(entry["layers"]), _floats(entry["contextual_similarity"])]  # L + 2 of (N, N)
    pairs = [(i, j) for i in range(len(labels)) for j in range(i + 1, len(labels))]
    return _cosine_map(
        f"cosine of {entry['word']!r} at each layer",
        [f"layer {layer}" for layer in range(len(matrices) - 1)] + ["read-out"],
        [f"{labels[i]}-{labels[j]}" for i, j in pairs],
        np.array([[m[i][j] for i, j in pairs] for m in matrices]),  # (L + 2, pairs)
        f"cosine of {entry['word']!r}",
        x_label="sentence pair",
        y_label="layer (0: the input to layer 1)",
        absolute=absolute,
    )


def cosine_range(values, *, symmetric: bool = False, absolute: bool = False) -> tuple[float, float, bool]:
    """(low, high, diverging): the colour scale of a map of cosines. Fitted (the default): light at the
    lowest value shown and dark at the highest (off the diagonal of a symmetric map, whose 1s say
    nothing), so cosines of 0.83 to 0.95 are told apart; ``absolute``, or values all alike: -1 to 1,
    centred on 0."""
    if not absolute:
        array = np.asarray(values, dtype=np.float64)
        if symmetric and array.ndim == 2 and array.shape[0] == array.shape[1] and len(array) > 1:
            array = array[~np.eye(len(array), dtype=bool)]  # (N * (N - 1),) off the diagonal
        finite = array[np.isfinite(array)]
        if finite.size and float(finite.max() - finite.min()) > 1e-6:
            return float(finite.min()), float(finite.max()), False
    return -1.0, 1.0, True


def scale_note(low: float, high: float, diverging: bool) -> str:
    """How a cosine map's colours read, for a title or a legend."""
    if diverging:
        return "colours -1 to 1"
    return f"colours {low:.3f} to {high:.3f}, fitted"


def _cosine_map(
    title: str, rows: list[str], columns: list[str], values, label: str, *, absolute: bool = False, **axes
) -> Heatmap:
    """A heatmap of cosines, three digits in each cell, coloured on :func:`cosine_range`'s scale."""
    low, high, diverging = cosine_range(values, symmetric=axes.get("symmetric", False), absolute=absolute)
    return Heatmap(
        f"{title} ({scale_note(low, high, diverging)})",
        rows,
        columns,
        values,
        low=low,
        high=high,
        diverging=diverging,
        digits=3,
        label=label,
        **axes,
    )


def neighbour_search(doc: dict) -> tuple[str, str | None]:
    """What a neighbors document's lists were searched among, and what was left out of them (None: nothing),
    in the words the terminal, the pictures and the page all use."""
    among = doc.get("among")
    pool = f" among the {among:,} most frequent (--among 0: all)" if among and among < doc["vectors"]["words"] else ""
    search = doc.get("search")
    where = f": the model's contextual space, {search['about']}" if search else f" searched {doc['space']}"
    left = []
    if doc["excluded"]:
        left.append(f"the sentence's words {', '.join(doc['excluded'])} (--include-context keeps them)")
    if doc.get("forms"):
        left.append(f"the word's own forms {', '.join(doc['forms'])}")
    return f"words{pool} (contextual column{where})", "; ".join(left) or None


@figure_for("ctxembed.neighbors/3")
@figure_for("ctxembed.neighbors/2")  # documents saved before the "warnings" field
def neighbors_figure(doc: dict, view: View) -> Figure:
    panels: list[Panel] = [
        Bars(
            f"{kind} neighbours of {doc['word']!r}",
            [n["word"] for n in doc[kind]],
            [n["similarity"] for n in doc[kind]],
            low=0.0,
            high=1.0,
            label=f"cosine to the {kind} {doc['word']!r}",
            x_label="cosine",
        )
        for kind in ("static", "contextual")
    ]
    which = f" (#{doc['position']}, occurrence {doc['occurrence']})" if doc.get("occurrence", 1) > 1 else ""
    nearest, left = neighbour_search(doc)
    return Figure(
        f"nearest words of {marked(doc['word'], doc.get('source'))!r}{which} in: {doc['text']}",
        _settings_lines(doc),
        panels,
        notes=[f"nearest {nearest}", *([f"left out {left}"] if left else []), *source_notes([doc.get("source")])],
        columns=2,
    )


@figure_for("ctxembed.senses/2")
def senses_figure(doc: dict, view: View) -> Figure:
    """One map per word: its occurrences on their first two principal components, coloured by sense."""
    panels: list[Panel] = []
    for entry in doc["words"]:
        if not entry["k"]:
            continue
        names = [
            f"{s['sense']} ({s['size']}): " + " ".join(item["word"] for item in s["label"][:2]) for s in entry["senses"]
        ]
        points = entry["occurrences"]
        explained = entry["map"]["explained_variance"]
        panels.append(
            Points(
                f"{entry['word']}: {counted(entry['k'], 'sense')}, {len(points)} occurrences "
                f"(PCA, {sum(explained):.0%} of the variance)",
                [p["x"] for p in points],
                [p["y"] for p in points],
                [f"line {p['line']}" if len(points) <= 40 else "" for p in points],  # more: unreadable
                [names[p["sense"] - 1] for p in points],
                x_label="first principal component",
                y_label="second principal component",
            )
        )
    if not panels:
        raise UsageError("no word was clustered: nothing to draw")
    corpus = doc["corpus"]["name"]
    return Figure(f"senses in {corpus}", _settings_lines(doc), panels, columns=min(2, len(panels)))


@figure_for("ctxembed.train/1")
def train_figure(doc: dict, view: View) -> Figure:
    """The loss curves of a training run: the training batches and the held-out sentences, by step."""
    series = [
        (
            name.replace("_", "-"),
            [e["step"] for e in doc[name] if e["loss"] is not None],
            [e["loss"] for e in doc[name] if e["loss"] is not None],
        )
        for name in ("train", "held_out")
    ]
    final = doc["final"]
    lines = [
        doc["settings_summary"],
        f"{doc['corpus']['source']}: {doc['corpus']['tokens']:,} tokens, {doc['steps']:,} steps",
    ]
    if final["held_out"] is not None and final["held_out_initial"] is not None:
        lines.append(f"held-out loss {final['held_out_initial']:.3f} -> {final['held_out']:.3f}")
    return Figure(
        "training loss (masked-word cross-entropy, nats)",
        lines,
        [Curves("loss", "step", "loss", [s for s in series if s[1]])],
    )


@figure_for("ctxembed.side-by-side/1")
def side_by_side_figure(doc: dict, view: View) -> Figure:
    """One column per model: what the word attends to, its cosine to each word, and across the sentences."""
    word, views = doc["word"], doc["models"]
    names = [f"{entry['model']} · {entry['preset']}" for entry in views]
    panels: list[Panel] = [
        Bars(f"{name}: what {word!r} attends to", entry["tokens"], list(entry["word_attention"]), label="weight")
        for name, entry in zip(names, views, strict=True)
    ]
    panels += [
        Bars(
            f"{name}: cosine of {word!r} to each word",
            entry["tokens"],
            list(entry["word_cosines"]),
            label="contextual cosine",  # from 0: a negative cosine is a bar of no length, its number shown
        )
        for name, entry in zip(names, views, strict=True)
    ]
    labels = [f"S{i + 1}" for i in range(len(doc["sentences"]))]
    panels += [
        _cosine_map(
            f"{name}: {word!r} across sentences",
            labels,
            labels,
            _floats(entry["across"]["contextual_similarity"]),
            f"contextual cosine of {word!r}",
            symmetric=True,
            absolute=view.cosine_scale == "absolute",
        )
        for name, entry in zip(names, views, strict=True)
        if entry["across"] is not None
    ]
    notes = [f"{label}: {sentence}" for label, sentence in zip(labels, doc["sentences"], strict=True)]
    notes += [f"{name}: {entry['settings_summary']}" for name, entry in zip(names, views, strict=True)]
    notes += [f"{gone['model']} · {gone['preset']} not shown: {gone['reason']}" for gone in doc["missing"]]
    return Figure(
        f"{word!r} side by side: attention and cosines, model by model", [], panels, notes, columns=len(views)
    )
