"""The ctxembed vector store: a vocabulary and a matrix in one file, opened with mmap.

A store opens in milliseconds and never imports gensim, so every command that only
reads vectors stays fast. Foreign formats (word2vec, GloVe, fastText) are converted
into a store once, by :mod:`ctxembed.vectors.formats`, and cached.

File layout (all integers little-endian)::

    8 bytes   magic b"CTXEMB\\x00\\x01"
    8 bytes   header length H (uint64)
    H bytes   header, UTF-8 JSON: count, dim, dtype, sections {name: [offset, nbytes]}, metadata,
              extra {name: {key: {offset, nbytes, dtype, shape}}} (named groups of arrays, e.g. the
              all-but-the-top statistics "abtt"), checksums (version 2)
    padding   to a multiple of 64 bytes; section offsets count from here
    sections  vocab (each word + "\\n"), order (int32, N: rows sorted by their bytes, for binary
              search), norms (float32, N), scales (float32, N; int8 only),
              matrix (N, D) float32 or int8, ngrams (bucket, D) float32 or int8 (character n-gram
              vectors: fastText files, the shipped store), ngram_scales (float32, bucket; int8 n-grams
              only), then the arrays of the extra sections

Checksums (version 2): the header carries ``header_crc32`` (CRC-32 of its own canonical JSON
without that key) and ``checksums`` = {"block": B, "crc32": {blob: [crc of each B-byte block]}}.
The header, vocabulary and order are verified when the store opens (~4 MB for 200k words); the
other blobs block by block on first use in the process, so looking up a sentence's words checks
a few 64 KiB blocks instead of the whole matrix (a full CRC-32 of the 24 MB default store costs
several times its ~5 ms open). Version 1 stores (no checksums) stay readable.

Example::

    >>> store = VectorStore.open("data/glove-6B-100d-400k.ctxv")     # doctest: +SKIP
    >>> store.vector("bank").shape                                   # doctest: +SKIP
    (100,)
    >>> store.most_similar(store.vector("king"), k=3, exclude={"king"})  # doctest: +SKIP
    [('prince', 0.77), ('queen', 0.75), ('son', 0.70)]
"""

from __future__ import annotations

import json
import mmap
import os
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ctxembed.errors import DataError
from ctxembed.output import atomic_file
from ctxembed.vectors.subwords import capped, ngram_buckets_many, ngram_counts
from ctxembed.vectors.vocabulary import Vocabulary

MAGIC = b"CTXEMB\x00\x01"
STORE_VERSION = 2
_READABLE_VERSIONS = (1, 2)
_CHECK_BLOCK = 1 << 16  # bytes per checksummed block: a sentence's first lookup reads a few, not megabytes
_EAGER_BLOBS = ("vocab", "order")  # verified at open: every lookup reads them
STORE_SUFFIX = ".ctxv"
_ALIGN = 64
_BLOCK_ROWS = 32768  # rows per block in whole-vocabulary scans: bounds the float32 temporary to ~13 MB
_NGRAM_BLOCK = 8192  # n-gram rows per block in subword_vectors (~3 MB of float32 at D = 100)


def _pad(n: int) -> int:
    return (-n) % _ALIGN


@dataclass(frozen=True)
class Subwords:
    """Character n-gram table (fastText hashing), so out-of-vocabulary words still get vectors.

    ``ngrams`` is float32, or int8 codes with one float32 scale per row in ``scales`` (row ~= codes * scale)."""

    ngrams: np.ndarray  # (bucket, D) float32 or int8
    min_n: int
    max_n: int
    scales: np.ndarray | None = None  # (bucket,) float32 when ngrams is int8

    def rows(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """Dequantised float32 n-gram vectors: (n,) -> (n, D)."""
        ids = np.asarray(ids, dtype=np.int64)
        block = self.ngrams[ids].astype(np.float32)  # (n, D)
        if self.scales is not None:
            block *= self.scales[ids][:, None]  # (n, D) * (n, 1)
        return block

    def builds(self, words: Sequence[str]) -> np.ndarray:
        """(k,) bool: whether :meth:`vectors` builds each word a vector (it has an n-gram), from the
        words' lengths alone (:func:`ngram_counts`), without hashing them."""
        lengths = np.fromiter(map(len, capped(words)), np.int64, len(words))  # (k,)
        return (ngram_counts(lengths, self.min_n, self.max_n) > 0) & (len(self.ngrams) > 0)

    def vectors(self, words: Sequence[str], check: Callable[[np.ndarray], None]) -> tuple[np.ndarray, np.ndarray]:
        """(vectors (k, D) float32, zeros for a word with no n-gram; built (k,) bool) of ``words``,
        after ``check`` of the n-gram rows they read (the store's checksums).

        Each vector is its word's dequantised n-gram rows' mean, computed as ``rows.mean(axis=0)``
        computes it, in its two steps: the float32 sum over the rows, then the division by their
        count (an integer). The rows are read for many words at once, a block at a time. A word
        longer than MAX_WORD_CHARS characters is built from its first ones (:func:`capped`)."""
        vectors = np.zeros((len(words), self.ngrams.shape[1]), np.float32)  # (k, D)
        ids, counts = ngram_buckets_many(capped(words), self.min_n, self.max_n, self.ngrams.shape[0])  # (G,), (k,)
        built = counts > 0
        if not len(ids):
            return vectors, built
        check(ids)
        ends = np.cumsum(counts)  # (k,) n-gram rows up to each word's last
        bounds = list(zip((ends - counts).tolist(), ends.tolist(), strict=True))  # (start, end) of each in ids
        first, add = 0, np.add.reduce
        while first < len(words):  # words with at most _NGRAM_BLOCK n-gram rows at a time (or one word)
            offset = bounds[first][0]
            last = max(first + 1, int(np.searchsorted(ends, offset + _NGRAM_BLOCK, side="right")))
            rows = self.rows(ids[offset : bounds[last - 1][1]])  # (g, D) their dequantised n-gram rows
            for word in np.flatnonzero(built[first:last]).tolist():
                start, end = bounds[first + word]
                vectors[first + word] = add(rows[start - offset : end - offset], axis=0)  # mean's sum
            first = last
        vectors[built] = vectors[built] / counts[built][:, None]  # float64 quotients made float32, as in mean
        return vectors, built


def quantize_int8(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 quantisation with one float32 scale per row.

    matrix (N, D) -> codes (N, D) int8 and scales (N,) float32, with row ~= codes * scale.
    """
    matrix = np.asarray(matrix, dtype=np.float32)
    peak = np.abs(matrix).max(axis=1)  # (N,)
    scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)  # (N,)
    codes = np.clip(np.rint(matrix / scales[:, None]), -127, 127).astype(np.int8)  # (N, D)
    return codes, scales


# Where a row's vector came from, by the code a store's ROW_SOURCE_SECTION holds per row (array
# "estimated", (N,) uint8): the source's own vector (0), or one estimated from another source (1),
# e.g. a 100-d vector from the 50-d one. A store without that section has only its source's own.
ROW_SOURCES = ("vocabulary", "estimated")
ROW_SOURCE_SECTION = "row_source"


class VectorStore:
    """Read-only word vectors backed by a memory-mapped store file.

    Attributes: ``words`` (list, frequency order as in the source), ``dim``, ``meta``
    (the header's metadata: name, source, format...), ``lowercase`` (True when the
    vocabulary has no upper-case letters, so tokens should be lower-cased).
    """

    def __init__(self, path: Path, header: dict, buffer: mmap.mmap | bytes):
        self.path = path
        self.meta: dict = header.get("meta", {})
        self.dim: int = int(header["dim"])
        count = int(header["count"])
        if count < 0 or self.dim < 1:
            raise DataError(f"{path}: store header is corrupt (count {count}, dim {self.dim})")
        sections = header["sections"]
        data_start = header["_data_start"]
        self._checks = Checksums(path, header, buffer, data_start)
        # appended to a checksum error, e.g. "reinstall ctxembed"; a callable is called (once) for it
        self.damage_hint: str | Callable[[], str] = ""

        def section(name: str, dtype, shape):
            offset, nbytes = (int(x) for x in sections[name])
            n_items = int(np.prod(shape)) if shape else 0
            if offset < 0 or nbytes != n_items * np.dtype(dtype).itemsize or data_start + offset + nbytes > len(buffer):
                raise DataError(f"{path}: store is truncated or corrupt (section {name!r})")
            return np.frombuffer(buffer, dtype=dtype, count=n_items, offset=data_start + offset).reshape(shape)

        offset, nbytes = (int(x) for x in sections["vocab"])
        if offset < 0 or nbytes < 0 or data_start + offset + nbytes > len(buffer):
            raise DataError(f"{path}: store is truncated or corrupt (section 'vocab')")
        blob = bytes(buffer[data_start + offset : data_start + offset + nbytes])  # UTF-8, "\n"-joined
        self.vocabulary = Vocabulary(blob, count, path)
        self.vocabulary.order = section("order", np.int32, (count,))  # (N,) rows sorted by their UTF-8 bytes
        for name in _EAGER_BLOBS:
            self._checks.whole(name, self)
        self.vocabulary.check_order()
        self.count = count
        self._bind_lookups()
        self._matrix = section("matrix", header["dtype"], (count, self.dim))  # (N, D)
        self.norms = section("norms", np.float32, (count,))  # (N,) norms of the dequantised rows
        self._scales = section("scales", np.float32, (count,)) if "scales" in sections else None  # (N,)
        self.subwords: Subwords | None = None
        if "ngrams" in sections:
            sub = header["subwords"]
            bucket, ngram_dtype = int(sub["bucket"]), sub.get("dtype", "float32")  # stores before int8: float32
            if ngram_dtype not in ("float32", "int8"):
                raise DataError(f"{path}: store header is corrupt (n-gram dtype {ngram_dtype!r})")
            ngrams = section("ngrams", ngram_dtype, (bucket, self.dim))
            ngram_scales = section("ngram_scales", np.float32, (bucket,)) if ngram_dtype == "int8" else None
            self.subwords = Subwords(ngrams, int(sub["min_n"]), int(sub["max_n"]), ngram_scales)
        self._extra: dict = header.get("extra") or {}
        self.lowercase: bool = bool(header.get("lowercase", False))
        self._buffer = buffer
        self._data_start = data_start

    # ----------------------------------------------------------------------------- opening
    @classmethod
    def open(cls, path: str | os.PathLike) -> VectorStore:
        """Open a store file with mmap; only the header and the vocabulary are read now."""
        path = Path(path)
        try:
            with open(path, "rb") as fh:
                prefix = fh.read(16)
                if len(prefix) < 16 or prefix[:8] != MAGIC:
                    raise DataError(f"{path}: not a ctxembed store (bad magic bytes)")
                header_len = int.from_bytes(prefix[8:16], "little")
                if header_len > 1 << 24:
                    raise DataError(f"{path}: not a ctxembed store (implausible header length)")
                header = json.loads(fh.read(header_len).decode("utf-8"))
                if not isinstance(header, dict):
                    raise DataError(f"{path}: store header is corrupt")
                buffer = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if path.stat().st_size else b""
        except FileNotFoundError:
            raise DataError(f"{path}: no such file") from None
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            raise DataError(f"{path}: store header is corrupt") from None
        except (OSError, ValueError) as exc:
            raise DataError(f"{path}: cannot open store ({exc})") from None
        if header.get("version") not in _READABLE_VERSIONS:
            raise DataError(f"{path}: store version {header.get('version')} is not supported")
        if header["version"] >= 2 and header.pop("header_crc32", None) != _header_crc(header):
            raise DataError(f"{path}: store header is damaged (checksum mismatch)")
        header["_data_start"] = 16 + header_len + _pad(16 + header_len)
        try:
            return cls(path, header, buffer)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise DataError(f"{path}: store header is corrupt ({exc})") from None

    # ----------------------------------------------------------------------------- lookup
    def __len__(self) -> int:
        return self.count

    @property
    def words(self) -> list[str]:
        """Every word, in row (frequency) order; decoded on first use (tens of ms for 200k words)."""
        return self.vocabulary.words

    @property
    def index(self) -> dict[str, int]:
        """word -> row, built on first use (see :class:`Vocabulary`)."""
        return self.vocabulary.index

    @property
    def sorted_lookup(self) -> bool:
        """True when :meth:`find_many` works without the dict (built now if need be)."""
        return self.vocabulary.sorted_lookup

    def _bind_lookups(self) -> None:
        """The vocabulary's lookups as the store's own (:meth:`Vocabulary.find` runs once a token)."""
        vocabulary = self.vocabulary
        self.find, self.find_many = vocabulary.find, vocabulary.find_many
        self.word_at, self.prepare_bulk = vocabulary.word_at, vocabulary.prepare_bulk

    def __contains__(self, word: str) -> bool:
        return self.find(word) is not None

    def can_embed(self, word: str) -> bool:
        """True when :meth:`vector` has an answer: in vocabulary, or built from subwords."""
        if self.find(word) is not None:
            return True
        return self.subwords is not None and bool(self.subwords.builds([word])[0])

    @property
    def dtype(self) -> str:
        return str(self._matrix.dtype)

    def rows(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """Dequantised float32 vectors of the given rows: (n,) -> (n, D)."""
        ids = np.asarray(ids, dtype=np.int64)
        self._checks.rows("matrix", ids, self._matrix.shape[1] * self._matrix.itemsize, self)
        if self._scales is not None:
            self._checks.rows("scales", ids, self._scales.itemsize, self)
        # np.take gathers whole rows ~4x faster than fancy indexing (_matrix[ids]); it copies, so the
        # float32 conversion need not
        block = np.take(self._matrix, ids, axis=0).astype(np.float32, copy=False)  # (n, D)
        if self._scales is not None:
            block *= np.take(self._scales, ids)[:, None]  # (n, D) * (n, 1)
        return block

    def vector(self, word: str) -> np.ndarray:
        """The float32 (D,) vector of a word; fastText stores build unknown words from n-grams."""
        row = self.find(word)
        if row is not None:
            return self.rows([row])[0]
        built = self.subword_vector(word)
        if built is None:
            raise KeyError(word)
        return built

    def subword_vector(self, word: str) -> np.ndarray | None:
        """The float32 (D,) vector built from ``word``'s n-grams (whether or not it is in the
        vocabulary), or None: no n-gram table, or no n-gram of the word in it."""
        vectors, built = self.subword_vectors([word])
        return vectors[0] if built[0] else None

    def subword_vectors(self, words: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`subword_vector` of many words at once (:meth:`Subwords.vectors`): (vectors (k, D)
        float32, zeros for a word with none; built (k,) bool, True where a word has one)."""
        if self.subwords is None or not len(words):
            return np.zeros((len(words), self.dim), np.float32), np.zeros(len(words), bool)
        return self.subwords.vectors(words, self._check_ngram_rows)

    def _check_ngram_rows(self, ids: np.ndarray) -> None:
        sub = self.subwords
        self._checks.rows("ngrams", ids, sub.ngrams.shape[1] * sub.ngrams.itemsize, self)
        if sub.scales is not None:
            self._checks.rows("ngram_scales", ids, 4, self)

    def row_source(self, row: int) -> str:
        """Where the vector of ``row`` came from: "vocabulary" (the source's own) or "estimated"
        (one of :data:`ROW_SOURCES`, from :attr:`row_sources`)."""
        codes = self.row_sources
        return ROW_SOURCES[0 if codes is None else int(codes[row])]

    def matrix(self) -> np.ndarray:
        """The whole vocabulary as float32 (N, D). Reads every page: for big stores use blocks."""
        return self.rows(np.arange(len(self)))

    def iter_blocks(self, block_rows: int = _BLOCK_ROWS):
        """Yield (start, float32 block (b, D)) over the vocabulary, in order."""
        for start in range(0, len(self), block_rows):
            yield start, self.rows(np.arange(start, min(start + block_rows, len(self))))

    def cosine_to_all(self, vector: np.ndarray) -> np.ndarray:
        """Cosine similarity of one (D,) vector to every word: (N,) float32, 0 for zero rows."""
        vector = np.asarray(vector, dtype=np.float32)
        out = np.empty(len(self), dtype=np.float32)
        self._checks.whole("norms", self)
        if self._scales is not None:
            self._checks.whole("scales", self)
        row_bytes = self._matrix.shape[1] * self._matrix.itemsize
        for start in range(0, len(self), _BLOCK_ROWS):
            stop = min(start + _BLOCK_ROWS, len(self))
            self._checks.span("matrix", start * row_bytes, stop * row_bytes, self)
            dots = self._matrix[start:stop].astype(np.float32) @ vector  # (b, D) @ (D,) -> (b,)
            if self._scales is not None:
                dots *= self._scales[start:stop]  # undo the int8 scale row by row
            out[start:stop] = dots
        denom = self.norms * np.float32(np.linalg.norm(vector))  # (N,)
        np.divide(out, denom, out=out, where=denom > 0)
        out[denom <= 0] = 0.0
        return out

    def most_similar(self, vector: np.ndarray, k: int = 10, exclude: Iterable[str] = ()) -> list[tuple[str, float]]:
        """The k words whose vectors have the highest cosine with ``vector``, best first."""
        return self.top_words(self.cosine_to_all(vector), k, exclude)

    def top_words(self, scores: np.ndarray, k: int, exclude: Iterable[str] = ()) -> list[tuple[str, float]]:
        """The k words with the highest ``scores``, best first, leaving out ``exclude``. ``scores`` (n,)
        belong to the first n rows (n <= N: a search among the most frequent words)."""
        scores = np.array(scores)  # (n,) a copy: excluded words are set to -inf below
        banned = [row for row in map(self.find, exclude) if row is not None and row < len(scores)]
        scores[banned] = -np.inf
        k = max(0, min(k, len(scores) - len(banned)))
        if k == 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k]  # unordered top k, O(N)
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(self.word_at(int(i)), float(scores[i])) for i in top]

    def head(self, n: int) -> VectorStore:
        """The n most frequent words (the first n rows) as a store of their own; shares memory."""
        clone = object.__new__(VectorStore)
        clone.__dict__.update(self.__dict__)
        clone.count = n
        clone.vocabulary = self.vocabulary.head(n)
        clone._bind_lookups()
        clone._matrix = self._matrix[:n]
        clone.norms = self.norms[:n]
        clone._scales = None if self._scales is None else self._scales[:n]
        clone.meta = {**self.meta, "limit": n}
        return clone

    @property
    def row_sources(self) -> np.ndarray | None:
        """(N,) uint8 per row: where its vector came from, an index into :data:`ROW_SOURCES`; None for
        a store without :data:`ROW_SOURCE_SECTION` (every row is the source's own vector).

        A store writer adds it as ``write_store(..., sections={ROW_SOURCE_SECTION: {"estimated": codes}})``."""
        section = self.section(ROW_SOURCE_SECTION)
        if section is None:
            return None
        codes = section.get("estimated")
        if codes is None or codes.dtype != np.uint8 or codes.shape != (len(self.vocabulary.offsets) - 1,):
            raise DataError(f"{self.path}: store is corrupt (section {ROW_SOURCE_SECTION!r} is not one code a row)")
        if codes.size and int(codes.max()) >= len(ROW_SOURCES):
            raise DataError(f"{self.path}: store is corrupt (section {ROW_SOURCE_SECTION!r} holds an unknown code)")
        return codes[: self.count]

    def section(self, name: str) -> dict[str, np.ndarray] | None:
        """The named group of arrays stored with :func:`write_store`'s ``sections``, or None.

        Arrays are read-only views into the file (checksums verified on first access)."""
        spec = self._extra.get(name)
        if spec is None:
            return None
        arrays = {}
        for key, item in spec.items():
            blob = f"{name}/{key}"
            try:
                offset, nbytes = int(item["offset"]), int(item["nbytes"])
                dtype, shape = np.dtype(item["dtype"]), tuple(int(n) for n in item["shape"])
            except (KeyError, TypeError, ValueError) as exc:
                raise DataError(f"{self.path}: store header is corrupt (section {blob!r}: {exc})") from None
            count = int(np.prod(shape)) if shape else 1
            start = self._data_start + offset
            if dtype.hasobject or offset < 0 or nbytes != count * dtype.itemsize or start + nbytes > len(self._buffer):
                raise DataError(f"{self.path}: store is truncated or corrupt (section {blob!r})")
            self._checks.span(blob, 0, nbytes, self)
            arrays[key] = np.frombuffer(self._buffer, dtype=dtype, count=count, offset=start).reshape(shape)
        return arrays

    @property
    def checksums(self) -> Checksums:
        """The store's block checksums (CRC-32 per block of each blob, the blobs' offsets), for tools that
        measure what verifying costs; lookups and :meth:`verify` use them already."""
        return self._checks

    def verify(self) -> None:
        """Check every checksum now (a full read); raises DataError naming the damaged part."""
        self._checks.everything(self)

    def close(self) -> None:
        if isinstance(self._buffer, mmap.mmap):
            # The numpy views keep the buffer alive; only drop our reference.
            self._buffer = b""


def write_store(
    path: str | os.PathLike,
    words: Sequence[str],
    matrix: np.ndarray,
    *,
    quantize: bool = False,
    meta: dict | None = None,
    subwords: Subwords | None = None,
    sections: dict[str, dict[str, np.ndarray]] | None = None,
    scales: np.ndarray | None = None,
) -> Path:
    """Write a store atomically (temporary file, then rename), so no half-written file remains.

    words: N unique strings without newlines; matrix: (N, D) finite numbers, or (N, D) int8 codes
    already quantised, with their (N,) float32 ``scales`` (re-packing a store without requantising).
    sections: named groups of numeric arrays kept with the vectors, read back with
    :meth:`VectorStore.section` (e.g. ``{"abtt": {"mean": ..., "directions": ...}}``).
    """
    path = Path(path)
    if scales is not None:
        matrix = np.ascontiguousarray(matrix)
        scales = np.ascontiguousarray(scales, dtype=np.float32)  # (N,)
        if matrix.dtype != np.int8 or scales.shape != (len(words),) or not np.isfinite(scales).all():
            raise DataError(f"{path}: pre-quantised vectors need int8 codes and one finite scale per row")
    else:
        matrix = np.ascontiguousarray(matrix, dtype=np.float32)  # (N, D)
    if matrix.ndim != 2 or matrix.shape[0] != len(words):
        raise DataError(f"{path}: {len(words)} words but a matrix of shape {matrix.shape}")
    if scales is None and not np.isfinite(matrix).all():
        row = int(np.argwhere(~np.isfinite(matrix))[0][0])
        raise DataError(f"{path}: the vector of {words[row]!r} (row {row + 1}) has NaN or infinite values")
    for word in words:
        if "\n" in word or word == "":
            raise DataError(f"{path}: invalid word {word!r} (empty or containing a newline)")
    if scales is not None:
        stored = matrix
    elif quantize:
        stored, scales = quantize_int8(matrix)
    else:
        stored = matrix
    norms = np.empty(len(words), dtype=np.float32)  # (N,) in blocks: no second full-size copy
    for start in range(0, len(words), _BLOCK_ROWS):
        block = stored[start : start + _BLOCK_ROWS].astype(np.float32)  # (b, D)
        if scales is not None:
            block *= scales[start : start + _BLOCK_ROWS, None]
        norms[start : start + len(block)] = np.linalg.norm(block, axis=1)
    encoded = [w.encode("utf-8") + b"\n" for w in words]
    if len(set(encoded)) != len(encoded):
        raise DataError(f"{path}: duplicate words")
    order = np.array(sorted(range(len(words)), key=lambda i: encoded[i][:-1]), dtype=np.int32)  # (N,)
    blobs: list[tuple[str, bytes | np.ndarray]] = [("vocab", b"".join(encoded)), ("order", order)]
    blobs.append(("norms", norms.astype(np.float32)))
    if scales is not None:
        blobs.append(("scales", scales))
    blobs.append(("matrix", stored))
    if subwords is not None and subwords.scales is not None:  # int8 codes, one scale per n-gram row
        ngram_scales = np.ascontiguousarray(subwords.scales, dtype=np.float32)  # (bucket,)
        if subwords.ngrams.dtype != np.int8 or ngram_scales.shape != (len(subwords.ngrams),):
            raise DataError(f"{path}: int8 n-grams need int8 codes and one scale per n-gram row")
        blobs.append(("ngrams", np.ascontiguousarray(subwords.ngrams)))
        blobs.append(("ngram_scales", ngram_scales))
    elif subwords is not None:
        blobs.append(("ngrams", np.ascontiguousarray(subwords.ngrams, dtype=np.float32)))
    extra_blobs = _extra_blobs(path, sections or {})

    offsets, offset = {}, 0
    for name, blob in blobs + extra_blobs:
        nbytes = len(blob) if isinstance(blob, bytes) else blob.nbytes
        offsets[name] = [offset, nbytes]
        offset += nbytes + _pad(nbytes)
    header = {
        "version": STORE_VERSION,
        "count": len(words),
        "dim": int(matrix.shape[1]),
        "dtype": str(stored.dtype),
        "lowercase": all(w == w.lower() for w in words),
        "sections": {name: offsets[name] for name, _ in blobs},
        "meta": meta or {},
    }
    if subwords is not None:
        header["subwords"] = {"min_n": subwords.min_n, "max_n": subwords.max_n, "bucket": len(subwords.ngrams)}
        if subwords.scales is not None:
            header["subwords"]["dtype"] = "int8"
    if extra_blobs:
        header["extra"] = {
            group: {
                key: {
                    "offset": offsets[f"{group}/{key}"][0],
                    "nbytes": offsets[f"{group}/{key}"][1],
                    "dtype": array.dtype.str,
                    "shape": list(array.shape),
                }
                for key, array in arrays.items()
            }
            for group, arrays in ((g, {k: np.asarray(a) for k, a in v.items()}) for g, v in (sections or {}).items())
        }
    blobs += extra_blobs
    header["checksums"] = {
        "block": _CHECK_BLOCK,
        "crc32": {name: _block_crcs(_blob_bytes(blob)) for name, blob in blobs},
    }
    header["header_crc32"] = _header_crc(header)
    header_bytes = json.dumps(header, ensure_ascii=False).encode("utf-8")

    with atomic_file(path) as fh:
        fh.write(MAGIC + len(header_bytes).to_bytes(8, "little") + header_bytes)
        fh.write(b"\0" * _pad(16 + len(header_bytes)))
        for _, blob in blobs:
            data = _blob_bytes(blob)
            fh.write(data)
            fh.write(b"\0" * _pad(len(data)))
    return path


def _blob_bytes(blob: bytes | np.ndarray) -> bytes | memoryview:
    if isinstance(blob, bytes):
        return blob
    if blob.size == 0:
        return b""  # memoryview cannot cast an empty array
    return memoryview(np.ascontiguousarray(blob)).cast("B")  # the array's own bytes: no copy


def _extra_blobs(path: Path, sections: dict) -> list[tuple[str, np.ndarray]]:
    blobs = []
    for group, arrays in sections.items():
        for key, array in arrays.items():
            array = np.ascontiguousarray(array)
            if "/" in group or "/" in key or array.dtype.hasobject or array.dtype.kind not in "biuf":
                raise DataError(f"{path}: section {group}/{key} must be a numeric array with a plain name")
            if array.dtype.kind == "f" and not np.isfinite(array).all():
                raise DataError(f"{path}: section {group}/{key} has NaN or infinite values")
            blobs.append((f"{group}/{key}", array))
    return blobs


def _block_crcs(data: bytes | memoryview) -> list[int]:
    view = memoryview(data)
    return [zlib.crc32(view[i : i + _CHECK_BLOCK]) for i in range(0, len(view), _CHECK_BLOCK)]


def _header_crc(header: dict) -> int:
    """CRC-32 of the header's canonical JSON (sorted keys, without "header_crc32" itself)."""
    body = {k: v for k, v in header.items() if k not in ("header_crc32", "_data_start")}
    return zlib.crc32(json.dumps(body, ensure_ascii=False, sort_keys=True).encode("utf-8"))


class Checksums:
    """Block checksums of a store's blobs, verified lazily: each block at most once per process."""

    def __init__(self, path: Path, header: dict, buffer, data_start: int):
        self.path = path
        info = header.get("checksums")
        if info is None and header.get("version", 1) >= 2:
            raise DataError(f"{path}: store header is damaged (no checksums)")
        self.block = int(info["block"]) if info else _CHECK_BLOCK
        if self.block < 1:
            raise DataError(f"{path}: store header is corrupt (checksum block {self.block})")
        self.crcs: dict[str, list[int]] = dict(info["crc32"]) if info else {}
        self.offsets = {name: tuple(map(int, v)) for name, v in header["sections"].items()}
        for group, arrays in (header.get("extra") or {}).items():
            for key, item in arrays.items():
                self.offsets[f"{group}/{key}"] = (int(item["offset"]), int(item["nbytes"]))
        self.buffer, self.data_start = buffer, data_start
        self.done: dict[str, np.ndarray] = {}  # blob -> (blocks,) bool, True once verified
        self.complete: set[str] = set()  # blobs verified in full: no more bookkeeping per lookup

    def span(self, name: str, lo: int, hi: int, store: VectorStore) -> None:
        """Verify the blocks covering bytes [lo, hi) of blob ``name``."""
        crcs = self.crcs.get(name)
        if crcs is None or hi <= lo or name in self.complete:
            return
        self._check(name, range(lo // self.block, (hi - 1) // self.block + 1), store)

    def whole(self, name: str, store: VectorStore) -> None:
        if name in self.crcs and name in self.offsets:
            self.span(name, 0, self.offsets[name][1], store)

    def rows(self, name: str, ids: np.ndarray, row_bytes: int, store: VectorStore) -> None:
        """Verify the blocks holding the given rows of a (rows, row_bytes) blob."""
        if name not in self.crcs or ids.size == 0 or name in self.complete:
            return
        count = len(self.crcs[name])
        wanted = np.zeros(count, dtype=bool)  # (blocks,) True: holds a byte of one of the rows
        for edge in (ids * row_bytes // self.block, ((ids + 1) * row_bytes - 1) // self.block):  # (n,) each
            wanted[edge[(edge >= 0) & (edge < count)]] = True  # a block past the end is _check's to report
        done = self.done.get(name)
        if done is not None:
            wanted &= ~done  # (blocks,) verified once is enough: a batch's lookups cost no Python per row
        self._check(name, np.flatnonzero(wanted).tolist(), store)

    def everything(self, store: VectorStore) -> None:
        for name in self.crcs:
            self.whole(name, store)

    def _check(self, name: str, blocks, store: VectorStore) -> None:
        crcs = self.crcs[name]
        done = self.done.get(name)
        if done is None:
            done = self.done[name] = np.zeros(len(crcs), dtype=bool)
        offset, nbytes = self.offsets[name]
        if len(crcs) != -(-nbytes // self.block):
            self._damaged(name, store)
        for block in blocks:
            if block >= len(crcs) or done[block]:
                continue
            start = self.data_start + offset + block * self.block
            stop = self.data_start + offset + min(nbytes, (block + 1) * self.block)
            if stop > len(self.buffer) or zlib.crc32(memoryview(self.buffer)[start:stop]) != crcs[block]:
                self._damaged(name, store)
            done[block] = True
        if done.all():
            self.complete.add(name)

    def _damaged(self, name: str, store: VectorStore) -> None:
        hint = store.damage_hint() if callable(store.damage_hint) else store.damage_hint
        hint = f"; {hint}" if hint else ""
        raise DataError(f"{self.path}: store is damaged (checksum mismatch in {name!r}){hint}")
