"""`ctxembed senses` (the senses of words across a corpus) and `ctxembed eval wsi` (scored against labels).

Exit codes, beside the usual ones (2 for a bad command line, 1 for an unreadable, empty or binary
corpus): 1 when some word could not be clustered (it does not occur, or has fewer usable
occurrences than -k); the other words are still shown, and each problem is one stderr line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ctxembed.cli import app, reports_errors, show
from ctxembed.cli.eval import ConfigOpt, eval_app
from ctxembed.cli.options import (
    OPTION,
    check_saves,
    declared,
    draws,
    save_all,
    with_attention_options,
    with_declared_options,
)
from ctxembed.output import say
from ctxembed.presets import SENSE_OPTIONS

# eval wsi clusters as senses does, with the clustering options only
_CLUSTERING = {name: SENSE_OPTIONS[name] for name in ("k", "k_max", "min_share", "drop_own", "sample_seed")}

# The library modules a command needs are imported inside it: see docs/architecture.md, "Why imports are lazy".


def split_arguments(arguments: list[str], corpus: str | None) -> tuple[list[str], str | None]:
    """WORD [WORD ...] [CORPUS|-] -> (words, corpus). The last argument is the corpus when it is "-",
    an existing file, or looks like a path (has a "/" or a .txt/.gz ending); else None (the shipped one)."""
    words = list(arguments)
    if corpus is None and len(words) > 1:
        last = words[-1]
        if last == "-" or Path(last).is_file() or "/" in last or last.endswith((".txt", ".gz", ".text")):
            corpus = words.pop()
    return words, corpus


@app.command(epilog="Example: ctxembed senses bass plant   |   ctxembed senses bank corpus.txt -k 3 --json")
@reports_errors
@draws
@with_attention_options
@with_declared_options(SENSE_OPTIONS, into="options")
@declared
def senses(
    arguments: Annotated[
        list[str],
        typer.Argument(
            metavar="WORD... [CORPUS|-]",
            help="The words, then the corpus (a UTF-8 text file, .gz allowed, "
            "one sentence or paragraph per line; '-' reads stdin). The last argument is the corpus when it is "
            "'-' or an existing file; without one, the shipped Brown example corpus.",
            show_default=False,
        ),
    ],
    corpus: Annotated[str | None, typer.Option("--corpus", help="The corpus (then every argument is a word).")] = None,
    forms: Annotated[
        list[str] | None,
        typer.Option(
            "--forms", help="Forms to find, e.g. bank,banks or bank:bank,banks (repeatable).", show_default=False
        ),
    ] = None,
    exact: Annotated[bool, typer.Option("--exact", help="Only the word as given, no inflections.")] = False,
    json_out: bool = OPTION,
    save: list[Path] | None = OPTION,
    explorer=None,
    options=None,
) -> None:
    """The senses of words across a corpus: every occurrence, clustered, each sense labelled and shown in context.

    --save map.tsv (or a folder) writes the TensorBoard Projector pair: the occurrences' vectors, and
    their word, sense, label and sentence (docs/scale.md says how to open it)."""
    from ctxembed.senses.run import found_senses  # senses only
    from ctxembed.senses.run import senses as find  # senses only

    words, corpus = split_arguments(arguments, corpus)
    maps = [path for path in save or [] if path.suffix.lower() in ("", ".tsv")]  # Projector pairs
    save = [path for path in save or [] if path not in maps]
    check_saves(save)
    ex = explorer()
    doc, problems = find(
        ex.engine, ex.vectors, words, corpus, forms=forms or [], exact=exact, projector=maps, **options
    )
    if found_senses(doc):  # a document without senses has nothing to show: the problems below say why
        save_all(doc, save)
        show(doc, json_out, "render_senses.render_senses")
    for problem in problems:
        say(f"ctxembed: error: {problem}")
    if problems:
        raise typer.Exit(1)


# ------------------------------------------------------------------------------ eval wsi
@eval_app.command("wsi", epilog="Example: ctxembed eval wsi data/wsi-pseudowords.tsv -c textbook -c default")
@reports_errors
@draws
@with_attention_options
@with_declared_options(_CLUSTERING, into="clustering")
@declared
def eval_wsi(
    path: Annotated[
        Path,
        typer.Argument(help="TSV: word, sense label, token index (from 0), space-tokenised sentence."),
    ],
    config: ConfigOpt = None,
    json_out: bool = OPTION,
    explorer=None,
    clustering=None,
) -> None:
    """Word-sense induction: clusters of each word's occurrences against sense labels (ARI, V-measure,
    pair accuracy), beside the one-cluster and bag-of-words baselines."""
    show(explorer().evaluate_wsi(path, configs=config, **clustering), json_out, "render_senses.render_eval_wsi")
