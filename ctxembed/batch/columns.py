"""Batch's speed seam: :meth:`Engine.prepare` and :meth:`Engine.run` for many sentences, as columns.

    sentences = prepare_many(engine, texts)            # Sentences: flat columns, no object per text
    for members, group in arrays(engine, sentences):   # ColumnGroup: B sentences of one length T
        group.weights[b], group.contextual[b]          # (L, h, T, T), (T, d_out) of sentences[members[b]]

The numbers are the readable path's: a text's tokens, vocabulary status and store rows are those
:meth:`Engine.prepare` gives it (``sentences.sentence(i) == engine.prepare(texts[i])``,
tests/test_fast_paths.py), and each group runs through the same kernel, the one the engine declares
(``engine.columns``, a :class:`ctxembed.engine.contract.ColumnKernel`: the glove engine's own
:meth:`Engine.run_group`, with the groups of :meth:`Engine.plan_groups`), so a record's numbers are
byte for byte those of ``engine.run([engine.prepare(text)])``: tests/test_engine_groups.py's
``test_batch_columns_give_the_bytes_of_engine_run`` proves it, and tests/test_batch_golden.py
pins batch's output.
What differs is the bookkeeping: each distinct word is tokenised and looked up once per chunk
(:class:`TokenTable`), every check is one NumPy call over the chunk, and the static vectors of
consecutive groups are gathered from the store together (:data:`SLAB_FLOATS`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import NamedTuple

import numpy as np

from ctxembed.core.attention import flat_twins
from ctxembed.engine.contract import ColumnKernel, ContextEngine
from ctxembed.engine.sentence import GroupArrays, Prepared, first_match, split_word
from ctxembed.errors import DataError
from ctxembed.vectors.lexicon import TOKEN_SOURCES, TokenTable, offsets, places, source_codes
from ctxembed.vectors.tokenize import WINDOW

# Floats of static vectors gathered from the store at once for a run of groups (1 MB of float32): one
# gather and one SIF call for many groups, in a block that stays in a core's cache.
SLAB_FLOATS = 1 << 18
_SOURCE_NAMES = np.array(TOKEN_SOURCES, object)  # TOKEN_SOURCES, to turn many codes into names in one gather


@dataclass(kw_only=True)
class Sentences:
    """Many sentences ready for attention, column by column: what :func:`arrays` reads.

    A sentence of the fast path is its text, its tokens, a slice of the flat ``pieces`` (ids into
    ``table``, which knows each token's key, vector and status) and a slice of the flat ``rows``
    (its attended tokens' store rows), with no object of its own; any other sentence keeps its
    :class:`Prepared` in ``prepared``, and a text that could not be prepared its error in
    ``errors``. :meth:`sentence` gives any of them as a :class:`Prepared`, the same as
    :meth:`Engine.prepare`."""

    texts: list[str]
    lengths: np.ndarray  # (n,) int64 tokens that enter attention; -1 for a text in ``errors``
    starts: np.ndarray  # (n,) int64 where each sentence's rows begin in ``rows``
    rows: np.ndarray  # (total,) int64 store rows, -1 for a vector that is no store row
    vectors: np.ndarray  # (total,) int64 row of ``table.vectors`` for such a vector, else -1
    pieces: np.ndarray  # (P,) int64 the fast path's tokens as piece ids of ``table``, text after text
    piece_starts: np.ndarray  # (n,) int64 where each sentence's tokens begin in ``pieces``
    piece_ends: np.ndarray  # (n,) int64 and where they end
    used_before: np.ndarray  # (P + 1,) int64 attended tokens before each piece of ``pieces``, and in all
    table: TokenTable = field(repr=False)
    prepared: dict[int, Prepared]  # sentence -> its Prepared, when it is not on the fast path
    errors: dict[int, DataError]  # text -> why it could not be prepared
    # sentence -> how --word names its token there, where a --window crop changed it (records.cropped)
    spelled: dict[int, str] = field(default_factory=dict)
    _word_rows: dict = field(default_factory=dict, repr=False)  # word -> word_rows(word), once per chunk
    _lists: dict = field(default_factory=dict, repr=False)  # name -> per-sentence lists, made when first read

    def __len__(self) -> int:
        return len(self.texts)

    # per sentence, as Python lists (what a JSON record holds), made from the flat columns when first
    # read: a caller that reads the columns flat (:meth:`flat`) never makes them
    @property
    def tokens(self) -> list[list[str]]:
        """Per sentence: its tokens as written."""
        return self._per_sentence("tokens")

    @property
    def in_vocab(self) -> list[list[bool]]:
        """Per sentence: per token, whether it has a vector."""
        return self._per_sentence("in_vocab")

    @property
    def attended(self) -> list[list[int]]:
        """Per sentence: positions of the tokens that enter attention."""
        return self._per_sentence("attended")

    @property
    def sources_of(self) -> list[list[str]]:
        """Per sentence: per token, where its vector came from (TOKEN_SOURCES)."""
        return self._per_sentence("sources")

    def _per_sentence(self, name: str) -> list[list]:
        made = self._lists.get(name)
        if made is None:
            if name == "attended":
                flat, ends = self._attended().tolist(), self.used_before[self.piece_ends].tolist()
                begins = self.used_before[self.piece_starts].tolist()
            else:
                flat, begins, ends = self._flat(name, self.pieces), self.piece_starts.tolist(), self.piece_ends.tolist()
            made = [flat[begin:end] for begin, end in zip(begins, ends, strict=True)]
            for i, given in self.prepared.items():
                made[i] = _prepared_column(given, name)
            self._lists[name] = made
        return made

    def _flat(self, name: str, pieces: np.ndarray) -> list:
        """Column ``name`` (tokens, in_vocab, sources) of these pieces (P,), as a list."""
        table = self.table
        if name == "tokens":
            return table.text[pieces].tolist()
        if name == "in_vocab":
            return table.known[pieces].tolist()
        return _SOURCE_NAMES[source_codes(table.store, table.row[pieces], table.known[pieces])].tolist()

    def _attended(self) -> np.ndarray:
        """(A,) the position in its text of every attended piece of ``pieces``."""
        position = places(self.piece_ends - self.piece_starts)  # (P,) position in its text
        return position[self.table.used[self.pieces]]  # (A,)

    def flat(self, members: Sequence[int], *, lists: bool = True) -> FlatColumns:
        """The token columns of sentences ``members`` (none in ``errors``), one after the other, flat:
        what :attr:`tokens`, :attr:`sources_of`, :attr:`in_vocab` and :attr:`attended` hold, without a
        list per sentence (a columnar chunk reads them so). ``lists=False``: no tokens or sources (None)."""
        members = np.asarray(members, np.int64)  # (k,)
        if self.prepared and any(i in self.prepared for i in members.tolist()):  # rare: one by one
            chain = itertools.chain.from_iterable
            pick = members.tolist()
            tokens = list(chain(self.tokens[i] for i in pick))
            counts = np.fromiter((len(self.tokens[i]) for i in pick), np.int64, len(pick))
            in_vocab = np.fromiter(chain(self.in_vocab[i] for i in pick), bool, len(tokens))
            attended = np.fromiter(chain(self.attended[i] for i in pick), np.int64)
            return FlatColumns(tokens, list(chain(self.sources_of[i] for i in pick)), in_vocab, attended, counts)
        begins, counts = self.piece_starts[members], (self.piece_ends - self.piece_starts)[members]  # (k,)
        within = places(counts)  # (t,) place in its text
        chosen = self.pieces[np.repeat(begins, counts) + within]  # (t,) the members' pieces
        used = self.table.used[chosen]  # (t,)
        return FlatColumns(
            tokens=self._flat("tokens", chosen) if lists else None,
            sources=self._flat("sources", chosen) if lists else None,
            in_vocab=self.table.known[chosen],
            attended=within[used],
            token_counts=counts,
        )

    def _pieces(self, i: int) -> np.ndarray:
        return self.pieces[int(self.piece_starts[i]) : int(self.piece_ends[i])]  # (tokens,)

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
        return Prepared(self.texts[i], self.tokens[i], token_keys, in_vocab, used, rows, keys, extra, table.store)

    def sources(self, i: int) -> list[str]:
        """:meth:`Prepared.sources` of sentence ``i``."""
        return self.sources_of[i]

    def columns(self, i: int) -> tuple[list[str], list[bool], list[int]]:
        """(tokens, in_vocab, attended positions) of sentence ``i``: what its batch record shows."""
        return self.tokens[i], self.in_vocab[i], self.attended[i]

    def index_of(self, i: int, word: str) -> int | None:
        """:meth:`Prepared.index_of` of sentence ``i`` (``word`` as its cropped text spells it: ``spelled``)."""
        word = self.spelled.get(i, word)
        given = self.prepared.get(i)
        if given is not None:
            return given.index_of(word)
        tokens, _, used = self.columns(i)
        keys = [self.table.keys[p] for p in self._pieces(i).tolist()]
        return first_match(word, tokens, keys, used)

    def word_rows(self, word: str) -> np.ndarray | None:
        """:meth:`index_of` of every sentence at once: (n,) int64 rows into each sentence's attended
        positions, -1 where it lacks ``word``; None for a position (``#8``), which index_of answers
        alone. A match is judged once per piece of the table (:meth:`TokenTable.matches`), not once
        per token of each sentence: the per-sentence search cost batch --word more than attention
        (profile of 4,096 Brown lines). A sentence outside the fast path (in ``prepared``) is answered by index_of."""
        cached = self._word_rows.get(word)
        if cached is not None or word in self._word_rows:
            return cached
        wanted, number = split_word(word)
        if wanted is None:
            self._word_rows[word] = None
            return None
        wanted, number = wanted.lower(), number or 1
        table, pieces = self.table, self.pieces
        used = table.used[pieces]  # (P,)
        matched = used & table.matches(wanted)[pieces]  # (P,) attended tokens that are the word
        count = np.diff(np.append(self.piece_starts, len(pieces)))  # (n,) tokens per sentence
        owner = np.repeat(np.arange(len(self)), count)  # (P,) sentence of each piece
        used_before = np.cumsum(used) - used  # (P,) attended tokens before each piece
        seen = np.cumsum(matched)  # (P,) matches up to each piece, inclusive
        first = self.piece_starts
        before = np.zeros(len(self), np.int64)  # (n,) matches before each sentence
        before[count > 0] = (seen - matched)[first[count > 0]]
        chosen = np.flatnonzero(matched & (seen - before[owner] == number))  # (k,) the wanted occurrence's piece
        rows = np.full(len(self), -1, np.int64)  # (n,)
        rows[owner[chosen]] = used_before[chosen] - used_before[first[owner[chosen]]]
        for i in [*self.prepared, *self.spelled]:
            found = self.index_of(i, word) if self.lengths[i] >= 0 else None
            rows[i] = -1 if found is None else found
        self._word_rows[word] = rows
        return rows


class FlatColumns(NamedTuple):
    """The token columns of many sentences, one after the other (:meth:`Sentences.flat`)."""

    tokens: list[str] | None  # (t,) every token as written
    sources: list[str] | None  # (t,) where its vector came from (TOKEN_SOURCES)
    in_vocab: np.ndarray  # (t,) bool whether it has a vector
    attended: np.ndarray  # (a,) int64 the attended tokens' positions, each in its own sentence
    token_counts: np.ndarray  # (k,) int64 tokens of each sentence


def _prepared_column(sentence: Prepared, name: str) -> list:
    """Column ``name`` of a :class:`Prepared`, as :class:`Sentences` holds it per sentence."""
    if name == "tokens":
        return sentence.texts
    if name == "in_vocab":
        return sentence.in_vocab
    return sentence.used if name == "attended" else sentence.sources()


@dataclass
class ColumnGroup(GroupArrays):
    """A group's arrays (:meth:`Engine.run_group`) and which of the columns' sentences they hold:
    batch reads its records straight from them."""

    sentences: Sentences
    members: list[int]  # the B sentences of the group: indices into ``sentences``
    # with arrays(word=...): the word's contextual vector in each sentence (B, d_out), zeros where
    # a sentence lacks it; the group's other arrays, static vectors included, are then not made (None)
    word_vectors: np.ndarray | None = None


def prepare_many(engine: ContextEngine, texts: Sequence[str]) -> Sentences:
    """:meth:`Engine.prepare` of many texts, as columns (:class:`Sentences`); a text that cannot be
    prepared has its DataError in ``errors`` (not raised).

    Texts are tokenised and looked up together through the engine's :class:`TokenTable` (split
    at white space, one dict lookup per word, each distinct word tokenised and looked up once)
    and checked with whole-chunk NumPy calls, with no object per sentence. Only a text with a
    problem goes through :meth:`Engine.prepare` alone: one it refuses (no token with a vector, too
    many tokens, --oov error), or one longer than the tokenizer's window (which prepare refuses
    without tokenising it whole). ``sentences.sentence(i)`` equals ``engine.prepare(texts[i])``
    either way (tests/test_fast_paths.py). The engine's column kernel (``engine.columns``) resolves and
    checks the words."""
    kernel: ColumnKernel = engine.columns
    n = len(texts)
    table = kernel.lexicon.table()
    fast = np.fromiter(map(len, texts), np.int64, n) <= WINDOW  # (n,)
    short = texts if fast.all() else [text if ok else "" for text, ok in zip(texts, fast.tolist(), strict=True)]
    pieces, piece_starts = table.chunk(short)
    count = np.diff(piece_starts)  # (n,) tokens per text
    used, known = table.used[pieces], table.known[pieces]  # (P,)
    used_before = offsets(used)  # (P + 1,) attended tokens before each piece
    known_before = offsets(known)  # (P + 1,)
    lengths = np.diff(used_before[piece_starts])  # (n,) tokens that enter attention
    n_known = np.diff(known_before[piece_starts])  # (n,) tokens with a vector
    fast &= (n_known > 0) & (lengths <= kernel.max_tokens)  # else prepare() says what is wrong
    fast &= kernel.fits_weights_budget(lengths)
    if kernel.oov == "error":
        fast &= n_known == count
    starts = used_before[piece_starts[:-1]]  # (n,) where each text's rows begin
    rows, vectors = table.row[pieces[used]], table.vector[pieces[used]]  # (total,)
    prepared: dict[int, Prepared] = {}
    errors: dict[int, DataError] = {}
    extra_rows: list[int] = []  # the other texts' rows, one after the other
    total = len(rows)
    for i in np.flatnonzero(~fast).tolist():  # the rest, one by one, as one sentence alone
        try:
            sentence = prepared[i] = engine.prepare(texts[i])
        except DataError as exc:
            errors[i] = exc
            lengths[i] = -1
            continue
        lengths[i], starts[i] = len(sentence.used), total
        extra_rows += sentence.rows
        total += len(sentence.used)
    if extra_rows:
        rows = np.concatenate([rows, np.array(extra_rows, dtype=np.int64)])
        vectors = np.concatenate([vectors, np.full(len(extra_rows), -1, np.int64)])
    return Sentences(
        texts=list(texts),
        lengths=lengths,
        starts=starts,
        rows=rows,
        vectors=vectors,
        pieces=pieces,
        piece_starts=piece_starts[:-1],
        piece_ends=piece_starts[1:],
        used_before=used_before,
        table=table,
        prepared=prepared,
        errors=errors,
    )


def arrays(
    engine: ContextEngine, sentences: Sentences, *, weights: bool = True, vectors: bool = True, word: str | None = None
):
    """Yield (indices into sentences, :class:`ColumnGroup`) group by group, in the order of
    :meth:`Engine.plan_groups` (shortest sentences first; a text in ``sentences.errors`` is in no
    group). ``vectors=False`` is for a caller that reads the weights alone: the last layer stops at
    its weights, and no contextual vector is made. ``word`` is for a caller that reads that word's
    vector alone (weights and vectors False): each group's ``word_vectors`` (see :func:`_word_group`).
    The static vectors of consecutive groups are gathered from the store together, up to
    SLAB_FLOATS floats (see :func:`_slab_rows`). The groups run through the engine's column kernel
    (``engine.columns``), with the twins its card masks."""
    kernel: ColumnKernel = engine.columns
    twins = engine.card.masks.exclude_twins
    groups = kernel.plan_groups(sentences.lengths, weights=weights)
    if word is not None:
        yield from _word_groups(kernel, sentences, groups, word_positions(sentences, word), twins)
        return
    inputs = _group_inputs(kernel, sentences, groups, twins)
    for members, (static, bias, twin_ids) in zip(groups, inputs, strict=True):
        group = kernel.run_group(static, bias, weights=weights, vectors=vectors, twins=twin_ids)
        kept = {f.name: getattr(group, f.name) for f in fields(GroupArrays)}
        chosen = members.tolist()
        yield chosen, ColumnGroup(**kept, sentences=sentences, members=chosen)


def _word_groups(
    kernel: ColumnKernel, sentences: Sentences, groups: list[np.ndarray], found: np.ndarray, exclude_twins: bool
):
    """:func:`arrays` for one word's vectors: per group, the word's vector in each sentence (B, d_out),
    zeros where ``found`` (n,) says it lacks the word; only the sentences that hold it are gathered
    and run (:func:`_word_group`). The group's other arrays are not made (None)."""
    held = [members[found[members] >= 0] for members in groups]  # (S,) each: the sentences that hold the word
    nothing = dict(static=None, inputs=None, contextual=None, weights=None, layer_inputs=[], top=None, steps=None)
    for members, holders, (static, bias, twins) in zip(
        groups, held, _group_inputs(kernel, sentences, held, exclude_twins), strict=True
    ):
        word_vectors = np.zeros((len(members), kernel.out_dim), np.float32)  # (B, d_out)
        if len(holders):
            word_vectors[found[members] >= 0] = _word_group(kernel, static, bias, found[holders], twins)  # (S, d_out)
        chosen = members.tolist()
        yield chosen, ColumnGroup(**nothing, sentences=sentences, members=chosen, word_vectors=word_vectors)


def _group_inputs(kernel: ColumnKernel, sentences: Sentences, groups: list[np.ndarray], exclude_twins: bool):
    """Per group (indices of B sentences of one length T; may be empty), what the kernel reads: its
    static vectors (B, T, d), key biases (B, T) or None, and twin ids (B, T) or None (None, None,
    None for an empty group). Consecutive groups are gathered from the store together, up to
    SLAB_FLOATS floats (see :func:`_slab_rows`), and their twins found together (:func:`flat_twins`)."""
    lengths = sentences.lengths
    for slab in _slabs(groups, lengths, kernel.dim):
        gathered = np.concatenate(slab)  # (S,)
        if len(gathered):
            static, bias = _slab_rows(kernel, sentences, gathered)  # (n, d), (n,) or None
            # the slab's twins in one pass (row by row, exact): (n,) ids, None where no sentence repeats a vector
            twins = flat_twins(static, lengths[gathered]) if exclude_twins else None
        first = 0  # where the group's rows begin in the slab
        for members in slab:
            if not len(members):
                yield None, None, None
                continue
            B, T = len(members), int(lengths[members[0]])
            rows = slice(first, first + B * T)
            first += B * T
            group_static = static[rows].reshape(B, T, -1)  # (B, T, d) a view
            group_bias = None if bias is None else bias[rows].reshape(B, T)  # (B, T)
            group_twins = None if twins is None else _group_twins(twins[rows], rows.start, B)  # (B, T) or None
            yield group_static, group_bias, group_twins


def word_positions(sentences: Sentences, word: str) -> np.ndarray:
    """(n,) each sentence's row of ``word`` among its attended tokens, -1 where it lacks the word
    (or could not be prepared): :meth:`Sentences.word_rows`, or index_of one by one for a position."""
    found = sentences.word_rows(word)
    if found is not None:
        return found
    rows = np.full(len(sentences), -1, np.int64)
    for i in np.flatnonzero(sentences.lengths > 0).tolist():
        row = sentences.index_of(i, word)
        rows[i] = -1 if row is None else row
    return rows


def _group_twins(ids: np.ndarray, first: int, B: int) -> np.ndarray | None:
    """A group's twin ids (B, T) from its rows of the slab's (:func:`flat_twins`), (B * T,) from row
    ``first`` on; None when none of its sentences repeats a vector (each row is its own first copy)."""
    return ids.reshape(B, -1) if (ids != np.arange(first, first + len(ids))).any() else None


def _word_group(
    kernel: ColumnKernel, static: np.ndarray, bias: np.ndarray | None, rows: np.ndarray, twins: np.ndarray | None
) -> np.ndarray:
    """The word's contextual vector in each of S sentences that hold it (S, d_out), at ``rows`` (S,):
    :meth:`Engine.run_rows` (one softmax row each), or, where it cannot serve, the word's rows of
    :meth:`Engine.run_group`. The same numbers either way (tests/test_batch_columnar.py); a
    sentence's numbers do not depend on the others it runs with. ``twins`` (S, T): their twin ids, or None."""
    vectors = kernel.run_rows(static, bias, rows, twins)  # (S, d_out) or None
    if vectors is None:
        contextual = kernel.run_group(static, bias, weights=False, twins=twins).contextual  # (S, T, d_out)
        vectors = contextual[np.arange(len(rows)), rows]  # (S, d_out)
    return vectors


def _slabs(groups: list[np.ndarray], lengths: np.ndarray, dim: int):
    """Runs of consecutive groups whose static vectors fill at most SLAB_FLOATS floats (a group
    larger than that alone): their vectors are gathered from the store in one go."""
    slab: list[np.ndarray] = []
    floats = 0
    for members in groups:
        size = len(members) * int(lengths[members[0]]) * dim if len(members) else 0
        if slab and floats + size > SLAB_FLOATS:
            yield slab
            slab, floats = [], 0
        slab.append(members)
        floats += size
    if slab:
        yield slab


def _slab_rows(kernel: ColumnKernel, sentences: Sentences, members: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """The static vectors (n, d) and SIF key biases (n,) or None of the sentences ``members``,
    their rows one after the other. Both are computed row by row: a row's numbers are the same
    whichever rows it is computed with. (All-but-the-top is not: BLAS may round a matrix
    product's rows differently with the number of rows, so it runs per group, on (B, T, d).)"""
    lengths = sentences.lengths[members]  # (S,)
    firsts = np.cumsum(lengths) - lengths  # (S,) where each sentence's rows begin in the slab
    n = int(firsts[-1] + lengths[-1])
    at = np.arange(n) + np.repeat(sentences.starts[members] - firsts, lengths)  # (n,) positions in sentences.rows
    ranks = sentences.rows[at]  # (n,) store rows, -1 for none
    static = kernel.store.rows(np.maximum(ranks, 0))  # (n, d)
    built = sentences.vectors[at]  # (n,) rows of table.vectors: subwords, --oov zero
    if (built >= 0).any():
        static[built >= 0] = sentences.table.vectors[built[built >= 0]]
    if sentences.prepared:  # vectors that are no store row: subwords, --oov zero
        for first, i in zip(firsts.tolist(), members.tolist(), strict=True):
            given = sentences.prepared.get(i)
            if given is not None:
                for index, vector in given.extra.items():
                    static[first + index] = vector
    return static, kernel.key_bias(ranks)  # (n, d), (n,) or None
