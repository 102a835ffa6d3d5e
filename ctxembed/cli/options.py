"""Command-line options generated from the setting declarations; nothing here names a setting.

:func:`with_attention_options` gives a command every declared setting as an option (grouped by
help panel, choices as ``[softmax|sum]``, limits in the help), plus the preset and where the
vectors come from. The command receives them as one ``explorer`` callable that builds a
:class:`ctxembed.api.Explorer` when first called.
"""

from __future__ import annotations

import enum
import functools
import inspect
from pathlib import Path
from typing import Annotated, Any

import typer

from ctxembed.declarations import INPUT_PANEL, ReadOptions, Setting, declarations
from ctxembed.errors import CtxembedError, UsageError
from ctxembed.output import COLOR_MODES, say, use_color
from ctxembed.presets import PRESET_HELP, PRESET_NAMES, PRESETS, SETTINGS, flag

# The library modules a command needs are imported inside it: see docs/architecture.md, "Why imports are lazy".

Preset = enum.Enum("Preset", {name: name for name in PRESET_NAMES}, type=str)  # [default|textbook|notes]

# Options that are not settings: where the vectors come from.
VectorsOpt = Annotated[
    str | None,
    typer.Option(
        "--vectors",
        envvar="CTXEMBED_VECTORS",
        help="A vector file (word2vec text/binary, GloVe, fastText .vec/.bin, .gz/.bz2, a ctxembed store), "
        "a gensim-data name such as glove-wiki-gigaword-50, or notes-toy (the lecture notes' 3-d toy "
        "vectors). Default: the shipped GloVe 6B 100d.",
        show_default=False,
        rich_help_panel=INPUT_PANEL,
    ),
]
LimitOpt = Annotated[
    int | None, typer.Option("--limit", min=1, help="Keep only the N most frequent words.", rich_help_panel=INPUT_PANEL)
]
TrustOpt = Annotated[
    bool,
    typer.Option(
        "--trust", help="Allow gensim's native .kv/.model files, which are pickles.", rich_help_panel=INPUT_PANEL
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document to stdout.")]
# The model behind the command: a name of the model registry (ctxembed.engine.registry.MODELS).
ModelOpt = Annotated[
    str,
    typer.Option(
        "--model",
        "-m",
        help="The model: glove (static vectors + the attention settings) or minilm (all-MiniLM-L6-v2, a trained "
        "6-layer BERT; `ctxembed models install minilm` first). `ctxembed models list` shows what is installed.",
        rich_help_panel=INPUT_PANEL,
    ),
]
AttentionReadingOpt = Annotated[
    str,
    typer.Option(
        "--attention",
        help="What the maps show: raw (the weights), mean (each layer's heads averaged), rollout (Abnar & "
        "Zuidema: the residual counted, multiplied through the layers) or value-norm (Kobayashi et al.: "
        "||weight x value x W_out||, the size of what each token sends). See docs/attention.md.",
        metavar="[raw|mean|rollout|value-norm]",
        show_default="raw",
    ),
]
SaveOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--save",
        help="Also write the result to PATH; the suffix picks the format: .svg, .html (interactive, offline), "
        ".png (needs ctxembed[plot]) or .json. Repeatable.",
        show_default=False,
    ),
]


ColorMode = enum.Enum("ColorMode", {name: name for name in COLOR_MODES}, type=str)  # [auto|always|never]
ColorOpt = Annotated[
    ColorMode,
    typer.Option(
        "--color",
        help="Colour: auto (on a terminal, none under NO_COLOR), always (also in a pipe), never (no escape "
        "sequences at all; heatmap cells carry glyphs instead).",
        case_sensitive=False,
    ),
]
ScaleMaxOpt = Annotated[
    float | None,
    typer.Option(
        "--scale-max",
        min=0.001,
        help="Shade attention on an absolute scale: this weight is full (1.0: a token that attends to one "
        "token only). Default: the largest weight shown, so uniform attention looks full.",
        show_default=False,
    ),
]

# Output files of the commands that write data (batch). The formats are batch's: ctxembed.batch.columnar.FORMATS.
OutputFormat = enum.Enum("OutputFormat", {name: name for name in ("jsonl", "parquet", "npz", "projector")}, type=str)
FormatOpt = Annotated[
    OutputFormat,
    typer.Option(
        "--format",
        help="jsonl: a JSON record per line (stdout unless --out); parquet: a row per line (needs "
        "ctxembed[parquet]); npz: one --word's vectors, lines and positions; projector: TensorBoard's "
        "vectors.tsv + metadata.tsv for --word, in the --out folder.",
        case_sensitive=False,
    ),
]
OutOpt = Annotated[
    str | None,
    typer.Option(
        "--out",
        "-o",
        help="Write to this file (a folder for projector), made whole at the end: an interrupted run leaves none.",
        show_default=False,
    ),
]
DigitsOpt = Annotated[
    int | None,
    typer.Option(
        "--digits",
        min=0,
        max=9,
        help="Round weights and vectors to N decimals (smaller, faster JSON). Default: every float32 "
        "exactly, in its shortest form.",
        show_default=False,
    ),
]


def draws(command):
    """Give a command that draws on the terminal the --color option (:data:`ColorOpt`); the consoles
    it makes with :func:`ctxembed.output.stdout_console` follow it."""
    signature = inspect.signature(command, eval_str=True)
    color = inspect.Parameter("color", inspect.Parameter.KEYWORD_ONLY, annotation=ColorOpt, default=ColorMode("auto"))

    @functools.wraps(command)
    def wrapper(**kwargs):
        with use_color(getattr(kwargs.pop("color"), "value", "auto")):
            return command(**kwargs)

    wrapper.__signature__ = signature.replace(parameters=[*signature.parameters.values(), color])
    return wrapper


def check_saves(paths: list[Path] | None) -> None:
    """Refuse unknown suffixes, missing folders and a missing PNG extra before any work is done."""
    if paths:
        from ctxembed.views.export import check_path  # --save only

        for path in paths:
            check_path(path)


def save_all(doc: dict, paths: list[Path] | None, **view) -> None:
    """Write ``doc`` to every --save path (``view``: --layer, --head, --all-heads)."""
    if paths:
        from ctxembed.views.export import save_document  # --save only

        for path in paths:
            save_document(doc, path, **view)


READ_OPTIONS = declarations(ReadOptions)


def error_message(exc: CtxembedError) -> str:
    """A library error in command-line terms: its settings become their flags."""
    return exc.render(flag)


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return "none" if value is None else f"{value:.3g}" if isinstance(value, float) else str(value)


def _help(spec: Setting, shown_default: str | None = None) -> str:
    text = spec.help
    if spec.limits():
        text += f"  [{spec.limits()}]"
    if shown_default is not None:
        text += f"  [{shown_default}]"
    elif spec.name in SETTINGS:
        text += f"  [default preset: {_shown(PRESETS['default'].values()[spec.name])}]"
    else:
        text += f"  [default: {spec.default}]"
    return text


def option(
    spec: Setting, default: Any = None, *, shown_default: str | None = None, panel: str | None = None
) -> tuple[Any, Any]:
    """The typer annotation and default of one declared setting (``shown_default``: the help's
    "[default ...]" text when a command has its own default; ``panel``: another help panel)."""
    helped = _help(spec, shown_default)
    panel = panel or spec.panel
    if spec.kind is bool:
        off = spec.off_flag or "--no-" + spec.option[2:]
        declared = typer.Option(f"{spec.option}/{off}", help=helped, show_default=False, rich_help_panel=panel)
        return Annotated[bool | None, declared], default
    kind = str if spec.none_as else spec.kind  # "-k auto": read as text, see spelled()
    metavar = f"[{'|'.join(spec.choices)}]" if spec.choices else spec.metavar
    extra = {} if metavar is None else {"metavar": metavar}
    declared = typer.Option(spec.option, help=helped, show_default=False, rich_help_panel=panel, **extra)
    return Annotated[kind | None, declared], default


def with_setting_options(names: tuple[str, ...], defaults: dict[str, Any], *, panel: str):
    """Give a command some declared settings as options, with the command's own ``defaults`` (the
    rest: the textbook preset's) shown in the help; it receives those given as ``settings``, a dict
    of name -> value without the ones left unset. Flags, types and limits come from the declarations."""
    textbook = PRESETS["textbook"].values()
    specs = {name: SETTINGS[name] for name in names}
    shown = {name: defaults.get(name, textbook[name]) for name in names}
    return with_declared_options(specs, into="settings", defaults=shown, panel=panel)


def spelled(spec: Setting, value: Any) -> Any:
    """A value of an option that spells None with a word (``-k auto``): None for the word, else the
    number it reads as (its limits are the library's to check)."""
    if spec.none_as is None or value is None:
        return value
    if value.strip().lower() == spec.none_as:
        return None
    try:
        return spec.kind(value)
    except ValueError:
        raise UsageError(f"{spec.option} must be a number or {spec.none_as!r}, not {value!r}") from None


def with_declared_options(
    specs: dict[str, Setting], *, into: str, defaults: dict[str, Any] | None = None, panel: str | None = None
):
    """Give a command one option per declaration in ``specs`` (flag, type, limits and help from the
    declaration; ``defaults``: the defaults the help shows, else the declared ones; ``panel``: a help
    panel for all, else each declaration's). The command receives those given as ``into``, a dict of
    name -> value without the ones left unset, so the library's own defaults apply."""

    def decorate(command):
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != into]
        extra = []
        for name, spec in specs.items():
            value = (defaults or {}).get(name, spec.default)
            shown = spec.none_as if value is None and spec.none_as else _shown(value)  # -k: "auto", not "none"
            annotation, _ = option(spec, None, shown_default=f"default: {shown}", panel=panel)
            extra.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=None))

        @functools.wraps(command)
        def wrapper(**kwargs):
            given = {name: spelled(spec, kwargs.pop(name)) for name, spec in specs.items()}
            kwargs[into] = {name: value for name, value in given.items() if value is not None}
            return command(**kwargs)

        wrapper.__signature__ = signature.replace(parameters=own + extra)
        return wrapper

    return decorate


def _parameters() -> list[inspect.Parameter]:
    keyword = inspect.Parameter.KEYWORD_ONLY
    preset = Annotated[
        Preset,
        typer.Option(
            "--preset",
            help=PRESET_HELP,
            metavar=f"[{'|'.join(PRESET_NAMES)}]",
            show_default=False,
            rich_help_panel=SETTINGS["scale"].panel,
        ),
    ]
    found = [inspect.Parameter("preset", keyword, annotation=preset, default=Preset("default"))]
    for name, spec in SETTINGS.items():
        annotation, default = option(spec)
        found.append(inspect.Parameter(name, keyword, annotation=annotation, default=default))
    for name, spec in READ_OPTIONS.items():
        annotation, _ = option(spec)
        found.append(inspect.Parameter(name, keyword, annotation=annotation, default=None))
    found += [
        inspect.Parameter("vectors", keyword, annotation=VectorsOpt, default=None),
        inspect.Parameter("limit", keyword, annotation=LimitOpt, default=None),
        inspect.Parameter("trust", keyword, annotation=TrustOpt, default=False),
        inspect.Parameter("model", keyword, annotation=ModelOpt, default="glove"),
    ]
    return found


_PARAMETERS = _parameters()
_NAMES = [p.name for p in _PARAMETERS]


def with_attention_options(command):
    """Give a command every attention option; it receives them as ``explorer``, a callable that builds
    (once) the :class:`ctxembed.api.Explorer` they describe."""
    signature = inspect.signature(command, eval_str=True)  # __signature__ is not evaluated again
    own = [p for p in signature.parameters.values() if p.name != "explorer"]

    @functools.wraps(command)
    def wrapper(**kwargs):
        options = {name: kwargs.pop(name) for name in _NAMES}
        kwargs["explorer"] = functools.cache(lambda: build_explorer(options))
        return command(**kwargs)

    wrapper.__signature__ = signature.replace(parameters=own + _PARAMETERS)
    return wrapper


def build_explorer(options: dict[str, Any]):
    from ctxembed.api import Explorer  # help and option errors never need it

    options = dict(options)
    preset = options.pop("preset")
    settings = {name: options.pop(name) for name in SETTINGS}
    return Explorer(
        options.pop("vectors"),
        getattr(preset, "value", preset),
        limit=options.pop("limit"),
        trust=options.pop("trust"),
        model=options.pop("model"),
        on_note=say,
        label=flag,
        **{k: v for k, v in options.items() if v is not None},
        **settings,
    )
