"""How large batch's output will be when it keeps every layer's and head's weights: a note before a run
that would write a lot, so that a 6 x 12 model's 1 GB of JSON Lines for 2,000 lines is no surprise.

The estimate reads the first lines of a file (not stdin), counts the words each one sends into
attention, and scales the weights they would write (L x h x T x T numbers a line) to the file's size."""

from __future__ import annotations

from itertools import islice

from ctxembed.errors import CtxembedError
from ctxembed.output import say

SAMPLE_LINES = 200  # lines read to estimate the words per line
NOTE_BYTES = 256 * 2**20  # a run expected to write more weights than this gets a note first
JSON_NUMBER = 12.2  # bytes of JSONL per weight ("0.12345678," and its share of the record), measured on MiniLM
COLUMN_NUMBER = 4  # bytes of one float32 weight in a Parquet column, before compression


def weights_bytes(engine, sample: list[str], fmt: str, digits: int | None) -> tuple[float, float]:
    """(bytes of weights per line, bytes of text per line) over ``sample``'s lines that run."""
    maps = engine.card.layers * engine.card.heads
    number = COLUMN_NUMBER if fmt == "parquet" else (digits + 3 if digits is not None else JSON_NUMBER)
    sizes, texts = [], []
    for line in sample:
        try:
            words = len(engine.prepare(line.strip()).used)
        except (CtxembedError, ValueError):  # an error record: no weights
            words = 0
        sizes.append(maps * words * words * number)
        texts.append(len(line.encode("utf-8")) + 1)
    return sum(sizes) / max(1, len(sizes)), sum(texts) / max(1, len(texts))


def note_weights_size(engine, path: str | None, total_bytes: int | None, fmt: str, digits: int | None) -> None:
    """Say on stderr, before the run, about how many bytes of weights it will write, when that is more
    than :data:`NOTE_BYTES`, and how to keep fewer. ``path`` None: stdin, whose size is unknown."""
    if fmt not in ("jsonl", "parquet") or path is None or not total_bytes:
        return
    with open(path, encoding="utf-8", errors="replace") as lines:
        sample = [line for line in islice(lines, SAMPLE_LINES) if line.strip()]
    if not sample:
        return
    per_line, text = weights_bytes(engine, sample, fmt, digits)
    expected = per_line * total_bytes / text
    if expected < NOTE_BYTES:
        return
    card = engine.card
    say(
        f"batch: every line keeps the weights of {card.layers} layers x {card.heads} heads "
        f"({card.layers * card.heads} maps of T x T): about {_size(expected)} of {fmt} for this input "
        f"(from its first {len(sample)} lines); --no-weights leaves them out, and --word WORD "
        "--format npz or parquet keeps one word's vectors"
    )


def _size(count: float) -> str:
    for unit, scale in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count:.0f} bytes"
