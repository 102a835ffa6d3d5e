"""Where output goes: JSON documents to stdout, tables to stdout, messages for people to stderr.

Rich already honours NO_COLOR and writes no ANSI codes when the stream is not a terminal;
``FORCE_COLOR`` forces colour on. JSON never contains NaN or Infinity: such numbers become
null (they should not occur, and a test checks that they do not).
"""

from __future__ import annotations

import functools
import math
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ctxembed.errors import DataError, OutputClosed

if TYPE_CHECKING:  # rich: JSON output never needs it
    from rich.console import Console

import orjson  # fast, and exact for float32 arrays

PIPE_WIDTH = 80  # a pipe, without COLUMNS and with no terminal on stderr either: what `less` and files expect

_color = "auto"  # --color, for the command being run (see use_color)


def output_width() -> int | None:
    """Columns for tables: COLUMNS when set (also in a pipe), else the terminal's (stdout's, or
    stderr's when stdout is a pipe: `ctxembed attend ... | less` is laid out for the window), else
    PIPE_WIDTH."""
    columns = os.environ.get("COLUMNS", "")
    if columns.strip().isdigit() and int(columns) > 0:
        return int(columns)
    if sys.stdout.isatty():
        return None
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns or PIPE_WIDTH
    except (OSError, ValueError, AttributeError):  # not a terminal, closed, or replaced (tests)
        return PIPE_WIDTH


@contextmanager
def use_color(mode: str) -> Iterator[None]:
    """--color for the consoles :func:`stdout_console` makes inside the block: "auto" (colour on a
    terminal, none under NO_COLOR), "always" (also in a pipe, and despite NO_COLOR) or "never" (no
    escape sequence at all: no colour, no bold)."""
    global _color
    previous, _color = _color, mode
    try:
        yield
    finally:
        _color = previous


# Characters that act on a terminal instead of showing: C0 controls, DEL, C1 controls (ESC and CSI
# start cursor moves, title and colour changes), and the bidi overrides and isolates, which reorder
# what is shown around them. Text from the user's input shows them as escapes, e.g. \x1b or \u202e.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, keep: str = "") -> str:
    """``text`` safe to show on a terminal: every control or bidi character as a visible escape
    (``\\x1b``, ``\\u202e``), except those in ``keep``; everything else (accents, CJK, emoji) as is."""
    if keep:
        return "".join(c if c in keep else _UNSAFE.sub(_escape, c) for c in text)
    return _UNSAFE.sub(_escape, text)


def printable_document(value: Any) -> Any:
    """A document with every string (keys too) made :func:`printable`; arrays and numbers as they are."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable_document(k): printable_document(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(printable_document(v) for v in value)
    return value


def terminal_view(render: Callable) -> Callable:
    """Decorate a renderer ``render(console, doc, ...)``: it draws a :func:`printable_document`, so no
    text from the user's input reaches the terminal as a control sequence."""

    @functools.wraps(render)
    def wrapper(console, doc, *args, **kwargs):
        return render(console, printable_document(doc), *args, **kwargs)

    return wrapper


def stdout_console() -> Console:
    """The terminal view's console. ``markup=False``: a sentence like ``[bold]bank[/]`` prints as typed."""
    from rich.console import Console  # rich: JSON output never needs it

    chosen = {"always": {"force_terminal": True, "no_color": False}, "never": {"color_system": None}}.get(_color, {})
    console = Console(file=sys.stdout, highlight=False, markup=False, width=output_width(), **chosen)
    console.on_broken_pipe = _output_closed  # rich would exit 1; a closed pipe is no error (exit 0)
    return console


def _output_closed() -> None:
    raise OutputClosed()


def stderr_console() -> Console:
    from rich.console import Console  # rich: JSON output never needs it

    return Console(file=sys.stderr, highlight=False, markup=False, stderr=True)


def say(message: str, *, lines: bool = False) -> None:
    """A note for people (progress, warnings, errors): stderr, plain text, :func:`printable` (so
    input it quotes cannot act on the terminal); ``lines`` keeps its line breaks (help text)."""
    print(printable(message, keep="\n" if lines else ""), file=sys.stderr, flush=True)


def jsonable(value: Any, *, keep_arrays: bool = False) -> Any:
    """Convert numpy values and nested containers to JSON types; NaN and inf become None.

    Every float is written in one form, the shortest decimal that reads back as the same float32
    (0.71092224, not 0.7109222412109375; 1.0, not 0.9999999999999999): the computation is float32,
    so further digits are noise, and a weight prints the same in ``weights`` and ``top_attended``.
    ``keep_arrays`` leaves finite arrays to orjson, which writes float32 arrays in that form, fast."""
    if isinstance(value, np.ndarray):
        if keep_arrays and value.dtype.kind == "f" and value.size and np.isfinite(value).all():
            return np.ascontiguousarray(value, dtype=np.float32)
        if keep_arrays and value.dtype.kind in "iub":
            return np.ascontiguousarray(value)
        if value.dtype.kind == "f":
            value = value.astype(np.float32)
        return jsonable(value.tolist())
    if isinstance(value, dict):
        return {str(k): jsonable(v, keep_arrays=keep_arrays) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v, keep_arrays=keep_arrays) for v in value]
    if isinstance(value, (float, np.floating)):
        return shortest_float32(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def shortest_float32(value: float) -> float | None:
    """``value`` as the float whose repr is its shortest float32 decimal; None if not finite."""
    value = float(value)
    if not math.isfinite(value) or abs(value) > 3.4028234e38:
        return None
    return float(repr(np.float32(value)).removeprefix("np.float32(").removesuffix(")"))


def dumps(document: dict, *, indent: int | None = None) -> str:
    """JSON text; float32 arrays print their shortest float32 form (0.74, not 0.7403098344802856)."""
    option = orjson.OPT_SERIALIZE_NUMPY | (orjson.OPT_INDENT_2 if indent else 0)
    return orjson.dumps(jsonable(document, keep_arrays=True), option=option).decode()


def as_json(document: dict) -> dict:
    """The document as ``--json`` prints it, read back: JSON types only (lists, not arrays; float32
    values in their shortest form), so a library call's result equals the command's output."""
    return orjson.loads(dumps(document))


def emit_json(document: dict) -> None:
    sys.stdout.write(dumps(document, indent=2 if sys.stdout.isatty() else None) + "\n")
    sys.stdout.flush()


def check_output_path(path: str | os.PathLike, setting: str) -> Path:
    """Refuse, before any long work, an output file that could not be written: a directory, a missing
    or non-folder parent, a folder where no file can be made (read-only, no permission) or a full
    disk. Every command that writes a file runs it first, so minutes of work are never lost to a typo.
    DataError names the path and ``setting`` (``{out}``, shown by the CLI as its flag)."""
    path = Path(path)
    where = f"{{{setting}}} {path}"
    if path.is_dir():
        raise DataError(f"{where}: is a directory; give a file name", setting)
    parent = path.parent
    if not parent.exists():
        raise DataError(f"{where}: no such folder {str(parent)!r}", setting)
    if not parent.is_dir():
        raise DataError(f"{where}: {str(parent)!r} is not a folder", setting)
    import tempfile  # lazy: only commands that write a file (--out) need it

    try:
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=parent)
        os.close(fd)
        os.unlink(probe)
        free = os.statvfs(parent).f_bavail if hasattr(os, "statvfs") else None
    except OSError as exc:
        raise DataError(f"{where}: cannot write in {str(parent)!r} ({exc.strerror or exc})", setting) from None
    if free == 0:
        raise DataError(f"{where}: cannot write in {str(parent)!r} (no space left on the device)", setting)
    return path


@contextmanager
def atomic_file(path: Path) -> Iterator:
    """Open a temporary file beside ``path`` for binary writing; on success it is synced and renamed
    to ``path`` (mode 0644), on any error removed, so no half-written file is ever left."""
    import tempfile  # lazy: as in the check above

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp_name, 0o644)  # mkstemp makes 0600; a store is not a secret
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


# ------------------------------------------------------------------------------ the Projector's TSV
# The TensorBoard Embedding Projector (projector.tensorflow.org, "Load") reads two files: vectors.tsv,
# a row of tab-separated numbers per point and no header, and metadata.tsv, a row per point (with a
# header row when it has more than one column). A field may hold no tab and no line break.
PROJECTOR_HEADER = ("line", "position", "text")  # batch --format projector's metadata columns


def tsv_field(value) -> str:
    """A metadata field as the Projector reads it: a tab or line break inside becomes a space."""
    return "" if value is None else " ".join(str(value).replace("\t", " ").splitlines())


def vectors_tsv(vectors: np.ndarray) -> str:
    """(n, d) vectors as vectors.tsv rows: each value the shortest text of its float32 (as JSON spells it)."""
    rows = (orjson.dumps(row, option=orjson.OPT_SERIALIZE_NUMPY)[1:-1].replace(b",", b"\t") for row in vectors)
    return "".join(row.decode() + "\n" for row in rows)


def metadata_tsv(*rows) -> str:
    """metadata.tsv rows (each a sequence of fields), tab-separated, one line each."""
    return "".join("\t".join(map(tsv_field, row)) + "\n" for row in rows)


def projector_paths(path: str | os.PathLike) -> tuple[Path, Path]:
    """Where a Projector pair goes: ``map.tsv`` -> (map.tsv, map-metadata.tsv); a folder (an existing
    one, or a path without a suffix) -> (folder/vectors.tsv, folder/metadata.tsv)."""
    path = Path(path)
    if path.suffix.lower() == ".tsv":
        return path, path.with_name(f"{path.stem}-metadata.tsv")
    return path / "vectors.tsv", path / "metadata.tsv"


def write_projector(path: str | os.PathLike, vectors: np.ndarray, header: tuple, rows: list) -> tuple[Path, Path]:
    """The Projector pair for (n, d) ``vectors`` and n metadata ``rows`` under ``header``, each file
    written atomically (:func:`projector_paths` says where). Returns the two paths."""
    paths = projector_paths(path)
    texts = (vectors_tsv(vectors), metadata_tsv(header, *rows))
    try:
        for target, text in zip(paths, texts, strict=True):
            with atomic_file(target) as fh:
                fh.write(text.encode("utf-8"))
    except OSError as exc:
        raise DataError(f"{{save}} {path}: cannot write ({exc.strerror or exc})", "save") from None
    return paths
