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
an engine writes ``if model == ...``. What a model is (its sizes, units, masks, read-out, the options
it takes) they read from its card, :class:`ModelCard` (``engine.card``), never from one model's
settings; what a model can do beyond the contract is declared (``engine.columns``, batch's column
kernel, or None), never probed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

    from ctxembed.core.abtt import TopRemoval
    from ctxembed.engine.sentence import AttentionParts, Contextualized, LayerTrace, Prepared
    from ctxembed.vectors.lexicon import Lexicon
    from ctxembed.vectors.store import VectorStore

WORDS, WORDPIECES = "words", "wordpieces"  # ModelCard.units: the units a model attends over
LAST_LAYER = "the last layer"  # ModelCard.readout of a model whose contextual vector is its last layer's output


@dataclass(frozen=True)
class Masks:
    """Which keys each query of the word-level maps cannot attend to, and why: what a document's
    ``masked_keys`` lists and a view draws as masked. All off: every key is open."""

    causal: bool = False  # the keys after the query (a decoder, or --causal)
    exclude_self: bool = False  # the query's own key (--exclude-self)
    exclude_twins: bool = False  # the keys with the query's static vector, its copies (--exclude-twins)
    hidden: tuple[str, ...] = ()  # units it attends to that the word maps leave out ([CLS], [SEP])
    about: str = ""  # why, in a line for people ("" when nothing is masked or hidden)

    @property
    def masked(self) -> tuple[str, ...]:
        """The names of the masks that are on, in the order the views list them."""
        on = (("self", self.exclude_self), ("twins", self.exclude_twins), ("causal", self.causal))
        return tuple(name for name, is_on in on if is_on)


@dataclass(frozen=True)
class ModelCard:
    """What a model is, for every command, report and view: read this, never one model's settings.

    A result's rows are words whatever ``units`` says (see the module's docstring); ``units`` says
    what the model attends over inside (the level ``--explain`` and the readings show)."""

    name: str  # the registry's name: what --model takes and a document records
    family: str  # how it is built and loaded: "attention" (static vectors + attention), "bert", ...
    layers: int  # L: a result's weights are (L, h, T, T)
    heads: int  # h: heads per layer
    dim: int  # d: a static vector's size
    out_dim: int  # d_out: a contextual vector's size
    units: str  # WORDS or WORDPIECES: what the model attends over
    masks: Masks  # the keys the word-level maps mask, and why
    readout: str  # how a contextual vector is read out of the layers: "the last layer", "0.2·h0 + 0.8·h1"
    options: frozenset[str]  # the settings and read options it takes, by their Python names (preset, vectors, ...)
    trained: bool  # its weights are its own: no preset and no attention setting shapes it
    # λ when the last layer's output is (...) + λ·x with no norm after it (0: none): the part of a
    # contextual vector that is the word's own input (senses' own term)
    residual: float = 0.0
    upstream: str | None = None  # where a trained model's weights come from (Hugging Face's name)
    # projection numbers applied to each token, all layers together (0: the identity): the cost budget's work
    parameters: int = 0
    # where `neighbors` searches a contextual vector's neighbours, the default first: "input" (the input
    # vectors: the store, after all-but-the-top when the model applies it) or "contextual" (each word's
    # mean contextual vector over Brown at the same read-out, built once: ctxembed.engine.space)
    spaces: tuple[str, ...] = ("input",)
    # a derived model's parent (trained from it on labelled pairs: before-after compares the two); None: none
    parent: str | None = None

    @property
    def keeps_layers(self) -> bool:
        """Whether a run keeps every layer's output: a read-out other than the last layer (a mix) reads them."""
        return self.readout != LAST_LAYER


@runtime_checkable
class ColumnKernel(Protocol):
    """Batch's column kernel (:mod:`ctxembed.batch.columns`), an optional part of the contract
    (``engine.columns``): a model whose sentences of one length run as one array of static vectors
    (B, T, d), with the same arithmetic as ``run``. A model without one runs batch through ``prepare``
    and ``run``."""

    lexicon: Lexicon  # word -> pieces -> rows: a chunk's words resolved at once (TokenTable)
    store: VectorStore
    dim: int
    out_dim: int
    max_tokens: int
    oov: str

    def plan_groups(self, lengths: np.ndarray, *, weights: bool = True) -> list[np.ndarray]:
        """The groups sentences of these lengths (n,) run in: arrays of indices."""

    def run_group(self, static: np.ndarray, bias: np.ndarray | None, **keywords: Any) -> Any:
        """B sentences of one length T: static (B, T, d), key biases (B, T) -> their GroupArrays."""

    def run_rows(self, static: np.ndarray, bias: np.ndarray | None, rows: np.ndarray, twins: Any = ...) -> Any:
        """One token's contextual vector per sentence (B, d_out), or None when only run_group can."""

    def key_bias(self, ranks: np.ndarray) -> np.ndarray | None:
        """(..., T) frequency ranks -> (..., T) key biases, or None."""

    def fits_weights_budget(self, lengths: int | np.ndarray) -> bool | np.ndarray:
        """Whether a sentence of ``lengths`` words keeps weights within the budget."""


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
    card: ModelCard  # what the model is: sizes, units, masks, read-out, options taken
    columns: ColumnKernel | None  # batch's column kernel, or None: batch runs prepare and run
    store: VectorStore  # the neighbour search space: words with (d,) static vectors
    dim: int  # d: a static vector's size (the store's)
    out_dim: int  # d_out: a contextual vector's size
    max_tokens: int  # most words of one sentence that enter attention
    # tokens either side of a word a command reads the vector of (--window; 0: the whole sentence): the
    # commands crop its sentence with engine.sentence.crop before prepare; its registry entry's by default
    window: int
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

    def same_sense(self, layers: Sequence[np.ndarray]) -> np.ndarray | None:
        """A word in N sentences at each hidden state (L + 1 arrays (N, d)) -> (N, N): a derived model's
        head's probability that it keeps its sense between each two (compare shows it); None: no head."""
        ...

    def attention_parts(self, result: Contextualized) -> AttentionParts:
        """The weights and the vectors each unit sends through each head, at the level the model ran,
        with the aggregation to words: what ``attend --attention rollout|value-norm`` reads. ``sent``
        needs a result run with ``trace=True`` (else None)."""

    def layer_trace(self, result: Contextualized, layer: int) -> LayerTrace:
        """Every step of one layer (q, k, v per head, scores, weights, output) at the level the model ran,
        what ``--explain`` shows: from a result run with ``trace=True``, holding only that layer.
        DataError when the result keeps nothing to explain it from."""
