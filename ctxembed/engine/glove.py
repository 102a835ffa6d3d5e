"""The first engine behind the contract (:mod:`ctxembed.engine.contract`), registered as "glove":
a store of static word vectors (GloVe by default, or any store ``--vectors`` opens) -> attention
layers whose projections come from the settings. No printing, no files.

    engine = Engine(store, build_settings("default"))
    sentence = engine.prepare("we sat on the river bank")           # tokens, vocabulary status
    [result] = engine.run([sentence])                                # attention over the tokens
    result.contextual[result.index_of("bank")]                       # (d,) the contextual "bank"

Data flows one way: text -> :mod:`tokenize` -> store rows -> all-but-the-top removal (if any)
-> :func:`ctxembed.core.attention.encode` -> :class:`Contextualized`. Many sentences at once (batch)
take the same steps as columns: :meth:`Engine.prepare_many` -> :class:`Sentences` ->
:meth:`Engine.arrays` -> :class:`GroupArrays`, one group of equal-length sentences at a time.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from os import PathLike
from typing import Any

import numpy as np

from ctxembed.config import DEFAULT_MAX_TOKENS, WEIGHTS_BUDGET, ReadOptions
from ctxembed.core.abtt import TopRemoval
from ctxembed.core.attention import (
    LayerSteps,
    encode,
    identity_params,
    input_positions,
    validate_params,
)
from ctxembed.core.mix import LayerMix
from ctxembed.core.projections import LayerParams, random_params
from ctxembed.core.readings import sent_vectors
from ctxembed.engine.sentence import (
    AttentionParts,
    TOKEN_SOURCES,
    Contextualized,
    Prepared,
    first_match,
)
from ctxembed.errors import DataError, SettingError
from ctxembed.output import say
from ctxembed.settings import Settings, build_settings, fit_to_vectors
from ctxembed.vectors.mixfiles import resolve_mix
from ctxembed.vectors.sources import open_vectors
from ctxembed.vectors.statistics import statistics
from ctxembed.vectors.store import ROW_SOURCES, VectorStore
from ctxembed.vectors.tokenize import WINDOW, pretokenized, token_pieces, token_strings, vocabulary_key
from ctxembed.vectors.tokentable import TokenTable
from ctxembed.vectors.weights import check_trained_weights, load_projections

_SOURCE_NAMES = np.array(TOKEN_SOURCES, object)  # TOKEN_SOURCES, to turn many codes into names in one gather
# Floats one group of sentences holds at once in each of its arrays (512 KB of float32): a group's
# (B, T, d) vectors stay in a core's cache between steps, and the memory of a chunk's attention is
# bounded whatever its sentences' lengths (a longer sentence runs alone). Batch's speed is flat from
# 2^15 to 2^20 (within 10%: benchmarks/probes/alternatives.py groups); a larger group only costs memory.
GROUP_FLOATS = 1 << 17
# Floats of static vectors gathered from the store at once for a run of groups (1 MB of float32): one
# gather and one SIF call for many groups, in a block that stays in a core's cache.
SLAB_FLOATS = 1 << 18
_EULER_GAMMA = 0.5772156649
INDEX_MAX_WORDS = 1_000_000  # above this a word -> row dict costs hundreds of MB: keep the binary search


@dataclass
class Sentences:
    """Many sentences ready for attention, column by column: what :meth:`Engine.arrays` reads.

    A sentence of the fast path is its text, its tokens, a slice of the flat ``pieces`` (ids into
    ``table``, which knows each token's key, vector and status) and a slice of the flat ``rows``
    (its attended tokens' store rows), with no object of its own; any other sentence keeps its
    :class:`Prepared` in ``prepared``, and a text that could not be prepared its error in
    ``errors``. :meth:`sentence` gives any of them as a :class:`Prepared`, the same as
    :meth:`Engine.prepare`."""

    texts: list[str]
    tokens: list[list[str]]  # per sentence: its tokens as written
    lengths: np.ndarray  # (n,) int64 tokens that enter attention; -1 for a text in ``errors``
    starts: np.ndarray  # (n,) int64 where each sentence's rows begin in ``rows``
    rows: np.ndarray  # (total,) int64 store rows, -1 for a vector that is no store row
    vectors: np.ndarray  # (total,) int64 row of ``table.vectors`` for such a vector, else -1
    pieces: np.ndarray  # (P,) int64 the fast path's tokens as piece ids of ``table``, text after text
    piece_starts: np.ndarray  # (n,) int64 where each sentence's tokens begin in ``pieces``
    in_vocab: list[list[bool]]  # per sentence: per token, whether it has a vector
    attended: list[list[int]]  # per sentence: positions of the tokens that enter attention
    sources_of: list[list[str]]  # per sentence: per token, where its vector came from (TOKEN_SOURCES)
    table: TokenTable | None
    prepared: dict[int, Prepared]  # sentence -> its Prepared, when it is not on the fast path
    errors: dict[int, DataError]  # text -> why it could not be prepared
    store: VectorStore = field(repr=False)

    @classmethod
    def of(cls, sentences: Sequence[Prepared]) -> Sentences:
        """Prepared sentences as columns (each keeps its Prepared: results point back to it)."""
        n = len(sentences)
        lengths = np.fromiter(map(len, (s.used for s in sentences)), np.int64, n)  # (n,)
        starts = np.zeros(n, np.int64)  # (n,)
        np.cumsum(lengths[:-1], out=starts[1:])
        total = int(lengths.sum())
        rows = np.fromiter(itertools.chain.from_iterable(s.rows for s in sentences), np.int64, total)
        store = sentences[0].store if sentences else None
        texts, tokens, none = [s.text for s in sentences], [s.texts for s in sentences], np.zeros(n, np.int64)
        in_vocab, attended = [s.in_vocab for s in sentences], [s.used for s in sentences]
        sources = [s.sources() for s in sentences]
        return cls(
            texts, tokens, lengths, starts, rows, np.full(total, -1), none[:0], none, in_vocab, attended, sources,
            None, dict(enumerate(sentences)), {}, store,
        )  # fmt: skip

    def __len__(self) -> int:
        return len(self.texts)

    def _pieces(self, i: int) -> np.ndarray:
        start = int(self.piece_starts[i])
        return self.pieces[start : start + len(self.tokens[i])]  # (tokens,)

    def sentence(self, i: int) -> Prepared:
        """Sentence ``i`` as a :class:`Prepared` (built now for one of the fast path)."""
        given = self.prepared.get(i)
        if given is not None:
            return given
        if i in self.errors:
            raise self.errors[i]
        table, pieces = self.table, self._pieces(i).tolist()
        start, n = int(self.starts[i]), int(self.lengths[i])
        _, in_vocab, used = self.columns(i)
        vectors = self.vectors[start : start + n].tolist()
        extra = {at: table.vectors[v] for at, v in enumerate(vectors) if v >= 0}
        token_keys, keys = [table.keys[p] for p in pieces], [table.words[p] for p in pieces]
        rows = self.rows[start : start + n].tolist()
        return Prepared(self.texts[i], self.tokens[i], token_keys, in_vocab, used, rows, keys, extra, self.store)

    def sources(self, i: int) -> list[str]:
        """:meth:`Prepared.sources` of sentence ``i``."""
        return self.sources_of[i]

    def columns(self, i: int) -> tuple[list[str], list[bool], list[int]]:
        """(tokens, in_vocab, attended positions) of sentence ``i``: what its batch record shows."""
        return self.tokens[i], self.in_vocab[i], self.attended[i]

    def index_of(self, i: int, word: str) -> int | None:
        """:meth:`Prepared.index_of` of sentence ``i``."""
        given = self.prepared.get(i)
        if given is not None:
            return given.index_of(word)
        tokens, _, used = self.columns(i)
        keys = [self.table.keys[p] for p in self._pieces(i).tolist()]
        return first_match(word, tokens, keys, used)


@dataclass
class GroupArrays:
    """The numbers of a group of B sentences of one length T, as computed, before they are cut into
    one :class:`Contextualized` per sentence. Batch reads records straight from these arrays."""

    sentences: Sentences
    members: list[int]  # the B sentences of the group: indices into ``sentences``
    static: np.ndarray  # (B, T, d) the static vectors
    inputs: np.ndarray  # (B, T, d) after all-but-the-top removal: what attention saw
    contextual: np.ndarray | None  # (B, T, d_out) the mix when one is on, else the last layer (None: not asked)
    weights: np.ndarray | None  # (B, L, h, T, T) C-contiguous, so weights[b] is one block (None: not kept)
    layer_inputs: list[np.ndarray]  # L arrays (B, T, d_l), positions included (empty without vectors)
    top: np.ndarray | None  # (B, T, d_out) the last layer's output when a mix made ``contextual``
    steps: list[LayerSteps] | None  # with trace: every step of every layer, the B axis kept

    def results(self, mix: LayerMix | None) -> list[Contextualized]:
        """One :class:`Contextualized` per sentence: views into the group's arrays."""
        T = self.static.shape[1]
        return [
            Contextualized(
                prepared=self.sentences.sentence(i),
                static=self.static[b],  # (T, d)
                inputs=self.inputs[b],  # (T, d)
                contextual=self.contextual[b],  # (T, d_out)
                weights=None if self.weights is None else self.weights[b],  # (L, h, T, T)
                layer_inputs=[layer[b] for layer in self.layer_inputs],  # L arrays (T, d_l)
                steps=None if self.steps is None else [layer.sentence(b, T) for layer in self.steps],
                top=None if self.top is None else self.top[b],  # (T, d_out)
                mix=mix,
            )
            for b, i in enumerate(self.members)
        ]


MAX_MIXED = 1e15  # largest |value| of a mixed vector: its squared norm stays inside float32 (3.4e38)


def _non_finite(x: np.ndarray, *, masked: bool = False) -> bool:
    """True when ``x`` holds NaN or infinity; with ``masked``, -inf (a masked score) is allowed."""
    if masked:
        return bool(np.isnan(x).any() or np.isposinf(x).any())
    return not np.isfinite(x).all()


class WordLookup:
    """Word -> store row (its frequency rank), or None. A binary search over the store's sorted
    vocabulary costs nothing to set up; :meth:`index_all` switches to a dict, built once (~50 ms for
    200k words), for many sentences."""

    def __init__(self, store: VectorStore):
        self.store = store
        self.row: Callable[[str], int | None] = store.find
        self.indexed = False

    def index_all(self) -> WordLookup:
        self.row = self.store.index.get
        self.indexed = True
        return self

    def rows(self, keys: Sequence[str]) -> np.ndarray:
        """(n,) int64 store row of each key, -1 for a key not in the vocabulary."""
        if self.indexed:
            return np.fromiter(map(self.row, keys, itertools.repeat(-1)), np.int64, len(keys))  # dict.get(key, -1)
        found = (-1 if row is None else row for row in map(self.row, keys))
        return np.fromiter(found, np.int64, len(keys))


class Engine:
    """Static vectors + settings -> contextual vectors. Build once, run on many sentences.

    The "glove" model of :data:`ctxembed.engine.registry.MODELS`: it keeps the engine contract
    (:class:`ctxembed.engine.contract.ContextEngine`)."""

    model = "glove"

    def __init__(
        self,
        store: VectorStore,
        settings: Settings,
        *,
        oov: str = "skip",
        max_tokens: int = DEFAULT_MAX_TOKENS,
        label: Callable[[str], str] = str,
    ):
        options = ReadOptions(oov=oov, max_tokens=max_tokens)
        self.store = store
        self.settings = settings
        self.oov = options.oov
        self.max_tokens = options.max_tokens
        self.label = label  # how error messages name a setting (the CLI: by its flag)
        self.dim = store.dim
        self.words = WordLookup(store)  # word -> store row
        self._table: TokenTable | None = None  # token -> pieces, for many sentences (token_table())
        self.removal = top_removal(store, settings)  # all-but-the-top, or None
        check_trained_weights(settings, store)
        self.params = projection_params(settings, self.dim)
        try:
            self.out_dim = validate_params(
                self.params or identity_params(settings.attention), self.dim, settings.attention
            )
        except ValueError as exc:
            raise SettingError(str(exc)) from None
        self.mix = self._layer_mix()
        # Zipf estimate of a word's probability from its frequency rank: p(r) = 1 / (r * H_N)
        self._harmonic = math.log(max(len(store), 1)) + _EULER_GAMMA

    @property
    def layers(self) -> int:
        return self.settings.attention.layers

    @property
    def heads(self) -> int:
        return self.settings.attention.heads

    def describe(self) -> dict[str, Any]:
        """The settings this engine runs with, as a document's ``settings`` holds them."""
        return self.settings.as_dict()

    def summary(self) -> str:
        """The settings in one line, as a document's ``settings_summary`` holds them."""
        return self.settings.summary()

    def attention_parts(self, result: Contextualized) -> AttentionParts:
        """The result's weights and, when traced, what each word sends through each head: its values
        times the head's rows of W_out (the heads' own slices without W_out). Words are the units."""
        sent = None
        if result.steps is not None:
            params = self.params or [None] * self.layers
            sent = [
                sent_vectors(step.v, None if layer is None else layer.W_out)  # (h, T, D)
                for step, layer in zip(result.steps, params, strict=True)
            ]
        return AttentionParts(result.weights, sent)

    def bulk(self) -> Engine:
        """Prepare for many sentences: look words up in a dict (see :meth:`WordLookup.index_all`)."""
        self.words.index_all()
        return self

    def bulk_if_affordable(self) -> Engine:
        """:meth:`bulk` (the same rows as the binary search), unless the vocabulary has over
        INDEX_MAX_WORDS words (the dict would cost hundreds of MB) or is not valid UTF-8: then the
        binary search, which copes with both. What batch and embed_lines do for a run."""
        if len(self.store) <= INDEX_MAX_WORDS:
            try:
                self.bulk()  # the store builds its dict once; later calls cost nothing
            except DataError:
                pass
        return self

    def bulk_for_chunks(self) -> Engine:
        """What batch and embed_lines do for a run. They read texts through :meth:`prepare_many`,
        whose TokenTable looks each chunk's new words up together in the store's sorted keys
        (:meth:`VectorStore.find_many`, ~10 ms to set up for 400k words against ~90 ms for the
        dict); only a text off that path looks its tokens up one by one, by binary search. When
        the sorted keys cannot be built: :meth:`bulk_if_affordable`."""
        if not self.store.sorted_lookup:
            self.bulk_if_affordable()
        return self

    def _layer_mix(self) -> LayerMix | None:
        """The mix the settings name, checked against the layers (None: the last layer alone)."""
        mix = resolve_mix(self.settings.mix, self.settings.attention.layers)
        if mix is not None and self.settings.mix_norm:
            mix = replace(mix, normalize=True)
        if mix is not None and self.out_dim != self.dim:
            raise SettingError(
                f"{{mix}} adds the layers up, but attention outputs have {self.out_dim} dimensions and its "
                f"input {self.dim}: use {{output_projection}}, or {{mix}} off",
                "mix",
                "output_projection",
            )
        return mix

    # ------------------------------------------------------------------ sentences
    def prepare_many(self, texts: Sequence[str]) -> Sentences:
        """:meth:`prepare` of many texts, as columns (:class:`Sentences`); a text that cannot be
        prepared has its DataError in ``errors`` (not raised).

        Texts are tokenised and looked up together through the engine's :class:`TokenTable` (split
        at white space, one dict lookup per word, each distinct word tokenised and looked up once)
        and checked with whole-chunk NumPy calls, with no object per sentence. Only a text with a
        problem goes through :meth:`prepare` alone: one it refuses (no token with a vector, too many
        tokens, --oov error), or one longer than the tokenizer's window (which prepare refuses
        without tokenising it whole). ``sentences.sentence(i)`` equals ``prepare(texts[i])`` either
        way (tests/test_fast_paths.py)."""
        n = len(texts)
        table = self.token_table()
        fast = np.fromiter(map(len, texts), np.int64, n) <= WINDOW  # (n,)
        short = texts if fast.all() else [text if ok else "" for text, ok in zip(texts, fast.tolist(), strict=True)]
        pieces, piece_starts = table.chunk(short)
        count = np.diff(piece_starts)  # (n,) tokens per text
        used, known = table.used[pieces], table.known[pieces]  # (P,)
        used_before = np.zeros(len(pieces) + 1, np.int64)  # (P + 1,) attended tokens before each piece
        np.cumsum(used, out=used_before[1:])
        known_before = np.zeros(len(pieces) + 1, np.int64)
        np.cumsum(known, out=known_before[1:])
        lengths = np.diff(used_before[piece_starts])  # (n,) tokens that enter attention
        n_known = np.diff(known_before[piece_starts])  # (n,) tokens with a vector
        a = self.settings.attention
        fast &= (n_known > 0) & (lengths <= self.max_tokens)  # else prepare() says what is wrong
        fast &= a.layers * a.heads * lengths**2 * 4 <= WEIGHTS_BUDGET
        if self.oov == "error":
            fast &= n_known == count
        starts = used_before[piece_starts[:-1]]  # (n,) where each text's rows begin
        rows, vectors = table.row[pieces[used]], table.vector[pieces[used]]  # (total,)
        # per text, slices of flat lists: its tokens as written, has-a-vector flags, attended positions
        bounds, used_bounds = piece_starts.tolist(), used_before[piece_starts].tolist()
        flat = table.text[pieces].tolist()
        tokens = [flat[begin:end] for begin, end in itertools.pairwise(bounds)]
        flat = known.tolist()
        in_vocab = [flat[begin:end] for begin, end in itertools.pairwise(bounds)]
        flat = (np.arange(len(pieces)) - np.repeat(piece_starts[:-1], count))[used].tolist()  # position in its text
        attended = [flat[begin:end] for begin, end in itertools.pairwise(used_bounds)]
        flat = _SOURCE_NAMES[self._source_codes(table.row[pieces], known)].tolist()
        sources = [flat[begin:end] for begin, end in itertools.pairwise(bounds)]
        prepared: dict[int, Prepared] = {}
        errors: dict[int, DataError] = {}
        extra_rows: list[int] = []  # the other texts' rows, one after the other
        total = len(rows)
        for i in np.flatnonzero(~fast).tolist():  # the rest, one by one, as one sentence alone
            try:
                sentence = prepared[i] = self.prepare(texts[i])
            except DataError as exc:
                errors[i] = exc
                lengths[i] = -1
                continue
            lengths[i], starts[i], tokens[i] = len(sentence.used), total, sentence.texts
            in_vocab[i], attended[i], sources[i] = sentence.in_vocab, sentence.used, sentence.sources()
            extra_rows += sentence.rows
            total += len(sentence.used)
        if extra_rows:
            rows = np.concatenate([rows, np.array(extra_rows, dtype=np.int64)])
            vectors = np.concatenate([vectors, np.full(len(extra_rows), -1, np.int64)])
        return Sentences(
            list(texts), tokens, lengths, starts, rows, vectors, pieces, piece_starts[:-1], in_vocab, attended, sources,
            table, prepared, errors, self.store,
        )  # fmt: skip

    def _source_codes(self, rows: np.ndarray, known: np.ndarray) -> np.ndarray:
        """(P,) index into TOKEN_SOURCES per token, from its store row (-1: none) and whether it has a
        vector: what :func:`token_sources` gives one sentence at a time."""
        codes = self.store.row_sources  # (N,) index into ROW_SOURCES, or None: all the source's own
        if codes is None:
            found = np.full(len(rows), TOKEN_SOURCES.index("vocabulary"))  # (P,)
        else:
            as_token_source = np.array([TOKEN_SOURCES.index(name) for name in ROW_SOURCES])
            found = as_token_source[codes[np.maximum(rows, 0)]]  # (P,)
        by_row = np.where(rows < 0, TOKEN_SOURCES.index("subword"), found)  # (P,)
        return np.where(known, by_row, TOKEN_SOURCES.index("none"))  # (P,)

    def token_table(self) -> TokenTable:
        """The engine's :class:`TokenTable` (a new one when it is full)."""
        if self._table is None or self._table.full:
            self._table = TokenTable(self.store, oov=self.oov)
        return self._table

    def prepare(self, text: str, *, words: Sequence[str] | None = None) -> Prepared:
        """Tokenise and look up a sentence (or pre-split ``words``); raise DataError when it is unusable.

        Tokenising stops as soon as more than ``max_tokens`` tokens would enter attention, so a huge
        line is refused without being tokenised whole."""
        lowercase = self.store.lowercase
        tokens, lookup = None, self.words.row
        if words is not None:
            tokens = pretokenized(words, lowercase=lowercase)
            pieces = iter([([t.text for t in tokens], [t.key for t in tokens], True)])
        elif len(text) <= WINDOW:  # one piece
            texts, keys = token_strings(text, lowercase=lowercase)
            found = list(map(lookup, keys))
            if None not in found and 0 < len(found) <= self.max_tokens:
                # the usual case, without the bookkeeping below: every token is a vocabulary word
                n = len(found)
                return Prepared(text, texts, keys, [True] * n, list(range(n)), found, keys, {}, self.store)
            pieces = iter([(texts, keys, True)])
        else:
            pieces = token_pieces(text, lowercase=lowercase)
        texts: list[str] = []
        token_keys: list[str] = []
        in_vocab: list[bool] = []
        keys: list[str | None] = []
        used: list[int] = []
        rows: list[int] = []  # per used token: its store row, or -1 (zero vector or subword vector)
        extra: dict[int, np.ndarray] = {}  # index into used -> a vector that is not a store row
        for piece_texts, piece_keys, last in pieces:
            found = list(map(lookup, piece_keys))
            offset = len(texts)
            texts += piece_texts
            token_keys += piece_keys
            if None not in found:  # the usual case: every token is a vocabulary word
                in_vocab += [True] * len(found)
                keys += piece_keys
                used += range(offset, len(texts))
                rows += found
            else:
                self._look_up_slowly(piece_keys, found, offset, in_vocab, keys, used, rows, extra)
            if len(used) > self.max_tokens and not last:  # refused before the rest is tokenised
                raise DataError(
                    f"sentence has over {self.max_tokens} tokens, more than {{max_tokens}} {self.max_tokens} "
                    f"(attention keeps n^2 weights per head and layer)",
                    "max_tokens",
                )
        if not texts:
            raise DataError("empty sentence: nothing to attend to")
        if self.oov == "error" and not all(in_vocab):
            missing = ", ".join(repr(t) for t, ok in zip(texts, in_vocab, strict=True) if not ok)
            raise DataError(f"out of vocabulary: {missing} ({{oov}} skip or zero to go on)", "oov")
        if not any(in_vocab):
            shown = " ".join(texts[:8]) + (" ..." if len(texts) > 8 else "")
            raise DataError(f"no token is in the vocabulary: {shown}")
        if len(used) > self.max_tokens:
            raise DataError(
                f"sentence has {len(used)} tokens, more than {{max_tokens}} {self.max_tokens} "
                f"(attention keeps n^2 weights per head and layer)",
                "max_tokens",
            )
        a = self.settings.attention
        if a.layers * a.heads * len(used) ** 2 * 4 > WEIGHTS_BUDGET:
            raise DataError(
                f"a sentence of {len(used)} tokens with {{layers}} {a.layers} and {{heads}} {a.heads} would keep "
                f"{a.layers * a.heads * len(used) ** 2 * 4 / 2**30:.1f} GB of attention weights; "
                f"the limit is {WEIGHTS_BUDGET / 2**30:.0f} GB",
                "layers",
                "heads",
            )
        return Prepared(text, texts, token_keys, in_vocab, used, rows, keys, extra, self.store, tokens)

    def _look_up_slowly(self, piece_keys, found, offset, in_vocab, keys, used, rows, extra) -> None:
        """Tokens of a piece, one by one: clitic fallbacks, case, subwords and --oov for unknown words."""
        store, lookup, lowercase = self.store, self.words.row, self.store.lowercase
        for position, (token_key, row) in enumerate(zip(piece_keys, found, strict=True), start=offset):
            key = token_key
            if row is None:
                key = vocabulary_key(token_key, lambda k: lookup(k) is not None, cased=not lowercase)
                row = lookup(key) if key is not None else None
            built = store.subword_vector(token_key) if row is None else None  # (d,) or None: no n-gram rows
            known = row is not None or built is not None
            in_vocab.append(known)
            keys.append(key if row is not None else (token_key if known else None))
            if known or self.oov == "zero":
                if row is None:
                    extra[len(used)] = built if known else np.zeros(store.dim, np.float32)
                used.append(position)
                rows.append(-1 if row is None else row)

    def key_bias(self, ranks: np.ndarray) -> np.ndarray | None:
        """SIF: log(a / (a + p(w))) per key, with p from the Zipf estimate; 0 for words without a rank."""
        a = self.settings.sif
        if not a:
            return None
        p = np.where(ranks >= 0, 1.0 / ((np.maximum(ranks, 0) + 1) * self._harmonic), 0.0)  # (T,)
        return np.log(a / (a + p)).astype(np.float32)  # (T,) <= 0

    def project_inputs(self, static: np.ndarray) -> np.ndarray:
        """(..., d) static vectors -> attention inputs (all-but-the-top removal when on)."""
        return static if self.removal is None else self.removal(static)  # (..., d)

    def run(self, sentences: Sequence[Prepared], *, weights: bool = True, trace: bool = False) -> list[Contextualized]:
        """Attention over many sentences; one result per sentence, in order.

        Sentences run in groups of equal length (see :meth:`groups`), so a sentence's numbers never
        depend on the sentences it runs with. ``weights=False`` keeps no attention weights; ``trace``
        keeps every intermediate step in ``result.steps`` (what --explain shows)."""
        results: list[Contextualized | None] = [None] * len(sentences)
        for members, group in self.groups(sentences, weights=weights, trace=trace):
            for i, result in zip(members, group, strict=True):
                results[i] = result
        return results

    def groups(self, sentences: Sequence[Prepared], *, weights: bool = True, trace: bool = False):
        """Yield (indices into sentences, their results) group by group, shortest sentences first
        (the groups of :meth:`arrays`, cut into one :class:`Contextualized` per sentence)."""
        for members, group in self.arrays(sentences, weights=weights, trace=trace):
            yield members, group.results(self.mix)

    def arrays(
        self,
        sentences: Sentences | Sequence[Prepared],
        *,
        weights: bool = True,
        vectors: bool = True,
        trace: bool = False,
    ):
        """Yield (indices into sentences, :class:`GroupArrays`) group by group, shortest sentences first.

        A group holds sentences of one length T, and at most GROUP_FLOATS floats in each array:
        layers x heads x T^2 per sentence when weights are kept, heads x T^2 (one layer's) when they
        are not, and T x d for its vectors. Without padding, a sentence's arithmetic is the same
        whatever it runs with. ``vectors=False`` is for a caller that reads the weights alone: the
        last layer stops at its weights, and no contextual vector is made. A text in
        ``sentences.errors`` is in no group. The static vectors of consecutive groups are gathered
        from the store together, up to SLAB_FLOATS floats (see :meth:`_slab_rows`)."""
        if not isinstance(sentences, Sentences):
            sentences = Sentences.of(sentences)
        a = self.settings.attention
        lengths = sentences.lengths
        order = np.argsort(lengths, kind="stable")  # (n,) by length, then in input order
        order = order[lengths[order] > 0]  # texts in errors (-1) are in no group
        cuts = np.flatnonzero(np.diff(lengths[order])) + 1  # where the length changes
        groups: list[np.ndarray] = []  # the groups' members, in running order: consecutive slices of order
        for members in np.split(order, cuts) if len(order) else []:
            T = int(lengths[members[0]])
            # floats a sentence holds at once: its attention weights, or its (T, d) vectors if more
            per_sentence = T * max(a.heads * T * (a.layers if weights else 1), self.dim)
            size = max(1, GROUP_FLOATS // per_sentence)
            groups += [members[start : start + size] for start in range(0, len(members), size)]
        vectors = vectors or trace
        for slab in self._slabs(groups, lengths):
            static, bias = self._slab_rows(sentences, np.concatenate(slab))  # (n, d), (n,) or None
            first = 0  # where the group's rows begin in the slab
            for members in slab:
                B, T = len(members), int(lengths[members[0]])
                rows = slice(first, first + B * T)
                first += B * T
                chosen = members.tolist()
                group_static = static[rows].reshape(B, T, -1)  # (B, T, d) a view
                group_bias = None if bias is None else bias[rows].reshape(B, T)  # (B, T)
                yield chosen, self._run_group(sentences, chosen, group_static, group_bias, weights, vectors, trace)

    def _slabs(self, groups: list[np.ndarray], lengths: np.ndarray):
        """Runs of consecutive groups whose static vectors fill at most SLAB_FLOATS floats (a group
        larger than that alone): their vectors are gathered from the store in one go."""
        slab: list[np.ndarray] = []
        floats = 0
        for members in groups:
            size = len(members) * int(lengths[members[0]]) * self.dim
            if slab and floats + size > SLAB_FLOATS:
                yield slab
                slab, floats = [], 0
            slab.append(members)
            floats += size
        if slab:
            yield slab

    def _slab_rows(self, sentences: Sentences, members: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """The static vectors (n, d) and SIF key biases (n,) or None of the sentences ``members``,
        their rows one after the other. Both are computed row by row: a row's numbers are the same
        whichever rows it is computed with. (All-but-the-top is not: BLAS may round a matrix
        product's rows differently with the number of rows, so it runs per group, on (B, T, d).)"""
        lengths = sentences.lengths[members]  # (S,)
        firsts = np.cumsum(lengths) - lengths  # (S,) where each sentence's rows begin in the slab
        n = int(firsts[-1] + lengths[-1])
        at = np.arange(n) + np.repeat(sentences.starts[members] - firsts, lengths)  # (n,) positions in sentences.rows
        ranks = sentences.rows[at]  # (n,) store rows, -1 for none
        static = self.store.rows(np.maximum(ranks, 0))  # (n, d)
        built = sentences.vectors[at]  # (n,) rows of table.vectors: subwords, --oov zero
        if (built >= 0).any():
            static[built >= 0] = sentences.table.vectors[built[built >= 0]]
        if sentences.prepared:  # vectors that are no store row: subwords, --oov zero
            for first, i in zip(firsts.tolist(), members.tolist(), strict=True):
                given = sentences.prepared.get(i)
                if given is not None:
                    for index, vector in given.extra.items():
                        static[first + index] = vector
        return static, self.key_bias(ranks)  # (n, d), (n,) or None

    def _run_group(
        self,
        sentences: Sentences,
        members: list[int],
        static: np.ndarray,
        bias: np.ndarray | None,
        weights: bool,
        vectors: bool,
        trace: bool,
    ) -> GroupArrays:
        """Attention over B sentences of one length T, from their static vectors (B, T, d) and key
        biases (B, T) or None, without padding."""
        inputs = self.project_inputs(static)  # (B, T, d)
        with np.errstate(all="ignore"):  # a NaN or overflow is reported below, naming its stage, not warned
            result = encode(
                inputs,
                self.settings.attention,
                self.params,
                key_bias=bias,
                trace=trace,
                keep_weights=weights or not vectors,
                outputs=vectors,
            )
        # without outputs, finite inputs and weights bound every output: each is a weighted mean of inputs
        checked = result.contextual if vectors else inputs
        finite = np.isfinite(checked).all() and (result.weights is None or np.isfinite(result.weights).all())
        if not finite:
            raise DataError(f"the computation gave NaN or infinite values at {self._bad_stage(inputs, None, bias)}")
        kept = None if not weights else np.ascontiguousarray(result.weights.swapaxes(0, 1))  # (B, L, h, T, T)
        if not vectors:
            return GroupArrays(sentences, members, static, inputs, None, kept, [], None, None)
        hidden_in = input_positions(inputs, self.settings.attention)[0]  # (B, T, d) the first layer's input
        layer_inputs = [hidden_in] + result.layer_outputs[:-1]  # L arrays (B, T, d_l)
        top, contextual = None, result.contextual  # (B, T, d_out)
        if self.mix is not None:  # h0 is the word itself: the input without positions
            layers = np.stack([inputs, *result.layer_outputs])  # (L + 1, B, T, d)
            with np.errstate(all="ignore"):
                top, contextual = contextual, self.mix.apply(layers)  # (B, T, d)
            if not np.isfinite(contextual).all() or np.abs(contextual).max(initial=0.0) > MAX_MIXED:
                raise DataError(
                    f"{{mix}} {self.mix.formula()} gives values past {MAX_MIXED:g}, whose "
                    "similarities cannot be computed: use a smaller gamma",
                    "mix",
                )
        return GroupArrays(sentences, members, static, inputs, contextual, kept, layer_inputs, top, result.steps)

    def _bad_stage(self, inputs: np.ndarray, lengths: np.ndarray | None, bias) -> str:
        """The first step whose numbers are not all finite (only run after a failure): re-run traced."""
        if not np.isfinite(inputs).all():
            return "the input vectors (after all-but-the-top)"
        with np.errstate(all="ignore"):
            traced = encode(inputs, self.settings.attention, self.params, lengths=lengths, key_bias=bias, trace=True)
        for number, layer in enumerate(traced.steps):
            a = layer.attention
            for name, array in (
                ("the queries, keys and values", (layer.q, layer.k, layer.v)),
                ("the attention scores", (a.scores,)),
                ("the attention weights (normalisation)", (a.weights,)),
                ("the weighted sum of values", (a.context,)),
                ("the merged heads (output projection)", (layer.merged,)),
                ("the layer output (residual, layer norm)", (layer.output,)),
            ):
                if any(_non_finite(x, masked=name == "the attention scores") for x in array):
                    return f"{name} of layer {number}"
        return "the contextual vectors"


def open_glove(
    vectors: str | PathLike | None = None,
    preset: str = "default",
    *,
    limit: int | None = None,
    trust: bool = False,
    oov: str = "skip",
    max_tokens: int = DEFAULT_MAX_TOKENS,
    on_note: Callable[[str], None] | None = None,
    label: Callable[[str], str] = str,
    **settings: Any,
) -> Engine:
    """An engine for a vector source and settings (the keywords of :class:`ctxembed.Explorer`).

    Settings are checked before any file is read; preset ingredients the vectors are too small for
    are turned off with a note to ``on_note`` (default: stderr), as are notes about a conversion."""
    note = on_note or say
    requested = build_settings(preset, **settings)
    store = open_vectors(None if vectors is None else str(vectors), limit=limit, trust=trust, on_convert=note)
    given = frozenset(name for name, value in settings.items() if value is not None)
    fitted, turned_off = fit_to_vectors(requested, store.dim, len(store), keep=given)
    if turned_off:
        values = requested.values()
        listed = ", ".join(f"{label(name)} {values[name]}" for name in turned_off)
        note(
            f"note: the {requested.preset} preset's {listed} turned off: these vectors are too small for it "
            f"({store.dim} dimensions, {len(store):,} words)"
        )
    return Engine(store, fitted, oov=oov, max_tokens=max_tokens, label=label)


def projection_params(settings: Settings, d_in: int) -> list[LayerParams] | None:
    """The query/key/value projections ``settings`` ask for on d_in-dimensional vectors:
    None for the identity, Xavier matrices from the seed, or the arrays of a weights file."""
    a = settings.attention
    if settings.projection == "identity":
        return None
    if settings.projection == "random":
        d_out = settings.d_out or d_in // a.heads
        if d_out < 1:
            raise SettingError(
                f"{{heads}} {a.heads} leave no dimensions per head of the {d_in}; give {{d_out}}", "heads", "d_out"
            )
        try:
            return random_params(d_in, d_out, a, seed=settings.seed, output_projection=settings.output_projection)
        except ValueError as exc:
            raise SettingError(str(exc)) from None
    try:
        return load_projections(settings.weights_file, d_in, a)
    except FileNotFoundError:
        raise DataError(f"{settings.weights_file}: no such file") from None
    except (ValueError, OSError) as exc:
        raise DataError(f"{settings.weights_file}: {exc}") from None


def top_removal(store: VectorStore, settings: Settings) -> TopRemoval | None:
    """All-but-the-top removal of ``settings.abtt`` directions, or None when it is off."""
    if not settings.abtt:
        return None
    n = min(settings.abtt_words, len(store))
    if settings.abtt >= store.dim or n < 2:
        raise SettingError(
            f"{{abtt}} {settings.abtt} needs vectors of more than {settings.abtt} dimensions and at least 2 words "
            f"(these have {store.dim} and {len(store)})",
            "abtt",
        )
    return TopRemoval.from_statistics(statistics(store, n), settings.abtt)
