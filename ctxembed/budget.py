"""What one command or one request may cost: the cost budget, checked before anything is allocated.

The same limits hold for the command line, the Python API and the page (docs/robustness.md lists them).
Refusals are :class:`~ctxembed.errors.SettingError` naming the settings to lower, or a
:class:`~ctxembed.errors.UsageError` for a view too large to draw.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from ctxembed.errors import DataError, SettingError, UsageError


@dataclass(frozen=True)
class CostBudget:
    """What one command or one request of ``ctxembed serve`` may cost, checked before anything is allocated:
    the same limits for the command line, the Python API and the page (docs/robustness.md lists them).

    Within these, a request keeps under about 1 GB and answers in seconds on a laptop core; past them
    it is refused with the settings to lower.
    """

    weights: int = 1 << 24  # attention weights kept, summed over sentences: layers x heads x T² (64 MB float32)
    parameters: int = 1 << 23  # projection numbers: per layer, input x d_out x 3 x heads, plus W_out (64 MB)
    work: int = 1 << 31  # multiply-adds: tokens x projection numbers + weights x (each head's size + 128)
    activations: int = 1 << 25  # numbers of the layer outputs kept: tokens x output width x layers (256 MB)
    drawn_cells: int = 6_400  # cells of one matrix the step-by-step view draws as text: T², 80 tokens
    server_cache_files: int = 32  # statistics files one server may add to the cache folder (the oldest go)


BUDGET = CostBudget()
# A weight's score, masks, softmax and the steps around them cost about as much time as this many
# multiply-adds (benchmarks/serve_budget.py: 16 layers x 4 heads x 512² weights took ~5 s)
WEIGHT_OVERHEAD = 128
TRACE_COST = 16  # a trace (--explain) keeps every step of every head, and its document writes them out
WEIGHTS_BUDGET = BUDGET.weights * 4  # bytes of float32 attention weights one request may keep
_STRETCH = re.compile(r"\S+")  # a stretch between white space


def attention_weights(layers: int, heads: int, tokens):
    """The attention weights a sentence of ``tokens`` tokens keeps: layers x heads x T² (an int, or one
    count per sentence for an array of lengths). Every limit on weights counts them with this."""
    return layers * heads * tokens**2


def pieces_at_least(text: str, limit: int) -> int:
    """A lower bound of the pieces a trained model's tokenizer cuts ``text`` into, counted no further than
    ``limit + 1`` and without cutting it: each stretch between white space gives at least one piece
    (a word, a byte-level BPE's ``Ġword``; a stretch of characters BERT drops, such as control
    characters, gives none and is not counted). Costs microseconds where cutting 4 MiB takes a minute."""
    count = 0
    for stretch in _STRETCH.finditer(text):
        text_of = stretch.group()
        if (text_of.isprintable() and "\ufffd" not in text_of) or not all(map(_dropped, text_of)):
            count += 1
            if count > limit:
                break
    return count


def _dropped(character: str) -> bool:
    """What BERT's cleaning removes before cutting: U+FFFD and the C* categories (controls, formats ...)."""
    import unicodedata  # lazy: only a stretch with a character that is not printable asks

    return character == "\ufffd" or unicodedata.category(character).startswith("C")


def check_pieces(text: str, room: int) -> None:
    """Refuse, before it is cut into pieces, a sentence sure to give more than ``room`` pieces."""
    if pieces_at_least(text, room) > room:
        raise DataError(
            f"more than {room:,} word pieces (one or more per stretch between spaces): the model takes at most {room:,}"
        )


def check_piece_weights(pieces: int, layers: int, heads: int) -> None:
    """Refuse a sentence of ``pieces`` pieces (the specials included) whose attention weights over the
    pieces (layers x heads x pieces², what a trained model computes and keeps) pass WEIGHTS_BUDGET: the
    same limit as a sentence of the glove model's words."""
    count = attention_weights(layers, heads, pieces)
    if count * 4 > WEIGHTS_BUDGET:
        raise DataError(
            f"a sentence of {pieces:,} word pieces keeps {count:,} attention weights over its pieces "
            f"({layers} layers x {heads} heads x {pieces:,}², {count * 4 / 2**20:,.0f} MB); the limit is "
            f"{WEIGHTS_BUDGET / 2**20:,.0f} MB: use a shorter sentence"
        )


def line_weights(card) -> Callable[[int], int]:
    """A line's bytes -> the most attention weights a trained model (``card``: its layers and heads) keeps
    for it: a piece takes at least a byte, and a sentence keeps at most BUDGET.weights (check_piece_weights),
    with two special pieces around it."""
    return lambda size: min(attention_weights(card.layers, card.heads, size + 2), BUDGET.weights)


def group_size(pieces: int, layers: int, heads: int, most: int) -> int:
    """How many sentences of ``pieces`` pieces one group of a trained model runs together: at most
    ``most``, and no more than keep BUDGET.weights attention weights in the group's (L, B, H, P, P) array."""
    return max(1, min(most, BUDGET.weights // max(attention_weights(layers, heads, pieces), 1)))


def projection_numbers(d_in: int, d_out: int, heads: int, layers: int, output_projection: bool) -> int:
    """Numbers of random projections: each layer's heads map its input (d_in, or heads x d_out after a
    layer without W_out) to queries, keys and values of d_out; W_out maps heads x d_out back to d_in."""
    concat = heads * d_out
    total = 0
    layer_in = d_in
    for _ in range(layers):
        total += layer_in * d_out * 3 * heads + (concat * d_in if output_projection else 0)
        layer_in = d_in if output_projection else concat
    return total


def check_projections(d_in: int, d_out: int, heads: int, layers: int, output_projection: bool) -> None:
    """Refuse projections larger than :data:`BUDGET` before drawing them (SettingError naming the settings)."""
    count = projection_numbers(d_in, d_out, heads, layers, output_projection)
    if count > BUDGET.parameters:
        raise SettingError(
            f"{{d_out}} {d_out} x {{heads}} {heads} x {{layers}} {layers} on {d_in}-dimensional vectors need "
            f"{count:,} projection numbers, more than the budget's {BUDGET.parameters:,}: lower {{d_out}}, "
            f"{{heads}} or {{layers}}" + ("" if output_projection else ", or add {output_projection}"),
            "d_out",
            "heads",
            "layers",
            "output_projection",
        )


def check_cost(
    lengths: list[int],
    *,
    heads: int,
    layers: int,
    head_size: int,
    width: int,
    parameters: int,
    kept_layers: int,
    copies: int = 1,
    units: str = "tokens",
    settable: bool = True,
) -> None:
    """Refuse a run over sentences of ``lengths`` tokens that would pass :data:`BUDGET`, before it starts.

    ``head_size``: each head's query size; ``width``: a layer output's size; ``parameters``: projection
    numbers applied to each token (0 for the identity); ``kept_layers``: layer outputs kept (1, or every
    layer for a mix or a trace); ``copies``: how many times the weights' cost counts
    (:data:`TRACE_COST` for a trace); ``units``: what ``lengths`` count ("word pieces" for a trained
    model's, whose attention runs over its pieces).
    SettingError names the settings to lower; without ``settable`` settings (a trained model's layers and
    heads are its own) DataError says to use shorter or fewer sentences."""
    tokens = sum(lengths)
    weights = copies * sum(attention_weights(layers, heads, n) for n in lengths)
    work = tokens * parameters + weights * (head_size + WEIGHT_OVERHEAD)
    activations = tokens * width * kept_layers
    shape = f"{len(lengths)} sentence(s) of {tokens:,} {units} with {{heads}} {heads} and {{layers}} {layers}"
    for name, value, limit in (
        ("attention weights", weights, BUDGET.weights),
        ("multiply-adds", work, BUDGET.work),
        ("layer output numbers", activations, BUDGET.activations),
    ):
        if value > limit and not settable:
            raise DataError(
                f"{len(lengths)} sentence(s) of {tokens:,} {units} ({layers} layers x {heads} heads) need "
                f"{value:,} {name}, more than the budget's {limit:,}: use shorter or fewer sentences"
            )
        if value > limit:
            raise SettingError(
                f"{shape} need {value:,} {name}, more than the budget's {limit:,}: "
                "use shorter or fewer sentences, or fewer {heads} or {layers}",
                "heads",
                "layers",
            )


def check_drawn(tokens: int) -> None:
    """Refuse a step-by-step view whose matrices (tokens x tokens, drawn as text) pass :data:`BUDGET`."""
    if tokens * tokens > BUDGET.drawn_cells:
        raise UsageError(
            f"the step-by-step view of {tokens} tokens would draw {tokens * tokens:,} cells per matrix, more than "
            f"the budget's {BUDGET.drawn_cells:,} (about {math.isqrt(BUDGET.drawn_cells)} tokens): use a shorter "
            "sentence, or {json_out}",
            "json_out",
        )
