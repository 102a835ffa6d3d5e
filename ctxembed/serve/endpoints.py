"""Request bodies -> documents, computed by :class:`ctxembed.Explorer`: what ``ctxembed serve`` answers.

A body is a JSON object whose keys are the API's keywords: the endpoint's own (``sentence``, ``word``,
``k`` ...), ``model`` (a name of the model registry) and any setting of :data:`ctxembed.presets.SETTINGS`,
``preset``, ``oov`` and ``max_tokens``. The answer is the document ``--json`` prints for the same input:

>>> explorers = Explorers("notes-toy")
>>> answer("attend", {"sentence": "apple is the phone", "preset": "notes"}, explorers)["tokens"][0]["text"]
'apple'
>>> answer("attend", {"sentence": "apple", "weights_file": "/etc/passwd"}, explorers)
Traceback (most recent call last):
...
ctxembed.errors.UsageError: the page cannot name files: --weights is read only by the command line

Errors are the library's (:mod:`ctxembed.errors`), with the command line's messages; the server maps
them to 4xx. Nothing here reads a path sent by a request: the vectors are chosen at start.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.errors import ConsoleError

from ctxembed.api import Explorer, side_by_side
from ctxembed.budget import BUDGET, attention_weights
from ctxembed.core.mix import LEARNED, OFF, is_weights
from ctxembed.declarations import ReadOptions, declarations
from ctxembed.engine import Prepared
from ctxembed.engine.readout import split_readout
from ctxembed.engine.registry import DEFAULT_MODEL, entry_of, model_options
from ctxembed.errors import UsageError
from ctxembed.options import OPTIONS, CommandOption
from ctxembed.output import say
from ctxembed.presets import PRESET_HELP, PRESET_NAMES, PRESETS, SETTINGS, flag
from ctxembed.serve.lanes import HEAVY, LIGHT, lanes
from ctxembed.vectors.cache import cache_dir
from ctxembed.vectors.derived import find, names
from ctxembed.vectors.models import install_command, is_installed
from ctxembed.views import render
from ctxembed.views.figures import build_figure
from ctxembed.views.svg import figure_svg

MAX_BODY = 1 << 20  # bytes of one request body: a 1 MB sentence still reaches the tokenizer's own limit
MAX_SENTENCES = 32  # compare: a matrix of 32 x 32 is as much as a page shows
# characters of one sentence: 512 tokens of prose are ~3,000; reading 20,000 takes at most ~0.3 s even when
# no word has a vector (every token then goes through the slow, skipping path)
MAX_CHARS = 20_000
MAX_TOKENS = ReadOptions.max_tokens  # per sentence; a request may lower it, not raise it
MAX_WEIGHTS = 1 << 20  # attention weights in one attend document (layers x heads x T²): ~10 MB of JSON
# distinct settings kept ready. Each opens its own store (the vectors stay memory-mapped, shared): measured
# with the shipped GloVe, about 14 MB for attend and about 55 MB once it has searched neighbours. A model that
# takes no settings has one explorer (MiniLM's: about 125 MB of RSS, 77 MB of it its memory-mapped files)
CACHED_EXPLORERS = 4
FILE_SETTINGS = ("weights_file",)  # settings that name a file: only the command line may
READ_KEYS = ("oov", "max_tokens")
# the endpoints that read one word's vector take a window around it per request (--window), the trained
# models' too: it crops the sentences, so no explorer of its own is built for it
WINDOWED = ("compare", "neighbors")


def _keys(command: str, *names: str) -> dict[str, CommandOption]:
    """An endpoint's keys: the options of the command it answers for, as the table declares them there."""
    return {name: OPTIONS[name].of(command) for name in names}


# Each endpoint takes the keys of its command (flags, types, limits, defaults: ctxembed.options.OPTIONS);
# the page has no stdin, so the text is required.
ENDPOINTS: dict[str, dict[str, CommandOption]] = {
    "attend": _keys("attend", "sentence", "top", "with_vectors"),
    "explain": _keys("attend", "sentence", "layer", "head", "word"),  # word: the neuron view's query
    "compare": _keys("compare", "sentences", "word"),
    "side-by-side": _keys("side_by_side", "sentences", "word"),
    "neighbors": _keys("neighbors", "sentence", "word", "k", "include_context", "space"),
}
TEXTS = ("sentence", "sentences")  # required here: the page has no stdin to read them from


def _required(name: str, spec: CommandOption) -> bool:
    return spec.required or name in TEXTS


# ------------------------------------------------------------------------------ explorers
class Explorers:
    """One :class:`Explorer` per distinct settings and lane, on the vectors chosen at start; the most
    recently used :data:`CACHED_EXPLORERS` of each lane are kept. Each comes with a lock: an Engine fills
    caches on first use, so one request at a time uses it (a request costs about a millisecond;
    docs/serve.md measures this). The light lane has explorers of its own, so a heavy request (a long
    side by side) never holds a lock a light one waits for; a trained model, whose requests are all
    heavy, has one explorer (:func:`lane_of`). ``lanes`` are the server's lanes (:mod:`ctxembed.serve.lanes`).

    An explorer is built outside the cache's lock, so a slow one (statistics of many words, large
    projections within the budget) holds up only the requests that wait for the same settings. The
    statistics files the builds add to the cache folder are counted: past
    ``BUDGET.server_cache_files`` the oldest this server wrote is removed, so requests cannot fill a disk."""

    def __init__(self, vectors: str | None = None, *, limit: int | None = None, trust: bool = False, size=None):
        self.source = {"vectors": vectors, "limit": limit, "trust": trust}
        self.size = size or CACHED_EXPLORERS
        # (lane, the settings' key) -> the explorer and its lock, the most recently used last
        self._entries: OrderedDict[tuple, tuple[Explorer, threading.Lock]] = OrderedDict()
        self._building: dict[tuple, threading.Lock] = {}
        self._lock = threading.Lock()
        self.written: OrderedDict[Path, None] = OrderedDict()  # cache files this server's builds added
        self.lanes = lanes()
        self.default = self.get({})[0]  # bad vectors fail here, before the server starts

    def get(self, options: Mapping[str, Any], lane: str = LIGHT) -> tuple[Explorer, threading.Lock]:
        """The explorer of ``options`` (model, preset, settings, oov, max_tokens) for ``lane`` and its
        lock. The model is part of the key; the default model and preset are the same key as none, so the
        heavy lane's explorers and side-by-side's ({"model": "minilm", "preset": "default"}) are shared."""
        options = _canonical(options)
        lane = lane_of(options, lane)
        key = (lane, tuple(sorted((name, type(value).__name__, repr(value)) for name, value in options.items())))
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                return entry
            building = self._building.setdefault(key, threading.Lock())
        with building:  # one build per settings; others asking for them wait for it
            with self._lock:
                entry = self._entries.get(key)
            if entry is None:
                entry = (self._build(options), threading.Lock())
            with self._lock:
                self._entries[key] = entry
                self._entries.move_to_end(key)
                self._building.pop(key, None)
                kept = [k for k in self._entries if k[0] == lane]  # oldest first
                for oldest in kept[: max(0, len(kept) - self.size)]:
                    del self._entries[oldest]
            return entry

    def _build(self, options: Mapping[str, Any]) -> Explorer:
        options = dict(options)
        before = _cache_files()
        # the vectors chosen at start (and their limit, trust) go to the models that read vectors
        takes = model_options(options.get("model", DEFAULT_MODEL))
        source = {name: value for name, value in self.source.items() if name in takes}
        try:
            return Explorer(
                source.pop("vectors", None),
                options.pop("preset", "default"),
                **source,
                on_note=say,
                label=flag,
                **options,
            )
        finally:
            self._forget_oldest(_cache_files() - before)

    def _forget_oldest(self, added: set[Path]) -> None:
        with self._lock:
            for path in sorted(added):
                self.written[path] = None
            while len(self.written) > BUDGET.server_cache_files:
                oldest, _ = self.written.popitem(last=False)
                oldest.unlink(missing_ok=True)


def lane_of(options: Mapping[str, Any], lane: str) -> str:
    """The lane whose explorer serves ``options``: ``lane``, but a trained model's requests are all heavy
    (:func:`_light`), so it has one explorer per read-out (``minilm@N`` is one more, about 48 MB: the
    heavy lane keeps 4; a second copy in the light lane would cost about 92 MB)."""
    return lane if not entry_of(options.get("model", DEFAULT_MODEL)).trained else HEAVY


def _canonical(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` without what changes nothing: the default model and the default preset."""
    return {name: value for name, value in options.items() if (name, value) not in DEFAULTS}


DEFAULTS = {("model", DEFAULT_MODEL), ("preset", "default")}


def _cache_files() -> set[Path]:
    """The statistics files in the cache folder (what a request's settings can add)."""
    try:
        return set(cache_dir().glob("stats-*.npz"))
    except OSError:
        return set()


# ------------------------------------------------------------------------------ bodies
def _shown(value: Any) -> str:
    if isinstance(value, (list, dict)):  # its repr could be deep or long
        return f"a JSON {'list' if isinstance(value, list) else 'object'}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _check_key(name: str, spec: CommandOption, value: Any) -> Any:
    """A key's value checked by the table (its type and limits, named as the command line names them),
    and its texts by the page's own limits."""
    value = spec.check(value)
    texts = value if isinstance(value, list) else [value]
    if isinstance(value, list) and len(value) > MAX_SENTENCES:
        raise UsageError(f"{name}: {len(value)} sentences, more than the page's {MAX_SENTENCES}")
    for text in texts:
        if isinstance(text, str) and len(text) > MAX_CHARS:
            raise UsageError(f"{name} has {len(text):,} characters, more than the page takes ({MAX_CHARS:,})")
    return value


def _check_setting(name: str, value: Any) -> Any:
    if isinstance(value, (list, dict)):  # a setting is one value: a list or object is no preset or number
        raise UsageError(f"{name} must be one value (a string, number or true/false), not {_shown(value)}")
    if name == "preset" and not isinstance(value, str):
        raise UsageError(f"preset must be a name ({', '.join(PRESET_NAMES)}), not {_shown(value)}")
    if name in FILE_SETTINGS:
        raise UsageError(f"the page cannot name files: {flag(name)} is read only by the command line")
    if name == "mix" and isinstance(value, str):
        if value.strip() not in (OFF, LEARNED) and not is_weights(value.strip()):
            raise UsageError(
                f"the page cannot name files: {flag(name)} takes weights such as 0.2,0.8, off or learned here"
            )
    if name == "max_tokens" and isinstance(value, int) and not isinstance(value, bool) and value > MAX_TOKENS:
        raise UsageError(f"{flag(name)} {value} is more than the page allows ({MAX_TOKENS})")
    return value


def _check_model(value: Any) -> str:
    # the catalogue's models and the derived ones, and a trained one read out at hidden state N (minilm@3)
    if not isinstance(value, str) or find(split_readout(value)[0]) is None:
        raise UsageError(f"model must be one of {', '.join(names())}, not {_shown(value)}")
    return value


def split_body(endpoint: str, body: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the endpoint's keywords, the explorer's options) of a request body; UsageError for anything else.
    A model that takes no settings (a trained one) is refused any: the page does not send them."""
    if not isinstance(body, dict):
        raise UsageError(f"the request body must be a JSON object, not {type(body).__name__}")
    keys = ENDPOINTS[endpoint]
    own: dict[str, Any] = {name: spec.default for name, spec in keys.items() if not _required(name, spec)}
    options: dict[str, Any] = {}
    for name, value in body.items():
        if value is None:
            continue  # null: the preset's (or the endpoint's) default
        if name in keys:
            own[name] = _check_key(name, keys[name], value)
        elif name == "window" and endpoint in WINDOWED:
            own[name] = declarations(ReadOptions)["window"].check(value)  # SettingError: {window} named
        elif name == "model":
            options[name] = _check_model(value)
        elif name in SETTINGS or name in READ_KEYS or name == "preset":
            options[name] = _check_setting(name, value)
        else:
            windowed = ("window",) if endpoint in WINDOWED else ()
            settings = (n for n in SETTINGS if n not in FILE_SETTINGS)
            known = ", ".join([*keys, *windowed, "model", "preset", *settings, *READ_KEYS])
            raise UsageError(f"unknown key {_shown(name)} for /api/{endpoint}; known: {known}")
    missing = [name for name, spec in keys.items() if _required(name, spec) and name not in own]
    if missing:
        raise UsageError(f"/api/{endpoint} needs {' and '.join(missing)}")
    model = options.get("model", DEFAULT_MODEL)
    given = [name for name in options if name != "model"]
    if entry_of(model).trained and given:  # so one explorer serves every request for it (docs/serve.md)
        shown = ", ".join("preset" if n == "preset" else "{" + n + "}" for n in given)
        named = [n for n in given if n != "preset"]
        raise UsageError(
            f"{{model}} {model} is a trained model: the page runs it as trained, with no {shown}", "model", *named
        )
    return own, options


# ------------------------------------------------------------------------------ documents
def answer(endpoint: str, body: Any, explorers: Explorers) -> dict:
    """The ``--json`` document of ``endpoint`` (attend, explain, compare, side-by-side, neighbors) for a
    request body."""
    own, options = split_body(endpoint, body)
    if endpoint == "side-by-side":
        with explorers.lanes[HEAVY].slot():  # every model of the registry: a heavy request
            return _side_by_side(own, options, explorers)
    lane = LIGHT if _light(own, options) else HEAVY
    with explorers.lanes[lane].slot():  # Busy (503) when the lane and its queue are full
        explorer, lock = explorers.get(options, lane)
        with lock:
            return _document(endpoint, own, explorer)


# Requests run in two lanes (ctxembed.serve.lanes), so heavy ones (long texts, many heads and layers,
# projections) queue among themselves, never in front of the light ones a page sends at each pause in
# typing, and never hold an explorer's lock that a light one waits for (each lane has its own explorers).
LIGHT_CHARACTERS = 2_000  # characters of text of a light request
LIGHT_HEADS_LAYERS = 16  # heads x layers of a light request


def _light(own: dict[str, Any], options: dict[str, Any]) -> bool:
    """Whether a request is light whatever its vectors: a model shaped by the settings (a trained one runs
    all its layers and heads), short text, few heads and layers, the identity projection and the preset's
    statistics (no new abtt_words to compute)."""
    if entry_of(options.get("model", DEFAULT_MODEL)).trained:
        return False
    texts = own.get("sentences") or [own.get("sentence", "")]
    preset = PRESETS.get(options.get("preset", "default"))
    settings = {**(preset.values() if preset is not None else {}), **options}
    heads, layers = settings.get("heads", 1), settings.get("layers", 1)
    return (
        sum(len(t) for t in texts) <= LIGHT_CHARACTERS
        and all(isinstance(n, int) for n in (heads, layers))
        and heads * layers <= LIGHT_HEADS_LAYERS
        and settings.get("projection", "identity") in ("identity", "file")
        and "abtt_words" not in options
    )


def _document(endpoint: str, own: dict[str, Any], explorer: Explorer) -> dict:
    if endpoint == "compare":
        return explorer.compare(own["sentences"], own["word"], window=own.get("window")).document()
    if endpoint == "neighbors":
        return explorer.neighbors(
            own["sentence"], own["word"], own["k"], include_context=own["include_context"], space=own["space"],
            window=own.get("window"),
        ).document()  # fmt: skip
    sentence = _sized(explorer, own["sentence"])
    if endpoint == "explain":
        return explorer.explain(sentence, layer=own["layer"], head=own["head"], word=own["word"]).document()
    return explorer.attend(sentence, top=own["top"], with_vectors=own["with_vectors"]).document()


def _side_by_side(own: dict, options: dict, explorers: Explorers) -> dict:
    """Every view of the model registry on the same sentences (:func:`ctxembed.api.side_by_side`), each
    view's engine from the heavy lane's cached explorers and used under its lock (taken in the registry's
    order; the heavy lane runs one side-by-side at a time, and the light lane's explorers are others)."""
    if options:
        raise UsageError(f"side-by-side shows each model with its own presets: it takes no {', '.join(options)}")
    with ExitStack() as held:

        def open_view(model: str, preset: str):
            explorer, lock = explorers.get({"preset": preset, "model": model}, HEAVY)
            held.enter_context(lock)
            return explorer.engine

        vectors = explorers.source["vectors"]
        return side_by_side(own["sentences"], own["word"], vectors=vectors, on_note=say, open_view=open_view).document()


def _sized(explorer: Explorer, sentence: str) -> Prepared:
    """The sentence prepared (once: attend and explain run what this returns), refused when its weights
    would be too many for a page, before attention runs."""
    prepared = explorer.engine.prepare(sentence)
    card = explorer.engine.card
    tokens = len(prepared.used)
    count = attention_weights(card.layers, card.heads, tokens)
    if count > MAX_WEIGHTS:
        raise UsageError(
            f"{tokens} tokens x {card.heads} head(s) x {card.layers} layer(s) give {count:,} attention weights, more "
            f"than the page draws ({MAX_WEIGHTS:,}): use a shorter sentence, fewer {{heads}} or {{layers}}",
            "heads",
            "layers",
        )
    return prepared


def registry(explorers: Explorers) -> dict:
    """What the page builds its controls and command lines from: every setting's declaration (type,
    choices, limits, flag, help), each preset's values, the endpoints' keys, the vectors and the models of
    the registry (whether each is installed here, the command that installs it, whether it takes settings)."""

    def declared(name, spec, maximum=None) -> dict:
        kind = "choice" if spec.choices else spec.kind.__name__
        return {
            "name": name,
            "flag": spec.option,
            "off_flag": (spec.off_flag or "--no-" + spec.option[2:]) if spec.kind is bool else None,
            "kind": kind,
            "choices": list(spec.choices) if spec.choices else None,
            "minimum": spec.minimum,
            "maximum": maximum if maximum is not None else spec.maximum,
            "optional": spec.optional,
            "metavar": spec.metavar,
            "help": spec.help,
            "panel": spec.panel,
            "default": spec.default,
            "requires": list(spec.requires) if spec.requires else None,
        }

    def values(name: str) -> dict:
        return {k: v for k, v in PRESETS[name].values().items() if k not in FILE_SETTINGS}

    source = explorers.source["vectors"]
    return {
        "schema": "ctxembed.serve-settings/2",
        "vectors": explorers.default.vectors,
        "model": DEFAULT_MODEL,
        "models": [
            {
                "name": name,
                "summary": entry.summary,
                "installed": is_installed(name),
                "install": install_command(name) if entry.package is not None else None,
                "settings": not entry.trained,
                "hidden_states": entry.hidden_states,  # the page's read-out choice (NAME@N), when known
            }
            for name, entry in ((name, find(name)) for name in names())
        ],
        "vectors_options": ([] if source is None else ["--vectors", str(source)])
        + ([] if explorers.source["limit"] is None else ["--limit", str(explorers.source["limit"])])
        + (["--trust"] if explorers.source["trust"] else []),
        "presets": {name: values(name) for name in PRESET_NAMES},
        "preset_help": PRESET_HELP,
        "settings": [declared(name, spec) for name, spec in SETTINGS.items() if name not in FILE_SETTINGS],
        "read_options": [
            declared(name, spec, MAX_TOKENS if name == "max_tokens" else None)
            for name, spec in declarations(ReadOptions).items()
        ],
        "endpoints": {
            name: {
                key: {
                    "kind": "list" if spec.repeatable else spec.kind.__name__,
                    "required": _required(key, spec),
                    "minimum": spec.minimum,
                    "maximum": spec.maximum,
                    "default": None if spec.required else spec.default,
                    "flag": None if spec.argument else spec.option,
                    "help": spec.help,
                }
                for key, spec in keys.items()
            }
            for name, keys in ENDPOINTS.items()
        },  # fmt: skip
        "limits": {
            "body_bytes": MAX_BODY,
            "characters": MAX_CHARS,
            "sentences": MAX_SENTENCES,
            "tokens": MAX_TOKENS,
            "weights": MAX_WEIGHTS,
        },
    }


# ------------------------------------------------------------------------------ drawings of documents
def drawing(doc: Any, kind: str, width: int = 100) -> str:
    """A document drawn by ctxembed's renderers, for the page: ``svg`` (the figure of ``--save x.svg``) or
    ``terminal`` (what the command prints, as HTML with inline colours). UsageError for a document the
    renderers cannot read."""
    if not isinstance(doc, dict):
        raise UsageError(f"the request body must be a document (a JSON object), not {type(doc).__name__}")
    if kind not in ("svg", "terminal", "html"):
        raise UsageError(f"as must be svg, terminal or html, not {_shown(kind)}")
    try:
        if kind == "svg":
            return figure_svg(build_figure(doc))
        if kind == "html":  # the explain tab: the steps in the page's own style
            if "explain" not in doc:
                raise UsageError("as=html draws the steps of an explain document; this one has none")
            from ctxembed.views.explain_html import explain_html

            return explain_html(doc["explain"])
        return _terminal_html(doc, width)
    except UsageError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, ArithmeticError, ConsoleError) as exc:
        raise UsageError(f"cannot draw this {doc.get('schema')!r} document: {type(exc).__name__} {exc}") from None


_RENDERERS = {
    "ctxembed.attend": "render_attend",
    "ctxembed.compare": "render_compare",
    "ctxembed.neighbors": "render_neighbors",
    "ctxembed.side-by-side": "render_side_by_side",
}


def _terminal_html(doc: dict, width: int) -> str:
    schema = str(doc.get("schema")).rpartition("/")[0]  # any version: the renderers read what they know
    if schema not in _RENDERERS:
        known = ", ".join(_RENDERERS)
        raise UsageError(f"cannot draw a {doc.get('schema')!r} document as a terminal view (known: {known})")
    console = Console(
        file=io.StringIO(), record=True, width=max(40, min(width, 240)), force_terminal=True, markup=False
    )
    if "explain" in doc:
        render.render_explain(console, doc["explain"])
    else:
        getattr(render, _RENDERERS[schema])(console, doc)
    return console.export_html(inline_styles=True, code_format='<pre class="terminal">{code}</pre>')
