"""attend, compare, neighbors, batch: one sentence (or many) through attention, as tables or JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ctxembed.cli import app, read_sentence, read_stdin, reports_errors, show
from ctxembed.cli.options import OPTION, check_saves, declared, draws, save_all, with_attention_options
from ctxembed.declarations import check_view
from ctxembed.errors import DataError, UsageError
from ctxembed.output import say

# The library modules a command needs are imported inside it: see docs/architecture.md, "Why imports are lazy".


def sentences_or_stdin(sentences: list[str] | None, what: str) -> list[str]:
    """The sentences given, or with none (or '-') stdin's non-blank lines, stripped."""
    if sentences and sentences != ["-"]:
        return sentences
    return [line.strip() for line in read_stdin(what).splitlines() if line.strip()]


@app.command(
    epilog="Example: ctxembed attend 'the bank raised interest rates' --heads 2 --all-heads",
)
@reports_errors
@draws
@with_attention_options
@declared
def attend(
    sentence: str | None = OPTION,
    json_out: bool = OPTION,
    with_vectors: bool = OPTION,
    explain: Annotated[bool, typer.Option("--explain", help="Print every step with its numbers.")] = False,
    layer: int | None = OPTION,
    head: int | None = OPTION,
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
    word: str | None = OPTION,
    start: Annotated[
        int, typer.Option("--start", min=0, help="First token (position) of the matrix when it shows a window.")
    ] = 0,
    top: int = OPTION,
    max_display: Annotated[
        int | None, typer.Option("--max-display", min=1, help="At most N tokens in the matrix (default: all that fit).")
    ] = None,
    attention: str = OPTION,
    scale_max: float | None = OPTION,
    specials: str = OPTION,
    save: list[Path] | None = OPTION,
    explorer=None,
) -> None:
    """Show the attention weights of a sentence and how far context moved each token."""
    from ctxembed.report import check_reading, check_specials, focus_token, row_at_position  # help never needs it

    text = read_sentence(sentence, "attend")
    check_saves(save)
    check_reading(attention, head=None if explain else head, all_heads=all_heads)
    ex = explorer()
    card = ex.engine.card
    check_specials(specials, card, all_heads=all_heads, all_layers=all_layers, attention=attention)
    check_view(card.layers, card.heads, layer, head)
    shape = {"attention": attention, "top": top, "with_vectors": with_vectors}
    try:
        result = ex.explain(text, layer=layer, head=head, word=word, **shape) if explain else ex.attend(text, **shape)
    except DataError as exc:  # the word to explain is not in the sentence: as --word says it below
        if not explain or word is None:
            raise
        raise DataError(f"--word {exc.message}") from None
    doc = result.document()
    focus_at = None
    if word is not None:
        try:
            focus_at = focus_token(doc, word)
        except DataError as exc:  # a word not in the sentence is data, exit 1, as in every command
            raise DataError(f"--word {exc.message}") from None
    save_all(doc, save, layer=layer, head=head, all_heads=all_heads, all_layers=all_layers)
    show(
        doc,
        json_out,
        "render_attend_explained",
        layer=card.layers - 1 if layer is None else layer,
        head=head,
        all_heads=all_heads,
        all_layers=all_layers,
        focus=None if focus_at is None else focus_at[0],
        occurrence=None if focus_at is None else focus_at[1:],
        max_display=max_display,
        start=row_at_position(doc, start),
        scale_max=scale_max,
        specials=specials,
    )


@app.command(
    epilog="Example: ctxembed compare --word bank 'we sat on the river bank' 'I paid the bank'",
)
@reports_errors
@draws
@with_attention_options
@declared
def compare(
    sentences: list[str] | None = OPTION,
    word: str | None = OPTION,
    json_out: bool = OPTION,
    cosine_scale: str = OPTION,
    save: list[Path] | None = OPTION,
    explorer=None,
) -> None:
    """Static against contextual cosine of a word across sentences: an N×N matrix each."""
    sentences = sentences_or_stdin(sentences, "pair of SENTENCES")
    if len(sentences) < 2:
        raise UsageError(f"compare needs at least two sentences, got {len(sentences)}")
    check_saves(save)
    doc = explorer().compare(sentences, word).document()
    save_all(doc, save, cosine_scale=cosine_scale)
    show(doc, json_out, "render_compare", cosine_scale=cosine_scale)


@app.command(epilog="Example: ctxembed neighbors 'we sat on the river bank' --word bank -k 8")
@reports_errors
@draws
@with_attention_options
@declared
def neighbors(
    sentence: str | None = OPTION,
    word: str = OPTION,
    k: int = OPTION,
    include_context: bool = OPTION,
    among: int = OPTION,
    space: str | None = OPTION,
    json_out: bool = OPTION,
    save: list[Path] | None = OPTION,
    explorer=None,
) -> None:
    """Nearest vocabulary words of a word's contextual vector, beside those of its static vector.

    The sentence's own words are left out, so the list says what the word means here."""
    text = read_sentence(sentence, "neighbors")
    check_saves(save)
    doc = explorer().neighbors(text, word, k, include_context=include_context, among=among, space=space).document()
    save_all(doc, save)
    show(doc, json_out, "render_neighbors")


@app.command(epilog="Example: ctxembed batch sentences.txt --word bank --no-weights > out.jsonl")
@reports_errors
@with_attention_options
@declared
def batch(
    source: Annotated[
        str, typer.Argument(help="File of sentences, one per line, or JSON Lines with a 'text' field; '-' for stdin.")
    ] = "-",
    with_vectors: bool = OPTION,
    no_weights: Annotated[bool, typer.Option("--no-weights", help="Leave the attention weights out.")] = False,
    word: str | None = OPTION,
    chunk: int = OPTION,
    workers: int = OPTION,
    output_format: str = OPTION,
    out: str | None = OPTION,
    digits: int | None = OPTION,
    explorer=None,
) -> None:
    """Many sentences, one per line: a record each, in order, as JSON Lines or columns.

    JSON Lines by default (bad lines become {"line": k, "error": ...} records); --format parquet writes
    the same records as columns, a row per line; npz and projector one --word's vectors (docs/scale.md
    shows how to read each)."""
    from ctxembed.batch.driver import run_batch  # batch only

    explorer().check_window(word, "batch")  # it crops each line around --word: none to crop around, refused
    run_batch(
        explorer().engine,
        source,
        with_vectors=with_vectors,
        weights=not no_weights,
        word=word,
        chunk=chunk,
        workers=workers,
        fmt=output_format,
        out=out,
        digits=digits,
    )


@app.command(
    "side-by-side",
    epilog="Example: ctxembed side-by-side 'I deposited money in the bank' 'we sat on the river bank' --word bank",
)
@reports_errors
@draws
@declared
def side_by_side(
    sentences: list[str] | None = OPTION,
    word: str = OPTION,
    vectors: str | None = OPTION,
    json_out: bool = OPTION,
    cosine_scale: str = OPTION,
    save: list[Path] | None = OPTION,
) -> None:
    """The same sentence under the GloVe model's default preset (parameter-free attention), its learned
    projections (preset learned) and every other installed model: the word's attention and its cosines,
    model beside model."""
    from ctxembed.api import side_by_side  # help and option errors never need it

    sentences = sentences_or_stdin(sentences, "SENTENCES")
    check_saves(save)
    doc = side_by_side(sentences, word, vectors=vectors, on_note=say).document()
    save_all(doc, save, cosine_scale=cosine_scale)
    show(doc, json_out, "render_side_by_side", cosine_scale=cosine_scale)
