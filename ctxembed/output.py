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
import stat
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


# ------------------------------------------------------------------------------ files a command writes
# A file at --out or --save is written in one of two ways (docs/robustness.md, "Output files"):
# - a new path or an existing regular file: into a temporary file beside it, renamed over it once whole
#   (a symbolic link to a file stays a link: the file it names is replaced), so a failed or interrupted
#   run leaves the old file or none, never half of one;
# - an existing device, FIFO or socket, or a path under /dev or /proc (/dev/stdout, /dev/fd/3): written
#   through, as `cat > F` would, and never replaced: /dev/null stays a device, a FIFO stays a FIFO.
# A directory is refused. Files are made with the mode the umask gives (0644 under umask 022).
_WRITTEN_THROUGH = ("/dev/", "/proc/")


def writes_through(path: str | os.PathLike) -> bool:
    """Whether ``path`` is written through rather than replaced: an existing device, FIFO or socket, or
    an existing path under /dev or /proc (/dev/stdout names whatever stdout is, a file included)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False  # new (or unreadable: the write says why)
    if stat.S_ISDIR(mode):
        return False
    return not stat.S_ISREG(mode) or os.path.abspath(path).startswith(_WRITTEN_THROUGH)


def check_output_path(path: str | os.PathLike, setting: str) -> Path:
    """Refuse, before any long work, an output file that could not be written: a directory, a missing
    or non-folder parent, a folder where no file can be made (read-only, no permission) or a full
    disk. Every command that writes a file runs it first, so minutes of work are never lost to a typo.
    A device, FIFO or /dev/stdout (written through) needs only to be writable. DataError names the path
    and ``setting`` (``{out}``, shown by the CLI as its flag)."""
    path = Path(path)
    where = f"{{{setting}}} {path}"
    if path.is_dir():
        raise DataError(f"{where}: is a directory; give a file name", setting)
    if writes_through(path):
        if not os.access(path, os.W_OK):
            raise DataError(f"{where}: cannot write (permission denied)", setting)
        return path
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


def new_temp(path: Path, suffix: str) -> Path:
    """A new empty file beside ``path`` (``.NAME.RANDOM`` + ``suffix``), made with the umask's mode as
    any file this tool writes (tempfile.mkstemp's are 0600 whatever the umask). OSError as the system
    gives it."""
    import secrets  # lazy: only commands that write a file need it

    while True:
        temp = path.parent / f".{path.name}.{secrets.token_hex(4)}{suffix}"
        try:
            os.close(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666))
            return temp
        except FileExistsError:
            continue


class OutputFile:
    """A file a command writes at ``path`` for ``setting`` (see above): :attr:`name` is where to write
    (a temporary file beside it, or the path itself when it is written through), :meth:`commit` puts
    it in place, :meth:`abort` removes what a failed run wrote. Errors are DataErrors naming the
    setting's flag and the path (:meth:`writing`)."""

    def __init__(self, path: str | os.PathLike, setting: str):
        self.path, self.setting = Path(path), setting
        if self.path.is_dir():
            raise DataError(f"{{{setting}}} {self.path}: is a directory; give a file name", setting)
        self.temp: Path | None = None
        if writes_through(self.path):
            self.target = self.path
        else:
            self.target = Path(os.path.realpath(self.path))  # a link to a file stays a link
            with self.writing():
                self.temp = new_temp(self.target, ".partial")

    @property
    def name(self) -> Path:
        return self.path if self.temp is None else self.temp

    def open(self, mode: str = "wb", **kwargs):
        """The file to write, opened (truncated, as `cat > F`; a FIFO waits for its reader, as cat does)."""
        with self.writing():
            return open(self.name, mode, **kwargs)  # noqa: SIM115 - the caller closes it (finish)

    @contextmanager
    def writing(self) -> Iterator[None]:
        """An OSError inside (a full disk, a closed reader, no permission) as one DataError naming the setting."""
        try:
            yield
        except OSError as exc:  # pyarrow's ArrowIOError is one too
            raise DataError(
                f"cannot write {{{self.setting}}} {self.path}: {exc.strerror or exc}", self.setting
            ) from None

    def commit(self, *, sync: bool = False) -> None:
        """The temporary file renamed over the path (``sync``: its data on disk first); nothing to do
        for a file written through."""
        if self.temp is None:
            return
        with self.writing():
            if sync:
                fd = os.open(self.temp, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            os.replace(self.temp, self.target)

    def abort(self) -> None:
        """Remove the temporary file (what was written through stays written, as with cat)."""
        if self.temp is not None:
            self.temp.unlink(missing_ok=True)


def finish_outputs(complete: bool, outputs: list[tuple[OutputFile, Any]]) -> None:
    """Close each (file, stream) pair's stream (None: nothing open) and, when ``complete``, commit every
    file. On an error there (a full disk at the last flush), or when not complete, every stream is
    closed quietly and every temporary file removed, so a failed run leaves nothing behind; the error
    is raised as one DataError naming the setting."""
    if complete:
        try:
            for file, stream in outputs:
                if stream is not None:
                    with file.writing():
                        stream.close()
            for file, _ in outputs:
                file.commit()
            return
        except BaseException:
            _discard(outputs)
            raise
    _discard(outputs)


def _discard(outputs: list[tuple[OutputFile, Any]]) -> None:
    """What a failed run wrote: streams closed (their errors add nothing to the run's), temporary files removed."""
    for file, stream in outputs:
        if stream is not None:
            try:
                stream.close()
            except Exception:  # noqa: BLE001, S110 - a full disk again, say: the run's own error is the one told
                pass
        file.abort()


def write_output(path: str | os.PathLike, data: bytes, setting: str) -> None:
    """``data`` at ``path`` (replaced atomically, synced first, or written through: see above);
    DataError naming ``setting`` when it cannot be written, and no temporary file left."""
    write_outputs({path: data}, setting)


def write_outputs(files: dict, setting: str) -> None:
    """Each ``{path: bytes}`` written as :func:`write_output` does, all put in place together at the end:
    when one fails, none of the temporary files is left and none replaces its path."""
    outputs: list[tuple[OutputFile, Any]] = []
    try:
        for path, data in files.items():
            file = OutputFile(path, setting)
            outputs.append((file, None))
            stream = file.open("wb")
            outputs[-1] = (file, stream)
            with file.writing():
                stream.write(data)
                stream.flush()
                if file.temp is not None:
                    os.fsync(stream.fileno())
    except BaseException:
        finish_outputs(False, outputs)
        raise
    finish_outputs(True, outputs)


@contextmanager
def atomic_file(path: Path) -> Iterator:
    """Open a temporary file beside ``path`` for binary writing; on success it is synced and renamed
    to ``path`` (with the umask's mode), on any error removed, so no half-written file is ever left.
    A device or FIFO (``train --out /dev/stdout``) is written through, and a symbolic link to a file stays
    a link (the file it names is replaced), as :class:`OutputFile` does."""
    if writes_through(path):
        with open(path, "wb") as fh:
            yield fh
        return
    path = Path(os.path.realpath(path))  # a link to a file stays a link
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = new_temp(path, ".tmp")
    try:
        with open(temp, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
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


def check_projector_path(path: str | os.PathLike, setting: str) -> None:
    """Refuse, before any work, a Projector pair that could not be written at ``path``: a ``.tsv`` name
    that is a directory (or its ``-metadata.tsv``), a folder name that is a file, or the checks of
    :func:`check_output_path` on the two files of an existing folder. DataError naming ``setting``."""
    path = Path(path)
    if path.suffix.lower() != ".tsv":
        if path.exists() and not path.is_dir():
            raise DataError(f"{{{setting}}} {path}: a Projector pair goes in a folder, and this is a file", setting)
        if not path.exists():
            return  # made when the pair is written
    for target in projector_paths(path):
        check_output_path(target, setting)


def write_projector(path: str | os.PathLike, vectors: np.ndarray, header: tuple, rows: list) -> tuple[Path, Path]:
    """The Projector pair for (n, d) ``vectors`` and n metadata ``rows`` under ``header``, each file
    written atomically (:func:`projector_paths` says where). Returns the two paths."""
    paths = projector_paths(path)
    texts = (vectors_tsv(vectors), metadata_tsv(header, *rows))
    try:
        paths[0].parent.mkdir(parents=True, exist_ok=True)  # a folder: made when missing
    except OSError as exc:
        raise DataError(f"{{save}} {path}: cannot make the folder ({exc.strerror or exc})", "save") from None
    write_outputs({target: text.encode("utf-8") for target, text in zip(paths, texts, strict=True)}, "save")
    return paths
