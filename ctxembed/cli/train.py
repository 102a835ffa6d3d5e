"""``ctxembed train``: learn the projections on a corpus with the masked-word objective."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Annotated

import typer

from ctxembed.cli import app, reports_errors
from ctxembed.cli.options import (
    JsonOpt,
    LimitOpt,
    SaveOpt,
    TrustOpt,
    VectorsOpt,
    check_saves,
    save_all,
    with_setting_options,
)
from ctxembed.errors import UsageError
from ctxembed.output import emit_json, say, stderr_console, stdout_console
from ctxembed.settings import TRAIN_DEFAULTS

_PANEL_MODEL = "Model (what is trained)"
_PANEL_TRAINING = "Training"


# The architecture trained: declared settings (flags, limits and help from their one declaration),
# with training's own defaults (settings.TRAIN_DEFAULTS) shown in the help.
_MODEL_SETTINGS = (
    "layers", "heads", "d_out", "output_projection", "residual",
    "layer_norm", "positions", "exclude_self", "abtt", "sif",
)  # fmt: skip


@app.command(epilog="Example: ctxembed train data/brown.txt.gz --epochs 1 --out my-weights.npz")
@reports_errors
@with_setting_options(_MODEL_SETTINGS, TRAIN_DEFAULTS, panel=_PANEL_MODEL)
def train(
    corpus: Annotated[str, typer.Argument(help="Text, one sentence per line or running text; .gz; '-' for stdin.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the weights (.npz).")],
    fix_values: Annotated[
        bool,
        typer.Option(
            "--fix-values", help="Keep W_value = I; learn W_query, W_key (and W_out).", rich_help_panel=_PANEL_MODEL
        ),
    ] = False,
    epochs: Annotated[
        int,
        typer.Option(
            "--epochs", min=0, max=10_000, help="0: write the initial weights.", rich_help_panel=_PANEL_TRAINING
        ),
    ] = 5,
    lr: Annotated[
        float,
        typer.Option("--lr", min=1e-8, max=10.0, help="Adam's peak learning rate.", rich_help_panel=_PANEL_TRAINING),
    ] = 3e-3,
    batch_tokens: Annotated[
        int,
        typer.Option(
            "--batch-tokens", min=8, max=1_000_000, help="Padded tokens per step.", rich_help_panel=_PANEL_TRAINING
        ),
    ] = 512,
    mask_rate: Annotated[
        float,
        typer.Option("--mask-rate", min=0.01, max=0.9, help="Share of tokens masked.", rich_help_panel=_PANEL_TRAINING),
    ] = 0.15,
    negatives: Annotated[
        int,
        typer.Option(
            "--negatives", min=1, max=100_000, help="Sampled negative words per step.", rich_help_panel=_PANEL_TRAINING
        ),
    ] = 512,
    seed: Annotated[
        int,
        typer.Option("--seed", min=0, help="Initial weights and every random choice.", rich_help_panel=_PANEL_TRAINING),
    ] = 0,
    max_tokens: Annotated[
        int,
        typer.Option(
            "--max-tokens", min=1, max=2048, help="Longer sentences are cropped.", rich_help_panel=_PANEL_TRAINING
        ),
    ] = 128,
    held_out: Annotated[
        float,
        typer.Option(
            "--held-out", min=0.0, max=0.9, help="Share of sentences held out.", rich_help_panel=_PANEL_TRAINING
        ),
    ] = 0.1,
    warmup: Annotated[
        int, typer.Option("--warmup", min=0, help="Warm-up steps.", rich_help_panel=_PANEL_TRAINING)
    ] = 100,
    clip: Annotated[
        float,
        typer.Option(
            "--clip", min=0.0, help="Largest gradient norm (0: no clipping).", rich_help_panel=_PANEL_TRAINING
        ),
    ] = 1.0,
    resume: Annotated[
        bool,
        typer.Option("--resume", help="Continue from the checkpoint Ctrl-C wrote.", rich_help_panel=_PANEL_TRAINING),
    ] = False,
    checkpoint: Annotated[
        Path | None,
        typer.Option(
            "--checkpoint", help="Checkpoint file (default: OUT with .checkpoint.npz).", rich_help_panel=_PANEL_TRAINING
        ),
    ] = None,
    vectors: VectorsOpt = None,
    limit: LimitOpt = None,
    trust: TrustOpt = False,
    json_out: JsonOpt = False,
    save: SaveOpt = None,
    settings=None,
) -> None:
    """Learn W_query, W_key, W_value and W_out by predicting masked words (NumPy backprop).

    Ctrl-C writes a checkpoint; run the same command with --resume to continue. The weights work
    with `attend/compare/neighbors --weights OUT`.
    """
    from ctxembed.train import trainer as training

    check_saves(save)

    checkpoint = checkpoint or out.with_name(out.name.removesuffix(".npz") + ".checkpoint.npz")
    if out.resolve() == checkpoint.resolve():
        raise UsageError("--checkpoint must differ from --out")
    if str(corpus) == "-" and resume:
        raise UsageError("--resume needs the corpus as a file (stdin cannot be read again)")
    options = training.TrainOptions(
        epochs=epochs, lr=lr, batch_tokens=batch_tokens, mask_rate=mask_rate, negatives=negatives,
        fix_values=fix_values, max_tokens=max_tokens, held_out=held_out, warmup=warmup, seed=seed, clip=clip,
    )  # fmt: skip
    settings = training.training_settings(seed=seed, **settings)
    from ctxembed.vectors.sources import open_vectors

    store = open_vectors(vectors, limit=limit, trust=trust, on_convert=say)
    training.initial_params(settings, store.dim, fix_values)  # an impossible architecture fails before reading
    say(f"reading {corpus} ...")
    text = training.read_corpus(corpus, store, max_tokens=max_tokens, name="stdin" if corpus == "-" else corpus)
    trainer = training.Trainer(store, text, settings, options, corpus_name=corpus)
    state = training.read_checkpoint(checkpoint, store, settings, options, text) if resume else None
    _announce(text.stats, trainer, resume=state is not None)
    with _progress(trainer.total_steps) as (on_step, on_epoch, stop):
        result = trainer.run(resume=state, on_step=on_step, on_epoch=on_epoch, stop=stop)
    if result.interrupted:
        training.write_checkpoint(result, checkpoint, options)
        say(
            f"interrupted at step {result.report['steps']} of {trainer.total_steps}: checkpoint written to "
            f"{checkpoint}; run the same command with --resume to continue"
        )
    else:
        training.write_trained(result, out, options)
        if resume:
            checkpoint.unlink(missing_ok=True)
    report = dict(result.report, out=None if result.interrupted else str(out), checkpoint=str(checkpoint))
    save_all(report, save)  # the loss curves as a picture or page
    if json_out:
        emit_json(report)
    else:
        from ctxembed.views.render_train import render_train

        render_train(stdout_console(), report)
    if result.interrupted:
        raise typer.Exit(130)


def _announce(stats: dict, trainer, *, resume: bool) -> None:
    cropped = stats["cropped_sentences"] + stats["cropped_lines"]
    notes = [f"{stats['sentences']:,} sentences, {stats['tokens']:,} tokens, {stats['vocabulary']:,} words"]
    if stats["oov_tokens"]:
        notes.append(f"{stats['oov_tokens']:,} out-of-vocabulary tokens left out")
    if cropped:
        notes.append(f"{cropped:,} over-long lines or sentences cropped")
    if stats["invalid_lines"]:
        notes.append(f"{stats['invalid_lines']:,} lines that are not UTF-8 text skipped")
    say("; ".join(notes))
    held = trainer.held_out_batches
    say(
        f"{'resuming: ' if resume else ''}{trainer.total_steps:,} steps ({trainer.batches_per_epoch:,} per epoch), "
        f"{len(trainer.held_out_ids):,} sentences held out" + ("" if held else " (no held-out loss)")
    )


class _progress:
    """A progress bar on a terminal (stderr) and a Ctrl-C that stops at the next step boundary."""

    def __init__(self, total: int):
        self.total = total
        self.stopping = False
        self.bar = None
        self.previous_handler = None
        self.last_epoch = 0

    def __enter__(self):
        if sys.stderr.isatty() and self.total:
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(
                TextColumn("epoch {task.fields[epoch]}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total} steps"),
                TextColumn("loss {task.fields[loss]:.3f}"),
                TextColumn("{task.fields[speed]:,.0f} tokens/s"),
                TimeRemainingColumn(),
                console=stderr_console(),
                transient=True,
            )
            self.task = self.bar.add_task("train", total=self.total, epoch=1, loss=float("nan"), speed=0.0)
            self.bar.start()
        try:
            self.previous_handler = signal.signal(signal.SIGINT, self._interrupt)
        except ValueError:  # not the main thread (e.g. a test runner): Ctrl-C keeps its usual meaning
            self.previous_handler = None
        return self.on_step, self.on_epoch, lambda: self.stopping

    def _interrupt(self, signum, frame):
        if self.stopping:  # a second Ctrl-C: give up at once
            raise KeyboardInterrupt
        self.stopping = True
        say("stopping after this step (Ctrl-C again to abort without a checkpoint) ...")

    def on_step(self, info: dict) -> None:
        if self.bar is not None:
            self.bar.update(
                self.task, completed=info["step"], epoch=info["epoch"], loss=info["loss"],
                speed=info["tokens_per_second"],
            )  # fmt: skip

    def on_epoch(self, entry: dict) -> None:
        if entry["loss"] is None:
            line = f"epoch {entry['epoch']}/{entry['epochs']} done (no held-out sentences)"
        else:
            change = entry["loss"] / entry["initial"] - 1
            line = f"epoch {entry['epoch']}/{entry['epochs']}: held-out loss {entry['loss']:.4f}"
            line += f" ({change:+.1%} from step 0)"
        if self.bar is not None:
            self.bar.console.print(line, highlight=False)
        else:
            say(line)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
        if self.previous_handler is not None:
            signal.signal(signal.SIGINT, self.previous_handler)
        return False


@app.command("before-after", epilog="Example: ctxembed before-after 'we sat on the river bank' --preset learned")
@reports_errors
def before_after(
    sentence: Annotated[str | None, typer.Argument(help="The sentence ('-' or none: read stdin).")] = None,
    weights: Annotated[
        Path | None, typer.Option("--weights", help="Weights written by `ctxembed train` (default: the shipped ones).")
    ] = None,
    layer: Annotated[int | None, typer.Option("--layer", min=0, help="Layer to show (default: the last).")] = None,
    head: Annotated[int | None, typer.Option("--head", min=0, help="Head to show (default: mean of heads).")] = None,
    top: Annotated[int, typer.Option("--top", min=1, help="Most-attended tokens listed per token.")] = 2,
    vectors: VectorsOpt = None,
    limit: LimitOpt = None,
    trust: TrustOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """One sentence's attention before training (the same model at its initial weights) and after, side by side."""
    from ctxembed.cli import read_sentence
    from ctxembed.train.trainer import before_and_after
    from ctxembed.vectors.sources import open_vectors

    text = read_sentence(sentence, "before-after")
    store = open_vectors(vectors, limit=limit, trust=trust, on_convert=say)
    doc = before_and_after(store, text, weights, source=vectors or "default", top=top)
    a = doc["after"]["settings"]["attention"]
    if layer is not None and layer >= a["layers"]:
        raise UsageError(f"--layer {layer} does not exist: there are {a['layers']} layer(s), numbered from 0")
    if head is not None and head >= a["heads"]:
        raise UsageError(f"--head {head} does not exist: there are {a['heads']} head(s), numbered from 0")
    if json_out:
        emit_json(doc)
        return
    from ctxembed.views.render_train import render_before_after

    render_before_after(stdout_console(), doc, layer=a["layers"] - 1 if layer is None else layer, head=head)
