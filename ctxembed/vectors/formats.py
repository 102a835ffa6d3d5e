"""Reading foreign vector files through gensim: format detection, loading, and bad-file errors.

This is the only module that imports gensim (slow: about a second, mostly scipy), and only
inside the functions that parse a file, so opening a cached store never pays for it.

Formats (compressed ``.gz``/``.bz2`` variants of each are read transparently):

========================  ===============================================================
``word2vec-text``         ``count dim`` header line, then ``word v1 ... vD`` per line
``fasttext-vec``          the same layout, with the ``.vec`` suffix fastText uses
``glove-text``            no header, ``word v1 ... vD`` per line (detected, not flagged)
``word2vec-binary``       ``count dim`` header, then ``word `` and D raw float32 per entry
``fasttext-bin``          Facebook's fastText model; unknown words get vectors from n-grams
``gensim-native``         gensim's own ``.kv``/``.model`` pickles (need ``trust=True``)
``ctxembed-store``        a store written by ctxembed (opened directly, never parsed)
========================  ===============================================================
"""

from __future__ import annotations

import bz2
import gzip
import logging
import shutil
import struct
import tempfile
import warnings
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ctxembed.errors import DataError, UsageError
from ctxembed.vectors.corpus import looks_binary
from ctxembed.vectors.store import MAGIC, Subwords

FASTTEXT_MAGIC = 793712314  # first int32 of a Facebook fastText .bin file
_SNIFF_BYTES = 1 << 16
MAX_LINE_BYTES = 1 << 20  # a text vector line (a word, D numbers): 4,096 dimensions take ~50 KB
BOM = b"\xef\xbb\xbf"  # a UTF-8 byte-order mark, which some editors put first: accepted, skipped
# Largest accepted |value|: squares and dot products of D such values stay far inside float32
# (3.4e38), so norms and cosines never overflow. Real embeddings stay below ~100.
MAX_ABS_VALUE = 1e15
# What reading a damaged compressed file raises (zlib.error is not an OSError)
READ_ERRORS = (OSError, EOFError, zlib.error, gzip.BadGzipFile)


@dataclass
class LoadedVectors:
    """A parsed foreign file: words in file order, (N, D) float32 matrix, optional n-grams."""

    words: list[str]
    matrix: np.ndarray
    subwords: Subwords | None
    format: str


# Expanded size of a compressed vector file (F12): at most MAX_EXPANSION times its compressed size,
# or EXPANSION_FLOOR bytes, whichever is larger (a small file may compress well). Real vector files
# expand 2 to 4 times (text) or barely (binary float32); a gzip bomb expands about 1,000 times, bz2 more.
MAX_EXPANSION = 100
EXPANSION_FLOOR = 64 << 20


def is_compressed(path: Path) -> bool:
    return path.name.lower().endswith((".gz", ".bz2"))


def expansion_budget(path: Path) -> int:
    """How many bytes the compressed file ``path`` may expand to (see MAX_EXPANSION)."""
    return max(EXPANSION_FLOOR, MAX_EXPANSION * path.stat().st_size)


class ExpansionError(DataError):
    """A compressed file expanded past its budget; ``offset`` is where it was noticed."""

    def __init__(self, path: Path, budget: int, line: int | None = None):
        where = f" line {line}:" if line else ""
        super().__init__(
            f"{path}:{where} expands past {budget:,} bytes (more than {MAX_EXPANSION} times its compressed size: "
            "a compression bomb, or not a vector file)"
        )
        self.path, self.budget = path, budget


class _Bounded:
    """A decompressing reader that refuses to return more than ``budget`` bytes in all: every read,
    however the caller reads, is counted, so no reader of a compressed file can be bombed."""

    def __init__(self, path: Path, fh):
        self.path, self.fh, self.budget, self.expanded = path, fh, expansion_budget(path), 0

    def _count(self, data: bytes) -> bytes:
        self.expanded += len(data)
        if self.expanded > self.budget:
            raise ExpansionError(self.path, self.budget)
        return data

    def read(self, size: int = -1) -> bytes:
        return self._count(self.fh.read(min(size, self.budget + 1) if size >= 0 else self.budget + 1))

    def readline(self, size: int = -1) -> bytes:
        return self._count(self.fh.readline(size if size >= 0 else self.budget + 1))

    def __iter__(self):
        return iter(self.readline, b"")

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.fh.close()


def open_maybe_compressed(path: Path):
    """Open a file for binary reading, decompressing .gz and .bz2 on the fly, bounded by
    :func:`expansion_budget` (an :class:`ExpansionError` past it)."""
    name = path.name.lower()
    if name.endswith(".gz"):
        return _Bounded(path, gzip.open(path, "rb"))
    if name.endswith(".bz2"):
        return _Bounded(path, bz2.open(path, "rb"))
    return open(path, "rb")


def _plain_suffix(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in (".gz", ".bz2"):
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


def _is_count_dim_header(line: bytes) -> bool:
    parts = line.split()
    return len(parts) == 2 and all(p.isdigit() for p in parts)


def detect_format(path: Path) -> str:
    """Name the format of a vector file by its content (the suffix only separates .vec and .kv)."""
    try:
        with open_maybe_compressed(path) as fh:
            head = fh.read(_SNIFF_BYTES)
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a directory, not a vector file") from None
    except READ_ERRORS as exc:
        raise DataError(read_error(path, exc)) from None
    head = head.removeprefix(BOM)
    if not head:
        raise DataError(f"{path}: file is empty")
    if head.startswith(MAGIC):
        return "ctxembed-store"
    if len(head) >= 4 and int.from_bytes(head[:4], "little") == FASTTEXT_MAGIC:
        return "fasttext-bin"
    if head[:1] == b"\x80" or _plain_suffix(path) in (".kv", ".model", ".pkl", ".pickle"):
        return "gensim-native"
    first_line, _, rest = head.partition(b"\n")
    if _is_count_dim_header(first_line):
        if looks_binary(rest[:4096]):
            return "word2vec-binary"
        return "fasttext-vec" if _plain_suffix(path) == ".vec" else "word2vec-text"
    try:
        fields = first_line.decode("utf-8").rstrip().split(" ")
    except UnicodeDecodeError:
        if looks_binary(head[:4096]):
            raise DataError(f"{path}: unknown format (binary data without a word2vec header)") from None
        raise DataError(f"{path}: line 1: the word is not valid UTF-8") from None
    try:
        if len(fields) >= 2:
            [float(x) for x in fields[1:]]
            return "glove-text"
    except ValueError:
        pass
    raise DataError(f"{path}: unknown format (line 1 is neither a 'count dim' header nor 'word v1 v2 ...')")


def read_error(path: Path, exc: BaseException) -> str:
    if isinstance(exc, (EOFError, zlib.error, gzip.BadGzipFile)) or "compressed" in str(exc).lower():
        return f"{path}: damaged or truncated compressed file ({exc or type(exc).__name__})"
    return f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})"


def load_foreign(path: Path, fmt: str, *, limit: int | None = None, trust: bool = False) -> LoadedVectors:
    """Parse ``path`` (of format ``fmt``, from :func:`detect_format`) with gensim.

    Every value is checked: NaN, infinity, and magnitudes past :data:`MAX_ABS_VALUE` (which would
    overflow float32 norms) are refused with the line they are on; numpy's warnings stay quiet."""
    logging.getLogger("gensim").setLevel(logging.ERROR)  # its INFO chatter is not for our users
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # e.g. gensim's "overflow encountered in cast": refused below
        try:
            if fmt == "gensim-native":
                return _load_native(path, limit, trust)
            if fmt == "fasttext-bin":
                return _load_fasttext_bin(path, limit)
            if fmt in ("word2vec-text", "fasttext-vec", "glove-text", "word2vec-binary"):
                return _load_word2vec_family(path, fmt, limit)
        except READ_ERRORS as exc:
            raise DataError(read_error(path, exc)) from None
    raise DataError(f"{path}: cannot load format {fmt!r}")


def _starts_with_bom(path: Path) -> bool:
    with open_maybe_compressed(path) as fh:
        return fh.read(len(BOM)) == BOM


@contextmanager
def _gensim_source(path: Path):
    """What to hand gensim for ``path``: the path itself, or, when the file starts with a BOM, a
    temporary decompressed copy without it (gensim reads a header-less file twice, so a pipe
    would not do). BOM files are rare and small in practice; the copy is removed at once."""
    if not _starts_with_bom(path):
        yield str(path)
        return
    with tempfile.TemporaryDirectory(prefix="ctxembed-bom-") as folder:
        copy = Path(folder) / "vectors.txt"
        with open_maybe_compressed(path) as src, open(copy, "wb") as sink:
            src.read(len(BOM))
            shutil.copyfileobj(src, sink, 1 << 20)
        yield str(copy)


def _load_word2vec_family(path: Path, fmt: str, limit: int | None) -> LoadedVectors:
    binary = fmt == "word2vec-binary"
    no_header = fmt == "glove-text"
    if not binary:
        _check_field_counts(path, no_header, limit)  # gensim would broadcast a 1-value line silently
    else:
        header_bytes = _check_binary_header(path)
    from gensim.models import KeyedVectors  # gensim: about a second, once the file passed the checks above

    try:
        with _gensim_source(path) as source:
            kv = KeyedVectors.load_word2vec_format(
                source, binary=binary, no_header=no_header, limit=limit, unicode_errors="strict"
            )
    except UnicodeDecodeError:
        raise DataError(_non_utf8_message(path, binary)) from None
    except EOFError:
        what = "binary file" if binary else "file"
        raise DataError(f"{path}: truncated {what}: fewer entries than the header announces") from None
    except ValueError as exc:
        raise DataError(
            _bad_line_message(path, no_header) if not binary else f"{path}: truncated or damaged binary file ({exc})"
        ) from None
    except (OSError, MemoryError) as exc:
        raise DataError(f"{path}: cannot read ({exc})") from None
    words = list(kv.index_to_key)
    matrix = np.asarray(kv.vectors, dtype=np.float32)
    expected = _announced_count(path, no_header, limit)
    distinct = len(kv.key_to_index)
    if expected is not None and distinct < expected:
        raise DataError(_duplicate_message(path, binary, no_header, expected, distinct))
    if binary and limit is None:
        _check_binary_rest(path, header_bytes, words, matrix.shape[1])
    _check_finite(path, words, matrix, first_line=1 if no_header else 2, binary=binary)
    return LoadedVectors(words, matrix, None, fmt)


def _announced_count(path: Path, no_header: bool, limit: int | None) -> int | None:
    """How many entries the file says it has (header, or its non-empty lines for GloVe)."""
    with open_maybe_compressed(path) as fh:
        if no_header:
            count = sum(1 for line in fh if line.strip())
        else:
            count = int(fh.readline().removeprefix(BOM).split()[0])
    return min(count, limit) if limit else count


def _header(path: Path, line: bytes) -> tuple[int, int]:
    """(count, dim) of a word2vec header line, refusing counts or dimensions that cannot be."""
    count, dim = (int(x) for x in line.removeprefix(BOM).split()[:2])
    if dim < 1:
        raise DataError(f"{path}: line 1: the header announces vectors of dimension {dim}; a header is 'count dim'")
    if count < 1:
        raise DataError(f"{path}: line 1: the header announces {count} words: no vectors in the file")
    return count, dim


def _check_binary_header(path: Path) -> int:
    """A binary file's header against its size (uncompressed files): a header of 99999999999 words
    would make gensim try to allocate terabytes before noticing the file is short. Returns the
    header line's length in bytes."""
    with open_maybe_compressed(path) as fh:
        first = fh.readline(1 << 10)
    count, dim = _header(path, first)
    needed = len(first) + count * (dim * 4 + 2)  # each entry: at least a 1-byte word, a space, D float32
    if is_compressed(path):  # gensim would decompress (and allocate) that much: the same bound as any read
        if needed > (budget := expansion_budget(path)):
            raise DataError(
                f"{path}: the header announces {count:,} vectors of {dim} floats (at least {needed:,} bytes), more "
                f"than the {budget:,} bytes this compressed file may expand to ({MAX_EXPANSION} times its size)"
            )
        return len(first)
    size = path.stat().st_size
    if needed > size:
        raise DataError(
            f"{path}: truncated binary file: the header announces {count:,} vectors of {dim} floats "
            f"(at least {needed:,} bytes), the file has {size:,} bytes"
        )
    return len(first)


def _check_binary_rest(path: Path, header: int, words: list[str], dim: int) -> None:
    """Refuse a binary file with more entries than its header (``header`` bytes) announces: gensim
    reads the announced ones and ignores the rest, so a wrong count would silently drop vectors
    (text files get the same error from _check_field_counts)."""
    read = header + sum(len(word.encode("utf-8")) + 1 for word in words) + 4 * dim * len(words)
    if is_compressed(path):  # the uncompressed size is only known by reading: read no more than decides
        enough = read + len(words) + 2 + 4 * dim
        with open_maybe_compressed(path) as fh:
            size = 0
            while size < enough and (piece := fh.read(min(1 << 20, enough - size))):
                size += len(piece)
    else:
        size = path.stat().st_size
    # each entry may end with a newline; one more entry takes at least a byte, a space and D floats
    beyond = size - read - len(words)
    if beyond >= 2 + 4 * dim:
        raise DataError(
            f"{path}: the header announces {len(words):,} vectors but the file has more ({beyond:,} bytes "
            "after them; fix the header's count, or pass {limit} to keep only the first words)",
            "limit",
        )


def _duplicate_message(path: Path, binary: bool, no_header: bool, expected: int, distinct: int) -> str:
    if not binary:
        seen: set[bytes] = set()
        with open_maybe_compressed(path) as fh:
            for number, line in enumerate(fh, start=1):
                if number == 1 and not no_header:
                    continue
                word = line.split(b" ", 1)[0]
                if word in seen:
                    shown = word.decode("utf-8", "replace")
                    return f"{path}: line {number}: duplicate word {shown!r}"
                seen.add(word)
    return f"{path}: duplicate words: {expected} entries but only {distinct} distinct words"


def _non_utf8_message(path: Path, binary: bool) -> str:
    if not binary:
        with open_maybe_compressed(path) as fh:
            for number, line in enumerate(fh, start=1):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError:
                    return f"{path}: line {number}: not valid UTF-8"
    return f"{path}: a word is not valid UTF-8"


def _bounded_lines(path: Path, fh) -> Iterator[bytes]:
    """The lines of ``fh``, each refused past MAX_LINE_BYTES without being read whole: a 1 MB gzip can
    hold a 1 GB line (F12)."""
    number = 0
    while True:
        number += 1
        try:
            line = fh.readline(MAX_LINE_BYTES + 1)
        except ExpansionError as exc:
            raise ExpansionError(exc.path, exc.budget, number) from None
        if not line:
            return
        if len(line) > MAX_LINE_BYTES:
            raise DataError(
                f"{path}: line {number}: longer than {MAX_LINE_BYTES:,} bytes (a vector line is a word and its "
                "numbers: the file is damaged, or a compression bomb)"
            )
        yield line


def _check_field_counts(path: Path, no_header: bool, limit: int | None) -> None:
    """Every line holds a word and exactly D values, no word comes twice, and a header's count
    matches the lines (one fast pass; counts spaces, parses nothing). Each line is bounded
    (:func:`_bounded_lines`) and refused as soon as it is read."""
    with open_maybe_compressed(path) as fh:
        lines = _bounded_lines(path, fh)
        count, dim = (None, None) if no_header else _header(path, next(lines, b""))
        first = 1 if no_header else 2
        wanted = min(x for x in (count, limit) if x is not None) if (count or limit) else None
        seen = 0
        words: set[bytes] = set()  # as gensim keys them: the bytes before the first space
        for number, line in enumerate(lines, start=first):
            if number == 1:
                line = line.removeprefix(BOM)
            if wanted is not None and seen >= wanted:
                if count is not None and seen == count and line.strip() and (limit is None or limit > count):
                    raise DataError(
                        f"{path}: line {number}: the header announces {count:,} words but the file has more "
                        "(fix the header's count, or pass {limit} to keep only the first words)",
                        "limit",
                    )
                break
            values = line.rstrip().count(b" ")
            if dim is None:
                dim = values
            if values != dim or values == 0:
                raise DataError(f"{path}: line {number}: {values} values where {dim} were expected (mixed dimensions?)")
            word = line.split(b" ", 1)[0]
            if word in words:  # at its line, as soon as it is read: gensim would read the whole file first
                raise DataError(f"{path}: line {number}: duplicate word {word.decode('utf-8', 'replace')!r}")
            words.add(word)
            seen += 1
    if count is not None and seen < min(count, limit or count):
        raise DataError(f"{path}: truncated file: the header announces {count:,} words, the file has {seen:,}")


def _bad_line_message(path: Path, no_header: bool) -> str:
    """Find the first line whose field count or numbers are wrong (only run after a failure)."""
    dim = None
    with open_maybe_compressed(path) as fh:
        for number, line in enumerate(fh, start=1):
            if number == 1 and not no_header:
                dim = int(line.split()[1])
                continue
            fields = line.rstrip().split(b" ")
            if dim is None:
                dim = len(fields) - 1
            if len(fields) - 1 != dim:
                return f"{path}: line {number}: {len(fields) - 1} values where {dim} were expected (mixed dimensions)"
            try:
                [float(x) for x in fields[1:]]
            except ValueError:
                return f"{path}: line {number}: not a number among the values"
    return f"{path}: cannot parse the file"


def _check_finite(path: Path, words: list[str], matrix: np.ndarray, *, first_line: int, binary: bool) -> None:
    """Refuse NaN, infinity (also from float32 overflow) and values past MAX_ABS_VALUE, by line."""
    with np.errstate(invalid="ignore"):
        bad = np.flatnonzero(~(np.abs(matrix) <= MAX_ABS_VALUE).all(axis=1))  # NaN compares False
    if bad.size:
        row = int(bad[0])
        where = f"entry {row + 1}" if binary else f"line {row + first_line}"
        values = matrix[row]
        if np.isnan(values).any():
            what = "has NaN values"
        elif np.isinf(values).any():
            what = "has infinite values (or values past float32's 3.4e38)"
        else:
            what = f"has a value of {float(np.abs(values).max()):.3g}, past the {MAX_ABS_VALUE:.0e} limit"
        raise DataError(f"{path}: {where}: the vector of {words[row]!r} {what}")


def _subwords_of(path: Path, kv) -> Subwords | None:
    ngrams = getattr(kv, "vectors_ngrams", None)
    if ngrams is None or not getattr(kv, "bucket", 0):
        return None
    ngrams = np.asarray(ngrams, dtype=np.float32)  # (bucket, D)
    _check_ngrams_finite(path, ngrams)
    return Subwords(ngrams, int(kv.min_n), int(kv.max_n))


def _check_ngrams_finite(path: Path, ngrams: np.ndarray, block: int = 1 << 16) -> None:
    """Refuse an n-gram table with NaN, infinity or values past MAX_ABS_VALUE at conversion (F15): only
    the unknown words that hash there would meet them, later, far from the file. Read a block of rows
    at a time (the table can hold millions)."""
    for start in range(0, len(ngrams), block):
        with np.errstate(invalid="ignore"):
            bad = np.flatnonzero(~(np.abs(ngrams[start : start + block]) <= MAX_ABS_VALUE).all(axis=1))
        if bad.size:
            row = start + int(bad[0])
            values = ngrams[row]
            what = "NaN" if np.isnan(values).any() else "infinite" if np.isinf(values).any() else "too large"
            raise DataError(
                f"{path}: n-gram row {row:,} of {len(ngrams):,} has {what} values (the vectors of unknown words "
                "are built from these rows)"
            )


# fastText's .bin layout (Facebook's args.cc, dictionary.cc, densematrix.cc), as gensim reads it:
_FT_ARGS = struct.Struct("<2i12id")  # magic, version, dim ws epoch min_count neg word_ngrams loss model
#                                      bucket minn maxn lr_update_rate, t
_FT_DICT = struct.Struct("<3iqq")  # size, nwords, nlabels, ntokens, pruneidx_size
_FT_ENTRY_TAIL = 9  # after a word's NUL: count (int64), entry type (int8)
_FT_MATRIX = struct.Struct("<?2q")  # quantised?, rows, columns; then rows x columns float32
_FT_MAX_WORD = 1 << 16  # bytes: no real word is longer; a longer run without NUL is damage
# What gensim's fastText reader raises on a damaged file that passed _check_fasttext_bin
_FASTTEXT_READ_ERRORS = (EOFError, ValueError, AssertionError, OSError, UnicodeDecodeError, struct.error)
_FASTTEXT_READ_ERRORS += (NotImplementedError, IndexError, OverflowError, MemoryError)


class _StrictReader:
    """Reads a file (compressed or not) in 1 MiB pieces and raises ``_Short`` instead of returning
    fewer bytes than asked for: gensim's reader loops forever on a word cut by the end of the file.
    ``offset`` counts the bytes consumed; ``buffer[pos:]`` holds those read but not consumed."""

    def __init__(self, fh):
        self.fh, self.buffer, self.pos, self.offset = fh, b"", 0, 0

    def _fill(self, wanted: int) -> None:
        """Have at least ``wanted`` unconsumed bytes in the buffer."""
        while len(self.buffer) - self.pos < wanted:
            piece = self.fh.read(max(1 << 20, wanted))
            if not piece:
                raise _Short(self.offset + len(self.buffer) - self.pos)
            self.buffer, self.pos = self.buffer[self.pos :] + piece, 0

    def take(self, count: int) -> bytes:
        self._fill(count)
        data = self.buffer[self.pos : self.pos + count]
        self.pos += count
        self.offset += count
        return data

    def word(self) -> bytes:
        """Bytes up to and including the next NUL."""
        while (end := self.buffer.find(b"\0", self.pos)) < 0:
            if len(self.buffer) - self.pos > _FT_MAX_WORD:
                raise DataError(f"a word of more than {_FT_MAX_WORD:,} bytes at byte {self.offset:,}")
            self._fill(len(self.buffer) - self.pos + 1)
        return self.take(end + 1 - self.pos)

    def left(self) -> int:
        return len(self.buffer) - self.pos

    def skip(self, count: int, size: int | None) -> None:
        """Skip ``count`` bytes without keeping them (a matrix of gigabytes costs no memory); in a
        plain file of ``size`` bytes by seeking, in a compressed one by reading."""
        if size is not None and count > self.left():
            if self.offset + count > size:
                raise _Short(size)
            self.fh.seek(count - self.left(), 1)
            self.buffer, self.pos, self.offset = b"", 0, self.offset + count
            return
        while count > 0:
            self._fill(1)
            step = min(count, self.left())
            self.pos += step
            self.offset += step
            count -= step


class _Short(Exception):
    def __init__(self, offset: int):
        self.offset = offset


def _check_fasttext_bin(path: Path) -> None:
    """Walk a fastText .bin file's header, vocabulary and matrices, bounded, before gensim reads
    it: gensim loops forever on a file cut inside a word and raises bare ``struct.error`` elsewhere.
    Every size is checked against the bytes that are really there."""
    with open_maybe_compressed(path) as fh:
        reader = _StrictReader(fh)
        try:
            args = _FT_ARGS.unpack(reader.take(_FT_ARGS.size))
            dim, bucket = args[2], args[10]
            if args[1] != 12 or dim < 1 or bucket < 0:
                raise DataError(
                    f"{path}: not a fastText .bin file of a version ctxembed reads (version {args[1]}, dimension {dim})"
                )
            size, nwords, nlabels, _ntokens, pruneidx = _FT_DICT.unpack(reader.take(_FT_DICT.size))
            if nlabels > 0:
                raise DataError(f"{path}: a supervised fastText model (with labels) holds no word vectors")
            if size < 1 or nwords != size or pruneidx < -1:
                raise DataError(
                    f"{path}: damaged fastText .bin file (dictionary of {size:,} entries, {nwords:,} words)"
                )
            for _ in range(size):
                reader.word()
                reader.take(_FT_ENTRY_TAIL)
            file_size = None if path.name.lower().endswith((".gz", ".bz2")) else path.stat().st_size
            reader.skip(max(pruneidx, 0) * 8, file_size)
            for matrix, expected_rows in (("input", nwords + bucket), ("output", None)):
                quantised, rows, columns = _FT_MATRIX.unpack(reader.take(_FT_MATRIX.size))
                if quantised:
                    raise DataError(f"{path}: a quantised fastText model (.ftz) cannot be read")
                if columns != dim or rows < 0 or expected_rows is not None and rows != expected_rows:
                    raise DataError(
                        f"{path}: damaged fastText .bin file (a {rows:,} x {columns:,} {matrix} matrix for "
                        f"{nwords:,} words, {bucket:,} buckets and dimension {dim})"
                    )
                reader.skip(rows * columns * 4, file_size)
            if reader.left() or fh.read(1):
                raise DataError(f"{path}: damaged fastText .bin file (bytes after its last matrix)")
        except _Short as short:
            raise DataError(f"{path}: truncated fastText .bin file (it ends at byte {short.offset:,})") from None
        except DataError as exc:
            if not exc.message.startswith(str(path)):
                raise DataError(f"{path}: {exc.message}") from None
            raise


def _load_fasttext_bin(path: Path, limit: int | None) -> LoadedVectors:
    _check_fasttext_bin(path)
    from gensim.models.fasttext import load_facebook_vectors  # gensim: foreign formats only

    try:
        kv = load_facebook_vectors(str(path))
    except _FASTTEXT_READ_ERRORS as exc:
        raise DataError(f"{path}: cannot read fastText binary ({exc or type(exc).__name__})") from None
    return _from_keyed_vectors(path, kv, limit, "fasttext-bin")


def _load_native(path: Path, limit: int | None, trust: bool) -> LoadedVectors:
    if not trust:
        raise UsageError(
            f"{path}: gensim's native format is a pickle and loading it can run arbitrary code; "
            "pass {trust} if you trust this file",
            "trust",
        )
    from gensim.utils import SaveLoad  # gensim: foreign formats only

    try:
        obj = SaveLoad.load(str(path))
    except Exception as exc:  # unpickling raises anything at all; report it as a data error
        raise DataError(f"{path}: cannot load gensim file ({type(exc).__name__}: {exc})") from None
    kv = getattr(obj, "wv", obj)
    if not hasattr(kv, "index_to_key") or not hasattr(kv, "vectors"):
        raise DataError(f"{path}: gensim file holds a {type(obj).__name__}, not word vectors")
    return _from_keyed_vectors(path, kv, limit, "gensim-native")


def _from_keyed_vectors(path: Path, kv, limit: int | None, fmt: str) -> LoadedVectors:
    words = list(kv.index_to_key)
    matrix = np.asarray(kv.vectors, dtype=np.float32)
    if limit:
        words, matrix = words[:limit], matrix[:limit]
    _check_finite(path, words, matrix, first_line=1, binary=True)
    return LoadedVectors(words, np.ascontiguousarray(matrix), _subwords_of(path, kv), fmt)
