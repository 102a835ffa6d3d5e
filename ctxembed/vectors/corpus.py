"""Opening a corpus: a text file, a gzip file, or stdin, as one binary stream. ``senses`` and ``train``
both read corpora through :func:`open_corpus`; what a line means is theirs to decide. :func:`open_file`
is how every input file is opened (batch, sense-labelled files), with the same error lines."""

from __future__ import annotations

import gzip
import io
import sys
import zlib
from pathlib import Path

from ctxembed.errors import DataError

_GZIP_MAGIC = b"\x1f\x8b"


def open_file(path: str | Path, what: str) -> io.BufferedReader:
    """``path`` opened for binary reading, for the caller to close. A missing file, a directory
    (``f"is a directory, not {what}"``) or an unreadable one is a DataError, exit 1."""
    try:
        return open(path, "rb")  # noqa: SIM115 - handed to the caller, who closes it
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a directory, not {what}") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror})") from None


def open_corpus(source: str | Path) -> tuple[io.BufferedIOBase, str]:
    """A binary stream of ``source`` ("-" for stdin; gzip recognised by its magic bytes, whatever
    the name) and a name to show for it. The caller closes the stream."""
    if str(source) == "-":
        if sys.stdin is None:  # started with stdin closed (<&-)
            raise DataError("stdin is closed: give a corpus file, or pipe one in")
        raw = sys.stdin.buffer if hasattr(sys.stdin, "buffer") else io.BytesIO(sys.stdin.read().encode())
        name = "stdin"
    else:
        path = Path(source)
        raw = open_file(path, "a corpus file")
        name = str(path)
    stream = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)
    if stream.peek(2)[:2] == _GZIP_MAGIC:
        stream = gzip.GzipFile(fileobj=stream, mode="rb")  # type: ignore[assignment]
    try:
        start = stream.peek(SNIFF_BYTES)[:SNIFF_BYTES]  # what is buffered: never waits for more input
    except (OSError, EOFError, zlib.error) as exc:
        stream.close()
        raise DataError(f"{name}: cannot read the corpus ({exc})") from None
    if (problem := not_text(start)) is not None:
        stream.close()
        raise DataError(f"{name}: {problem}")
    if looks_binary(start):
        stream.close()
        raise DataError(f"{name}: does not look like text (binary data: NUL or control bytes in its first bytes)")
    return stream, name


SNIFF_BYTES = 1 << 16
# Byte-order marks of the encodings that are not UTF-8 (UTF-32's first: it starts like UTF-16's)
_OTHER_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
               (b"\xfe\xff", "UTF-16"))  # fmt: skip


def not_text(sample: bytes) -> str | None:
    """Why input starting with ``sample`` (its first block) is not UTF-8 text, or None when it may be:
    a UTF-16 or UTF-32 byte-order mark, or NUL bytes in a quarter of it or more (UTF-16 text without a
    mark has one in every other byte; binary data has many). A stray NUL in a line of text is left to
    the reader of that line."""
    for mark, encoding in _OTHER_BOMS:
        if sample.startswith(mark):
            return (
                f"{encoding} text (it starts with the byte-order mark {mark.hex(' ').upper()}); ctxembed reads "
                f"UTF-8: convert it first, e.g. iconv -f {encoding} -t UTF-8"
            )
    if sample and sample.count(0) * 4 >= len(sample) and sample.count(0) > 1:
        return "not UTF-8 text (NUL bytes in its first block: UTF-16 or UTF-32 text, or binary data)"
    return None


def looks_binary(sample: bytes) -> bool:
    """Whether the first bytes of a file are binary data: a NUL byte, or more than 1% of control
    characters (text, in any encoding, has tab, newline and return only; raw numbers have many).
    Shared by corpora (senses, train) and vector files (format detection)."""
    if not sample:
        return False
    controls = sum(1 for b in sample if b < 32 and b not in (9, 10, 13))
    return b"\0" in sample or controls > len(sample) // 100
