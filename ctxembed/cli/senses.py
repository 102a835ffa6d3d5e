"""`ctxembed senses` (the senses of words across a corpus) and `ctxembed eval wsi` (scored against labels).

Exit codes, beside the usual ones (2 for a bad command line, 1 for an unreadable, empty or binary
corpus): 1 when some word could not be clustered (it does not occur, or has fewer usable
occurrences than -k); the other words are still shown, and each problem is one stderr line.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ctxembed.cli import app, reports_errors, show
from ctxembed.cli.eval import ConfigOpt, _sweep, eval_app
from ctxembed.cli.options import JsonOpt, SaveOpt, check_saves, save_all, with_attention_options
from ctxembed.errors import UsageError
from ctxembed.output import emit_json, say, stdout_console

DEFAULT_MAX_OCCURRENCES = 1000

# The clustering options `senses` and `eval wsi` share.
KOpt = Annotated[str, typer.Option("-k", "--k", help="Senses per word: a number (1-50) or 'auto'.")]
KMaxOpt = Annotated[int, typer.Option("--k-max", min=2, max=20, help="-k auto tries 2 .. this.")]
MinShareOpt = Annotated[
    float, typer.Option("--min-share", min=0.0, max=0.5, help="-k auto: smallest share of a sense.")
]
OwnTermOpt = Annotated[
    bool,
    typer.Option(
        "--keep-own/--drop-own",
        help="Keep or drop (default) the word's own term (its layer-0 share, its residual) in its vector.",
        show_default=False,
    ),
]
SeedOpt = Annotated[int, typer.Option("--sample-seed", help="Seed of the occurrence sample and of k-means.")]


def default_corpus() -> Path:
    """The shipped Brown example corpus (data/brown.txt.gz; packaged as ctxembed/data/brown.txt.gz)."""
    from ctxembed.vectors.shipped import shipped_path

    return shipped_path("brown.txt.gz")


def split_arguments(arguments: list[str], corpus: str | None) -> tuple[list[str], str]:
    """WORD [WORD ...] [CORPUS|-] -> (words, corpus). The last argument is the corpus when it is "-",
    an existing file, or looks like a path (has a "/" or a .txt/.gz ending); else the shipped corpus."""
    words = list(arguments)
    if corpus is None and len(words) > 1:
        last = words[-1]
        if last == "-" or Path(last).is_file() or "/" in last or last.endswith((".txt", ".gz", ".text")):
            corpus = words.pop()
    if not words:
        raise UsageError("give at least one WORD")
    for word in words:
        if not word.strip() or any(c.isspace() for c in word.strip()):
            raise UsageError(f"{word!r} is not a single word")
    return [w.strip() for w in words], corpus if corpus is not None else str(default_corpus())


def parse_k(value: str) -> int | None:
    from ctxembed.senses.induce import K_MAX

    if value.strip().lower() == "auto":
        return None
    try:
        k = int(value)
    except ValueError:
        raise UsageError(f"-k must be a number of senses or 'auto', not {value!r}") from None
    if not 1 <= k <= K_MAX:
        raise UsageError(f"-k must be between 1 and {K_MAX} (or 'auto'), not {k}")
    return k


def _progress(corpus: str):
    """A progress callback on stderr when it is a terminal (by characters read), else None."""
    if not sys.stderr.isatty():
        return None, None
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TransferSpeedColumn

    from ctxembed.output import stderr_console

    total = Path(corpus).stat().st_size if corpus != "-" and not corpus.endswith(".gz") else None
    bar = Progress(
        TextColumn("scanning"), BarColumn(), TransferSpeedColumn(), TimeElapsedColumn(),
        console=stderr_console(), transient=True,
    )  # fmt: skip
    task = bar.add_task("scan", total=total)
    return bar, lambda chars: bar.update(task, completed=chars)


@app.command(epilog="Example: ctxembed senses bass plant   |   ctxembed senses bank corpus.txt -k 3 --json")
@reports_errors
@with_attention_options
def senses(
    arguments: Annotated[
        list[str],
        typer.Argument(
            help="WORD [WORD ...] [CORPUS|-]: the words, then the corpus (a UTF-8 text file, .gz allowed, "
            "one sentence or paragraph per line; '-' reads stdin). The last argument is the corpus when it is "
            "'-' or an existing file; without one, the shipped Brown example corpus.",
            show_default=False,
        ),
    ],
    corpus: Annotated[str | None, typer.Option("--corpus", help="The corpus (then every argument is a word).")] = None,
    k: KOpt = "auto",
    k_max: KMaxOpt = 8,
    min_share: MinShareOpt = 0.05,
    forms: Annotated[
        list[str] | None,
        typer.Option(
            "--forms", help="Forms to find, e.g. bank,banks or bank:bank,banks (repeatable).", show_default=False
        ),
    ] = None,
    exact: Annotated[bool, typer.Option("--exact", help="Only the word as given, no inflections.")] = False,
    max_occurrences: Annotated[
        int, typer.Option("--max-occurrences", min=0, help="Per word, a seeded uniform sample (0: all).")
    ] = DEFAULT_MAX_OCCURRENCES,
    sample_seed: SeedOpt = 0,
    own_term: OwnTermOpt = False,
    examples: Annotated[int, typer.Option("--examples", min=0, max=100, help="Central examples per sense.")] = 5,
    label_words: Annotated[int, typer.Option("--label-words", min=1, max=50, help="Words labelling a sense.")] = 8,
    json_out: JsonOpt = False,
    save: SaveOpt = None,
    explorer=None,
) -> None:
    """The senses of words across a corpus: every occurrence, clustered, each sense labelled and shown in context."""
    from ctxembed.senses import induce as sense_logic
    from ctxembed.senses import occurrences as occ

    words, corpus_name = split_arguments(arguments, corpus)
    chosen_k = parse_k(k)
    check_saves(save)
    given = occ.parse_forms(forms or [], words)
    options = sense_logic.SenseOptions(
        k=chosen_k, k_max=k_max, min_share=min_share, max_occurrences=max_occurrences or None, seed=sample_seed,
        drop_own=not own_term, examples=examples, label_words=label_words,
    )  # fmt: skip
    ex = explorer()
    engine = ex.engine.bulk()
    word_forms = sense_logic.search_forms(ex.store, words, given, exact=exact)
    stream, shown_name = occ.open_corpus(corpus_name)
    if corpus_name == str(default_corpus()):
        shown_name = "brown.txt.gz (the shipped example corpus)"
    bar, progress = _progress(corpus_name)
    try:
        if bar is not None:
            bar.start()
        found, problems = sense_logic.find_senses(engine, word_forms, stream, shown_name, options, progress=progress)
    finally:
        if bar is not None:
            bar.stop()
        stream.close()
    doc = {
        "schema": found.pop("schema"),
        "vectors": ex.vectors,
        "settings": ex.settings.as_dict(),
        "settings_summary": ex.settings.summary(),
        **found,
    }
    entries = doc["words"]
    if any(e["k"] for e in entries):
        save_all(doc, save)
        if json_out:
            emit_json(doc)
        else:
            from ctxembed.views.render_senses import render_senses

            render_senses(stdout_console(), doc)
    for problem in problems:
        say(f"ctxembed: error: {problem}")
    if problems:
        raise typer.Exit(1)


# ------------------------------------------------------------------------------ eval wsi
@eval_app.command("wsi", epilog="Example: ctxembed eval wsi data/wsi-pseudowords.tsv -c textbook -c default")
@reports_errors
@with_attention_options
def eval_wsi(
    path: Annotated[
        Path,
        typer.Argument(help="TSV: word, sense label, token index (from 0), space-tokenised sentence."),
    ],
    config: ConfigOpt = None,
    k: KOpt = "auto",
    k_max: KMaxOpt = 8,
    min_share: MinShareOpt = 0.05,
    own_term: OwnTermOpt = False,
    sample_seed: SeedOpt = 0,
    json_out: JsonOpt = False,
    explorer=None,
) -> None:
    """Word-sense induction: clusters of each word's occurrences against sense labels (ARI, V-measure,
    pair accuracy), beside the one-cluster and bag-of-words baselines."""
    from ctxembed.senses.wsi import contextual_vectors, evaluate_baselines, read_wsi, score_clusters

    items = read_wsi(path)
    options = {"k": parse_k(k), "k_max": k_max, "min_share": min_share, "seed": sample_seed}
    store = explorer().store

    def evaluate(name, settings):
        if sys.stderr.isatty():
            say(f"evaluating {name} ...")
        vectors, found = contextual_vectors(
            store, settings, items, drop_own=not own_term, max_tokens=explorer().engine.max_tokens
        )
        return score_clusters(items, vectors, found, **options)

    rows = evaluate_baselines(store, items, **options)
    rows += _sweep(config, explorer, ("static", "textbook", "default"), evaluate)
    doc = {
        "schema": "ctxembed.eval-wsi/1",
        "vectors": explorer().vectors,
        "file": str(path),
        "words": len({item.word for item in items}),
        "occurrences": len(items),
        "clustering": {**options, "k": options["k"] or "auto", "own_term": "kept" if own_term else "dropped"},
        "configs": rows,
    }
    if json_out:
        show(doc, True, "")
        return
    from ctxembed.views.render_senses import render_eval_wsi

    render_eval_wsi(stdout_console(), doc)
