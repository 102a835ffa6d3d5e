"""A store's vocabulary and how a word reaches its row: the lookup structure is chosen here, and
only here, by how the words are asked for.

- one word at a time (:meth:`Vocabulary.find`): a binary search over the rows sorted by their
  UTF-8 bytes, with no decoding, until so many searches that the word -> row dict pays for itself;
- many words at once (:meth:`Vocabulary.find_many`): sorted fixed-width keys and ``np.searchsorted``
  (:class:`SortedKeys`), or the dict once it is built.

Every structure gives the same rows (tests/test_find_many.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ctxembed.core.attention import byte_hashes
from ctxembed.errors import DataError

_TABLE_AFTER_WORDS = 1024  # find_many builds its table (~10 ms for 400k words) for this many words
# find builds the word -> row dict after this many binary searches (~10 us each): by then they have
# cost about what the dict costs to build (~100 ms for 400k words), so a command that reads one
# sentence never builds it, and one that reads thousands pays at most twice the better choice
_DICT_AFTER_FINDS = 8192
INDEX_MAX_WORDS = 1_000_000  # above this a word -> row dict costs hundreds of MB: keep the binary search
_KEY_BYTES = 24  # width of find_many's sorted keys: all but ~182 of GloVe's 400k words fit


class Vocabulary:
    """The words of a store, in row (frequency) order, and their lookups.

    ``blob`` holds every word + "\\n" in row order; ``offsets`` (N + 1,) where each begins (word i
    is ``blob[offsets[i] : offsets[i + 1] - 1]``); ``order`` (N,) the rows sorted by their bytes."""

    def __init__(self, blob: bytes, count: int, path: Path):
        self.blob, self.count, self.path = blob, count, path
        self.offsets = np.zeros(count + 1, dtype=np.int64)  # (N + 1,) from the blob's newlines
        newlines = np.flatnonzero(np.frombuffer(blob, dtype=np.uint8) == 10)  # (N,)
        if len(newlines) != count:
            raise DataError(f"{path}: store is corrupt (header says {count} words, found {len(newlines)})")
        self.offsets[1:] = newlines + 1
        self.order = np.arange(count, dtype=np.int32)  # (N,) the store sets the file's (see check_order)
        self._words: list[str] | None = None
        self._index: dict[str, int] | None = None
        self._searches = 0  # binary searches by find; -1: the dict is not to be built (see _may_index)
        self._sorted: SortedKeys | None | bool = None  # find_many's table; False: it cannot be built

    def __len__(self) -> int:
        return self.count

    def check_order(self) -> None:
        """Refuse an ``order`` that names a row the vocabulary does not have (a damaged file)."""
        if self.count and (int(self.order.min()) < 0 or int(self.order.max()) >= self.count):
            raise DataError(f"{self.path}: store is corrupt (section 'order' points outside the vocabulary)")

    def head(self, n: int) -> Vocabulary:
        """The first n words (rows) alone; shares the blob."""
        clone = object.__new__(Vocabulary)
        clone.__dict__.update(self.__dict__)
        clone.count = n
        clone.order = self.order[self.order < n]  # still sorted, restricted to the first n rows
        clone._words = None if self._words is None else self._words[:n]
        clone._index, clone._searches, clone._sorted = None, 0, None
        return clone

    @property
    def words(self) -> list[str]:
        """Every word, in row (frequency) order; decoded on first use (tens of ms for 200k words)."""
        if self._words is None:
            try:
                text = self.blob[: self.offsets[self.count] - 1].decode("utf-8") if self.count else ""
            except UnicodeDecodeError as exc:
                raise DataError(f"{self.path}: store vocabulary is not valid UTF-8 ({exc.reason})") from None
            self._words = text.split("\n") if self.count else []
        return self._words

    def word_at(self, row: int) -> str:
        if self._words is not None:
            return self._words[row]
        return self.blob[self.offsets[row] : self.offsets[row + 1] - 1].decode("utf-8", "replace")

    @property
    def index(self) -> dict[str, int]:
        """word -> row for bulk lookups; built on first use. Single lookups use :meth:`find`."""
        if self._index is None:
            self._index = dict(zip(self.words, range(self.count), strict=True))
        return self._index

    def find(self, word: str) -> int | None:
        """The row of ``word``, or None: a binary search over the sorted vocabulary, no decoding,
        until so many searches that the word -> row dict pays for itself (see :meth:`_may_index`)."""
        if self._index is not None or (self._searches >= _DICT_AFTER_FINDS and self._may_index()):
            return self._index.get(word)
        if self._searches >= 0:
            self._searches += 1
        target = word.encode("utf-8", "surrogatepass")
        vocab, offsets, order = self.blob, self.offsets, self.order
        lo, hi = 0, self.count
        while lo < hi:
            mid = (lo + hi) // 2
            row = int(order[mid])
            if vocab[offsets[row] : offsets[row + 1] - 1] < target:
                lo = mid + 1
            else:
                hi = mid
        if lo < self.count:
            row = int(order[lo])
            if vocab[offsets[row] : offsets[row + 1] - 1] == target:
                return row
        return None

    def find_many(self, words: Sequence[str]) -> np.ndarray:
        """(n,) int64 row of each word, -1 when absent: :meth:`find` of many words at once, with
        no dict (see :class:`SortedKeys`, built on first use), or the dict once :attr:`index` has
        been built. Fewer than _TABLE_AFTER_WORDS words, with neither built yet: one binary search
        each (~10 µs), cheaper than building either."""
        table = None
        if self._index is None and (self._sorted is not None or len(words) >= _TABLE_AFTER_WORDS):
            table = self._sorted_keys()
        if table is None:
            found = (-1 if row is None else row for row in map(self.find, words))
            return np.fromiter(found, np.int64, len(words))
        return table.rows_of(words)

    def _may_index(self) -> bool:
        """Build the word -> row dict now, unless the store should not: a vocabulary of over
        INDEX_MAX_WORDS words (hundreds of MB), one that is not valid UTF-8, or a store whose many
        words are looked up through its sorted keys (:meth:`find_many`: batch, whose workers would
        each build a dict for the rare sentence it resolves one by one). True when it is built."""
        if self._index is None and self._searches >= 0:
            self._searches = -1  # decided once
            if self.count <= INDEX_MAX_WORDS and not self._sorted:
                try:
                    self.index  # noqa: B018 (built on first use)
                except DataError:
                    pass
        return self._index is not None

    def prepare_bulk(self) -> None:
        """Build now what many lookups will use (the sorted keys, else the dict when affordable), so
        that processes forked from this one share it instead of each building its own."""
        if not self.sorted_lookup:
            self._may_index()

    @property
    def sorted_lookup(self) -> bool:
        """True when :meth:`find_many` works without the dict (built now if need be)."""
        return self._sorted_keys() is not None

    def _sorted_keys(self) -> SortedKeys | None:
        """find_many's table, built once; None when it cannot be built."""
        if self._sorted is None:
            self._sorted = SortedKeys.of(self) or False
        return self._sorted or None


def _key_hashes(keys: np.ndarray) -> np.ndarray:
    """(n,) uint64 hash of each S{_KEY_BYTES} key (n,): its bytes as integers (:func:`byte_hashes`)."""
    words = np.ascontiguousarray(keys).view(np.uint64).reshape(len(keys), _KEY_BYTES // 8)  # (n, 3)
    return byte_hashes(words)  # (n,)


class SortedKeys:
    """The vocabulary as fixed-width byte strings in sorted order, for exact lookups of many words
    at once with ``np.searchsorted``: what a word -> row dict gives, without building one (~10 ms
    against ~90 ms for 400k words).

    A NumPy ``S`` string drops trailing NUL bytes, so a word longer than the width or holding a NUL
    byte (a few hundred) is in ``others`` instead, a plain dict of its UTF-8 bytes."""

    def __init__(self, keys: np.ndarray, rows: np.ndarray, others: dict[bytes, int]):
        self.keys = keys  # (M,) S{_KEY_BYTES}, strictly increasing
        self.rows = rows  # (M,) int64 store row of each key
        self.others = others  # the other words' UTF-8 bytes -> row
        # The keys again, sorted by a 64-bit hash of their bytes: searching integers is several times
        # faster than searching strings (batch's workers look up every new word). None when two keys
        # share a hash: then the strings are searched.
        hashes = _key_hashes(keys)  # (M,)
        self.by_hash = np.argsort(hashes).astype(np.int32)  # (M,) key indices by hash
        self.hashes = hashes[self.by_hash]  # (M,) ascending
        if len(keys) > 1 and bool((self.hashes[1:] == self.hashes[:-1]).any()):
            self.by_hash = self.hashes = None

    @classmethod
    def of(cls, vocabulary: Vocabulary) -> SortedKeys | None:
        """Built from the store's vocabulary blob with whole-array gathers; None when its order is
        not strictly increasing (then only the dict or the binary search are trusted)."""
        width, order, offsets = _KEY_BYTES, vocabulary.order, vocabulary.offsets
        starts = offsets[:-1][order]  # (N,) where each word begins, in sorted order
        lengths = offsets[1:][order] - starts - 1  # (N,) its bytes
        padded = np.frombuffer(vocabulary.blob + bytes(width), np.uint8)  # (B + width,)
        # every width-byte window of the vocabulary (stride 1 byte); the words' ones gathered
        windows = np.ndarray((len(padded) - width + 1,), f"S{width}", padded, 0, (1,))
        keys = windows[starts]  # (N,) a copy, bytes past each word's end still to clear
        inside = np.arange(width, dtype=np.int32) < lengths.astype(np.int32)[:, None]  # (N, width)
        key_bytes = keys.view(np.uint8).reshape(-1, width)  # (N, width)
        np.multiply(key_bytes, inside, out=key_bytes, casting="unsafe")
        fits = lengths <= width  # (N,)
        nul = np.flatnonzero(padded[: len(vocabulary.blob)] == 0)  # NUL bytes in the blob (normally none)
        if len(nul):
            fits &= ~np.isin(order, np.searchsorted(offsets, nul, side="right") - 1)
        keys, rows = keys[fits], order[fits].astype(np.int64)  # (M,)
        if len(keys) > 1 and not bool((keys[1:] > keys[:-1]).all()):
            return None
        others = {
            vocabulary.blob[offsets[row] : offsets[row + 1] - 1]: row for row in order[~fits].astype(np.int64).tolist()
        }
        return cls(keys, rows, others)

    def rows_of(self, words: Sequence[str]) -> np.ndarray:
        """(n,) int64 row of each word, -1 when absent."""
        width = _KEY_BYTES
        encoded = [word.encode("utf-8", "surrogatepass") for word in words]  # as find encodes
        wanted = np.array(encoded, f"S{width}")  # (n,) cut to the width, trailing NULs dropped
        lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))  # (n,)
        # a key its S string does not hold whole (too long, or a NUL) can only be one of the others
        elsewhere = np.count_nonzero(wanted.view(np.uint8).reshape(-1, width), axis=1) != lengths  # (n,)
        if not len(self.keys):
            found = np.full(len(encoded), -1, np.int64)
        elif self.hashes is not None:  # the one key with the word's hash, if it is the word
            hashes = _key_hashes(wanted)  # (n,)
            place = np.minimum(np.searchsorted(self.hashes, hashes), len(self.keys) - 1)  # (n,)
            at = self.by_hash[place]  # (n,) a key index
            found = np.where((self.hashes[place] == hashes) & (self.keys[at] == wanted), self.rows[at], -1)  # (n,)
        else:
            at = np.minimum(np.searchsorted(self.keys, wanted), len(self.keys) - 1)  # (n,)
            found = np.where(self.keys[at] == wanted, self.rows[at], -1)  # (n,)
        for i in np.flatnonzero(elsewhere).tolist():
            found[i] = self.others.get(encoded[i], -1)
        return found
