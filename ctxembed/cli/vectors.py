"""vectors info, vectors convert: look at a vector source, and turn it into a fast store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ctxembed.cli import app, reports_errors, show
from ctxembed.cli.options import OPTION, declared, draws

# The library modules a command needs are imported inside it: see docs/architecture.md, "Why imports are lazy".

vectors_app = typer.Typer(help="Inspect and convert vector files.", no_args_is_help=True)
app.add_typer(vectors_app, name="vectors")


@vectors_app.command("info", epilog="Example: ctxembed vectors info glove.6B.300d.txt --json")
@reports_errors
@draws
@declared
def vectors_info(
    source: Annotated[str | None, typer.Argument(help="Vector file or gensim-data name (default: shipped).")] = None,
    limit: int | None = OPTION,
    json_out: bool = OPTION,
) -> None:
    """Show a vector source's format, size, dimension, and cache state."""
    from ctxembed.vectors.sources import vectors_info as describe  # this command only: help never needs it

    info = describe(source, limit=limit)
    show(info, json_out, "render_info")


@vectors_app.command("convert", epilog="Example: ctxembed vectors convert wiki-news-300d-1M.vec news.ctxv --quantize")
@reports_errors
@declared
def vectors_convert(
    source: Annotated[str, typer.Argument(help="Vector file or gensim-data name.")],
    out: Annotated[Path, typer.Argument(help="Where to write the ctxembed store (.ctxv).")],
    limit: int | None = OPTION,
    trust: bool = OPTION,
    quantize: Annotated[bool, typer.Option("--quantize", help="Store int8 with one scale per row.")] = False,
    json_out: bool = OPTION,
) -> None:
    """Convert any supported vector file into a ctxembed store that opens in milliseconds."""
    from ctxembed.vectors.sources import convert_vectors  # this command only: help never needs it

    show(convert_vectors(source, out, limit=limit, trust=trust, quantize=quantize), json_out, "render_converted")


@app.command("cache", epilog="Example: ctxembed cache --json")
@reports_errors
@declared
def cache(
    clear: Annotated[
        bool, typer.Option("--clear", help="Delete what ctxembed wrote there (it is rebuilt when next needed).")
    ] = False,
    json_out: bool = OPTION,
) -> None:
    """Show the cache folder (converted vector stores, neighbour search statistics) and its size; --clear empties it."""
    from ctxembed.vectors.cache import cache_document  # this command only

    show(cache_document(clear=clear), json_out, "render_cache")
