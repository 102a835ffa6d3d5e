"""What every engine takes and gives: a prepared sentence (:class:`Prepared`) and its result
(:class:`Contextualized`), and how a command names one of its words (``bank``, ``bank#2``, ``#8``).

Rows are words of ctxembed's tokenizer (:mod:`ctxembed.vectors.tokenize`), whatever the model.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ctxembed.core.attention import AttentionConfig, LayerSteps
from ctxembed.core.mix import LayerMix
from ctxembed.core.similarity import row_cosines
from ctxembed.errors import SettingError, UsageError
from ctxembed.vectors.lexicon import TOKEN_SOURCES, source_codes
from ctxembed.vectors.store import VectorStore
from ctxembed.vectors.tokenize import Token, tokenize


@dataclass(slots=True)  # slots: batch makes one per sentence, and a __dict__ each would be ~10% of that
class Prepared:
    """A sentence ready for attention: every token, and the ones that take part.

    Token objects (with character offsets) are built only when asked for: batch needs the
    tokens' texts and keys alone. Static vectors are gathered from the store when first asked
    for, so that a batch of sentences is gathered in one operation by :meth:`Engine.run`."""

    text: str
    texts: list[str]  # per token: its text as written
    token_keys: list[str]  # per token: the tokenizer's key (normalised, lower-cased for a lower-case vocabulary)
    in_vocab: list[bool]  # per token: has a vector (in the vocabulary, or built from subwords)
    used: list[int]  # positions (into tokens) of the tokens that enter attention, in order
    rows: list[int]  # per used token: its store row (= frequency rank), -1 when it has none
    keys: list[str | None]  # per token: the vocabulary word looked up
    extra: dict[int, np.ndarray]  # index into used -> a vector that is no store row (subwords, zeros)
    store: VectorStore = field(repr=False)
    _tokens: list[Token] | None = field(default=None, repr=False)

    @property
    def tokens(self) -> list[Token]:
        """Every token with its position and character offsets (the same texts as ``texts``)."""
        if self._tokens is None:
            self._tokens = tokenize(self.text, lowercase=self.store.lowercase)
        return self._tokens

    @property
    def ranks(self) -> np.ndarray:
        return np.array(self.rows, dtype=np.int64)  # (T,)

    @property
    def static(self) -> np.ndarray:
        """(T, d) float32 static vectors of the used tokens (zeros for oov "zero"), gathered now."""
        static = self.store.rows(np.maximum(self.ranks, 0))  # (T, d)
        for index, vector in self.extra.items():
            static[index] = vector
        return static

    @property
    def skipped(self) -> list[Token]:
        used = set(self.used)
        return [t for t in self.tokens if t.position not in used]

    def index_of(self, word: str) -> int | None:
        """Row (into ``used``) of the token ``word`` names: ``bank`` (its first occurrence), ``bank#2``
        or ``#8`` (position 8); see :func:`locate`."""
        return first_match(word, self.texts, self.token_keys, self.used)

    def locate(self, word: str) -> tuple[int, int, int] | None:
        """(row into ``used``, occurrence, occurrences) of the token ``word`` names (:func:`locate`)."""
        return locate(word, self.texts, self.token_keys, self.used)

    def units(self) -> int:
        """What attention runs over, as the cost budget counts it: the words that take part (a trained
        model's sentence counts its pieces)."""
        return len(self.used)

    def sources(self) -> list[str]:
        """Per token, where its vector came from: one of :data:`TOKEN_SOURCES`."""
        return token_sources(len(self.texts), self.in_vocab, self.used, self.rows, self.store)

    def pieces(self) -> list[list[str] | None]:
        """Per token, the pieces a subword model split it into (None: not split, or the units are words)."""
        return [None] * len(self.texts)

    def warning(self) -> str | None:
        """A line for people when the sentence's vectors are mostly guesses (:func:`tokens_warning`)."""
        return tokens_warning(self.texts, self.sources())


# Scripts written without spaces between words (CJK, kana, Thai, Lao, Khmer, Myanmar, Tibetan): the
# tokenizer cuts at spaces and punctuation, so a sentence in one of them becomes one or two long "words".
_UNSPACED = re.compile(
    "[\u0e00-\u0eff\u0f00-\u0fff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]{4,}"
)


def tokens_warning(texts: Sequence[str], sources: Sequence[str]) -> str | None:
    """The one rule for warning that a sentence's vectors say little: more than half of its tokens
    are subword guesses (vectors built from character n-grams), or a token holds four or more
    characters of a script written without spaces (a Japanese sentence is one token). None: fine."""
    unspaced = next((text for text in texts if _UNSPACED.search(text)), None)
    if unspaced is not None:
        shown = unspaced if len(unspaced) <= 12 else unspaced[:10] + "..."
        return (
            f"{shown!r} looks like a language written without spaces; the tokenizer cuts at spaces, "
            "so it is one token and its vector and neighbours mean little"
        )
    guessed = sum(source == "subword" for source in sources)
    if texts and guessed * 2 > len(texts):
        return (
            f"{guessed} of {len(texts)} tokens are not in the vocabulary and have subword guesses "
            "(vectors built from character n-grams): attention and neighbours rest on guesses"
        )
    return None


MAX_NUMBER_DIGITS = 9  # of a position or occurrence in bank#2 or #8: far past any sentence's tokens


def split_word(spec: str) -> tuple[str | None, int | None]:
    """A word as the commands take it: ``bank`` (its first occurrence), ``bank#2`` (its second) or
    ``#8`` (the token at position 8) -> (word or None, occurrence or position or None); a UsageError
    for a number of more than :data:`MAX_NUMBER_DIGITS` digits."""
    found = re.fullmatch(r"(.*?)#(\d+)", spec)
    if found is None:
        return spec, None
    if len(found[2]) > MAX_NUMBER_DIGITS:  # int() of 4,300 digits and more raises a bare ValueError
        shown = spec if len(spec) <= 40 else f"{spec[:30]}...({len(spec):,} characters)"
        raise UsageError(
            f"{shown}: the number after '#' has {len(found[2]):,} digits; a position or occurrence takes at most "
            f"{MAX_NUMBER_DIGITS} digits"
        )
    return (found[1] or None), int(found[2])


def locate(spec: str, texts: Sequence[str], keys: Sequence[str], used: Sequence[int]) -> tuple[int, int, int] | None:
    """(row into ``used``, occurrence from 1, occurrences) of the token ``spec`` names (see
    :func:`split_word`; a word matches a used token whose key or text, lower-cased, is the word
    lower-cased), or None when the sentence has no such token."""
    word, number = split_word(spec)
    at = None  # a position's row
    if word is None:
        if number not in used:
            return None
        at, word = list(used).index(number), keys[number]
    wanted = word.lower()
    rows = [r for r, p in enumerate(used) if keys[p].lower() == wanted or texts[p].lower() == wanted]
    if at is not None:
        return at, rows.index(at) + 1, len(rows)
    number = number or 1
    if not 1 <= number <= len(rows):
        return None
    return rows[number - 1], number, len(rows)


def window_span(count: int, at: int, window: int | None) -> tuple[int, int]:
    """(start, stop): the tokens a window of ``window`` reads around token ``at`` of ``count``, those at
    most ``window`` positions from it (0 or None: all ``count``). Every command that crops a sentence
    to its word (``--window``) crops here: :func:`crop`, eval's occurrences, senses' occurrences."""
    if not window:
        return 0, count
    return max(0, at - window), min(count, at + window + 1)


def refuse_window(window: int | None, command: str) -> None:
    """A SettingError for a ``window`` asked for where ``command`` has no word to crop around (attend,
    compare of every shared word, batch without --word); nothing for no window."""
    if window:
        reason = "a command that reads one word" if command == "attend" else "a word to crop around ({word})"
        raise SettingError(
            f"{{window}} {window} needs {reason}: it crops a sentence to the tokens either side of the word "
            "whose vector compare, neighbors, senses, batch and eval read",
            "window",
            "word",
        )


def crop(text: str, word: str, window: int | None) -> tuple[str, str]:
    """``text`` cropped to the tokens at most ``window`` positions from the token ``word`` names
    (``bank``, ``bank#2``, ``#8``; among every token of the sentence), and the spelling that names the
    same token in the cropped text (``bank#2`` becomes ``bank`` when the first bank is cut off, ``#8``
    becomes ``#3``). The text as it is written between the first and the last token kept. Unchanged
    when the window holds the whole sentence or the sentence has no such token (the command then
    says so as it would without a window)."""
    if not window:
        return text, word
    tokens = tokenize(text)  # (n,) every token: a window counts tokens, used by attention or not
    texts, keys = [t.text for t in tokens], [t.key for t in tokens]
    found = locate(word, texts, keys, range(len(tokens)))
    if found is None:
        return text, word
    at = found[0]  # rows of every token are positions
    start, stop = window_span(len(tokens), at, window)
    if (start, stop) == (0, len(tokens)):
        return text, word
    name, number = split_word(word)
    if name is None:  # #8: the same token's position in the cropped text
        spelled = f"#{at - start}"
    else:
        wanted = name.lower()
        occurrence = sum(keys[p].lower() == wanted or texts[p].lower() == wanted for p in range(start, at + 1))
        spelled = name if occurrence == 1 else f"{name}#{occurrence}"
    return text[tokens[start].start : tokens[stop - 1].end], spelled


def first_match(word: str, texts: Sequence[str], keys: Sequence[str], used: Sequence[int]) -> int | None:
    """Index into ``used`` of the token ``word`` names (:func:`locate`), or None."""
    found = locate(word, texts, keys, used)
    return None if found is None else found[0]


def token_sources(
    n: int, in_vocab: Sequence[bool], used: Sequence[int], rows: Sequence[int], store: VectorStore
) -> list[str]:
    """Per token of a sentence of ``n`` tokens: where its vector came from, one of
    :data:`TOKEN_SOURCES` (``rows`` per used token, -1: no store row; :func:`source_codes`)."""
    by_token = np.full(n, -1, np.int64)  # (n,) store row per token
    by_token[list(used)] = rows
    codes = source_codes(store, by_token, np.array(in_vocab, bool))  # (n,)
    return [TOKEN_SOURCES[code] for code in codes.tolist()]


@dataclass
class Contextualized:
    """One sentence after attention. Rows of every array follow ``prepared.used``."""

    prepared: Prepared
    static: np.ndarray  # (T, d) the static vectors of the used tokens
    inputs: np.ndarray  # (T, d) what attention saw: static vectors after all-but-the-top removal
    contextual: np.ndarray  # (T, d_out) the layer mix when one is on, else the last layer's output
    weights: np.ndarray | None  # (L, h, T, T) attention weights of every layer and head (None: not kept)
    layer_inputs: list[np.ndarray] = field(default_factory=list)  # L arrays (T, d_l), positions included
    steps: list[LayerSteps] | None = None  # Engine.run(..., trace=True): every step of every layer
    top: np.ndarray | None = None  # (T, d_out) the last layer's output when a mix made ``contextual``
    mix: LayerMix | None = None  # the mix that made ``contextual`` from the layers, or None
    # (L, h, T, S) each word's attention, before renormalising over the words, to the S units of no word
    # (a subword model's [CLS], [SEP], named by hidden_units); None when every unit is a word
    hidden_share: np.ndarray | None = None
    hidden_units: tuple[str, ...] = ()

    @property
    def last_layer(self) -> np.ndarray:
        """(T, d_out) the last attention layer's output, with or without a mix."""
        return self.contextual if self.top is None else self.top

    def hidden_states(self) -> list[np.ndarray]:
        """L + 1 arrays (T, d_l): the attention input h0, then each layer's output (a layer's size may
        differ from the input's, so they are a list, not one array)."""
        return [self.inputs, *self.layer_inputs[1:], self.last_layer]

    def layers(self) -> np.ndarray:
        """(L + 1, T, d) every layer a mix weighs: :meth:`hidden_states` as one array."""
        return np.stack(self.hidden_states())

    def used_tokens(self) -> list[Token]:
        return [self.prepared.tokens[p] for p in self.prepared.used]

    def index_of(self, word: str) -> int | None:
        """Row of the used token ``word`` names (``bank``, ``bank#2``, ``#8``; see :func:`locate`)."""
        return self.prepared.index_of(word)

    def moved(self) -> np.ndarray:
        """Per token, the cosine between its attention input and its contextual vector (T,);
        NaN when the two live in spaces of different size."""
        if self.inputs.shape[1] != self.contextual.shape[1]:
            return np.full(len(self.contextual), np.nan)
        return row_cosines(self.inputs, self.contextual)


def same_units(values: np.ndarray) -> np.ndarray:
    """The aggregation of an engine whose units are the words themselves: nothing to do."""
    return values


@dataclass(frozen=True)
class AttentionParts:
    """What attention's readings (rollout, value-norm; :mod:`ctxembed.core.readings`) need of one result,
    at the level the model ran: words for GloVe, wordpieces for a subword model (P units).

    The readings are computed on these units, then ``to_words`` turns each (..., P, P) map into the
    contract's (..., T, T) word map with the engine's own aggregation, the one its weights went
    through (a word's key pieces summed, its query pieces averaged), so a reading of a subword model
    is never computed from already-aggregated weights."""

    weights: np.ndarray  # (L, h, P, P) attention weights over the model's units
    sent: list[np.ndarray] | None  # per layer (h, P, D): f_h(x_j) = v^h_j W_out^h, what each unit sends
    # through each head (core.readings.sent_vectors); None when the result was run without trace
    to_words: Callable[[np.ndarray], np.ndarray] = same_units  # (..., P, P) -> (..., T, T)


NO_STEPS = (
    "{explain} needs the steps of each layer (q, k, scores), which this result does not hold "
    "(run it with trace=True; an engine that keeps none cannot be explained)"
)


@dataclass(frozen=True)
class LayerTrace:
    """One layer's steps for ``--explain`` (:meth:`ContextEngine.layer_trace`), at the level the model ran:
    words for GloVe, wordpieces with [CLS] and [SEP] for a subword model (U units), with what the view
    says about them. ``steps`` has no B axis: q, k, v (h, U, d_k), weights (h, U, U), output (U, d_out)."""

    steps: LayerSteps  # the core's own steps of this layer
    attention: AttentionConfig  # the ingredients that were on: scale, mask, normaliser, residual, norm
    units: list[str]  # (U,) row and column labels
    sources: list[str]  # (U,) where each unit's vector came from (TOKEN_SOURCES)
    query_units: list[int]  # per word row, the unit the neuron view takes as that word's query
    level: str = "words"  # "words" or "pieces"
    projected: bool = False  # q, k, v come from matrices (False: they are x, or a head's slice of it)
    projections: str | None = None  # where those matrices come from, for people; None for the identity
    biases: bool = False  # q = x W_q + b_q (and k, v alike)
    output_projection: bool = False  # the heads' merged contexts times W_out
    positions: bool = False  # sinusoidal position encodings were added to this layer's input
    shared_projection: bool = False  # the input is the static vectors after all-but-the-top
    inputs_about: str | None = None  # what the input x is, when more than "the static vectors" says
    attended: np.ndarray | None = None  # (U, d) after attention, residual and norm: a feed-forward's input
    notes: tuple[str, ...] = ()  # lines for the view's heading (the level, how a word picks its query)
    # the family's words for the sub-layer after attention's residual and norm, whose input is ``attended``
    # (BERT: its feed-forward, residual and norm); empty when the layer ends with attention
    after_attention: tuple[str, ...] = ()


@dataclass
class GroupArrays:
    """The numbers of a group of B sentences of one length T, as a column kernel's ``run_group`` computed
    them (:class:`ctxembed.engine.contract.ColumnKernel`), before they are cut into one
    :class:`Contextualized` per sentence."""

    static: np.ndarray  # (B, T, d) the static vectors
    inputs: np.ndarray  # (B, T, d) after all-but-the-top removal: what attention saw
    contextual: np.ndarray | None  # (B, T, d_out) the mix when one is on, else the last layer (None: not asked)
    weights: np.ndarray | None  # (B, L, h, T, T) C-contiguous, so weights[b] is one block (None: not kept)
    layer_inputs: list[np.ndarray]  # L arrays (B, T, d_l), positions included (empty without vectors)
    top: np.ndarray | None  # (B, T, d_out) the last layer's output when a mix made ``contextual``
    steps: list[LayerSteps] | None  # with trace: every step of every layer, the B axis kept

    def results(self, sentences: Sequence[Prepared], mix: LayerMix | None) -> list[Contextualized]:
        """One :class:`Contextualized` per sentence of the group: views into the group's arrays."""
        T = self.static.shape[1]
        return [
            Contextualized(
                prepared=sentence,
                static=self.static[b],  # (T, d)
                inputs=self.inputs[b],  # (T, d)
                contextual=self.contextual[b],  # (T, d_out)
                weights=None if self.weights is None else self.weights[b],  # (L, h, T, T)
                layer_inputs=[layer[b] for layer in self.layer_inputs],  # L arrays (T, d_l)
                steps=None if self.steps is None else [layer.sentence(b, T) for layer in self.steps],
                top=None if self.top is None else self.top[b],  # (T, d_out)
                mix=mix,
            )
            for b, sentence in enumerate(sentences)
        ]
