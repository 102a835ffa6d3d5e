"""One training run from a corpus file to a weights file: what ``ctxembed train`` does, as a library
call (``ctxembed.train_weights``; docs/api.md shows it at work)."""

from __future__ import annotations

from collections.abc import Callable
from os import PathLike
from pathlib import Path
from typing import Any

from ctxembed.engine.registry import DEFAULT_MODEL, check_trainable, entry_of
from ctxembed.errors import SettingError, UsageError
from ctxembed.output import as_json, check_output_path, say
from ctxembed.presets import FINETUNE_DEFAULTS, SETTINGS, TRAIN_OPTIONS, TrainOptions
from ctxembed.progress import Training
from ctxembed.train.checkpoint import read_checkpoint, write_checkpoint, write_trained
from ctxembed.train.corpus import read_corpus
from ctxembed.train.trainer import Trainer, initial_params, training_settings
from ctxembed.vectors.sources import open_vectors


def checkpoint_path(out: str | PathLike) -> Path:
    """Where a run writing ``out`` keeps its checkpoint: ``w.npz`` -> ``w.checkpoint.npz``."""
    out = Path(out)
    return out.with_name(out.name.removesuffix(".npz") + ".checkpoint.npz")


def train_weights(
    corpus: str | PathLike,
    out: str | PathLike | None = None,
    *,
    vectors: str | PathLike | None = None,
    limit: int | None = None,
    trust: bool = False,
    checkpoint: str | PathLike | None = None,
    resume: bool = False,
    on_note: Callable[[str], None] | None = say,
    model: str = DEFAULT_MODEL,
    name: str | None = None,
    freeze: bool = False,
    batch_pairs: int | None = None,
    **keywords: Any,
) -> dict:
    """Train W_query, W_key, W_value (and W_out) on ``corpus`` (a text file, ``.gz``, or ``"-"`` for
    stdin) and write them to ``out``; return the ``ctxembed.train/1`` document, as ``ctxembed train
    --json`` prints it.

    ``keywords`` are the training options (:class:`ctxembed.presets.TrainOptions`: ``epochs``, ``lr``,
    ``batch_tokens``, ...) and the settings of the architecture trained (``layers``, ``heads``, ...;
    training's defaults are :data:`ctxembed.presets.TRAIN_DEFAULTS`). Ctrl-C stops at the next step
    and writes ``checkpoint`` (default :func:`checkpoint_path`) instead of ``out``; the document then
    says ``"interrupted": true`` and ``resume=True`` continues from it. Notes and the per-epoch loss go
    to ``on_note`` (None: nowhere); a progress bar is drawn when stderr is a terminal. ``model``: the
    model whose attention is trained, the default (glove). A trained model (``--model minilm``) is trained
    on labelled pairs into derived model ``name`` instead (``corpus``: the pairs; ``freeze``: ELMo's way;
    :func:`ctxembed.train.derived.train_derived`), and returns its ``ctxembed.train-derived/1`` document.
    """
    note = on_note or (lambda text: None)
    unknown = sorted(set(keywords) - set(TRAIN_OPTIONS) - set(SETTINGS))
    if unknown:
        raise SettingError(f"unknown training option(s): {', '.join(unknown)}")
    given = {k: v for k, v in keywords.items() if k in TRAIN_OPTIONS and v is not None}
    if entry_of(model).trained:
        return _train_derived(corpus, out, model, name, freeze, batch_pairs, given, keywords, checkpoint, resume, note)
    derived_only = [flag for flag, value in (("name", name), ("freeze", freeze), ("batch_pairs", batch_pairs)) if value]
    if derived_only:
        raise UsageError(
            f"{{{derived_only[0]}}} trains a derived model of a trained model ({{model}} minilm); the {model} "
            "model's training learns its attention into {out}", derived_only[0], "out", "model"
        )  # fmt: skip
    if out is None:
        raise UsageError("train the glove model's attention into a weights file: give {out}", "out")
    check_trainable(model, "train")
    options = TrainOptions(**given)
    architecture = {k: v for k, v in keywords.items() if k not in TRAIN_OPTIONS}
    out = Path(out)
    checkpoint = Path(checkpoint) if checkpoint is not None else checkpoint_path(out)
    if out.resolve() == checkpoint.resolve():
        raise UsageError("{checkpoint} must differ from {out}", "checkpoint", "out")
    if str(corpus) == "-" and resume:
        raise UsageError("{resume} needs the corpus as a file (stdin cannot be read again)", "resume")
    check_output_path(out, "out")
    check_output_path(checkpoint, "checkpoint")
    settings = training_settings(seed=options.seed, **architecture)
    store = open_vectors(vectors, limit=limit, trust=trust, on_convert=note)
    initial_params(settings, store.dim, options.fix_values)  # an impossible architecture fails before reading
    note(f"reading {corpus} ...")
    text = read_corpus(corpus, store, max_tokens=options.max_tokens, name="stdin" if str(corpus) == "-" else corpus)
    trainer = Trainer(store, text, settings, options, corpus_name=str(corpus))
    state = read_checkpoint(checkpoint, store, settings, options, text) if resume else None
    _announce(note, text.stats, trainer, resume=state is not None)
    with Training(trainer.total_steps, note) as progress:
        result = trainer.run(resume=state, on_step=progress.on_step, on_epoch=progress.on_epoch, stop=progress.stop)
    if result.interrupted:
        write_checkpoint(result, checkpoint, options)
        note(
            f"interrupted at step {result.report['steps']} of {trainer.total_steps}: checkpoint written to "
            f"{checkpoint}; run the same command with --resume to continue"
        )
    else:
        write_trained(result, out, options)
        if resume:
            checkpoint.unlink(missing_ok=True)
    return as_json(dict(result.report, out=None if result.interrupted else str(out), checkpoint=str(checkpoint)))


def _train_derived(corpus, out, model, name, freeze, batch_pairs, given, keywords, checkpoint, resume, note) -> dict:
    """A trained model's training: the settings and options that apply to the glove model's are refused."""
    from ctxembed.train.derived import train_derived  # a trained model's training only

    refused = [k for k, v in keywords.items() if k not in TRAIN_OPTIONS and v is not None]
    refused += [k for k in ("batch_tokens", "mask_rate", "negatives", "fix_values", "max_tokens") if k in given]
    refused += ["out"] if out is not None else []
    if refused:
        raise UsageError(
            f"{{{refused[0]}}} does not apply to training {model}: it writes a derived model ({{name}}) from "
            "labelled pairs", refused[0], "name"
        )  # fmt: skip
    options = TrainOptions(**({k: v for k, v in FINETUNE_DEFAULTS.items() if k in TRAIN_OPTIONS} | given))
    return as_json(
        train_derived(
            corpus, model=model, name=name, freeze=freeze, options=options,
            batch_pairs=batch_pairs or FINETUNE_DEFAULTS["batch_pairs"], checkpoint=checkpoint, resume=resume,
            on_note=note,
        )
    )  # fmt: skip


def _announce(note: Callable[[str], None], stats: dict, trainer: Trainer, *, resume: bool) -> None:
    cropped = stats["cropped_sentences"] + stats["cropped_lines"]
    notes = [f"{stats['sentences']:,} sentences, {stats['tokens']:,} tokens, {stats['vocabulary']:,} words"]
    if stats["oov_tokens"]:
        notes.append(f"{stats['oov_tokens']:,} out-of-vocabulary tokens left out")
    if cropped:
        notes.append(f"{cropped:,} over-long lines or sentences cropped")
    if stats["invalid_lines"]:
        notes.append(f"{stats['invalid_lines']:,} lines that are not UTF-8 text skipped")
    note("; ".join(notes))
    held = trainer.held_out_batches
    note(
        f"{'resuming: ' if resume else ''}{trainer.total_steps:,} steps ({trainer.batches_per_epoch:,} per epoch), "
        f"{len(trainer.held_out_ids):,} sentences held out" + ("" if held else " (no held-out loss)")
    )
