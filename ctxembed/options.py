"""One declaration per command option: the table the CLI, the live page's server and the API read.

The attention settings are declared in :mod:`ctxembed.declarations`; this table holds the other options the
commands share (``--top``, ``-k``, ``--layer``, ``--word``, ``--save`` ...): each one's flags, type,
default, limits, choices, metavar and help. Generated from it:

- the typer options (:func:`ctxembed.cli.options.declared`): no command writes ``typer.Option("--top")``;
- the keys ``ctxembed serve`` accepts and how it checks them (:mod:`ctxembed.serve.endpoints`);
- the defaults of the API's signatures (:class:`ctxembed.api.Explorer`), and docs/options.md's second table.

tests/test_option_table.py fails when a command, the server or the API disagrees with the table, or
when a flag of the table is declared a second time.

>>> OPTIONS["top"].default, OPTIONS["top"].limits()
(3, '1<=x<=50')
>>> OPTIONS["top"].of("before_after").default  # a command's own default, declared here too
2
>>> OPTIONS["k"].check(0)
Traceback (most recent call last):
...
ctxembed.errors.SettingError: k must be an integer in [1, 1000], not 0

This module imports nothing from ctxembed but its errors and the flag spelling of the declarations
(:func:`ctxembed.declarations.long_flag`), so every layer may read it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from numbers import Integral, Real
from os import PathLike
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ctxembed.declarations import long_flag
from ctxembed.errors import SettingError

REQUIRED = ...  # a default that makes the option required (typer's spelling)
INPUT_PANEL = "Vectors and tokens"  # the help panel of where the vectors come from (as the settings')
# Neighbours are searched among this many most frequent words by default (--among): measured on
# data/senses.tsv (docs/json.md, neighbors), the whole 200,000-word vocabulary puts 2.6% of contextual
# neighbours (25% on everyday sentences) beyond rank 50,000 ("meenachil", "alaknanda" for a river bank),
# while the 50,000 most frequent give none and agree with the senses as well or better (0.100 against
# 0.098); smaller floors agree more but drop words people know (iphone is rank 11,046, smartphone 29,026).
NEIGHBOURS_AMONG = 50_000


@dataclass(frozen=True)
class CommandOption:
    """The one declaration of a command option.

    ``kind``: bool, int, float, str or Path (``repeatable``: a list of them); ``flags``: the long flag
    first (default ``--name-with-dashes``), then aliases; ``argument``: positional, without a flag;
    ``optional``: None is a value (``--layer`` unset: the last layer). ``commands`` holds a command's
    own values, by the command's Python name (``before_after``): any field, ``default`` and ``help``
    most often; :meth:`of` applies them.
    """

    kind: type
    default: Any
    help: str
    name: str = ""
    flags: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    optional: bool = False
    repeatable: bool = False
    argument: bool = False  # a positional argument (the sentence), not a flag
    envvar: str | None = None
    panel: str | None = None
    show_default: bool | str = True
    commands: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def option(self) -> str:
        """The long flag: what errors name."""
        return self.all_flags[0] if self.all_flags else self.name

    @property
    def own_flags(self) -> tuple[str, ...]:
        """The flags of this option (none for an argument)."""
        return () if self.argument else self.flags or (long_flag(self.name),)

    @property
    def all_flags(self) -> tuple[str, ...]:
        """Every spelling of this option, over all commands (``--focus`` is attend's ``--word``)."""
        spellings = [self.own_flags, *(own["flags"] for own in self.commands.values() if "flags" in own)]
        return tuple(dict.fromkeys(f for flags in spellings for f in flags))

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def of(self, command: str) -> CommandOption:
        """This option as ``command`` declares it: the table's values with the command's own."""
        own = self.commands.get(command)
        return self if not own else dataclasses.replace(self, **own, commands={})

    def limits(self) -> str:
        """The allowed range as help text shows it, e.g. ``1<=x<=50``; empty without limits."""
        low, high = self.minimum, self.maximum
        if low is None and high is None:
            return ""
        return ("" if low is None else f"{_number(low)}<=") + "x" + ("" if high is None else f"<={_number(high)}")

    def check(self, value: Any) -> Any:
        """``value`` if this option takes it, else a SettingError naming the option (``{top}``: the
        command line and the page show the flag, the API the keyword)."""
        name = self.name
        if value is None and (self.optional or not self.required):
            return value
        if self.repeatable:  # of strings or paths
            if not isinstance(value, list) or not all(isinstance(item, str | PathLike) for item in value):
                raise SettingError(f"{{{name}}} must be a list of strings, not {_shown(value)}", name)
            return value
        if self.choices is not None:
            if value not in self.choices:
                raise SettingError(f"{{{name}}} must be one of {', '.join(self.choices)}, not {_shown(value)}", name)
            return value
        if self.kind is bool:
            if not isinstance(value, bool):
                raise SettingError(f"{{{name}}} must be true or false, not {_shown(value)}", name)
            return value
        if self.kind in (str, Path):
            if not isinstance(value, str | PathLike if self.kind is Path else str):
                raise SettingError(f"{{{name}}} must be a string, not {_shown(value)}", name)
            return value
        integer = self.kind is int
        wrong = isinstance(value, bool) or not isinstance(value, Integral if integer else Real)
        low, high = self.minimum, self.maximum
        if (
            wrong
            or (not integer and not math.isfinite(value))
            or (low is not None and value < low)
            or (high is not None and value > high)
        ):
            what = "an integer" if integer else "a finite number"
            raise SettingError(f"{{{name}}} must be {what}{self._range_text()}, not {_shown(value)}", name)
        return value

    def _range_text(self) -> str:
        low, high = self.minimum, self.maximum
        if low is not None and high is not None:
            return f" in [{_number(low)}, {_number(high)}]"
        if low is not None:
            return f" >= {_number(low)}"
        return "" if high is None else f" <= {_number(high)}"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _shown(value: Any) -> str:
    if isinstance(value, (list, dict)):  # its repr could be deep or long
        return f"a JSON {'list' if isinstance(value, list) else 'object'}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


_WORD_FORMS = "bank#2: its second occurrence; #N: the token at position N"

_DECLARED: dict[str, CommandOption] = {
    # ------------------------------------------------------------------ what to compute and show
    "sentence": CommandOption(
        str, None, "The sentence ('-' or none: read stdin).", argument=True, show_default=False
    ),
    "sentences": CommandOption(
        str, None, "Two or more sentences ('-': one per stdin line).", argument=True, repeatable=True,
        show_default=False,
        commands={
            "side_by_side": {"help": "One sentence or more ('-': one per stdin line); the first is shown."},
        },
    ),
    "word": CommandOption(
        str, None, f"The word ({_WORD_FORMS}).", flags=("--word", "-w"), optional=True, show_default=False,
        commands={
            "attend": {
                "flags": ("--word", "-w", "--focus"),
                "help": f"Show one token's row and column whole: a word (its first occurrence; {_WORD_FORMS}).",
            },
            "compare": {"help": f"The word to compare (default: every shared word; {_WORD_FORMS}, in every sentence)."},
            "neighbors": {"default": REQUIRED, "help": f"The word whose neighbours to list ({_WORD_FORMS})."},
            "batch": {"help": f"Add this word's contextual vector ({_WORD_FORMS})."},
            "side_by_side": {"default": REQUIRED, "help": f"The word to follow in every model ({_WORD_FORMS})."},
        },
    ),
    # 50 rows of a --top list are more than a terminal or the page shows; a row per token already
    "top": CommandOption(
        int, 3, "Most-attended tokens listed per token.", minimum=1, maximum=50,
        # before-after draws two maps (before, after) in one width: two names per token keep both readable
        commands={"before_after": {"default": 2}},
    ),
    "layer": CommandOption(
        int, None, "Layer to show, from 0 (default: the last).", minimum=0, optional=True, show_default=False
    ),
    "head": CommandOption(
        int, None, "Head to show, from 0 (default: the mean of the heads; --explain: head 0).", minimum=0,
        optional=True, show_default=False,
        commands={"before_after": {"help": "Head to show, from 0 (default: the mean of the heads)."}},
    ),
    "k": CommandOption(int, 10, "How many neighbours.", flags=("-k", "--k"), minimum=1, maximum=1000),
    "include_context": CommandOption(bool, False, "Keep the sentence's own words among the neighbours."),
    "among": CommandOption(
        int, NEIGHBOURS_AMONG,
        "Search the N most frequent words (words people know); 0: the whole vocabulary, rare names included.",
        minimum=0, metavar="N",
    ),
    "space": CommandOption(
        str, None,
        "Where contextual neighbours are searched: contextual (each word's mean contextual vector over Brown, "
        "built once; a trained model's default) or input (the model's input embeddings: GloVe's only space).",
        choices=("contextual", "input"), optional=True, show_default=False,
    ),
    "with_vectors": CommandOption(bool, False, "Add the static and contextual vectors (JSON, batch records)."),
    "attention": CommandOption(
        str, "raw",
        "What the maps show: raw (the weights), mean (each layer's heads averaged), rollout (Abnar & "
        "Zuidema: the residual counted, multiplied through the layers) or value-norm (Kobayashi et al.: "
        "||weight x value x W_out||, the size of what each token sends). See docs/attention.md.",
        choices=("raw", "mean", "rollout", "value-norm"),
    ),
    "cosine_scale": CommandOption(
        str, "fitted",
        "Colours of cosine maps: fitted (lightest at the lowest cosine shown, darkest at the highest, off "
        "the diagonal; the range is printed) or absolute (-1 to 1, centred on 0).",
        choices=("fitted", "absolute"),
    ),
    "specials": CommandOption(
        str, "hide",
        "A subword model's [CLS] and [SEP] (--model minilm): hide (each word's row renormalised over the "
        "words; the tables give their share) or show (columns of their own, each row as the model gave it).",
        choices=("hide", "show"),
    ),
    "scale_max": CommandOption(
        float, None,
        "Shade attention on an absolute scale: this weight is full (1.0: a token that attends to one "
        "token only). Default: the largest weight shown, so uniform attention looks full.",
        minimum=0.001, optional=True, show_default=False,
    ),
    "color": CommandOption(
        str, "auto",
        "Colour: auto (on a terminal, none under NO_COLOR), always (also in a pipe), never (no escape "
        "sequences at all; heatmap cells carry glyphs instead).",
        choices=("auto", "always", "never"),
    ),
    # ------------------------------------------------------------------ output
    "json_out": CommandOption(bool, False, "Print one JSON document to stdout.", flags=("--json",)),
    "save": CommandOption(
        Path, None,
        "Also write the result to PATH; the suffix picks the format: .svg, .html (interactive, offline), "
        ".png (needs ctxembed[plot]) or .json. Repeatable.",
        repeatable=True, optional=True, show_default=False,
        commands={
            "senses": {
                "help": "Also write the result to PATH; the suffix picks the format: .svg, .html (interactive, "
                "offline), .png (needs ctxembed[plot]), .json, or .tsv or a folder (the TensorBoard "
                "Projector's vectors and metadata). Repeatable."
            }
        },
    ),
    "output_format": CommandOption(
        str, "jsonl",
        "jsonl: a JSON record per line (stdout unless --out); parquet: a row per line (needs "
        "ctxembed[parquet]); npz: one --word's vectors, lines and positions; projector: TensorBoard's "
        "vectors.tsv + metadata.tsv for --word, in the --out folder.",
        flags=("--format",), choices=("jsonl", "parquet", "npz", "projector"),
    ),
    "out": CommandOption(
        str, None,
        "Write to this file (a folder for projector), made whole at the end: an interrupted run leaves none.",
        flags=("--out", "-o"), optional=True, show_default=False,
        commands={
            "train": {"kind": Path, "help": "Where to write the weights (.npz); the glove model's training only."},
            "eval_fit_mix": {
                "kind": Path, "flags": ("--out",),
                "help": "Where to write the mix (default: the cache folder, read by --mix learned).",
            },
        },
    ),
    # training a trained model: a derived model (ctxembed.train.derived, docs/training.md)
    "name": CommandOption(
        str, None,
        "Train --model minilm on labelled pairs into a derived model NAME in the models folder; then "
        "--model NAME works in every command.",
        optional=True, show_default=False, metavar="NAME", panel="Training",
    ),
    "freeze": CommandOption(
        bool, False,
        "With --name: keep the encoder fixed and learn a layer mix and a head over its cosines (ELMo's way); "
        "without it every weight is fine-tuned (BERT's way).",
        panel="Training",
    ),
    "batch_pairs": CommandOption(
        int, None,
        "With --name: labelled pairs per fine-tuning step (default 16).",
        minimum=1, maximum=4096, optional=True, show_default=False, metavar="N", panel="Training",
    ),
    "against": CommandOption(
        str, None,
        "Another sentence holding --word: show the word's cosine across the sentences before and after "
        "training (a derived model). Repeatable.",
        flags=("--with",), repeatable=True, optional=True, show_default=False, metavar="SENTENCE",
    ),
    # batch's unit of work: a worker's task and a Parquet row group; memory stays one chunk's (docs/scale.md)
    "chunk": CommandOption(
        int, 1024,
        "Sentences per attention batch (batch: at most; 1,024 for jsonl, 4,096 for parquet, npz and projector).",
        minimum=1, maximum=100_000, metavar="N",
        # batch's columnar formats take larger chunks unless told (driver.COLUMNAR_CHUNK): unset is None there
        commands={"batch": {"default": None, "optional": True, "show_default": False}},
    ),
    "workers": CommandOption(int, 0, "Processes (0: one per usable core).", minimum=0, metavar="N"),
    "digits": CommandOption(
        int, None,
        "Round weights and vectors to N decimals (smaller, faster JSON). Default: every float32 exactly, in "
        "its shortest form.",
        minimum=0, maximum=9, optional=True, show_default=False,
    ),
    # ------------------------------------------------------------------ where the vectors come from
    "model": CommandOption(
        str, "glove",
        "The model: glove (static vectors + the attention settings) or minilm (all-MiniLM-L6-v2, a trained "
        "6-layer BERT; `ctxembed models install minilm` first). `ctxembed models list` shows what is installed.",
        flags=("--model", "-m"), panel="Model",
    ),
    "vectors": CommandOption(
        str, None,
        "A vector file (word2vec text/binary, GloVe, fastText .vec/.bin, .gz/.bz2, a ctxembed store), "
        "a gensim-data name such as glove-wiki-gigaword-50, or notes-toy (the lecture notes' 3-d toy "
        "vectors). Default: the shipped GloVe 6B 100d.",
        envvar="CTXEMBED_VECTORS", optional=True, show_default=False, panel=INPUT_PANEL,
    ),
    "limit": CommandOption(
        int, None, "Keep only the N most frequent words.", minimum=1, optional=True, panel=INPUT_PANEL
    ),
    "trust": CommandOption(
        bool, False, "Allow gensim's native .kv/.model files, which are pickles.", panel=INPUT_PANEL
    ),
}  # fmt: skip

OPTIONS: Mapping[str, CommandOption] = MappingProxyType(
    {name: dataclasses.replace(spec, name=name) for name, spec in _DECLARED.items()}
)


def default(name: str, command: str | None = None) -> Any:
    """The default of option ``name`` (in ``command``, when it has its own)."""
    spec = OPTIONS[name]
    return (spec if command is None else spec.of(command)).default
