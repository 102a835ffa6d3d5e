"""``ctxembed train``: learn the projections on a corpus with the masked-word objective."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ctxembed.cli import app, reports_errors, show
from ctxembed.cli.options import (
    OPTION,
    check_saves,
    declared,
    draws,
    option,
    save_all,
    with_declared_options,
    with_setting_options,
)
from ctxembed.output import say
from ctxembed.presets import MODEL_PANEL, SETTINGS, TRAIN_DEFAULTS, TRAIN_OPTIONS, TRAINING_PANEL

# The architecture trained: declared settings (flags, limits and help from their one declaration),
# with training's own defaults (settings.TRAIN_DEFAULTS) shown in the help.
_MODEL_SETTINGS = (
    "layers", "heads", "d_out", "output_projection", "residual",
    "layer_norm", "positions", "position_mode", "exclude_self", "abtt", "sif", "mix", "mix_norm",
)  # fmt: skip

# The library modules a command needs are imported inside it: see docs/architecture.md, "Why imports are lazy".


@app.command(epilog="Example: ctxembed train data/brown.txt.gz --epochs 1 --out my-weights.npz")
@reports_errors
@draws
@with_setting_options(_MODEL_SETTINGS, TRAIN_DEFAULTS, panel=MODEL_PANEL)
@with_declared_options(TRAIN_OPTIONS, into="options")
@declared
def train(
    corpus: Annotated[
        str,
        typer.Argument(
            help="Text, one sentence per line or running text; .gz; '-' for stdin. With --model minilm --name: "
            "labelled pairs (a WiC folder or SPLIT.data.txt, or a TSV: sentence1, sentence2, word or i-j, label)."
        ),
    ],
    out: Path | None = OPTION,
    name: str | None = OPTION,
    freeze: bool = OPTION,
    batch_pairs: int | None = OPTION,
    resume: Annotated[
        bool,
        typer.Option("--resume", help="Continue from the checkpoint Ctrl-C wrote.", rich_help_panel=TRAINING_PANEL),
    ] = False,
    checkpoint: Annotated[
        Path | None,
        typer.Option(
            "--checkpoint", help="Checkpoint file (default: OUT with .checkpoint.npz).", rich_help_panel=TRAINING_PANEL
        ),
    ] = None,
    vectors: str | None = OPTION,
    limit: int | None = OPTION,
    trust: bool = OPTION,
    model: str = OPTION,
    json_out: bool = OPTION,
    save: list[Path] | None = OPTION,
    settings=None,
    options=None,
) -> None:
    """Learn W_query, W_key, W_value and W_out by predicting masked words (NumPy backprop); with --model minilm
    and --name, fine-tune it on labelled pairs (or, --freeze, learn a head over it) into a derived model.

    Ctrl-C writes a checkpoint; run the same command with --resume to continue. The weights work
    with `attend/compare/neighbors --weights OUT`.
    """
    from ctxembed.train.run import train_weights  # train only

    check_saves(save)
    report = train_weights(
        corpus, out, vectors=vectors, limit=limit, trust=trust, checkpoint=checkpoint, resume=resume, on_note=say,
        model=model, name=name, freeze=freeze, batch_pairs=batch_pairs, **settings, **options,
    )  # fmt: skip
    if report["schema"] == "ctxembed.train-derived/1":  # a derived model: its own view, no loss curves
        show(report, json_out, "render_train.render_derived")
    else:
        save_all(report, save)  # the loss curves as a picture or page
        show(report, json_out, "render_train.render_train")
    if report["interrupted"]:
        raise typer.Exit(130)


# before-after's --weights is the setting's (a file `ctxembed train` wrote), with the shipped one as default
_WEIGHTS, _ = option(SETTINGS["weights_file"], shown_default="default: the shipped --preset learned weights")


@app.command("before-after", epilog="Example: ctxembed before-after 'we sat on the river bank' --layer 0")
@reports_errors
@draws
@declared
def before_after(
    sentence: str | None = OPTION,
    weights: _WEIGHTS = None,
    layer: int | None = OPTION,
    head: int | None = OPTION,
    top: int = OPTION,
    vectors: str | None = OPTION,
    limit: int | None = OPTION,
    trust: bool = OPTION,
    model: str = OPTION,
    against: list[str] | None = OPTION,
    word: str | None = OPTION,
    json_out: bool = OPTION,
) -> None:
    """One sentence's attention before training (the same model at its initial weights) and after, side by side.

    With --model NAME (a derived model): its parent's attention and its own, layer by layer and head by head,
    the heads that moved most first; --word W --with SENTENCE adds the word's cosine across the sentences."""
    from ctxembed.cli import read_sentence  # a circle: ctxembed.cli imports this module
    from ctxembed.train.before_after import before_after as compute  # before-after only

    text = read_sentence(sentence, "before-after")
    doc = compute(
        text, weights, vectors=vectors, limit=limit, trust=trust, top=top, layer=layer, head=head, on_note=say,
        model=model, against=against, word=word,
    )  # fmt: skip
    derived = doc["schema"] == "ctxembed.before-after-model/1"  # a derived model beside its parent
    show(doc, json_out, f"render_train.render_before_after{'_model' if derived else ''}", layer=layer, head=head)
