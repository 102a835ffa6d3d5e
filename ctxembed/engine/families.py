"""Model families: how the models of one architecture are loaded, tokenized, run and explained.

A model of the registry (:mod:`ctxembed.vectors.catalogue`) names its family; the family says the
rest, so a second BERT is one registry entry and no code names a model:

- ``attention``: static word vectors and attention layers built from the settings (the glove model),
  run by :class:`ctxembed.engine.glove.Engine`;
- ``bert``: a post-LayerNorm transformer encoder with WordPiece pieces between [CLS] and [SEP],
  run by the one trained-model engine, :class:`ctxembed.engine.trained.TrainedEngine`, with the
  family's loader, piece tokenizer (:class:`ctxembed.vectors.pieces.PieceTokenizer`), special
  pieces, block (:func:`ctxembed.core.encoder.encode`, one layer traced by
  :func:`~ctxembed.core.encoder.trace_layer`) and the words its ``--explain`` steps are named with.

A trained family's installed folder (its converter, the files it writes and pins, its checked loader) is
its :class:`ctxembed.vectors.layouts.Layout`, declared in the vectors layer where ``models install`` and
``models verify`` read it; the record here refers to it.

A causal decoder with a byte-level BPE would be a third record: its layout (loader and converter), a BPE
tokenizer giving word-aligned spans, no special piece around a sentence, ``causal=True`` (its card
then masks the future keys), its own block and step names (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxembed.errors import SettingError
from ctxembed.presets import ATTENTION_OPTIONS
from ctxembed.vectors.layouts import LAYOUTS, Layout

if TYPE_CHECKING:
    from ctxembed.engine.contract import ContextEngine
    from ctxembed.vectors.catalogue import ModelEntry
    from ctxembed.vectors.pieces import PieceTokenizer


@dataclass(frozen=True)
class StepNames:
    """How ``--explain`` names a family's steps (the view draws what it is handed; these are its words)."""

    inputs: str  # what layer 0's input x is
    later_inputs: str  # what layer l's input is ({layer}, {previous} are filled in)
    projections: str  # where q, k, v come from ({upstream}: the model's name)
    level: str  # the units the rows are, and how a word's maps are made from them
    query: str  # which unit a word queries with in the neuron view
    feed_forward: tuple[str, ...]  # the sub-layer after attention's residual and norm, in parts (empty: none)


@dataclass(frozen=True)
class Family:
    """One family: what every model of it shares. A trained family runs through TrainedEngine."""

    name: str
    about: str  # its block in one line, for people (whether its models are trained: ModelEntry.trained)
    # the options its models take, by their Python names (--model aside): the one declaration that refuses
    # the others before any work (ctxembed.engine.registry.check_options), that each command's help lists
    # and that a card's ``options`` says
    options: frozenset[str]
    open: Callable[..., ContextEngine]  # (entry, vectors, preset, **open_engine's keywords) -> its engine
    # a trained family's installed folder (ctxembed.vectors.layouts, where install and verify read it): its
    # converter, the files it writes and pins, its checked loader; None: nothing to install
    layout: Layout | None = None
    begin: tuple[str, ...] = ()  # the special pieces before a sentence's pieces
    end: tuple[str, ...] = ()  # ... and after them
    causal: bool = False  # a query attends to no key after it
    encode: Callable[..., Any] | None = None  # the block stack: (weights, ids (B, T), real (B, T)) -> hidden, weights
    trace: Callable[..., Any] | None = None  # one layer step by step: (weights, layer, x (P, D)) -> its steps
    steps: StepNames | None = None  # the words of its --explain steps

    @property
    def specials(self) -> tuple[str, ...]:
        return self.begin + self.end

    @property
    def load(self) -> Callable[[Path], tuple[Any, Any, PieceTokenizer]]:
        """folder -> (config, weights, tokenizer), checked: its layout's loader."""
        return self.layout.load


def _open_glove(entry: ModelEntry, vectors: Any, preset: str, **keywords: Any) -> ContextEngine:
    from ctxembed.engine.glove import Engine, open_glove  # lazy: opening another model does not load this engine

    store = keywords.pop("store", None)
    if store is not None:  # a job's store and Settings (engine_for): no file to open, no preset to fit
        return Engine(
            store,
            keywords["settings"],
            oov=keywords.get("oov", "skip"),
            max_tokens=keywords["max_tokens"],
            window=keywords.get("window"),
        )
    return open_glove(vectors, preset, **keywords)


def _open_trained(entry: ModelEntry, vectors: Any, preset: str, **keywords: Any) -> ContextEngine:
    from ctxembed.declarations import DEFAULT_MAX_TOKENS
    from ctxembed.engine.trained import TrainedEngine  # lazy: the glove model never loads the encoder

    settings = keywords.get("settings")
    if settings is None and keywords.get("mix") not in (None, "off"):  # --mix: the read-out, as for GloVe
        from dataclasses import replace

        from ctxembed.presets import PRESETS

        if keywords.get("readout_layer") is not None:
            raise SettingError("{model} NAME@N reads one hidden state: {mix} does not apply beside it", "model", "mix")
        mix_norm = bool(keywords.get("mix_norm"))
        settings = replace(
            PRESETS["textbook"], preset=entry.name, model=entry.name, mix=keywords["mix"], mix_norm=mix_norm
        )
    return TrainedEngine(
        entry,
        FAMILIES[entry.family],
        max_tokens=keywords.get("max_tokens") or DEFAULT_MAX_TOKENS,
        label=keywords.get("label") or str,
        settings=settings,
        readout_layer=keywords.get("readout_layer"),
        window=keywords.get("window"),
    )


def _encode_bert(*args: Any, **keywords: Any):
    from ctxembed.core.encoder import encode  # lazy: the glove model never loads the encoder

    return encode(*args, **keywords)


def _trace_bert(*args: Any, **keywords: Any):
    from ctxembed.core.encoder import trace_layer  # lazy: as _encode_bert

    return trace_layer(*args, **keywords)


BERT_STEPS = StepNames(
    inputs="h0: word-piece embeddings + learned position embeddings + segment 0, then LayerNorm",
    later_inputs="h{layer}: the output of layer {previous}",
    projections="W_q, W_k, W_v trained ({upstream}), each with a bias",
    level="rows are WordPiece pieces with {specials}, the units the model attends over; its word-level maps sum "
    "a word's key pieces and average its query pieces",
    query="a word's query (--word) is its first piece",
    feed_forward=("feed-forward GELU(a W_1 + b_1) W_2 + b_2", "plus a", "then layer norm"),
)

FAMILIES: dict[str, Family] = {
    "attention": Family(
        "attention",
        "static word vectors -> attention layers shaped by the settings (presets, --heads, --causal ...)",
        options=ATTENTION_OPTIONS,
        open=_open_glove,
    ),
    "bert": Family(
        "bert",
        "BERT encoder: embeddings + positions, LayerNorm; per layer attention, residual, LayerNorm, "
        "GELU feed-forward, residual, LayerNorm",
        options=frozenset(
            {"max_tokens", "window", "mix", "mix_norm"}
        ),  # its words, layers and heads are its own; its read-out may be chosen
        open=_open_trained,
        layout=LAYOUTS["bert"],  # its converter, files and loader, declared where install and verify read them
        begin=("[CLS]",),
        end=("[SEP]",),
        encode=_encode_bert,
        trace=_trace_bert,
        steps=BERT_STEPS,
    ),
}
