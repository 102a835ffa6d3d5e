"""eval wic, eval senses, eval pairs: how well contextual vectors separate word senses."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from ctxembed.cli import app, reports_errors, show
from ctxembed.cli.options import JsonOpt, with_attention_options
from ctxembed.output import say

eval_app = typer.Typer(help="Measure how well contextual vectors separate word senses.", no_args_is_help=True)
app.add_typer(eval_app, name="eval")


def _config_help() -> str:
    from ctxembed.settings import ladder

    return (
        f"A configuration of the ladder ({', '.join(ladder())}) or 'custom' (the attention options given here). "
        "Repeatable; default: the whole ladder."
    )


ConfigOpt = Annotated[list[str] | None, typer.Option("--config", "-c", help=_config_help())]


def _sweep(names: list[str] | None, explorer, default: tuple[str, ...], evaluate: Callable) -> list[dict]:
    """Evaluate each chosen configuration (default: ``default``); "custom" is the command line's settings."""
    from ctxembed.evaluation.evaluate import named_settings
    from ctxembed.progress import steps

    chosen = names or list(default)
    if not names and "learned" in chosen:
        from ctxembed.vectors.weights import fits_learned_weights

        if not fits_learned_weights(explorer().store):  # trained on the shipped vectors only
            chosen.remove("learned")
    custom = explorer().settings if "custom" in chosen else None
    rows = []
    with steps(f"evaluating {len(chosen)} configuration(s)", total=len(chosen)) as progress:
        for name in chosen:
            progress.describe(f"evaluating {name}")
            settings = named_settings(name, custom)
            rows.append(
                {"name": name, "settings": settings.as_dict() if settings else None, **evaluate(name, settings)}
            )
            progress.done()
    return rows


@eval_app.command("wic", epilog="Example: ctxembed eval wic WiC_dataset/ -c textbook -c default")
@reports_errors
@with_attention_options
def eval_wic(
    directory: Annotated[Path, typer.Argument(help="Folder with SPLIT.data.txt and SPLIT.gold.txt (WiC format).")],
    tune_on: Annotated[str, typer.Option("--tune-on", help="Split whose labels choose the threshold.")] = "train",
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
    explorer=None,
) -> None:
    """Word-in-Context accuracy: same sense or not, by thresholding the cosine of the target's vectors."""
    from ctxembed.evaluation.evaluate import LADDER, evaluate_wic, read_wic
    from ctxembed.progress import enabled

    splits = read_wic(directory)
    store = explorer().store

    def evaluate(name, settings):
        if not enabled():  # a log rather than a terminal (where a bar shows it): one line per configuration
            say(f"evaluating {name} on {', '.join(s.name for s in splits)} ...")
        return evaluate_wic(store, splits, settings, tune_on)

    rows = _sweep(config, explorer, tuple(LADDER), evaluate)
    primary = next((r for r in rows if r["name"] == "default"), rows[0])
    doc = {
        "schema": "ctxembed.eval-wic/1",
        "vectors": explorer().vectors,
        "directory": str(directory),
        "tuned_on": tune_on,
        "config": primary["name"],
        "threshold": primary["threshold"],
        "splits": primary["splits"],
        "configs": rows,
    }
    show(doc, json_out, "render_eval_wic")


@eval_app.command("senses", epilog="Example: ctxembed eval senses -c textbook -c default")
@reports_errors
@with_attention_options
def eval_senses(
    path: Annotated[
        Path | None, typer.Argument(help="word<TAB>sense<TAB>sentence file (default: the shipped polysemy suite).")
    ] = None,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
    explorer=None,
) -> None:
    """The share of ambiguous words whose same-sense pairs all beat their cross-sense pairs."""
    from ctxembed.evaluation.evaluate import LADDER, default_senses_path, evaluate_senses, read_senses

    rows_in = read_senses(path or default_senses_path())
    store = explorer().store
    rows = _sweep(config, explorer, tuple(LADDER), lambda name, settings: evaluate_senses(store, rows_in, settings))
    doc = {
        "schema": "ctxembed.eval-senses/1",
        "vectors": explorer().vectors,
        "file": str(path or default_senses_path()),
        "configs": rows,
    }
    show(doc, json_out, "render_eval_senses")


@eval_app.command("pairs", epilog="Example: ctxembed eval pairs simlex999")
@reports_errors
@with_attention_options
def eval_pairs(
    path: Annotated[
        str,
        typer.Argument(
            help="SCWS-layout file (contexts with <b> word </b>), or a word-pair "
            "file (word1 TAB word2 TAB score), or wordsim353 / simlex999."
        ),
    ],
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
    explorer=None,
) -> None:
    """Graded similarity: Spearman ρ in context (SCWS), or gensim's Pearson and Spearman for word pairs."""
    from ctxembed.evaluation.evaluate import evaluate_scws, evaluate_word_pairs, is_scws, read_scws, resolve_pairs_file

    file = resolve_pairs_file(path)
    store = explorer().store
    if is_scws(file):
        items = read_scws(file)
        rows = _sweep(
            config,
            explorer,
            ("static", "textbook", "previous-default", "default"),  # the default with and without the layer mix
            lambda name, settings: evaluate_scws(store, items, settings),
        )
        doc = {"schema": "ctxembed.eval-pairs/1", "layout": "scws", "file": str(file), "configs": rows}
    else:
        doc = {
            "schema": "ctxembed.eval-pairs/1",
            "layout": "word-pairs",
            "file": str(file),
            "configs": [{"name": "static", **evaluate_word_pairs(store, file)}],
        }
    doc["vectors"] = explorer().vectors
    show(doc, json_out, "render_eval_pairs")


@eval_app.command("fit-mix", epilog="Example: ctxembed eval fit-mix WiC_dataset/ --out my-mix.json")
@reports_errors
@with_attention_options
def eval_fit_mix(
    sources: Annotated[
        list[str],
        typer.Argument(
            help="WiC folders (SPLIT.data.txt, SPLIT.gold.txt) and/or SCWS-style files; each weighs the same."
        ),
    ],
    split: Annotated[str, typer.Option("--split", help="The WiC split to fit on.")] = "train",
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Where to write the mix (default: the cache folder, read by --mix learned)."),
    ] = None,
    json_out: JsonOpt = False,
    explorer=None,
) -> None:
    """Learn ELMo's layer mix (weights s_j and scale γ) on labelled pairs, for --mix learned or --mix FILE.

    Only the mixing weights are learned, over the layers of the attention options given here (their
    own --mix is ignored): s = softmax(w) and γ maximise the likelihood of P(same) = σ(γ²·cos + b)."""
    from ctxembed.evaluation.mixfit import fit_document, read_labelled
    from ctxembed.vectors.mixfiles import learned_path, write_mix_file

    labelled = [read_labelled(source, split) for source in sources]
    found = explorer()
    say(f"fitting the layer mix on {', '.join(s.path for s in labelled)} ...")
    doc = fit_document(found.store, found.settings, labelled, found.vectors)
    target = out if out is not None else learned_path()
    doc["written"] = str(target)
    write_mix_file(doc, target)
    show(doc, json_out, "render_mix_fit")
    say(f"wrote {target}: use it with --mix {'learned' if out is None else target}")
