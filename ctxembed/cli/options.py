"""Command-line options generated from the declarations; nothing here names a setting or an option.

:func:`with_attention_options` gives a command every declared setting as an option (grouped by
help panel, choices as ``[softmax|sum]``, limits in the help), plus the preset and where the
vectors come from. The command receives them as one ``explorer`` callable that builds a
:class:`ctxembed.api.Explorer` when first called.

:func:`declared` gives a command its options of the command-option table (:mod:`ctxembed.options`:
``--top``, ``--word``, ``--json`` ...): a parameter whose default is :data:`OPTION` gets the table's
flags, type, default, limits and help, with the command's own default where the table gives one.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from ctxembed.declarations import ReadOptions, Setting, declarations
from ctxembed.errors import CtxembedError, UsageError
from ctxembed.options import OPTIONS, CommandOption
from ctxembed.output import say, use_color
from ctxembed.presets import PRESET_HELP, PRESET_NAMES, PRESETS, SETTINGS, flag

# The library modules a command needs are imported inside it: see docs/architecture.md, "Why imports are lazy".

Preset = enum.Enum("Preset", {name: name for name in PRESET_NAMES}, type=str)  # [default|textbook|notes]

OPTION: Any = object()  # a command parameter's default: "declared in ctxembed.options.OPTIONS", see declared()


def command_option(spec: CommandOption, command: str | None = None) -> tuple[Any, Any]:
    """The typer annotation and default of a table option (``command``: with that command's own values):
    flags, type, default, help, metavar and panel from :data:`ctxembed.options.OPTIONS`. Limits and
    choices show in the help; :func:`declared` checks them with the table's own words."""
    return _generated(spec.name, command if command in spec.commands else None)


@functools.cache  # every command builds its options at `import ctxembed.cli`: --json's once, not 16 times
def _generated(name: str, command: str | None) -> tuple[Any, Any]:
    return _typed(OPTIONS[name].of(command) if command else OPTIONS[name])


def _typed(spec: CommandOption) -> tuple[Any, Any]:
    """The typer annotation and default of one table option as given (see :func:`command_option`)."""
    kind = spec.kind
    if spec.repeatable:
        kind = list[kind]
    if spec.optional or spec.default is None:
        kind = kind | None
    text = spec.help + (f"  [{spec.limits()}]" if spec.limits() else "")
    metavar = spec.metavar or (f"[{'|'.join(spec.choices)}]" if spec.choices else None)
    declared_with = {"help": text, "show_default": spec.show_default}
    if metavar:
        declared_with["metavar"] = metavar
    if spec.panel:
        declared_with["rich_help_panel"] = spec.panel
    if spec.argument:
        return Annotated[kind, typer.Argument(**declared_with)], spec.default
    if spec.envvar:
        declared_with["envvar"] = spec.envvar
    return Annotated[kind, typer.Option(*spec.own_flags, **declared_with)], spec.default


def _checked(spec: CommandOption, value: Any) -> Any:
    if spec.choices and isinstance(value, str):  # --format JSONL as --format jsonl
        value = value.lower()
    return spec.check(value)


def declared(command):
    """Give each parameter of ``command`` whose default is :data:`OPTION` its option from the table
    (:data:`ctxembed.options.OPTIONS`, with the command's own values, the command named by its
    function's name); the values given are checked against the table before the command runs. The
    command's ``table_options`` lists them (and those :func:`draws` and :func:`with_attention_options`
    add): what docs/options.md and tests/test_option_table.py read."""
    name = command.__name__
    signature = inspect.signature(command, eval_str=True)
    specs = {p.name: OPTIONS[p.name].of(name) for p in signature.parameters.values() if p.default is OPTION}
    parameters = []
    for parameter in signature.parameters.values():
        if parameter.name in specs:
            annotation, default = command_option(OPTIONS[parameter.name], name)
            parameter = parameter.replace(annotation=annotation, default=default)
        parameters.append(parameter)

    @functools.wraps(command)
    def wrapper(**kwargs):
        for key, spec in specs.items():
            kwargs[key] = _checked(spec, kwargs[key])
        return command(**kwargs)

    wrapper.__signature__ = signature.replace(parameters=parameters)
    wrapper.table_options = {**getattr(command, "table_options", {}), **specs}
    return wrapper


def draws(command):
    """Give a command that draws on the terminal the --color option (``color`` of the table); the
    consoles it makes with :func:`ctxembed.output.stdout_console` follow it."""
    signature = inspect.signature(command, eval_str=True)
    spec = OPTIONS["color"]
    annotation, default = command_option(spec)
    color = inspect.Parameter("color", inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)

    @functools.wraps(command)
    def wrapper(**kwargs):
        with use_color(_checked(spec, kwargs.pop("color"))):
            return command(**kwargs)

    wrapper.__signature__ = signature.replace(parameters=[*signature.parameters.values(), color])
    wrapper.table_options = {**getattr(command, "table_options", {}), "color": spec}
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


def error_message(exc: CtxembedError, spelled: Mapping[str, str] | None = None) -> str:
    """A library error in command-line terms: its settings become their flags, or what ``spelled`` gives
    (a setting the command takes as its argument: ``{"model": "NAME"}``)."""
    return exc.render(lambda name: (spelled or {}).get(name) or flag(name))


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
    elif spec.default is not None:  # None: the help says whose default applies (--window: the model's)
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
    # --model first, in a panel of its own: the first choice a reader makes (the settings below are glove's)
    model, model_default = _typed(_model_option())
    found = [inspect.Parameter("model", keyword, annotation=model, default=model_default)]
    found.append(inspect.Parameter("preset", keyword, annotation=preset, default=Preset("default")))
    for name, spec in SETTINGS.items():
        annotation, default = option(spec)
        found.append(inspect.Parameter(name, keyword, annotation=annotation, default=default))
    for name, spec in READ_OPTIONS.items():
        annotation, _ = option(spec)
        found.append(inspect.Parameter(name, keyword, annotation=annotation, default=None))
    for name in _SOURCE:
        if name != "model":
            annotation, default = command_option(OPTIONS[name])
            found.append(inspect.Parameter(name, keyword, annotation=annotation, default=default))
    return found


_SOURCE = ("vectors", "limit", "trust", "model")  # where the vectors come from: options of the table


def _model_option() -> CommandOption:
    """--model as the table declares it, its help saying which options each model takes: generated from
    the registry (each model's family declares them, :func:`ctxembed.engine.registry.model_options`)."""
    from ctxembed.engine.registry import MODELS, model_options  # the registry's data: no engine is loaded

    every = frozenset().union(*(model_options(name) for name in MODELS))
    takes: dict[frozenset[str], list[str]] = {}
    for name in MODELS:
        takes.setdefault(model_options(name), []).append(name)
    parts = [
        f"{', '.join(names)}: " + ("every option" if options >= every else ", ".join(flag(n) for n in sorted(options)))
        for options, names in takes.items()
    ]
    spec = OPTIONS["model"]
    taken = f"Options each model takes: {'; '.join(parts)} (others are refused)."
    return dataclasses.replace(spec, help=f"{spec.help} {taken}")


_PARAMETERS = _parameters()
_NAMES = [p.name for p in _PARAMETERS]


def with_attention_options(command):
    """Give a command every attention option; it receives them as ``explorer``, a callable that builds
    (once) the :class:`ctxembed.api.Explorer` they describe. An option the model does not take is refused
    before the command starts (:func:`ctxembed.engine.registry.check_options`)."""
    signature = inspect.signature(command, eval_str=True)  # __signature__ is not evaluated again
    own = [p for p in signature.parameters.values() if p.name != "explorer"]

    @functools.wraps(command)
    def wrapper(**kwargs):
        options = {name: kwargs.pop(name) for name in _NAMES}
        options |= {name: _checked(OPTIONS[name], options[name]) for name in _SOURCE}
        check_model_options(options)
        kwargs["explorer"] = functools.cache(lambda: build_explorer(options))
        return command(**kwargs)

    wrapper.__signature__ = signature.replace(parameters=own + _PARAMETERS)
    wrapper.table_options = {**getattr(command, "table_options", {}), **{name: OPTIONS[name] for name in _SOURCE}}
    return wrapper


def check_model_options(options: dict[str, Any]) -> None:
    """Refuse the options given that ``options["model"]`` does not take, before any work. Vectors named by
    the environment (CTXEMBED_VECTORS) are the default of the models that read vectors, not an option
    given: a model that reads none leaves them unread."""
    from ctxembed.engine.registry import check_options, model_options  # the registry's rule

    model = options["model"]
    if "vectors" not in model_options(model) and _from_environment("vectors", options["vectors"]):
        options["vectors"] = None  # the environment's value, or the same file named again: left unread
    preset = getattr(options["preset"], "value", options["preset"])
    # given on the command line: a flag with a value (--oov skip too), a switch on, a preset named
    given = [name for name, value in options.items() if name != "model" and value is not None and value is not False]
    check_options(model, [name for name in given if name != "preset" or preset != "default"], preset=preset)


def _from_environment(name: str, value: Any) -> bool:
    """Whether ``value`` of option ``name`` is its environment variable's (what typer reads when the flag is absent)."""
    import os  # the environment: only when a model reads no vectors

    spec = OPTIONS[name]
    return value is not None and spec.envvar is not None and os.environ.get(spec.envvar) == str(value)


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
