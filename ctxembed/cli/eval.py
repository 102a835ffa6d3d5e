"""eval wic, eval senses, eval pairs: how well contextual vectors separate word senses."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ctxembed.cli import app, reports_errors, show
from ctxembed.cli.options import OPTION, declared, draws, with_attention_options
from ctxembed.evaluation.ladder import ladder
from ctxembed.output import say

# The library modules a command needs are imported inside it: see docs/architecture.md, "Why imports are lazy".

eval_app = typer.Typer(help="Measure how well contextual vectors separate word senses.", no_args_is_help=True)
app.add_typer(eval_app, name="eval")


def _config_help() -> str:
    return (
        f"A configuration of the ladder ({', '.join(ladder())}) or 'custom' (the attention options given here); "
        "NAME@N reads it out at layer N (0: the input), e.g. -c learned@0 -c learned@1 -c learned@2 for a "
        "per-layer ladder. Repeatable; default: the whole ladder."
    )


ConfigOpt = Annotated[list[str] | None, typer.Option("--config", "-c", help=_config_help())]


@eval_app.command("wic", epilog="Example: ctxembed eval wic WiC_dataset/ -c textbook -c default")
@reports_errors
@draws
@with_attention_options
@declared
def eval_wic(
    directory: Annotated[Path, typer.Argument(help="Folder with SPLIT.data.txt and SPLIT.gold.txt (WiC format).")],
    tune_on: Annotated[str, typer.Option("--tune-on", help="Split whose labels choose the threshold.")] = "train",
    config: ConfigOpt = None,
    json_out: bool = OPTION,
    explorer=None,
) -> None:
    """Word-in-Context accuracy: same sense or not, by thresholding the cosine of the target's vectors."""
    show(explorer().evaluate_wic(directory, tune_on=tune_on, configs=config), json_out, "render_eval_wic")


@eval_app.command("senses", epilog="Example: ctxembed eval senses -c textbook -c default")
@reports_errors
@draws
@with_attention_options
@declared
def eval_senses(
    path: Annotated[
        Path | None,
        typer.Argument(
            help="word<TAB>sense<TAB>sentence file; word#2 scores the word's second occurrence "
            "(default: the shipped polysemy suite)."
        ),
    ] = None,
    config: ConfigOpt = None,
    json_out: bool = OPTION,
    explorer=None,
) -> None:
    """The share of ambiguous words whose same-sense pairs all beat their cross-sense pairs."""
    show(explorer().evaluate_senses(path, configs=config), json_out, "render_eval_senses")


@eval_app.command("pairs", epilog="Example: ctxembed eval pairs simlex999")
@reports_errors
@draws
@with_attention_options
@declared
def eval_pairs(
    path: Annotated[
        str,
        typer.Argument(
            help="SCWS-layout file (contexts with <b> word </b>), or a word-pair "
            "file (word1 TAB word2 TAB score), or wordsim353 / simlex999."
        ),
    ],
    config: ConfigOpt = None,
    json_out: bool = OPTION,
    explorer=None,
) -> None:
    """Graded similarity: Spearman ρ in context (SCWS), or gensim's Pearson and Spearman for word pairs."""
    show(explorer().evaluate_pairs(path, configs=config), json_out, "render_eval_pairs")


@eval_app.command("fit-mix", epilog="Example: ctxembed eval fit-mix WiC_dataset/ --out my-mix.json")
@reports_errors
@draws
@with_attention_options
@declared
def eval_fit_mix(
    sources: Annotated[
        list[str],
        typer.Argument(
            help="WiC folders (SPLIT.data.txt, SPLIT.gold.txt) and/or SCWS-style files; each weighs the same."
        ),
    ],
    split: Annotated[str, typer.Option("--split", help="The WiC split to fit on.")] = "train",
    out: Path | None = OPTION,
    json_out: bool = OPTION,
    explorer=None,
) -> None:
    """Learn ELMo's layer mix (weights s_j and scale γ) on labelled pairs, for --mix learned or --mix FILE.

    Only the mixing weights are learned, over the layers of the attention options given here (their
    own --mix is ignored): s = softmax(w) and γ maximise the likelihood of P(same) = σ(γ²·cos + b)."""
    doc = explorer().fit_mix(sources, split=split, out=out)
    show(doc, json_out, "render_mix_fit")
    say(f"wrote {doc['written']}: use it with --mix {'learned' if out is None else doc['written']}")
