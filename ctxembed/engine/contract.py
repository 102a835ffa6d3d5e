"""The engine contract: what every model behind ``--model`` gives the commands, reports and views.

An engine turns sentences into contextual vectors in two steps, whatever the model inside:

    engine = open_engine(model="glove")                     # ctxembed.engine.registry
    sentence = engine.prepare("we sat on the river bank")   # Prepared: words, vocabulary status
    [result] = engine.run([sentence])                        # Contextualized: vectors and weights
    result.contextual[result.index_of("bank")]               # (d_out,) the contextual "bank"

Rows are WORDS. Every array of a result has one row per word of ctxembed's tokenizer
(:mod:`ctxembed.vectors.tokenize`) that enters attention (``prepared.used``), in order, whatever
the model reads inside. A subword model (WordPiece, BPE) splits each word into its pieces, runs on
the pieces, and aggregates them back to words inside its own engine (a word's vector from its
pieces' vectors, a word's attention from its pieces' rows and columns), so that ``--word bank#2``
and ``#8`` name the same word in every model, and every command, view and document reads
(T, d) vectors and (L, h, T, T) weights over T words. Two views look below the words, at the units
the model ran on, and say so: ``attention_parts`` (the readings) and ``layer_trace`` (``--explain``).

Commands, reports and views depend on this contract, never on one engine: they ask the registry
(:func:`ctxembed.engine.registry.open_engine`) for an engine by its model name, and no code outside
an engine writes ``if model == ...``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ctxembed.core.abtt import TopRemoval
    from ctxembed.engine.sentence import AttentionParts, Contextualized, LayerTrace, Prepared
    from ctxembed.presets import Settings
    from ctxembed.vectors.store import VectorStore


@runtime_checkable
class ContextEngine(Protocol):
    """Sentences -> words -> per-layer contextual vectors and attention weights.

    ``prepare`` tokenises one sentence (or takes its pre-split ``words``) and says which words enter
    attention; it raises :class:`ctxembed.errors.DataError` for a sentence it cannot run (empty, no
    word it knows, over ``max_tokens``). ``run`` computes many prepared sentences, one
    :class:`Contextualized` each, in order; a sentence's numbers never depend on the sentences it
    runs with. ``weights=False`` may drop the (L, h, T, T) weights; ``trace=True`` keeps every
    intermediate step (what ``--explain`` shows)."""

    model: str  # the registry's name for it: what --model names and a document records
    settings: Settings  # the attention settings it runs with (layers, heads, mix, ...)
    store: VectorStore  # the neighbour search space: words with (d,) static vectors
    dim: int  # d: a static vector's size (the store's)
    out_dim: int  # d_out: a contextual vector's size
    max_tokens: int  # most words of one sentence that enter attention
    removal: TopRemoval | None  # applied to contextual vectors before a neighbour search, or None
    label: Callable[[str], str]  # how its error messages name a setting (the CLI: by its flag)

    @property
    def layers(self) -> int:
        """L: attention layers; a result's weights are (L, h, T, T)."""

    @property
    def heads(self) -> int:
        """h: heads per layer."""

    def describe(self) -> dict[str, Any]:
        """JSON-ready description of what computed a document: its ``settings`` block."""

    def summary(self) -> str:
        """:meth:`describe` in one line for people: a document's ``settings_summary``."""

    def prepare(self, text: str, *, words: Sequence[str] | None = None) -> Prepared:
        """One sentence, ready to run: its words, their vocabulary status, those that enter attention."""

    def run(self, sentences: Sequence[Prepared], *, weights: bool = True, trace: bool = False) -> list[Contextualized]:
        """Per sentence: static and contextual (T, d_out) vectors, and (L, h, T, T) weights over its words."""

    def attention_parts(self, result: Contextualized) -> AttentionParts:
        """The weights and the vectors each unit sends through each head, at the level the model ran,
        with the aggregation to words: what ``attend --attention rollout|value-norm`` reads. ``sent``
        needs a result run with ``trace=True`` (else None)."""

    def layer_trace(self, result: Contextualized, layer: int) -> LayerTrace:
        """Every step of one layer (q, k, v per head, scores, weights, output) at the level the model ran,
        what ``--explain`` shows: from a result run with ``trace=True``, holding only that layer.
        DataError when the result keeps nothing to explain it from."""
