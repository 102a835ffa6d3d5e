"""The ctxembed command line: thin commands over the library; errors become exit codes here.

Exit codes: 0 success, 1 data or runtime error, 2 usage error. Every error is one line on
stderr, ``ctxembed: error: ...``; set CTXEMBED_DEBUG=1 to see a traceback instead.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperGroup

from ctxembed.errors import CtxembedError, UsageError
from ctxembed.output import emit_json, say, stdout_console

# click's exception base, wherever this typer keeps click (recent typers vendor it).
_ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


class _OneLineErrors(TyperGroup):
    """Report click's usage errors as one line on stderr (exit 2) instead of a boxed panel."""

    def main(self, *args, standalone_mode: bool = True, **kwargs):
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except _ClickException as exc:
            if not standalone_mode:
                raise
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
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
)
vectors_app = typer.Typer(help="Inspect and convert vector files.", no_args_is_help=True)
app.add_typer(vectors_app, name="vectors")


def reports_errors(command):
    """Turn domain errors into one stderr line and their exit code."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except CtxembedError as exc:
            if os.environ.get("CTXEMBED_DEBUG"):
                raise
            say(f"ctxembed: error: {exc.message}")
            raise typer.Exit(exc.exit_code) from None

    return wrapper


# ------------------------------------------------------------------------------ shared options
VectorsOpt = Annotated[
    str | None,
    typer.Option(
        "--vectors",
        envvar="CTXEMBED_VECTORS",
        help="A vector file (word2vec text/binary, GloVe, fastText .vec/.bin, .gz/.bz2, a ctxembed store) "
        "or a gensim-data name such as glove-wiki-gigaword-50. Default: the shipped GloVe 6B 100d.",
        show_default=False,
    ),
]
LimitOpt = Annotated[int | None, typer.Option("--limit", min=1, help="Keep only the N most frequent words.")]
TrustOpt = Annotated[bool, typer.Option("--trust", help="Allow gensim's native .kv/.model files, which are pickles.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document to stdout.")]


def open_store(vectors: str | None, limit: int | None, trust: bool):
    from ctxembed.sources import open_vectors

    return open_vectors(vectors, limit=limit, trust=trust, on_convert=say)


# ------------------------------------------------------------------------------ vectors
@vectors_app.command("info")
@reports_errors
def vectors_info(
    source: Annotated[str | None, typer.Argument(help="Vector file or gensim-data name (default: shipped).")] = None,
    limit: LimitOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show a vector source's format, size, dimension, and cache state."""
    from ctxembed.sources import describe

    info = describe(source, limit=limit)
    if json_out:
        emit_json({"schema": "ctxembed.vectors-info/1", **info})
        return
    from ctxembed.render import render_info

    render_info(stdout_console(), info)


@vectors_app.command("convert")
@reports_errors
def vectors_convert(
    source: Annotated[str, typer.Argument(help="Vector file or gensim-data name.")],
    out: Annotated[Path, typer.Argument(help="Where to write the ctxembed store (.ctxv).")],
    limit: LimitOpt = None,
    trust: TrustOpt = False,
    quantize: Annotated[bool, typer.Option("--quantize", help="Store int8 with one scale per row.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Convert any supported vector file into a ctxembed store that opens in milliseconds."""
    from ctxembed.formats import detect_format
    from ctxembed.sources import convert, resolve
    from ctxembed.store import VectorStore, write_store

    resolved = resolve(source)
    fmt = "ctxembed-store" if resolved.kind == "default" else detect_format(resolved.path)
    if out.exists() and out.is_dir():
        raise UsageError(f"{out}: is a directory; give a file name for the store")
    if fmt == "ctxembed-store":
        store = VectorStore.open(resolved.path)
        store = store.head(limit) if limit and limit < len(store) else store
        write_store(out, store.words, store.matrix(), quantize=quantize, meta=dict(store.meta, format=fmt))
    else:
        convert(resolved.path, fmt, out, limit=limit, trust=trust, quantize=quantize)
    store = VectorStore.open(out)
    result = {
        "source": source,
        "format": fmt,
        "out": str(out),
        "words": len(store),
        "dim": store.dim,
        "dtype": store.dtype,
        "bytes": out.stat().st_size,
    }
    if json_out:
        emit_json({"schema": "ctxembed.vectors-convert/1", **result})
    else:
        say(f"wrote {out}: {len(store):,} words x {store.dim} dimensions ({store.dtype}, {result['bytes']:,} bytes)")


def main() -> None:
    """Console-script entry point: one line per unexpected error, never a traceback."""
    try:
        app()
    except BrokenPipeError:
        # `ctxembed batch ... | head`: the reader left; that is not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(0)
    except KeyboardInterrupt:
        say("ctxembed: interrupted")
        sys.exit(130)
    except MemoryError:
        say("ctxembed: error: out of memory (try fewer tokens or a smaller --limit)")
        sys.exit(1)
    except Exception as exc:  # a bug: still one line, with a way to get the traceback
        if os.environ.get("CTXEMBED_DEBUG"):
            raise
        say(f"ctxembed: internal error: {type(exc).__name__}: {exc} (set CTXEMBED_DEBUG=1 for a traceback)")
        sys.exit(1)
