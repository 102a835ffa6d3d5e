"""attend, compare, neighbors, batch: one sentence (or many) through attention, as tables or JSON."""

from __future__ import annotations

from typing import Annotated

import typer

from ctxembed.cli import app, read_sentence, read_stdin, reports_errors, show
from ctxembed.cli.options import (
    AttentionReadingOpt,
    DigitsOpt,
    FormatOpt,
    JsonOpt,
    OutOpt,
    OutputFormat,
    SaveOpt,
    ScaleMaxOpt,
    VectorsOpt,
    check_saves,
    draws,
    save_all,
    with_attention_options,
)
from ctxembed.declarations import check_view
from ctxembed.errors import DataError, UsageError
from ctxembed.output import say

# The library modules a command needs are imported inside it: see docs/architecture.md, "Why imports are lazy".


def sentences_or_stdin(sentences: list[str] | None, what: str) -> list[str]:
    """The sentences given, or with none (or '-') stdin's non-blank lines, stripped."""
    if sentences and sentences != ["-"]:
        return sentences
    return [line.strip() for line in read_stdin(what).splitlines() if line.strip()]


SentenceArg = Annotated[str | None, typer.Argument(help="The sentence ('-' or none: read stdin).")]


@app.command(
    epilog="Example: ctxembed attend 'the bank raised interest rates' --heads 2 --all-heads",
)
@reports_errors
@draws
@with_attention_options
def attend(
    sentence: SentenceArg = None,
    json_out: JsonOpt = False,
    with_vectors: Annotated[
        bool, typer.Option("--with-vectors", help="JSON: add static and contextual vectors.")
    ] = False,
    explain: Annotated[bool, typer.Option("--explain", help="Print every step with its numbers.")] = False,
    layer: Annotated[int | None, typer.Option("--layer", min=0, help="Layer to show (default: the last).")] = None,
    head: Annotated[int | None, typer.Option("--head", min=0, help="Head to show (default: mean of heads).")] = None,
    all_heads: Annotated[
        bool, typer.Option("--all-heads", help="One matrix per head, side by side when they fit (small multiples).")
    ] = False,
    all_layers: Annotated[
        bool,
        typer.Option(
            "--all-layers",
            help="A small map per layer, side by side; with --all-heads one per layer and head (the model view).",
        ),
    ] = False,
    focus: Annotated[
        str | None,
        typer.Option(
            "--focus",
            "--word",
            "-w",
            help="Show one token's row and column whole: a word (its first occurrence; bank#2 for the second), "
            "or #N for the token at position N.",
        ),
    ] = None,
    start: Annotated[
        int, typer.Option("--start", min=0, help="First token (position) of the matrix when it shows a window.")
    ] = 0,
    top: Annotated[int, typer.Option("--top", min=1, help="Most-attended tokens listed per token.")] = 3,
    max_display: Annotated[
        int | None, typer.Option("--max-display", min=1, help="At most N tokens in the matrix (default: all that fit).")
    ] = None,
    attention: AttentionReadingOpt = "raw",
    scale_max: ScaleMaxOpt = None,
    save: SaveOpt = None,
    explorer=None,
) -> None:
    """Show the attention weights of a sentence and how far context moved each token."""
    from ctxembed.report import check_reading, focus_token, row_at_position  # help never needs it

    text = read_sentence(sentence, "attend")
    check_saves(save)
    check_reading(attention, head=None if explain else head, all_heads=all_heads)
    ex = explorer()
    a = ex.settings.attention
    check_view(a.layers, a.heads, layer, head)
    shape = {"attention": attention, "top": top, "with_vectors": with_vectors}
    try:
        result = ex.explain(text, layer=layer, head=head, word=focus, **shape) if explain else ex.attend(text, **shape)
    except DataError as exc:  # the word to explain is not in the sentence: as --focus says it below
        if not explain or focus is None:
            raise
        raise DataError(f"--focus {exc.message}") from None
    doc = result.document()
    focus_at = None
    if focus is not None:
        try:
            focus_at = focus_token(doc, focus)
        except DataError as exc:  # a word not in the sentence is data, exit 1, as in every command
            raise DataError(f"--focus {exc.message}") from None
    save_all(doc, save, layer=layer, head=head, all_heads=all_heads, all_layers=all_layers)
    show(
        doc,
        json_out,
        "render_attend_explained",
        layer=a.layers - 1 if layer is None else layer,
        head=head,
        all_heads=all_heads,
        all_layers=all_layers,
        focus=None if focus_at is None else focus_at[0],
        occurrence=None if focus_at is None else focus_at[1:],
        max_display=max_display,
        start=row_at_position(doc, start),
        scale_max=scale_max,
    )


@app.command(
    epilog="Example: ctxembed compare --word bank 'we sat on the river bank' 'I paid the bank'",
)
@reports_errors
@draws
@with_attention_options
def compare(
    sentences: Annotated[
        list[str] | None, typer.Argument(help="Two or more sentences ('-': one per stdin line).")
    ] = None,
    word: Annotated[
        str | None,
        typer.Option(
            "--word",
            "-w",
            help="The word to compare (default: every shared word); bank#2 takes its second occurrence in "
            "every sentence, #N the token at position N.",
        ),
    ] = None,
    json_out: JsonOpt = False,
    save: SaveOpt = None,
    explorer=None,
) -> None:
    """Static against contextual cosine of a word across sentences: an N×N matrix each."""
    sentences = sentences_or_stdin(sentences, "pair of SENTENCES")
    if len(sentences) < 2:
        raise UsageError(f"compare needs at least two sentences, got {len(sentences)}")
    check_saves(save)
    doc = explorer().compare(sentences, word).document()
    save_all(doc, save)
    show(doc, json_out, "render_compare")


@app.command(epilog="Example: ctxembed neighbors 'we sat on the river bank' --word bank -k 8")
@reports_errors
@draws
@with_attention_options
def neighbors(
    sentence: SentenceArg = None,
    word: Annotated[
        str,
        typer.Option(
            "--word",
            "-w",
            help="The word whose neighbours to list: its first occurrence, bank#2 for the second, "
            "#N for the token at position N.",
        ),
    ] = ...,
    k: Annotated[int, typer.Option("-k", "--k", min=1, max=1000, help="How many neighbours.")] = 10,
    include_context: Annotated[
        bool, typer.Option("--include-context", help="Keep the sentence's own words among the neighbours.")
    ] = False,
    among: Annotated[
        int,
        typer.Option(
            "--among",
            min=0,
            help="Search the N most frequent words (words people know); 0: the whole vocabulary, rare names included.",
        ),
    ] = 50_000,
    json_out: JsonOpt = False,
    save: SaveOpt = None,
    explorer=None,
) -> None:
    """Nearest vocabulary words of a word's contextual vector, beside those of its static vector.

    The sentence's own words are left out, so the list says what the word means here."""
    text = read_sentence(sentence, "neighbors")
    check_saves(save)
    doc = explorer().neighbors(text, word, k, include_context=include_context, among=among).document()
    save_all(doc, save)
    show(doc, json_out, "render_neighbors")


@app.command(epilog="Example: ctxembed batch sentences.txt --word bank --no-weights > out.jsonl")
@reports_errors
@with_attention_options
def batch(
    source: Annotated[
        str, typer.Argument(help="File of sentences, one per line, or JSON Lines with a 'text' field; '-' for stdin.")
    ] = "-",
    with_vectors: Annotated[bool, typer.Option("--with-vectors", help="Add static and contextual vectors.")] = False,
    no_weights: Annotated[bool, typer.Option("--no-weights", help="Leave the attention weights out.")] = False,
    word: Annotated[
        str | None,
        typer.Option(
            "--word", "-w", help="Add this word's contextual vector (bank#2: its second occurrence; #N: position N)."
        ),
    ] = None,
    chunk: Annotated[int, typer.Option("--chunk", min=1, max=100_000, help="Sentences per attention batch.")] = 1024,
    workers: Annotated[int, typer.Option("--workers", min=0, help="Processes (0: one per usable core).")] = 0,
    output_format: FormatOpt = OutputFormat.jsonl,
    out: OutOpt = None,
    digits: DigitsOpt = None,
    explorer=None,
) -> None:
    """One JSON line per input line, in order; bad lines become {"line": k, "error": ...} records.

    --format parquet writes the same records as columns, a row per line; npz and projector one
    --word's vectors (docs/scale.md shows how to read each)."""
    from ctxembed.batch.driver import run_batch  # batch only

    run_batch(
        explorer().engine,
        source,
        with_vectors=with_vectors,
        weights=not no_weights,
        word=word,
        chunk=chunk,
        workers=workers,
        fmt=output_format.value,
        out=out,
        digits=digits,
    )


@app.command(
    "side-by-side",
    epilog="Example: ctxembed side-by-side 'I deposited money in the bank' 'we sat on the river bank' --word bank",
)
@reports_errors
@draws
def side_by_side(
    sentences: Annotated[
        list[str] | None, typer.Argument(help="One sentence or more ('-': one per stdin line); the first is shown.")
    ] = None,
    word: Annotated[
        str, typer.Option("--word", "-w", help="The word to follow (bank#2: its second occurrence; #N: position N).")
    ] = ...,
    vectors: VectorsOpt = None,
    json_out: JsonOpt = False,
    save: SaveOpt = None,
) -> None:
    """The same sentence under textbook attention (GloVe, default preset), learned projections and every
    other installed model: the word's attention and its cosines, model beside model."""
    from ctxembed.api import side_by_side  # help and option errors never need it

    sentences = sentences_or_stdin(sentences, "SENTENCES")
    check_saves(save)
    doc = side_by_side(sentences, word, vectors=vectors, on_note=say).document()
    save_all(doc, save)
    show(doc, json_out, "render_side_by_side")
