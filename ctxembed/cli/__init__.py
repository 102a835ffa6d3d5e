"""The ctxembed command line: thin commands over the library; errors become exit codes here.

Exit codes: 0 success, 1 data or runtime error, 2 usage error. Every error is one line on
stderr, ``ctxembed: error: ...``; set CTXEMBED_DEBUG=1 to see a traceback instead. Library
errors name settings; :func:`reports_errors` shows them as the flags they come from.

Each command group lives in a module of this package (``attend``: attend, compare, neighbors,
batch, side-by-side; ``vectors``; ``eval``; ``senses``; ``train``; ``models``; ``serve``),
registered on :data:`app` when the package is imported.
"""

from __future__ import annotations

import errno
import functools
import importlib
import os
import signal
import sys
import warnings
from typing import Annotated

from ctxembed.batch.process import batch_process

_PROCESS = batch_process(sys.argv)  # batch's process tricks, decided before numpy loads: see ctxembed.batch.process

import typer

from ctxembed import __version__
from ctxembed.cli.help import FullSummaryGroup
from ctxembed.cli.options import error_message
from ctxembed.errors import CtxembedError, DataError, Interrupted, OutputClosed, UsageError
from ctxembed.output import emit_json, say, stdout_console

# click's exception base, wherever this typer keeps click (recent typers vendor it).
_ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


class _OneLineErrors(FullSummaryGroup):
    """Report click's usage errors as one line on stderr (exit 2) instead of a boxed panel.

    Interrupts and a closed stdout are turned into exceptions click does not catch (it would
    exit 130 silently on Ctrl-C and 1 on EPIPE), and handled here: ``ctxembed: interrupted`` with
    exit 130 or 143, and a silent exit 0 when the reader of our output has gone."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise Interrupted(signal.SIGINT) from None
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                raise OutputClosed() from None
            if exc.errno in _DISK_FULL:
                raise OutputFailed(exc.strerror) from None
            raise

    def main(self, *args, standalone_mode: bool = True, **kwargs):
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except Interrupted as exc:
            if not standalone_mode:
                raise
            _exit_interrupted(exc)
        except OutputClosed:
            if not standalone_mode:
                raise
            _exit_output_closed()
        except OutputFailed as exc:
            if not standalone_mode:
                raise
            _exit_output_failed(exc)
        except _ClickException as exc:
            if not standalone_mode:
                raise
            if type(exc).__name__ == "NoArgsIsHelpError":  # bare `ctxembed` or `ctxembed vectors`: help, no error
                say(exc.format_message(), lines=True)
            else:
                say(f"ctxembed: error: {exc.format_message()}")
            sys.exit(exc.exit_code)
        except typer.Abort:
            say("ctxembed: aborted")
            sys.exit(130)
        if standalone_mode:
            sys.exit(code if isinstance(code, int) else 0)
        return code


app = typer.Typer(
    cls=_OneLineErrors,
    help="See how self-attention turns static word vectors into contextual ones.",
    epilog="Start with: ctxembed compare --word bank 'we sat on the river bank' 'I paid the bank'",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        print(f"ctxembed {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", help="Print the version and exit.", callback=_print_version, is_eager=True),
    ] = False,
) -> None:
    """See how self-attention turns static word vectors into contextual ones."""


def reports_errors(command=None, /, **spelled: str):
    """Turn domain errors into one stderr line (settings named by their flags) and their exit code.
    ``spelled``: how this command spells a setting it takes as its argument, not by its flag
    (``@reports_errors(model="NAME")``: ``models space NAME``)."""
    if command is None:
        return functools.partial(reports_errors, **spelled)

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except CtxembedError as exc:
            if os.environ.get("CTXEMBED_DEBUG"):
                raise
            say(f"ctxembed: error: {error_message(exc, spelled)}")
            raise typer.Exit(exc.exit_code) from None

    return wrapper


def say_warnings(doc: dict) -> None:
    """The document's ``warnings`` (its sentences' vectors are mostly guesses), one line each on stderr."""
    for line in doc.get("warnings", ()):
        say(f"warning: {line}")


def show(doc: dict, json_out: bool, renderer: str, **view) -> None:
    """Print a document: as JSON, or laid out by the view ``renderer`` with the options ``view`` (a
    function of :mod:`ctxembed.views.render`, or ``"module.function"`` of another ``ctxembed.views``
    module); its warnings on stderr either way."""
    say_warnings(doc)
    if json_out:
        emit_json(doc)
        return
    module, _, name = renderer.rpartition(".")
    views = importlib.import_module(f"ctxembed.views.{module or 'render'}")  # rich tables: --json never needs them
    getattr(views, name)(stdout_console(), doc, **view)


STDIN_LIMIT = 4 << 20  # bytes: the batch line limit at the largest --max-tokens (4096 x 1 KiB)


def read_stdin(what: str, limit: int = STDIN_LIMIT) -> str:
    """All of stdin as text, read in pieces and refused as soon as it passes ``limit`` bytes (a
    runaway input costs neither memory nor time); a usage error on a terminal (nothing piped)."""
    if sys.stdin is None:  # started with stdin closed (<&-)
        raise UsageError(f"give a {what} (stdin is closed)")
    if sys.stdin.isatty():
        raise UsageError(f"give a {what} or pipe text on stdin")
    stream = sys.stdin.buffer if hasattr(sys.stdin, "buffer") else None
    pieces, size = [], 0
    while size <= limit:
        piece = stream.read(1 << 16) if stream is not None else sys.stdin.read(1 << 16).encode()
        if not piece:
            break
        pieces.append(piece)
        size += len(piece)
    if size > limit:
        raise DataError(f"stdin is longer than {limit:,} bytes: too long for a {what} (use 'ctxembed batch' for many)")
    data = b"".join(pieces)
    from ctxembed.vectors.corpus import not_text  # loads gzip and zlib: only for a command that reads stdin

    if (problem := not_text(data[: 1 << 16])) is not None:
        raise DataError(f"stdin: {problem}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"stdin is not valid UTF-8 (byte {exc.start})") from None


def read_sentence(sentence: str | None, command: str) -> str:
    """A sentence argument, or one sentence on stdin when it is "-" or missing; several lines are
    an error pointing at the commands made for them."""
    if sentence is not None and sentence != "-":
        return sentence
    lines = [line.strip() for line in read_stdin("SENTENCE").splitlines() if line.strip()]
    if len(lines) > 1:
        raise UsageError(
            f"stdin has {len(lines)} lines, and {command} takes one sentence: use "
            f"'ctxembed batch' for one result per line, or 'ctxembed compare -' to compare them"
        )
    return lines[0] if lines else ""


__all__ = ["app", "main", "read_sentence", "read_stdin", "reports_errors", "show"]

# The command groups register themselves on `app`.
from ctxembed.cli import attend as _attend  # noqa: E402, F401
from ctxembed.cli import eval as _eval  # noqa: E402, F401
from ctxembed.cli import models as _models  # noqa: E402, F401
from ctxembed.cli import serve as _serve  # noqa: E402, F401
from ctxembed.cli import train as _train  # noqa: E402, F401
from ctxembed.cli import vectors as _vectors  # noqa: E402, F401


def _exit_interrupted(exc: Interrupted) -> None:
    say("ctxembed: interrupted")
    sys.exit(exc.exit_code)


def _exit_output_closed(code: int = 0) -> None:
    """The reader left (``| head``): not an error of ours. Later writes and the final flush go to
    /dev/null, so Python does not complain about the closed pipe at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    sys.exit(code)


# A write to stdout that fails because the disk or device is full (``> /dev/full``) or a file is too big
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class OutputFailed(Exception):
    """stdout could not be written (disk full): one error line, exit 1."""


def _exit_output_failed(exc: OutputFailed) -> None:
    """Say why stdout failed, then point it at /dev/null so the final flush of what is still buffered
    does not fail again (Python would print 'Exception ignored' at exit)."""
    say(f"ctxembed: error: cannot write the output: {exc}")
    _exit_output_closed(code=1)


def _terminate(signum, frame) -> None:
    raise Interrupted(signum)


def check_arguments(arguments: list[str]) -> None:
    """Command-line bytes that are not UTF-8 (Python keeps them as lone surrogates) would reach
    the JSON encoder or the tokenizer; refuse them up front, unless the argument names a file."""
    for number, argument in enumerate(arguments, start=1):
        try:
            argument.encode("utf-8")
        except UnicodeEncodeError:
            if os.path.lexists(argument):
                continue  # a file name in another encoding: fine, it is only opened
            shown = argument.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            raise UsageError(f"argument {number} is not valid UTF-8: {shown!r}") from None


def _build_only(argv: list[str]) -> None:
    """Typer builds every command's click options at each start, and most commands carry every
    attention option: a run that names its command builds only that one (the cold-start rows of
    ``make bench`` measure what it saves). Help, completion, --version and unknown names keep the
    whole tree."""
    if len(argv) < 2 or any(key.endswith("_COMPLETE") for key in os.environ):
        return
    name = argv[1]
    commands = [c for c in app.registered_commands if (c.name or c.callback.__name__.lower().replace("_", "-")) == name]
    groups = [g for g in app.registered_groups if g.name == name]
    if commands or groups:
        app.registered_commands[:] = commands
        app.registered_groups[:] = groups


def main() -> None:
    """Console-script entry point: one line per unexpected error, never a traceback."""
    with _PROCESS:
        _main()


def _main() -> None:
    try:
        signal.signal(signal.SIGTERM, _terminate)  # stop like Ctrl-C, with exit 143
    except (ValueError, OSError):  # not the main thread
        pass

    # numpy's RuntimeWarnings are not for users: a NaN or overflow that matters is an error naming
    # its stage (Engine.run), never a warning on stderr
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    # nor are the libraries' own warnings (scikit-learn's ConvergenceWarning, gensim's notes): what
    # matters to a user is turned into a ctxembed note or error where the library is called
    warnings.filterwarnings("ignore", module=r"(sklearn|gensim|scipy|numpy|smart_open|joblib)(\..*)?$")
    try:
        check_arguments(sys.argv[1:])
    except UsageError as exc:
        say(f"ctxembed: error: {exc.message}")
        sys.exit(exc.exit_code)
    _build_only(sys.argv)
    try:
        app()
    except Interrupted as exc:
        _exit_interrupted(exc)
    except KeyboardInterrupt:
        _exit_interrupted(Interrupted(signal.SIGINT))
    except (BrokenPipeError, OutputClosed):
        _exit_output_closed()
    except OutputFailed as exc:
        _exit_output_failed(exc)
    except OSError as exc:
        if exc.errno not in _DISK_FULL or os.environ.get("CTXEMBED_DEBUG"):
            raise
        _exit_output_failed(OutputFailed(exc.strerror))
    except MemoryError:
        say("ctxembed: error: out of memory (try fewer tokens or a smaller --limit)")
        sys.exit(1)
    except Exception as exc:  # a bug: still one line, with a way to get the traceback
        if os.environ.get("CTXEMBED_DEBUG"):
            raise
        say(f"ctxembed: internal error: {type(exc).__name__}: {exc} (set CTXEMBED_DEBUG=1 for a traceback)")
        sys.exit(1)


from ctxembed.cli import senses as _senses  # noqa: E402,F401  (registers `senses` and `eval wsi`)
