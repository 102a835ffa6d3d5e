"""Word -> pieces -> store rows or subword vectors: the one resolver of words, for every caller.

A word becomes its tokens (*pieces*: punctuation and clitics split off, "don't," -> "do" "n't" ",",
as :mod:`ctxembed.vectors.tokenize` cuts them), and each piece its store row: the piece's key as it
is, or its clitic or case fallback (:func:`ctxembed.vectors.tokenize.vocabulary_key`); a piece with
no row gets a vector built from its character n-grams (subwords) when the store has them, or
--oov zero's zeros, or no vector. Every command resolves words here, one sentence at a time
(:meth:`Lexicon.sentence`: attend, senses, eval, train, serve) or a chunk at a time
(:meth:`Lexicon.table`, a :class:`TokenTable`: batch), and both run the one rule for a piece with
no row as it is, :func:`resolve_unknown`. How a key reaches its row (a binary search, the word ->
row dict, sorted keys) is the store's choice (:meth:`VectorStore.find`, :meth:`VectorStore.find_many`).

    lexicon = Lexicon(store, oov="skip")
    lexicon.sentence("The bank's river.").rows                      # store rows of its attended tokens
    pieces, starts = lexicon.table().chunk(["The bank's river.", "we sat"])
    lexicon.table().row[pieces]                                     # (P,) store rows, -1 for none
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ctxembed.errors import DataError
from ctxembed.vectors.store import ROW_SOURCES, VectorStore
from ctxembed.vectors.tokenize import (
    CLITIC_FALLBACKS,
    Token,
    pretokenized,
    token_pieces,
    vocabulary_key,
    words_pieces,
)

MAX_PIECES = 1 << 21  # a table this full is replaced by an empty one (a few hundred MB at most)
# Where a token's vector came from: a vocabulary row (the source's own vector, or one the store marks
# as estimated, see VectorStore.row_sources), character n-grams (subwords), or nowhere (skipped, or
# the zero vector of --oov zero).
# "pieces": a subword model's word split into several wordpieces, its vector the mean of theirs;
# "unknown": a word the subword model reads as its [UNK] piece (one vector for every such word)
TOKEN_SOURCES = ("vocabulary", "estimated", "subword", "none", "pieces", "unknown")
_AS_TOKEN_SOURCE = np.array([TOKEN_SOURCES.index(name) for name in ROW_SOURCES])  # ROW_SOURCES -> TOKEN_SOURCES


def source_codes(store: VectorStore, rows: np.ndarray, known: np.ndarray) -> np.ndarray:
    """(P,) index into TOKEN_SOURCES per token, from its store row (P,) (-1: none) and whether it
    has a vector (P,): where each token's vector came from."""
    codes = store.row_sources  # (N,) index into ROW_SOURCES, or None: all the source's own
    if codes is None:
        found = np.full(len(rows), TOKEN_SOURCES.index("vocabulary"))  # (P,)
    else:
        found = _AS_TOKEN_SOURCE[codes[np.maximum(rows, 0)]]  # (P,)
    by_row = np.where(rows < 0, TOKEN_SOURCES.index("subword"), found)  # (P,)
    return np.where(known, by_row, TOKEN_SOURCES.index("none"))  # (P,)


def resolve_unknown(
    store: VectorStore, keys: Sequence[str]
) -> tuple[list[str | None], list[int], np.ndarray, np.ndarray]:
    """Pieces whose key is no vocabulary word as it is, resolved: clitic and case fallbacks (every
    key they may ask about looked up at once), then the subword vectors of those still without a
    row, in one call. Returns per key the vocabulary word found (None: none) and its row (-1: none),
    and for the keys without a row, in order, their subword vectors (u, d) (zeros for none) and
    whether each has one (u,)."""
    found, rows = _fallbacks(store, keys)
    built, has = store.subword_vectors([key for key, row in zip(keys, rows, strict=True) if row < 0])  # (u, d), (u,)
    return found, rows, built, has


def _fallbacks(store: VectorStore, keys: Sequence[str]) -> tuple[list[str | None], list[int]]:
    """Per key, the vocabulary word it resolves to through the clitic and case fallbacks (None: none)
    and its row (-1: none); every key they may ask about looked up at once."""
    asked = [form for key in keys for form in (key, key.lower())]
    asked += [fallback for key in asked if (fallback := CLITIC_FALLBACKS.get(key)) is not None]
    answers = dict(zip(asked, store.find_many(asked).tolist(), strict=True))

    def row_of(key: str) -> int:
        if key in answers:
            return answers[key]
        row = store.find(key)
        return -1 if row is None else row

    found = [vocabulary_key(key, lambda k: row_of(k) >= 0, cased=not store.lowercase) for key in keys]
    return found, [-1 if word is None else row_of(word) for word in found]


def entering(store: VectorStore, keys: Sequence[str], *, oov: str) -> int:
    """How many of these tokens would enter attention, counted without building a vector: with --oov
    zero all of them, else those with an n-gram (:meth:`Subwords.builds`, from their lengths alone:
    a row or subwords, they enter) and, of the others, those with a row (as they are, or through a
    fallback), looked up at once. What :meth:`Lexicon.sentence` counts before each token's work."""
    if oov == "zero":
        return len(keys)
    rest = keys
    if store.subwords is not None:
        rest = [key for key, has in zip(keys, store.subwords.builds(keys).tolist(), strict=True) if not has]
    return len(keys) - sum(row < 0 for row in _fallbacks(store, rest)[1])


def too_many_tokens(count: int, max_tokens: int, *, whole: bool = True) -> DataError:
    """The error of a sentence whose ``count`` tokens would enter attention (at least, when not ``whole``)."""
    return DataError(
        f"sentence has {'' if whole else 'over '}{count if whole else max_tokens} tokens, more than "
        f"{{max_tokens}} {max_tokens} (attention keeps n^2 weights per head and layer)",
        "max_tokens",
    )


class Resolved(NamedTuple):
    """One sentence's tokens, resolved (see :meth:`Lexicon.sentence`)."""

    texts: list[str]  # per token: its text as written
    token_keys: list[str]  # per token: the tokenizer's key
    in_vocab: list[bool]  # per token: has a vector (a store row, or subwords)
    keys: list[str | None]  # per token: the vocabulary word looked up (the key itself for subwords, None: none)
    used: list[int]  # positions of the tokens that enter attention
    rows: list[int]  # per used token: its store row, -1 for none
    extra: dict[int, np.ndarray]  # index into used -> a vector that is no store row (subwords, zeros)
    tokens: list[Token] | None  # the tokens, when they were made (pre-split words)


class Lexicon:
    """The resolver of words for one store and one --oov policy: a sentence at a time
    (:meth:`sentence`), or a chunk at a time through its :class:`TokenTable` (:meth:`table`)."""

    def __init__(self, store: VectorStore, *, oov: str = "skip"):
        self.store, self.oov = store, oov
        self._table: TokenTable | None = None

    def row(self, word: str) -> int | None:
        """The store row of a pre-split word (lower-cased for a lower-case store; no fallback), or None."""
        return self.store.find(word.lower() if self.store.lowercase else word)

    def table(self) -> TokenTable:
        """The chunk resolver, shared by the chunks of a run (a new one when it is full)."""
        if self._table is None or self._table.full:
            self._table = TokenTable(self.store, oov=self.oov)
        return self._table

    def prepare_bulk(self) -> None:
        """Build now what many lookups will use, so that processes forked from this one share it."""
        self.store.prepare_bulk()

    def sentence(self, text: str, *, words: Sequence[str] | None = None, max_tokens: int) -> Resolved:
        """One sentence (or its pre-split ``words``) resolved token by token. Tokenising stops as
        soon as more than ``max_tokens`` tokens would enter attention (DataError), so a huge line is
        refused without being tokenised whole."""
        lowercase, find = self.store.lowercase, self.store.find
        tokens = None
        if words is not None:
            tokens = pretokenized(words, lowercase=lowercase)
            pieces = iter([([t.text for t in tokens], [t.key for t in tokens], True, None)])
        else:
            pieces = token_pieces(text, lowercase=lowercase)
            texts, keys, last = next(pieces, ([], [], True))
            found = list(map(find, keys)) if len(keys) <= max_tokens else None  # else counted first, below
            if last and found is not None and None not in found and len(found) > 0:
                # the usual case, without the bookkeeping below: one piece, every token a vocabulary word
                n = len(found)
                return Resolved(texts, keys, [True] * n, keys, list(range(n)), found, {}, None)
            rest = ((*piece, None) for piece in pieces)  # (texts, keys, last, rows as they are: not yet)
            pieces = itertools.chain([(texts, keys, last, found)], rest)
        resolved = Resolved([], [], [], [], [], [], {}, tokens)
        for piece_texts, piece_keys, last, found in pieces:
            if len(resolved.used) + len(piece_keys) > max_tokens:  # maybe too many: count them before their work
                count = len(resolved.used) + entering(self.store, piece_keys, oov=self.oov)
                if count > max_tokens:  # refused before the rest is tokenised, and before any vector is built
                    raise too_many_tokens(count, max_tokens, whole=last)
            rows = self._rows_as_they_are(piece_keys) if found is None else found
            self._add_piece(resolved, piece_texts, piece_keys, rows)
        return resolved

    def _rows_as_they_are(self, keys: list[str]) -> list[int | None]:
        """Each key's store row (None: none): a binary search each, or one sorted lookup for many keys."""
        return [None if row < 0 else row for row in self.store.find_many(keys).tolist()]

    def _add_piece(self, resolved: Resolved, texts: list[str], keys: list[str], found: list[int | None]) -> None:
        """The tokens of one piece of a sentence (``found``: their rows as they are), appended."""
        texts_so_far, in_vocab, used, rows = resolved.texts, resolved.in_vocab, resolved.used, resolved.rows
        offset = len(texts_so_far)
        texts_so_far += texts
        resolved.token_keys.extend(keys)
        if None not in found:  # the usual case: every token is a vocabulary word
            in_vocab += [True] * len(found)
            resolved.keys.extend(keys)
            used += range(offset, len(texts_so_far))
            rows += found
            return
        unknown = [key for key, row in zip(keys, found, strict=True) if row is None]
        words, fallback_rows, built, has = resolve_unknown(self.store, unknown)
        fallbacks = iter(zip(words, fallback_rows, strict=True))
        vectors = iter(zip(built, has.tolist(), strict=True))  # per key still without a row
        for position, (key, row) in enumerate(zip(keys, found, strict=True), start=offset):
            word = key
            if row is None:
                word, row = next(fallbacks)
                row = None if row < 0 else row
            vector, known = (None, True) if row is not None else next(vectors)
            in_vocab.append(known)
            resolved.keys.append(word if row is not None else (key if known else None))
            if known or self.oov == "zero":
                if row is None:
                    resolved.extra[len(used)] = vector  # (d,) subwords, or zeros for --oov zero
                used.append(position)
                rows.append(-1 if row is None else row)


def offsets(counts: np.ndarray, dtype=np.int64) -> np.ndarray:
    """Runs of ``counts`` (n,) items laid end to end -> (n + 1,) where each run begins, then their end:
    0, c0, c0 + c1, ... (the layout of :meth:`TokenTable.chunk`'s pieces and of batch's flat columns)."""
    starts = np.zeros(len(counts) + 1, dtype)  # (n + 1,)
    np.cumsum(counts, out=starts[1:])
    return starts


def places(counts: np.ndarray) -> np.ndarray:
    """Runs of ``counts`` (n,) items laid end to end -> (sum counts,) each item's place in its own run:
    0, 1, ..., c0 - 1, 0, 1, ..."""
    starts = offsets(counts)  # (n + 1,)
    return np.arange(int(starts[-1])) - np.repeat(starts[:-1], counts)


class TokenTable:
    """A chunk of texts -> every token's store row, in a few whole-chunk calls: batch's resolver.

    The chunk is split at white space (no token spans it); one dict lookup per word turns each word
    into an entry, which says what its word becomes: its pieces, and per piece its key, its store
    row, a vector that is no store row, whether it has a vector, and whether it enters attention.
    The tokenizer's regex and the lookups run once per distinct word, the first time it is seen
    (:func:`resolve_unknown` for the pieces with no row as they are); the rest is NumPy over the
    chunk's arrays.

    Entries and pieces are only ever appended, so the piece ids that a chunk's columns hold stay
    valid while the table lives. New ones are resolved in Python, then copied into the NumPy
    columns once per chunk (arrays grow by doubling)."""

    def __init__(self, store: VectorStore, *, oov: str = "skip"):
        self.store, self.oov, self.lowercase = store, oov, store.lowercase
        self.entries: dict[str, int] = {}  # word (white space around it) -> entry id
        self.keys: list[str] = []  # per piece: the tokenizer's key (lower-cased for a lower-case store)
        self.words: list[str | None] = []  # per piece: the vocabulary word looked up (None: no vector)
        # the NumPy columns, filled up to len(entries) and len(keys) (see _flush)
        self.width = np.zeros(0, np.int64)  # (entries,) pieces of each entry: its tokens, clitics split off
        self.first = np.zeros(0, np.int64)  # (entries,) its first piece id
        self.row = np.zeros(0, np.int64)  # (pieces,) store row, -1 for none
        self.known = np.zeros(0, bool)  # (pieces,) has a vector: a store row or subwords
        self.used = np.zeros(0, bool)  # (pieces,) enters attention: known, or --oov zero
        self.vector = np.zeros(0, np.int64)  # (pieces,) row of ``vectors`` for a used piece with no store row
        self.text = np.zeros(0, object)  # (pieces,) its text as written (a chunk's token texts in one gather)
        # added since the last flush, as columns: each new entry's width (its pieces follow the
        # previous entry's), each new piece's text and store row; the pieces with no row (all others
        # are known and used, with no vector of their own) in blocks of (piece ids, known, used, vector)
        self._widths: list[int] = []
        self._texts: list[str] = []
        self._rows: list[int | None] = []  # -1 for none (None until _add_unknown has looked further)
        self._unknown: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # (u,) each
        self._blocks: list[np.ndarray] = []  # (k, d) float32 vectors not yet in _matrix
        self._matrix = np.zeros((0, store.dim), np.float32)
        self._matches: dict[str, tuple[int, np.ndarray]] = {}  # word -> (pieces judged, (judged,) bool)

    def matches(self, wanted: str) -> np.ndarray:
        """(pieces,) bool: the pieces that are the lower-case word ``wanted``, by key or as written.
        Each piece is judged once, the first time a chunk asks (batch --word asks every chunk)."""
        judged, hit = self._matches.get(wanted, (0, np.zeros(0, bool)))
        count = len(self.keys)
        if count > judged:
            keys, texts = self.keys[judged:count], self.text[judged:count].tolist()
            new = [k.lower() == wanted or t.lower() == wanted for k, t in zip(keys, texts, strict=True)]
            hit = np.concatenate([hit, np.array(new, bool)])  # (count,)
            self._matches[wanted] = (count, hit)
        return hit

    @property
    def full(self) -> bool:
        return len(self.keys) >= MAX_PIECES

    @property
    def vectors(self) -> np.ndarray:
        """(k, d) float32 every vector that is no store row, in the order ``vector`` points into."""
        if self._blocks:
            self._matrix = np.concatenate([self._matrix, *self._blocks])  # (k, d)
            self._blocks = []
        return self._matrix

    def chunk(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(pieces (P,) piece ids of every text's tokens, text after text; starts (n + 1,) where
        each text's pieces begin, and their end)."""
        words = [text.split() for text in texts]  # no token spans white space
        counts = np.fromiter(map(len, words), np.int64, len(texts))  # (n,) words per text
        flat = list(itertools.chain.from_iterable(words))  # (m,) every word, text after text
        ids = np.fromiter(map(self.entries.get, flat, itertools.repeat(-1)), np.int64, len(flat))  # (m,)
        missing = np.flatnonzero(ids < 0)
        if len(missing):
            unseen = [flat[i] for i in missing.tolist()]
            self._add(list(dict.fromkeys(unseen)))  # each once, in order
            self._flush()
            ids[missing] = list(map(self.entries.__getitem__, unseen))
        width = self.width[ids]  # (m,) pieces per word (0: a word of format characters only)
        starts = offsets(width)[offsets(counts)]  # (n + 1,) where each text's pieces begin: at its first word's
        if not len(ids) or width.min() == width.max() == 1:  # every word is one token (of letters and digits)
            return self.first[ids], starts
        # (P,) each word's first piece, repeated over its pieces, plus 0, 1, ... within the word
        return np.repeat(self.first[ids], width) + places(width), starts

    def _add(self, words: list[str]) -> None:
        """Entries for words not seen before, each token resolved as :meth:`Lexicon.sentence`
        resolves it, once per distinct word: every word cut by one bulk call of the tokenizer
        (:func:`words_pieces`), their tokens looked up together, then those that are no vocabulary
        word as they are (:meth:`_add_unknown`: fallbacks, then all their subword vectors in one call)."""
        texts, straight, widths = words_pieces(words)
        self._append(words, widths.tolist(), texts, straight)
        unknown = [i for i, row in enumerate(self._rows) if row is None]  # among the pieces since the last flush
        if unknown:
            first = len(self.keys) - len(self._rows)
            for i, row in zip(unknown, self._add_unknown([first + i for i in unknown]), strict=True):
                self._rows[i] = row

    def _look_up(self, keys: list[str]) -> list[int | None]:
        """The store row of each key, None when absent (:meth:`VectorStore.find_many`)."""
        return [None if row < 0 else row for row in self.store.find_many(keys).tolist()]

    def _append(self, words: list[str], widths: list[int], texts: list[str], straight: list[str] | None = None) -> None:
        """Entries for ``words``, ``widths`` pieces each, whose pieces are ``texts`` in order, each
        looked up by its key: ``straight`` (the texts with straight apostrophes; the texts themselves
        when None), lower-cased for a lower-case store. A row of None: no vocabulary word as it is
        (see _add_unknown)."""
        keys = texts if straight is None else straight
        if self.lowercase:
            keys = list(map(str.lower, keys))
        entry = len(self.entries)
        self.entries.update(zip(words, range(entry, entry + len(words)), strict=True))
        self._widths += widths
        self._texts += texts
        self.keys += keys
        self.words += keys
        self._rows += self._look_up(keys)

    def _add_unknown(self, pieces: list[int]) -> list[int]:
        """Pieces whose key is no vocabulary word as it is (:func:`resolve_unknown`), and --oov.
        Returns their store rows (-1 for none)."""
        words, rows, built, known = resolve_unknown(self.store, [self.keys[piece] for piece in pieces])
        unfound = [piece for piece, row in zip(pieces, rows, strict=True) if row < 0]
        for piece, word, row in zip(pieces, words, rows, strict=True):
            if row >= 0:
                self.words[piece] = word  # a fallback: known and used, like a vocabulary word
        if not unfound:
            return rows
        used = known | (self.oov == "zero")  # (u,) enters attention: subwords, or --oov zero's zeros
        first = len(self._matrix) + sum(map(len, self._blocks))  # the next row of ``vectors``
        vector = np.full(len(unfound), -1, np.int64)  # (u,)
        vector[used] = np.arange(first, first + np.count_nonzero(used))
        self._blocks.append(built[used])  # (k, d) zeros where a piece has no subword vector
        self._unknown.append((np.array(unfound, np.int64), known, used, vector))
        for piece in np.array(unfound)[~known].tolist():
            self.words[piece] = None
        return rows

    def _flush(self) -> None:
        """Copy the entries and pieces added since the last flush into the NumPy columns."""
        entries, pieces = len(self.entries), len(self.keys)
        widths, rows = np.array(self._widths, np.int64), np.array(self._rows, np.int64)  # (e,), (p,)
        first = np.cumsum(widths) - widths + (pieces - len(rows))  # (e,) each entry's pieces follow the last's
        known, used, vector = np.ones(len(rows), bool), np.ones(len(rows), bool), np.full(len(rows), -1, np.int64)
        text = np.array(self._texts, object)  # (p,)
        for at, known_at, used_at, vector_at in self._unknown:  # (u,) each
            at = at - (pieces - len(rows))  # (u,) among the new pieces
            known[at], used[at], vector[at] = known_at, used_at, vector_at
        self._widths, self._texts, self._rows, self._unknown = [], [], [], []
        for names, values, size in (
            (("width", "first"), (widths, first), entries),
            (("row", "known", "used", "vector", "text"), (rows, known, used, vector, text), pieces),
        ):
            for name, column_values in zip(names, values, strict=True):
                column = getattr(self, name)
                if size > len(column):  # grow by doubling, the first part copied
                    grown = np.zeros(max(1024, 2 * size), column.dtype)
                    grown[: len(column)] = column
                    setattr(self, name, column := grown)
                column[size - len(column_values) : size] = column_values
