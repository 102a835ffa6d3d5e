"""A chunk of texts -> every token's store row, in a few whole-chunk calls: batch's tokenizer.

The chunk is split at white space (no token spans it); one dict lookup per word turns each word
into an entry of a :class:`TokenTable`, which grows as new words are seen. An entry says what its
word becomes: its tokens, punctuation and clitics split off ("don't," -> "do" "n't" ","), as
:func:`ctxembed.vectors.tokenize.token_strings` cuts them, and per token (a *piece*) its key, its
store row (lower-casing, clitic and case fallbacks applied), a vector that is no store row (built
from subwords, or --oov zero's zeros), whether it has a vector, and whether it enters attention.
The tokenizer's regex and the lookups run once per distinct word, the first time it is seen,
resolving each token exactly as :meth:`ctxembed.engine.Engine.prepare` resolves it for one
sentence; the rest is NumPy over the chunk's arrays.

    table = TokenTable(store, oov="skip")
    pieces, starts = table.chunk(["The bank's river.", "we sat"])  # piece ids, where each text begins
    table.row[pieces]                                              # (P,) store rows, -1 for none
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence

import numpy as np

from ctxembed.vectors.store import VectorStore
from ctxembed.vectors.tokenize import CLITIC_FALLBACKS, cut_in_bulk, vocabulary_key, word_pieces, words_pieces

MAX_PIECES = 1 << 21  # a table this full is replaced by an empty one (a few hundred MB at most)


class TokenTable:
    """Word -> its pieces, each resolved once; see the module's docstring.

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
        width = self.width[ids]  # (m,) pieces per word, at least 1
        ends = np.cumsum(width)  # (m,) pieces up to and including each word
        word_starts = np.zeros(len(texts) + 1, np.int64)  # (n + 1,) where each text's words begin
        np.cumsum(counts, out=word_starts[1:])
        starts = np.concatenate([[0], ends])[word_starts]  # (n + 1,)
        if not len(ids) or width.max() == 1:  # every word is one token (words of letters and digits)
            return self.first[ids], starts
        # (P,) each word's first piece, repeated over its pieces, plus 0, 1, ... within the word
        within = np.arange(int(ends[-1])) - np.repeat(ends - width, width)
        return np.repeat(self.first[ids], width) + within, starts

    def _add(self, words: list[str]) -> None:
        """Entries for words not seen before, each token resolved as Engine.prepare resolves it
        (see Engine._look_up_slowly), once per distinct word.

        Every step is a whole-list call: words of letters and digits are one token as they stand
        (see :func:`word_pieces`); the others ("said," '"red"' "U.S." "3.5" "don't" "Atlanta's")
        are cut in one regex pass (:func:`words_pieces`), but for words with curly apostrophes
        ("don\u2019t"), cut by :func:`word_pieces` one by one.
        Their tokens are looked up together, then those that are no vocabulary word as they are
        (:meth:`_add_unknown`: fallbacks, then all their subword vectors in one call)."""
        # letters and digits only is one token (str.isalnum is the regex's [^\W_]+); "\u02bc" is
        # alphanumeric yet an apostrophe to the tokenizer, so such words take the long way
        alone = [word.isalnum() and "\u02bc" not in word for word in words]
        plain = list(itertools.compress(words, alone))
        self._append(plain, [1] * len(plain), plain)
        rest = list(itertools.compress(words, map(operator.not_, alone)))
        bulk = cut_in_bulk(rest)  # no curly apostrophe: all their tokens in one regex pass
        together = list(itertools.compress(rest, bulk))
        texts, widths = words_pieces(together)
        self._append(together, widths.tolist(), texts)
        rest = list(itertools.compress(rest, map(operator.not_, bulk)))
        cut = list(map(word_pieces, rest))  # per word: (text, text with straight apostrophes) per token
        texts = [text for pieces in cut for text, _ in pieces]
        straight = [text for pieces in cut for _, text in pieces]
        self._append(rest, list(map(len, cut)), texts, straight)
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
        """Pieces whose key is no vocabulary word as it is: clitic and case fallbacks one by one,
        then the subword vectors of those still without a row in one call, and --oov. Returns
        their store rows (-1 for none)."""
        store, keys = self.store, self.keys
        # every key the fallbacks may ask about, looked up at once
        asked = [key for piece in pieces for key in (keys[piece], keys[piece].lower())]
        asked += [fallback for key in asked if (fallback := CLITIC_FALLBACKS.get(key)) is not None]
        answers = dict(zip(asked, self._look_up(asked), strict=True))

        def find(key: str) -> int | None:
            return answers[key] if key in answers else store.find(key)

        rows: list[int] = []
        unfound: list[int] = []  # pieces with no row after the fallbacks
        for piece in pieces:
            token_key = keys[piece]
            key = vocabulary_key(token_key, lambda k: find(k) is not None, cased=not self.lowercase)
            row = find(key) if key is not None else None
            if row is None:
                unfound.append(piece)
            else:
                self.words[piece] = key  # a fallback: known and used, like a vocabulary word
            rows.append(-1 if row is None else row)
        if not unfound:
            return rows
        built, known = store.subword_vectors([keys[piece] for piece in unfound])  # (u, d), (u,)
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
