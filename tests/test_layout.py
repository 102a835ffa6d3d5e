"""The terminal heatmap layout: it always fits, never cuts a label or a number, and loses no token."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ctxembed.engine import DEFAULT_MAX_TOKENS
from ctxembed.views.layout import GLYPHS, MASKED, cell_text, choose_layout, draw, heat_level, legend_lines, wrap_parts
from ctxembed.views.layout import text_width as width_of

WORDS = "the old fisherman slowly walked along muddy river bank near village while his dog watched ducks".split()


def sentence(n: int, seed: int = 0, long_word: bool = False) -> list[str]:
    rng = random.Random(seed)
    tokens = [rng.choice(WORDS) for _ in range(n)]
    if long_word and n > 2:
        tokens[n // 2] = "pneumonoultramicroscopicsilicovolcanoconiosis-and-more"  # 54 characters
    return tokens


def weights(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = rng.random((n, n)) ** 3  # (n, n) skewed, like attention
    w[0, :] = 0.0  # a row of exact zeros
    return w / np.maximum(w.sum(axis=1, keepdims=True), 1e-12)


def rendered(tokens, width, panels=1, colour=False, start=0, limit=None):
    n = len(tokens)
    numbers = list(range(n))
    titles = [f"head {p}" if panels > 1 else "" for p in range(panels)]
    layout = choose_layout(tokens, width, numbers=numbers, titles=titles, colour=colour, start=start, limit=limit)
    masked = np.eye(n, dtype=bool)
    lines = draw(layout, tokens, numbers, [(t, weights(n, p), masked) for p, t in enumerate(titles)], 1.0)
    texts = ["".join(text for text, _ in line) for line in lines]
    shown = slice(layout.start, layout.start + layout.count)
    legend = legend_lines(tokens[shown], numbers[shown], width) if layout.legend else []
    return layout, texts, legend


def assert_fits(tokens, width, **options):
    layout, texts, legend = rendered(tokens, width, **options)
    for line in texts + legend:
        assert width_of(line) <= width, (width, layout, line)
        assert "…" not in line
    labels = [line[: layout.label_width] for line in texts]
    legend_text = "".join("".join(line.split()) for line in legend)
    for i in range(layout.start, layout.start + layout.count):
        token = tokens[i]
        if layout.labels == "tokens":
            assert any(label.rstrip() == token for label in labels)
        elif layout.labels == "numbered":
            assert any(label.split() == [str(i), token] for label in labels)
        else:
            assert f"{i}{token}" in legend_text
    return layout


# ------------------------------------------------------------------------------ always fits
@pytest.mark.parametrize("colour", [False, True])
def test_every_width_from_60_to_200_fits_sentences_up_to_48_tokens(colour):
    lengths = (1, 2, 3, 5, 8, 12, 13, 17, 21, 24, 29, 34, 41, 48)
    for width in range(60, 201, 1 if not colour else 7):
        for n in lengths:
            layout = assert_fits(sentence(n, seed=width), width, colour=colour)
            assert layout.count == n or layout.cells == "glyphs"


def test_long_sentences_up_to_max_tokens_fit_as_a_window():
    for n in (49, 64, 100, 200, 333, DEFAULT_MAX_TOKENS):
        for width in (60, 61, 79, 80, 120, 159, 200):
            layout = assert_fits(sentence(n, seed=n), width)
            if layout.windowed:
                assert layout.count == min(n, width - len(str(n - 1)) - 1)


def test_the_chooser_fits_every_width_and_length_up_to_max_tokens():
    # the chooser alone (no drawing) over the whole range the issue names
    for n in [*range(1, 65), 128, 256, DEFAULT_MAX_TOKENS]:
        tokens = sentence(n, seed=n)
        for width in range(60, 201):
            assert choose_layout(tokens, width).band_width(1) <= width


def test_a_token_too_long_for_any_column_moves_to_the_legend():
    tokens = sentence(12, long_word=True)
    layout = assert_fits(tokens, 60)
    assert layout.labels == "numbers" and layout.legend


def test_a_window_starts_where_asked_and_fits():
    tokens = sentence(300)
    layout = assert_fits(tokens, 80, start=250)
    assert layout.start == 250 and layout.count == 50 and layout.windowed


def test_all_heads_go_side_by_side_when_they_fit():
    layout = assert_fits(sentence(6), 120, panels=4)
    assert layout.per_band == 4
    narrow = assert_fits(sentence(30), 60, panels=4)
    assert 1 <= narrow.per_band < 4


# ------------------------------------------------------------------------------ which layout
def test_short_sentence_gets_full_labelled_cells():
    layout, texts, _ = rendered(["apple", "phone"], 80)
    assert layout.cells == "full" and layout.labels == "tokens"
    assert texts[0].split() == ["apple", "phone"]


def test_thirteen_tokens_at_80_columns_get_numbered_columns():
    tokens = "the old fisherman slowly walked along the muddy river bank near the village".split()
    layout, texts, _ = rendered(tokens, 80)
    assert layout.cells == "numbers" and layout.labels == "numbered"
    assert texts[0].split() == [str(n) for n in range(13)]


def test_colour_leaves_the_glyphs_out_of_number_cells():
    plain, _, _ = rendered(sentence(5), 80, colour=False)
    coloured, _, _ = rendered(sentence(5), 80, colour=True)
    assert plain.with_glyph and not coloured.with_glyph


# ------------------------------------------------------------------------------ cells
def test_cells_mark_masked_zero_and_heat():
    assert cell_text(0.5, True, "full", 0, True) == MASKED
    assert cell_text(0.0, False, "full", 0, True) == "0 "
    assert cell_text(0.13, False, "full", 2, False) == "0.13"
    assert cell_text(0.13, False, "numbers", 2, True) == ".13" + GLYPHS[1]
    assert cell_text(0.999, False, "numbers", 8, False) == "1.0"
    assert cell_text(0.0, False, "glyphs", 0, True) == " "
    assert cell_text(0.4, False, "glyphs", 4, True) == GLYPHS[3]


def test_heat_levels_are_eighths_of_the_top_rounded_up():
    assert heat_level(0.0, 1.0) == 0
    assert heat_level(1e-9, 1.0) == 1
    assert [heat_level(v, 0.8) for v in (0.1, 0.2, 0.4, 0.8)] == [1, 2, 4, 8]


def test_without_colour_distinct_weights_get_distinct_glyphs():
    tokens = ["a", "b", "c", "d"]
    values = np.array([[0.0, 0.1, 0.3, 0.6]] * 4)
    layout = choose_layout(tokens, 80)
    [row] = [
        "".join(t for t, _ in line)
        for line in draw(layout, tokens, [0, 1, 2, 3], [("", values, None)], 0.6)
        if "".join(t for t, _ in line).startswith("a ")
    ]
    glyphs = [c for c in row if c in GLYPHS]
    assert len(set(glyphs)) == 3


# ------------------------------------------------------------------------------ text
def test_settings_wrap_only_between_settings():
    parts = ["preset default", "scores x.x/sqrt(d)", "residual 0.111·x + context", "1 head, 1 layer"]
    lines = wrap_parts("settings ", parts, 40)
    assert all(width_of(line) <= 40 for line in lines)
    joined = " ".join(line.strip() for line in lines)
    for part in parts:
        assert part in joined  # no part broken over two lines


def test_legend_folds_an_entry_wider_than_the_line():
    lines = legend_lines(["x" * 100, "y"], [0, 1], 60)
    assert all(width_of(line) <= 60 for line in lines)
    assert "".join(line.strip() for line in lines).replace(" ", "").startswith("columns0" + "x" * 100)
