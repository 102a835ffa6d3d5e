"""serve: the live page, a local server whose JSON answers are the documents of --json."""

from __future__ import annotations

from typing import Annotated

import typer

from ctxembed.cli import app, reports_errors
from ctxembed.cli.options import OPTION, declared


@app.command(epilog="Example: ctxembed serve --open   # needs: a person to type, and to stop it with Ctrl-C")
@reports_errors
@declared
def serve(
    vectors: str | None = OPTION,
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port (0: any free one).")] = 8765,
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on; anything but loopback lets other machines in.")
    ] = "127.0.0.1",
    open_browser: Annotated[bool, typer.Option("--open", help="Open the page in the default browser.")] = False,
    limit: int | None = OPTION,
    trust: bool = OPTION,
) -> None:
    """A live page: type a sentence and watch attention change; compare, explain, neighbours.

    The URL goes to stderr; the page's settings are chosen on the page, the vectors here."""
    from ctxembed.serve.server import serve as run  # serve only

    run(vectors, host=host, port=port, limit=limit, trust=trust, open_browser=open_browser)
