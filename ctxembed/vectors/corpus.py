"""Opening a corpus: a text file, a gzip file, or stdin, as one binary stream. ``senses`` and ``train``
both read corpora through :func:`open_corpus`; what a line means is theirs to decide. :func:`open_file`
is how every input file is opened (batch, sense-labelled files), with the same error lines."""

from __future__ import annotations

import gzip
import io
import sys
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
        return gzip.GzipFile(fileobj=stream, mode="rb"), name  # type: ignore[return-value]
    return stream, name
