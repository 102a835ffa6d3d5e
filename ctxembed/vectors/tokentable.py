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
from collections.abc import Iterable, Sequence

import numpy as np

from ctxembed.vectors.store import VectorStore
from ctxembed.vectors.tokenize import vocabulary_key, word_pieces

MAX_PIECES = 1 << 21  # a table this full is replaced by an empty one (a few hundred MB at most)


class TokenTable:
    """Word -> its pieces, each resolved once; see the module's docstring.

    Entries and pieces are only ever appended, so the piece ids that a chunk's columns hold stay
    valid while the table lives. New ones are resolved in Python, then copied into the NumPy
    columns once per chunk (arrays grow by doubling)."""

    def __init__(self, store: VectorStore, *, oov: str = "skip"):
        self.store, self.oov, self.lowercase = store, oov, store.lowercase
        self.entries: dict[str, int] = {}  # word (white space around it) -> entry id
        self.texts: list[str] = []  # per piece: its text as written
        self.keys: list[str] = []  # per piece: the tokenizer's key (lower-cased for a lower-case store)
        self.words: list[str | None] = []  # per piece: the vocabulary word looked up (None: no vector)
        # the NumPy columns, filled up to len(entries) and len(texts) (see _flush)
        self.width = np.zeros(0, np.int64)  # (entries,) pieces of each entry: its tokens, clitics split off
        self.first = np.zeros(0, np.int64)  # (entries,) its first piece id
        self.row = np.zeros(0, np.int64)  # (pieces,) store row, -1 for none
        self.known = np.zeros(0, bool)  # (pieces,) has a vector: a store row or subwords
        self.used = np.zeros(0, bool)  # (pieces,) enters attention: known, or --oov zero
        self.vector = np.zeros(0, np.int64)  # (pieces,) row of ``vectors`` for a used piece with no store row
        self._new: list[tuple] = []  # (width, first) of each entry added since the last flush
        self.pieces: list[tuple] = []  # (row, known, used, vector) of each piece added since then
        self._vectors: list[np.ndarray] = []  # (d,) float32 each
        self._matrix = np.zeros((0, store.dim), np.float32)

    @property
    def full(self) -> bool:
        return len(self.texts) >= MAX_PIECES

    @property
    def vectors(self) -> np.ndarray:
        """(k, d) float32 every vector that is no store row, in the order ``vector`` points into."""
        if len(self._matrix) != len(self._vectors):
            self._matrix = np.stack(self._vectors)  # (k, d)
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

        Most new words are one vocabulary word as they stand (letters and digits: one token, see
        :func:`word_pieces`): those are added in bulk, a dict lookup each and no Python step of
        their own; the rest (punctuation, clitics, unknown words) one by one in :meth:`_add_one`."""
        find = self.store.find
        # letters and digits only is one token (str.isalnum is the regex's [^\W_]+); "\u02bc" is
        # alphanumeric yet an apostrophe to the tokenizer, so such words take the long way
        plain = [word for word in words if word.isalnum() and "\u02bc" not in word]
        keys = list(map(str.lower, plain)) if self.lowercase else plain
        rows = list(map(find, keys))  # None: not a vocabulary word as it stands
        known = [i for i, row in enumerate(rows) if row is not None]
        if len(known) < len(plain):
            plain, keys, rows = [plain[i] for i in known], [keys[i] for i in known], [rows[i] for i in known]
        taken = set(plain)
        entry, piece = len(self.entries), len(self.texts)
        self.entries.update(zip(plain, range(entry, entry + len(plain)), strict=True))
        self._new += zip(itertools.repeat(1), range(piece, piece + len(plain)))  # (width, first)
        self.pieces += zip(rows, itertools.repeat(True), itertools.repeat(True), itertools.repeat(-1))
        self.texts += plain
        self.keys += keys
        self.words += keys
        self._add_one(word for word in words if word not in taken)

    def _add_one(self, words: Iterable[str]) -> None:
        """Entries for new words, one word at a time: its tokens, each looked up with its fallbacks."""
        find, lowercase, new = self.store.find, self.lowercase, self._new
        for word in words:
            pieces = word_pieces(word)
            self.entries[word] = len(self.entries)
            new.append((len(pieces), len(self.texts)))
            for text, straight in pieces:
                token_key = straight.lower() if lowercase else straight
                row = find(token_key)
                if row is None:
                    self._add_unknown(text, token_key)
                    continue
                self.pieces.append((row, True, True, -1))
                self.texts.append(text)
                self.keys.append(token_key)
                self.words.append(token_key)

    def _add_unknown(self, text: str, token_key: str) -> None:
        """A token that is no vocabulary word as it is: clitic and case fallbacks, subwords, --oov."""
        store, find = self.store, self.store.find
        key = vocabulary_key(token_key, lambda k: find(k) is not None)
        if key is None and not self.lowercase and token_key != token_key.lower():
            key = vocabulary_key(token_key.lower(), lambda k: find(k) is not None)
        row = find(key) if key is not None else None
        built = store.subword_vector(token_key) if row is None else None  # (d,) or None: no n-gram rows
        known = row is not None or built is not None
        used = known or self.oov == "zero"
        vector = -1
        if used and row is None:
            vector = len(self._vectors)
            self._vectors.append(built if known else np.zeros(store.dim, np.float32))
        self.pieces.append((-1 if row is None else row, known, used, vector))
        self.texts.append(text)
        self.keys.append(token_key)
        self.words.append(key if row is not None else (token_key if known else None))

    def _flush(self) -> None:
        """Copy the entries and pieces added since the last flush into the NumPy columns."""
        entries, self._new = self._new, []
        pieces, self.pieces = self.pieces, []
        for names, rows, size in (
            (("width", "first"), entries, len(self.entries)),
            (("row", "known", "used", "vector"), pieces, len(self.texts)),
        ):
            if not rows:
                continue
            for name, values in zip(names, zip(*rows, strict=True), strict=True):
                column = getattr(self, name)
                if size > len(column):  # grow by doubling, the first part copied
                    grown = np.zeros(max(1024, 2 * size), column.dtype)
                    grown[: len(column)] = column
                    setattr(self, name, column := grown)
                column[size - len(values) : size] = values
