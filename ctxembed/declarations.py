"""One declaration per setting, and the attention core's configuration.

Every setting that changes the contextual vectors is declared once, as dataclass field metadata
(:func:`setting`): its type or choices, its limits, its help text and help panel, how the one-line
summary and ``--explain`` describe it, and which ingredient of the default preset it belongs to.
Everything else is generated from these declarations: the command-line options, the Python API's
keywords, :func:`ctxembed.presets.build_settings`, the summary line, the JSON settings and the
eval ladder. Adding an ingredient means one declaration here (or in :mod:`ctxembed.presets`)
and its maths, nothing in the CLI.

>>> config = AttentionConfig(heads=2, causal=True)
>>> config.heads, config.normalization
(2, 'softmax')
>>> AttentionConfig(temperature=float("nan"))
Traceback (most recent call last):
...
ctxembed.errors.SettingError: temperature must be a finite number in [0.001, 1000], not nan

This module imports nothing from the rest of ctxembed but its errors: the attention core, the
projections and the settings all build on it.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from functools import cache
from numbers import Integral, Real
from os import PathLike
from typing import Any

from ctxembed.errors import SettingError, counted

# Help panels: the command-line help groups options by them.
ATTENTION_PANEL = "Attention"
PROJECTION_PANEL = "Projections"
INGREDIENT_PANEL = "Ingredients of the default preset"
INPUT_PANEL = "Vectors and tokens"


class Normalization(str, enum.Enum):
    """How scores become weights."""

    softmax = "softmax"  # exp(s) / sum exp(s)
    sum = "sum"  # max(s, 0) / sum max(s, 0)


class CausalMode(str, enum.Enum):
    """Where the causal mask is applied."""

    before = "before"  # -inf, then normalise
    after = "after"  # normalise, zero the future, renormalise


class PositionMode(str, enum.Enum):
    """Where the sinusoidal position encodings go."""

    input = "input"  # added to the input vectors: carried by the values and the residual (the Transformer)
    query_key = "query-key"  # added to every layer's query and key inputs only: they steer, not carried


class Projection(str, enum.Enum):
    """Where queries, keys and values come from."""

    identity = "identity"  # Q = K = V = X
    random = "random"  # Xavier-uniform, from the seed
    file = "file"  # an .npz of trained matrices


Summary = str | Callable[[Mapping[str, Any]], str | None] | None


def long_flag(name: str) -> str:
    """The flag a command-line option of ``name`` has unless it declares another, as typer spells a
    parameter: ``--d-out`` for ``d_out``."""
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class Setting:
    """The one declaration of a setting. ``kind`` is bool, int, float, str or an Enum of choices.

    ``summary`` and ``explain`` are format strings over every setting's value (``{heads}``), shown when
    this setting is truthy, or functions of those values returning a string or None (not shown).
    ``requires`` names another setting's value this one needs when given explicitly (``seed`` needs
    ``projection="random"``). ``ingredient`` groups the settings of one ingredient of the default
    preset for the eval ladder. ``fits`` says whether a value works on vectors of a given dimension
    and vocabulary size; a preset's value that does not fit is stepped down to the default.
    """

    kind: type
    default: Any
    help: str
    name: str = ""
    flag: str | None = None  # default: --name-with-dashes; booleans get --x/--no-x
    minimum: float | None = None
    maximum: float | None = None
    optional: bool = False  # None is a value of its own (no file, d / heads)
    panel: str = ATTENTION_PANEL
    summary: Summary = None
    explain: Summary = None
    requires: tuple[str, str] | None = None
    ingredient: str | None = None
    fits: Callable[[Any, int, int], bool] | None = None
    metavar: str | None = None
    off_flag: str | None = None  # the negative of a boolean flag, when not --no-x
    none_as: str | None = None  # the word the command line spells None with ("-k auto")
    order: int = 0  # where the summary line and explain put it: by order, then by declaration

    @property
    def choices(self) -> tuple[str, ...] | None:
        return (
            tuple(c.value for c in self.kind)
            if isinstance(self.kind, type) and issubclass(self.kind, enum.Enum)
            else None
        )

    @property
    def option(self) -> str:
        """The command-line flag: ``--d-out`` for ``d_out`` unless declared otherwise."""
        return self.flag or long_flag(self.name)

    def limits(self) -> str:
        """The allowed range as help text shows it, e.g. ``1<=x<=64``; empty without limits."""
        low, high = self.minimum, self.maximum
        if low is None and high is None:
            return ""
        left = "" if low is None else f"{_number(low)}<="
        right = "" if high is None else f"<={_number(high)}"
        return f"{left}x{right}"

    def check(self, value: Any) -> Any:
        """The value in its plain form (an Enum's string, a path's string), or SettingError."""
        if value is None and self.optional:
            return None
        kind, name = self.kind, self.name
        if self.choices is not None:
            value = value.value if isinstance(value, enum.Enum) else value
            if value not in self.choices:
                raise SettingError(f"{{{name}}} must be one of {', '.join(self.choices)}, not {value!r}", name)
            return str(value)
        if kind is bool:
            if not isinstance(value, bool) and type(value).__name__ != "bool_":  # numpy's bool too
                raise SettingError(f"{{{name}}} must be True or False, not {value!r}", name)
            return bool(value)
        if kind is str:
            if not isinstance(value, str | PathLike) or not str(value):
                raise SettingError(f"{{{name}}} must be a non-empty string or path, not {value!r}", name)
            return str(value)
        if kind is int:
            if isinstance(value, bool) or not isinstance(value, Integral):
                raise SettingError(f"{{{name}}} must be an integer{self._range_text()}, not {value!r}", name)
            value = int(value)
        else:
            if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
                raise SettingError(f"{{{name}}} must be a finite number{self._range_text()}, not {value!r}", name)
            value = float(value)
        low, high = self.minimum, self.maximum
        if (low is not None and value < low) or (high is not None and value > high):
            what = "an integer" if kind is int else "a finite number"
            raise SettingError(f"{{{name}}} must be {what}{self._range_text()}, not {value!r}", name)
        return value

    def _range_text(self) -> str:
        low, high = self.minimum, self.maximum
        low_text = "" if low is None else _number(low)
        high_text = "" if high is None else _number(high)
        if low is not None and high is not None:
            return f" in [{low_text}, {high_text}]"
        if low is not None:
            return f" >= {low_text}"
        return "" if high is None else f" <= {high_text}"

    def describe(self, text: Summary, values: Mapping[str, Any]) -> str | None:
        """Render a ``summary`` or ``explain`` declaration over every setting's value."""
        if text is None:
            return None
        if callable(text):
            return text(values)
        return text.format(**values) if values[self.name] else None


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else f"{value:g}"


def setting(kind: type, default: Any, help: str, **declaration: Any) -> Any:
    """Declare a dataclass field as a setting; see :class:`Setting` for the keywords."""
    return field(default=default, metadata={"setting": Setting(kind, default, help, **declaration)})


@cache
def declarations(cls: type) -> dict[str, Setting]:
    """The declared settings of a dataclass, by field name, in field order."""
    found = {}
    for f in fields(cls):
        spec = f.metadata.get("setting")
        if spec is not None:
            found[f.name] = Setting(**{**spec.__dict__, "name": f.name})
    return found


def check_declared(instance: object) -> None:
    """Validate and normalise every declared field of a frozen dataclass in place (for __post_init__)."""
    for name, spec in declarations(type(instance)).items():
        object.__setattr__(instance, name, spec.check(getattr(instance, name)))


def _scores(v: Mapping[str, Any]) -> str:
    divisor = ("/sqrt(d)" if v["scale"] else "") + (f"/T={v['temperature']:g}" if v["temperature"] != 1 else "")
    return f"scores x.x{divisor}"


def _shape(v: Mapping[str, Any]) -> str:
    heads, layers = v["heads"], v["layers"]
    return f"{heads} head{'s' if heads > 1 else ''}, {layers} layer{'s' if layers > 1 else ''}"


@dataclass(frozen=True)
class AttentionConfig:
    """Which attention ingredients are on: the attention core's whole configuration.

    Limits keep memory bounded: the weights alone take layers x heads x T² floats per sentence
    (see ``max_tokens`` in :mod:`ctxembed.presets`), so 48 layers x 64 heads allow ~16 MB per
    sentence of 16 tokens, and the product is checked again per sentence.
    """

    scale: bool = setting(
        bool,
        True,
        "Divide scores by sqrt(d_k) (Vaswani et al.); off = the notes' raw dot products.",
        summary=_scores,
        explain="scores are divided by sqrt(d_k), so they do not grow with the dimension",
    )
    temperature: float = setting(
        float,
        1.0,
        "Divide scores by T: > 1 flattens the weights, < 1 sharpens them.",
        minimum=1e-3,
        maximum=1e3,
        metavar="T",
        explain=lambda v: (
            f"scores are divided by the temperature T={v['temperature']:g}" if v["temperature"] != 1 else None
        ),
    )
    normalization: str = setting(
        Normalization,
        "softmax",
        "How scores become weights: softmax, or sum (negatives clamped to 0, divided by the row sum).",
        summary="{normalization}",
        explain=lambda v: (
            "weights = softmax of the scores"
            if v["normalization"] == "softmax"
            else "weights = max(score, 0) / row sum"
        ),
    )
    exclude_self: bool = setting(
        bool,
        False,
        "Mask the diagonal: a token attends only to the other tokens.",
        off_flag="--include-self",
        summary="self masked",
        order=2,
        explain="self masked: a token does not attend to itself",
        ingredient="self-mask",
    )
    exclude_twins: bool = setting(
        bool,
        False,
        "Mask a token's twins, the other tokens with its vector (copies of the same word: bank ... bank), "
        "as --exclude-self masks the token itself.",
        off_flag="--include-twins",
        summary="twins masked",
        order=2,
        explain="twins masked: a token does not attend to copies of itself (the same word elsewhere in the sentence)",
        ingredient="self-mask",
    )
    residual: bool = setting(
        bool,
        False,
        "Residual connection: out = λ·x + attention(x).",
        summary="residual {residual_scale:.3g}·x + context",
        order=2,
        explain="output = {residual_scale:g}·x + context",
        ingredient="self-mask",
    )
    residual_scale: float = setting(
        float,
        1.0,
        "λ of the residual: 1 is the transformer's plain sum.",
        minimum=-100.0,
        maximum=100.0,
        metavar="λ",
        ingredient="self-mask",
    )
    layer_norm: bool = setting(
        bool,
        False,
        "Post-norm: each output vector to mean 0, variance 1 (no learned gain or bias).",
        summary="layer norm",
        order=2,
        explain="then layer norm",
    )
    causal: bool = setting(
        bool,
        False,
        "Attend only to earlier tokens, and to the token itself unless --exclude-self masks it "
        "(the default preset does).",
        summary="causal ({causal_mode} softmax)",
        order=2,
        explain="causal mask: a token attends only to itself and earlier tokens",
    )
    causal_mode: str = setting(
        CausalMode,
        "before",
        "Where the causal mask goes: before (-inf, then normalise) or after (normalise, zero, renormalise); "
        "the weights are the same either way (renormalising the past gives what normalising it alone gives), "
        "the steps --explain shows differ.",
    )
    positions: bool = setting(
        bool,
        False,
        "Add sinusoidal position encodings to the input (breaks permutation symmetry).",
        summary="sinusoidal positions",
        order=2,
        explain=lambda v: (
            "sinusoidal position encodings are added to the inputs"
            if v["position_mode"] == "input"
            else "sinusoidal position encodings are added to every layer's query and key inputs (not to the values)"
        ),
    )
    position_mode: str = setting(
        PositionMode,
        "input",
        "Where --positions go: input (added to the vectors, so values and the residual carry them) or "
        "query-key (added to each layer's query and key inputs only: they steer where to look, and the "
        "vectors stay words).",
        summary=lambda v: "positions in queries and keys" if v["positions"] and v["position_mode"] != "input" else None,
        order=2,
    )

    heads: int = setting(
        int,
        1,
        "Attention heads; the identity projection gives each an equal slice of the vector.",
        minimum=1,
        maximum=64,
        summary=_shape,
        order=3,
    )
    layers: int = setting(int, 1, "Stacked layers; each layer's output is the next one's input.", minimum=1, maximum=48)

    def __post_init__(self) -> None:
        check_declared(self)


def check_view(layers: int, heads: int, layer: int | None, head: int | None) -> None:
    """Refuse a layer or head to show that the model does not have (both count from 0; None: the default
    view). One check for the commands, the API and the pictures; the CLI names the flags."""
    if layer is not None and not 0 <= layer < layers:
        raise SettingError(
            f"{{layer}} {layer} does not exist: the model has {counted(layers, 'layer')}, numbered from 0", "layer"
        )
    if head is not None and not 0 <= head < heads:
        raise SettingError(
            f"{{head}} {head} does not exist: the model has {counted(heads, 'head')}, numbered from 0", "head"
        )


class Oov(str, enum.Enum):
    """What happens to a token without a vector."""

    skip = "skip"  # leave it out of attention
    zero = "zero"  # attend over a zero vector
    error = "error"  # refuse the sentence


@dataclass(frozen=True)
class ReadOptions:
    """How sentences become rows of static vectors: the settings that are not about attention."""

    oov: str = setting(
        Oov,
        "skip",
        "Tokens without a vocabulary vector: where the vectors have character n-grams (fastText) they get a "
        "subword vector (source 'subword'); the rest (source 'none') are skipped (listed as skipped), given a "
        "zero vector, or refuse the sentence.",
        panel=INPUT_PANEL,
    )
    # One layer and head keep T² float32 weights: 4096 tokens are 64 MB; the product with
    # layers and heads is checked per sentence against WEIGHTS_BUDGET.
    max_tokens: int = setting(
        int,
        512,
        "Longest sentence accepted, in tokens (attention keeps layers x heads x n² weights).",
        minimum=1,
        maximum=4096,
        metavar="N",
        panel=INPUT_PANEL,
    )
    # The commands that read one word's vector (compare, neighbors, senses, batch --word, eval) crop its
    # sentence to the tokens either side of it before anything is looked up (engine.sentence.window_span);
    # None: the model's own default (its registry entry's ``window``), 0: the whole sentence.
    window: int | None = setting(
        int,
        None,
        "Read only the N tokens either side of the word (compare, neighbors, senses, batch --word, eval): "
        "long contexts cost less and may read better; 0: the whole sentence. Default: the model's own, "
        "chosen on dev data (docs/models.md).",
        minimum=0,
        maximum=4096,
        optional=True,
        metavar="N",
        panel=INPUT_PANEL,
    )

    def __post_init__(self) -> None:
        check_declared(self)


DEFAULT_MAX_TOKENS = ReadOptions.max_tokens
# The shipped trained projections (scripts/build_learned_weights.py): the learned preset names them by
# this file name, and ctxembed.vectors.weights finds the file among the shipped data.
LEARNED_WEIGHTS_FILE = "learned-brown-2x4.npz"
