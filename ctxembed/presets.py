"""Named attention configurations (presets) and the settings every command runs with.

A preset is a list of differences from the declared defaults; any command-line flag or API
keyword overrides one setting of it. The presets that matter:

- ``textbook``: softmax(X Xᵀ / sqrt(d)) X, the lecture notes' scaled dot-product
  self-attention with no parameters (every setting at its default).
- ``default``: the textbook path plus three parameter-free ingredients that make the
  contextual vectors follow word senses (see README, "Meaning in context"):
  a shared affine projection of Q, K and V that removes the common mean and the dominant
  directions of the vocabulary ("all-but-the-top", Mu & Viswanath 2018); a key bias
  log(a / (a + p(w))) that down-weights frequent context words (smooth inverse frequency,
  Arora, Liang & Ma 2017); a diagonal mask, so a word attends to its context rather than mostly
  to itself, and a twin mask, so it does not attend to its own copies (the second "bank" of "the
  bank of the river bank") either; and ELMo's layer mix 0.2·h0 + 0.8·h1 (:mod:`ctxembed.core.mix`),
  which puts the word's own vector (layer 0, the attention input) back beside its context (layer 1).

Every setting is declared once (:func:`ctxembed.declarations.setting`); :data:`SETTINGS` lists them all,
flat, by name, and everything else here is generated from it.

>>> build_settings("textbook", heads=2, causal=True).summary()
'preset textbook | scores x.x/sqrt(d) | softmax | projection identity | causal (before softmax) | 2 heads, 1 layer'
>>> build_settings("textbook", seed=3)
Traceback (most recent call last):
...
ctxembed.errors.SettingError: seed is used only by projection random
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ctxembed.core.mix import check_spec
from ctxembed.declarations import (
    INGREDIENT_PANEL,
    LEARNED_WEIGHTS_FILE,
    PROJECTION_PANEL,
    AttentionConfig,
    Projection,
    ReadOptions,
    Setting,
    check_declared,
    declarations,
    long_flag,
    setting,
)
from ctxembed.errors import SettingError
from ctxembed.options import OPTIONS


def _projection(v: Mapping[str, Any]) -> str:
    kind = v["projection"]
    if kind == "random":
        kind += f"(seed {v['seed']}, d_out {v['d_out'] or 'd/h'}{', W_out' if v['output_projection'] else ''})"
    elif kind == "file":
        kind += f"({v['weights_file']})"
    return f"projection {kind}"


@dataclass(frozen=True)
class Settings:
    """Everything that decides the contextual vectors, besides the vectors themselves."""

    preset: str = "default"
    attention: AttentionConfig = field(default_factory=AttentionConfig)
    projection: str = setting(
        Projection,
        "identity",
        "Queries, keys and values: identity (Q=K=V=X), random (Xavier, from --seed) or file (--weights).",
        panel=PROJECTION_PANEL,
        summary=_projection,
        order=1,
    )
    seed: int = setting(
        int,
        0,
        "Seed of the random projections.",
        minimum=0,
        maximum=2**32 - 1,
        panel=PROJECTION_PANEL,
        requires=("projection", "random"),
    )
    # 4096 columns keep one head's random matrices at 3 x 4096 x d floats (~10 MB for d = 100).
    d_out: int | None = setting(
        int,
        None,
        "Per-head size of the random projections (default: d / heads).",
        minimum=1,
        maximum=4096,
        optional=True,
        panel=PROJECTION_PANEL,
        requires=("projection", "random"),
    )
    weights_file: str | None = setting(
        str,
        None,
        "Projections .npz (l0.h0.W_query, ...; layout in docs/attention.md); selects the file projection.",
        flag="--weights",
        metavar="FILE.npz",
        optional=True,
        panel=PROJECTION_PANEL,
        requires=("projection", "file"),
        explain="W_query, W_key, W_value (and any W_out) are read from {weights_file}",
    )
    output_projection: bool = setting(
        bool,
        False,
        "W_out from the heads back to d: random from --seed, or learned by `ctxembed train`.",
        panel=PROJECTION_PANEL,
        requires=("projection", "random"),
    )
    abtt: int = setting(
        int,
        0,
        "All-but-the-top: remove the mean and D top principal directions of the vocabulary (0 = off).",
        minimum=0,
        maximum=256,
        metavar="D",
        panel=INGREDIENT_PANEL,
        summary="all-but-the-top D={abtt}",
        order=1,
        explain="the vocabulary mean and its top {abtt} principal directions are removed first",
        ingredient="abtt",
        fits=lambda directions, dimensions, words: directions == 0 or (directions < dimensions and words >= 2),
    )
    abtt_words: int = setting(
        int,
        200_000,
        "All-but-the-top statistics come from this many most frequent words.",
        minimum=2,
        maximum=10**8,
        panel=INGREDIENT_PANEL,
        ingredient="abtt",
    )
    sif: float = setting(
        float,
        0.0,
        "SIF key bias log(a / (a + p(w))) with this a: frequent context words weigh less (0 = off).",
        minimum=0.0,
        maximum=1.0,
        metavar="a",
        panel=INGREDIENT_PANEL,
        summary="SIF key bias a={sif:g}",
        order=1,
        explain="each key's score gets log(a / (a + p(w))), a={sif:g}: frequent words weigh less",
        ingredient="sif",
    )

    mix: str | None = setting(
        str,
        None,
        "Layer mix γ·Σ s_j h_j over layer 0 (the attention input) to L: weights such as 0.2,0.8 "
        "(two weights: layer 0 and the last), 'learned' (the last eval fit-mix), a fit-mix file, "
        "or off (the last layer alone).",
        optional=True,
        metavar="WEIGHTS|learned|FILE|off",
        panel=INGREDIENT_PANEL,
        summary=lambda v: f"layer mix {v['mix']}" if v["mix"] not in (None, "off") else None,
        order=1,
        explain=lambda v: (
            f"the contextual vector is the layer mix {v['mix']}: γ·Σ s_j h_j over the attention input h0 "
            "and every layer's output"
            if v["mix"] not in (None, "off")
            else None
        ),
        ingredient="mix",
    )
    mix_norm: bool = setting(
        bool,
        False,
        "Scale every layer to length 1 before the layer mix (AllenNLP's ScalarMix with layer norm), so "
        "the weights, not the layers' lengths, decide: a trained layer can be many times longer than a word.",
        panel=INGREDIENT_PANEL,
        summary=lambda v: "layers scaled to length 1" if v["mix_norm"] and v["mix"] not in (None, "off") else None,
        order=1,
        explain=lambda v: (
            "each layer's vector is scaled to length 1 before the mix"
            if v["mix_norm"] and v["mix"] not in (None, "off")
            else None
        ),
        ingredient="mix",
    )
    # the trained model these settings read out (an eval configuration of it: minilm, minilm@3, whose
    # read-out is ``mix``); None: settings of the attention over static vectors, what every field above shapes
    model: str | None = None

    def __post_init__(self) -> None:
        check_declared(self)
        if self.mix is not None:
            try:
                object.__setattr__(self, "mix", check_spec(self.mix))
            except ValueError as exc:
                raise SettingError(f"{{mix}} {self.mix}: {exc}", "mix") from None
        if self.projection == "file" and not self.weights_file:
            raise SettingError("{projection} file needs {weights_file}", "projection", "weights_file")
        if self.weights_file and self.projection != "file":
            raise SettingError(
                "{weights_file} is read only by {projection} file, not " + self.projection,
                "weights_file",
                "projection",
            )

    def head_size(self, d_in: int) -> int:
        """d_out, each head's size on d_in-dimensional inputs: ``d_out`` when given, else d_in / heads."""
        return self.d_out or d_in // self.attention.heads

    def values(self) -> dict[str, Any]:
        """Every declared setting by name, flat (attention settings included)."""
        attention = {name: getattr(self.attention, name) for name in declarations(AttentionConfig)}
        return attention | {name: getattr(self, name) for name in declarations(Settings)}

    def as_dict(self) -> dict:
        """The JSON settings: the preset, the attention core's settings, then the ingredients (and the
        trained model they read out, when they do)."""
        settings = asdict(self)
        if self.model is None:
            del settings["model"]
        return settings

    def summary(self) -> str:
        """One line naming every ingredient that is on, for table headers."""
        values = self.values()
        parts = [f"preset {self.preset}"]
        parts += [text for spec in _IN_ORDER if (text := spec.describe(spec.summary, values))]
        return " | ".join(parts)

    def explain(self) -> list[str]:
        """What each setting that is on did to the numbers, in declaration order, for ``--explain``."""
        values = self.values()
        return [text for spec in _IN_ORDER if (text := spec.describe(spec.explain, values))]


SETTINGS: dict[str, Setting] = declarations(AttentionConfig) | declarations(Settings)
# What a model of static word vectors and attention layers takes (the "attention" family of
# ctxembed.engine.families, whose record and whose models' cards say it with this set): where its vectors
# come from, how words are read, a preset and every setting, by their Python names.
ATTENTION_OPTIONS = frozenset({"preset", "vectors", "limit", "trust", "oov", "max_tokens", "window", *SETTINGS})
_IN_ORDER = sorted(SETTINGS.values(), key=lambda spec: spec.order)  # stable: declaration order within


def flag(name: str) -> str:
    """The command-line flag of a setting, a read option or a vectors option named in a library error
    (``max_tokens`` -> ``--max-tokens``): what the CLI and the live page show for ``{name}``. A
    command's own option (``--explain``, ``--resume``, ``--port``), declared by its command alone, is
    spelled as typer spells its parameter (:func:`long_flag`); tests/test_errors_name_settings.py checks
    that every command declares each option's flag so."""
    spec = (
        SETTINGS.get(name) or declarations(ReadOptions).get(name) or TRAIN_OPTIONS.get(name) or SENSE_OPTIONS.get(name)
    )
    if spec is None and name in OPTIONS and not OPTIONS[name].argument:  # a command option (--top, -k, --layer)
        return OPTIONS[name].option
    return spec.option if spec is not None else long_flag(name)


def _make(preset: str, values: Mapping[str, Any]) -> Settings:
    """Settings from flat values; names not given keep their declared default."""
    attention = {k: v for k, v in values.items() if k in declarations(AttentionConfig)}
    rest = {k: v for k, v in values.items() if k in declarations(Settings)}
    return Settings(preset=preset, attention=AttentionConfig(**attention), **rest)


# Each preset is its differences from the declared defaults.
PRESET_CHANGES: dict[str, dict[str, Any]] = {
    "textbook": {},
    "notes": {"scale": False},
    # Tuned on WiC train (threshold and ingredients), confirmed on dev; see README "Meaning in context".
    # The word comes back through the layer mix 0.2 * h0 + 0.8 * h1 (h0 the input, h1 pure context).
    # The previous default's residual 1/9 was the mix 0.1 * h0 + 0.9 * h1 up to a factor cosine
    # ignores, and 0.1 is what ELMo's recipe (eval fit-mix) learns on WiC train; 0.2 gains +0.08
    # Spearman on SCWS dev for -0.008 accuracy on WiC train (docs/mix.md).
    # The twin mask changes only sentences that repeat a word: WiC dev unchanged, SCWS dev -0.0003, the
    # repeated-word suite data/twins.tsv +0.18 of margin (docs/attention.md, "Twins").
    "default": {"exclude_self": True, "exclude_twins": True, "abtt": 3, "sif": 1e-4, "mix": "0.2,0.8"},
}


# What `ctxembed train` trains unless told otherwise (docs/training.md has the measurements):
# - a transformer encoder's attention without its feed-forward block: 2 layers of 4 heads, W_out,
#   residual. Two layers, because with one the masked token's query is the constant [MASK] @ W_query
#   and W_query cannot learn; no layer norm, which held the held-out loss back (10% lower after 5
#   epochs on 5,000 Brown sentences, against 22% without it);
# - sinusoidal positions in the queries and keys only: word order predicts a masked word and steers
#   the attention, but the vectors stay words (added to the input, a 6.9-long position vector sits in
#   every output, longer than a word);
# - the default preset's input ingredients (all-but-the-top, SIF, self mask): the model learns on the
#   vectors it is read with;
# - the read-out: half the word, half the last layer, each scaled to length 1. The last layer's update
#   is trained only where a word is masked and grows many times longer than a word (40 after 5 epochs
#   on Brown, against 4.5), so compared as it is it hides the word.
TRAIN_DEFAULTS: dict[str, Any] = {
    "layers": 2, "heads": 4, "output_projection": True, "residual": True,
    "positions": True, "position_mode": "query-key",
    "exclude_self": True, "abtt": 3, "sif": 1e-4,
    "mix": "0.5,0.5", "mix_norm": True,
}  # fmt: skip


TRAINING_PANEL = "Training"
# What training a trained model (a derived model, ``train --model minilm PAIRS --name NAME``) uses unless told:
# BERT's fine-tuning recipe (lr 5e-5, batches of 16 pairs, warm-up over a tenth of the steps at most), 2 epochs
# (docs/training.md: WiC dev 0.650 after one epoch, 0.655 after two). ``batch_pairs`` is the command's option.
FINETUNE_DEFAULTS: dict[str, Any] = {"epochs": 2, "lr": 5e-5, "batch_pairs": 16}
MODEL_PANEL = "Model (what is trained)"


@dataclass(frozen=True)
class TrainOptions:
    """How ``ctxembed train`` trains (the architecture it trains is a :class:`Settings`). Each option is
    declared once: the command's flags, their limits and help, and the API's keywords come from here.

    >>> TrainOptions(epochs=2).lr
    0.003
    >>> TrainOptions(mask_rate=0.95)
    Traceback (most recent call last):
    ...
    ctxembed.errors.SettingError: mask_rate must be a finite number in [0.01, 0.9], not 0.95
    """

    # a padded batch of 10^6 tokens already holds layers x heads x 10^6 x T weights for the backward pass
    epochs: int = setting(
        int,
        5,
        "Passes over the training sentences; 0: write the initial weights. Fine-tuning (--model minilm --name): "
        f"{FINETUNE_DEFAULTS['epochs']} unless given.",
        minimum=0,
        maximum=10_000,
        panel=TRAINING_PANEL,
    )
    lr: float = setting(
        float,
        3e-3,
        f"Adam's peak learning rate. Fine-tuning (--model minilm --name): {FINETUNE_DEFAULTS['lr']:g} unless given.",
        minimum=1e-8,
        maximum=10.0,
        panel=TRAINING_PANEL,
    )
    batch_tokens: int = setting(
        int,
        512,
        "Padded tokens per step (sentences of similar length are batched together).",
        minimum=8,
        maximum=1_000_000,
        panel=TRAINING_PANEL,
    )
    mask_rate: float = setting(
        float,
        0.15,
        "Share of tokens replaced by [MASK] and predicted.",
        minimum=0.01,
        maximum=0.9,
        panel=TRAINING_PANEL,
    )
    negatives: int = setting(
        int,
        512,
        "Sampled negative words each masked token is told apart from, per step.",
        minimum=1,
        maximum=100_000,
        panel=TRAINING_PANEL,
    )
    fix_values: bool = setting(bool, False, "Keep W_value = I; learn W_query, W_key (and W_out).", panel=MODEL_PANEL)
    max_tokens: int = setting(
        int,
        128,
        "Longer sentences are cropped to their first N tokens with a vector.",
        minimum=1,
        maximum=2048,
        metavar="N",
        panel=TRAINING_PANEL,
    )
    held_out: float = setting(
        float,
        0.1,
        "Share of sentences kept out of training, scored every epoch.",
        minimum=0.0,
        maximum=0.9,
        panel=TRAINING_PANEL,
    )
    warmup: int = setting(
        int,
        100,
        "Steps of linear learning-rate warm-up (fewer when the run is shorter).",
        minimum=0,
        maximum=10_000_000,
        panel=TRAINING_PANEL,
    )
    clip: float = setting(
        float,
        1.0,
        "Largest global gradient norm; larger gradients are scaled down (0: never).",
        minimum=0.0,
        panel=TRAINING_PANEL,
    )
    seed: int = setting(
        int,
        0,
        "Seed of the initial weights and of every random choice.",
        minimum=0,
        maximum=2**32 - 1,
        panel=TRAINING_PANEL,
    )

    def __post_init__(self) -> None:
        check_declared(self)


TRAIN_OPTIONS: dict[str, Setting] = declarations(TrainOptions)
SENSES_PANEL = "Senses"


@dataclass(frozen=True)
class SenseOptions:
    """How ``ctxembed senses`` and ``ctxembed eval wsi`` find and cluster a word's occurrences; declared
    once, like :class:`TrainOptions`.

    >>> SenseOptions(k=3).k_max, SenseOptions(max_occurrences=0).max_occurrences   # 0: every occurrence
    (8, None)
    """

    k: int | None = setting(
        int,
        None,
        "Senses per word: a number, or auto (chosen by silhouette).",
        minimum=1,
        maximum=50,
        optional=True,
        flag="-k",
        none_as="auto",
        metavar="N|auto",
        panel=SENSES_PANEL,
    )
    k_max: int = setting(int, 8, "-k auto tries 2 .. this.", minimum=2, maximum=20, panel=SENSES_PANEL)
    min_share: float = setting(
        float,
        0.05,
        "-k auto: smallest share of the occurrences a sense holds.",
        minimum=0.0,
        maximum=0.5,
        panel=SENSES_PANEL,
    )
    max_occurrences: int | None = setting(
        int,
        1000,
        "Per word, a seeded uniform sample of the occurrences (0: all).",
        minimum=0,
        optional=True,
        panel=SENSES_PANEL,
    )
    sample_seed: int = setting(
        int,
        0,
        "Seed of the occurrence sample and of k-means.",
        minimum=0,
        maximum=2**32 - 1,
        panel=SENSES_PANEL,
    )
    # measured: dropping it scores higher with the default preset (docs/senses.md)
    drop_own: bool = setting(
        bool,
        True,
        "Drop (default) or keep the word's own term (its layer-0 share, its residual) in its vector.",
        flag="--drop-own",
        off_flag="--keep-own",
        panel=SENSES_PANEL,
    )
    examples: int = setting(int, 5, "Central examples shown per sense.", minimum=0, maximum=100, panel=SENSES_PANEL)
    label_words: int = setting(int, 8, "Words labelling a sense.", minimum=1, maximum=50, panel=SENSES_PANEL)

    def __post_init__(self) -> None:
        check_declared(self)
        if self.max_occurrences == 0:
            object.__setattr__(self, "max_occurrences", None)


SENSE_OPTIONS: dict[str, Setting] = declarations(SenseOptions)


def _learned_changes() -> dict[str, Any]:
    """The shipped weights, trained by scripts/build_learned_weights.py with the training defaults, named
    by their file's name: the engine layer finds the file among the shipped data. A trained file's
    recorded settings are the ones that count (the engine layer reads them, see :func:`build_settings`);
    a test checks they agree."""
    trained = {k: v for k, v in TRAIN_DEFAULTS.items() if k != "output_projection"}  # the file holds W_out
    return trained | {"projection": "file", "weights_file": LEARNED_WEIGHTS_FILE}


PRESET_CHANGES["learned"] = _learned_changes()
PRESETS: dict[str, Settings] = {name: _make(name, changes) for name, changes in PRESET_CHANGES.items()}
PRESET_NAMES = tuple(PRESETS)
PRESET_HELP = (
    "Named recipe: default (separates senses), textbook (softmax(XXᵀ/√d)X), notes (unscaled), "
    "learned (projections trained on the Brown corpus by `ctxembed train`); "
    "the options below change one setting of it.  [default: default]"
)


def build_settings(preset: str = "default", *, recorded: Mapping[str, Any] | None = None, **overrides: Any) -> Settings:
    """A preset with some settings overridden by name; ``None`` leaves the preset's choice.

    A setting given here that only means something with another (``seed`` with the random
    projection) is an error when that other setting says otherwise; ``weights_file`` alone
    switches an identity preset to the file projection. ``recorded``: the settings the weights file
    (given, or the preset's) was trained with, as ``ctxembed train`` records them; they replace the
    preset's, and settings given still win. This module reads no file: the engine layer reads them
    (:func:`ctxembed.engine.projections.resolve_settings`, what the API and the commands call).
    """
    preset = getattr(preset, "value", preset)
    if preset not in PRESETS:
        raise SettingError(f"unknown {{preset}} {preset!r}; choose one of {', '.join(PRESET_NAMES)}", "preset")
    chosen = {k: v for k, v in overrides.items() if v is not None}
    unknown = sorted(set(chosen) - set(SETTINGS))
    if unknown:
        raise SettingError(f"unknown setting(s): {', '.join(unknown)}; known: {', '.join(SETTINGS)}")
    chosen = {k: SETTINGS[k].check(v) for k, v in chosen.items()}
    values = PRESETS[preset].values()
    if recorded is not None:
        values |= _trained_values(recorded, chosen.get("weights_file") or values["weights_file"])
    values |= chosen
    if chosen.get("weights_file") and "projection" not in chosen and values["projection"] == "identity":
        values["projection"] = "file"
    for name in chosen:
        needed = SETTINGS[name].requires
        if needed and values[needed[0]] != needed[1]:
            other, wanted = needed
            raise SettingError(f"{{{name}}} is used only by {{{other}}} {wanted}", name, other)
    return _make(preset, values)


def fit_to_vectors(
    settings: Settings, dimensions: int, words: int, *, keep: frozenset[str] = frozenset()
) -> tuple[Settings, list[str]]:
    """Step a preset's settings down to what vectors of this size allow.

    A setting whose declaration says it does not fit (all-but-the-top needs more dimensions than
    directions) goes back to its default, unless it was asked for by name (in ``keep``): then the
    engine reports the conflict. Returns the settings and the names of the settings turned off.
    """
    values = settings.values()
    changed = {
        name: spec.default
        for name, spec in SETTINGS.items()
        if spec.fits is not None and name not in keep and not spec.fits(values[name], dimensions, words)
    }
    if not changed:
        return settings, []
    return _make(settings.preset, values | changed), list(changed)


# Settings a weights file decides for itself: its projections are not random.
_FILE_DECIDES = {"projection", "weights_file", "seed", "d_out", "output_projection"}


def _trained_values(trained: Mapping[str, Any], weights_file: str) -> dict[str, Any]:
    """A weights file written by ``ctxembed train`` carries its architecture: its recorded settings
    replace the preset's, so ``--weights FILE`` needs no other flag (flags given still override)."""
    flat = dict(trained.get("attention", {})) | {k: v for k, v in trained.items() if k != "attention"}
    values = {k: v for k, v in flat.items() if k in SETTINGS and k not in _FILE_DECIDES}
    # a setting the file does not record was not there when it was trained: it ran at its default
    defaults = {k: spec.default for k, spec in SETTINGS.items()}
    return defaults | values | {"projection": "file", "weights_file": weights_file}
