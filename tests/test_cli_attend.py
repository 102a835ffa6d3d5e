"""`ctxembed attend`: the tables, every option family, --explain checked by hand, and its errors.

Hand computations use the notes' toy vectors: apple [5,2,0], is [0,0,5], phone [0,5,0], the [0,0,6];
so apple.apple = 29, apple.phone = 10, phone.phone = 25, and sqrt(d) = sqrt(3).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from ctxembed.core.projections import random_params
from ctxembed.declarations import AttentionConfig
from ctxembed.vectors.weights import save_projections
from tests.cli_helpers import TOY, fails, numbers, run_json, succeeds, table

SQRT3 = math.sqrt(3)
SENTENCE = "the cat sat on the mat"


def weights(*args) -> np.ndarray:
    """The JSON weights of ``attend ARGS`` as an array (L, h, T, T)."""
    return np.array(run_json("attend", *args, "--json")["weights"])


def toy(*args) -> list[str]:
    return ["--vectors", TOY, *args]


GLYPH_CHARS = "▁▂▃▄▅▆▇█"


def grid(stdout: str, title: str) -> tuple[list[str], list[list[str]]]:
    """The full-layout heatmap printed after a line containing ``title``: (column labels, rows of
    [label, cell, ...]) with the glyphs that end each cell stripped."""
    lines = stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if title in line)
    header = lines[at + 1].split()
    rows = []
    for line in lines[at + 2 :]:
        cells = line.translate({ord(g): " " for g in GLYPH_CHARS}).split()
        if len(cells) != len(header) + 1:
            break
        rows.append(cells)
    return header, rows


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def approx(value: float):
    """A printed cell: rounded to 2 or 3 decimals."""
    return pytest.approx(value, abs=0.0051)


# ------------------------------------------------------------------------------ the tables
WIDE = {"COLUMNS": "160"}  # a pipe is 80 columns; these tests read tables laid out side by side


def test_header_names_the_vectors_and_the_settings():
    summary = run_json("attend", "apple phone", *toy("--preset", "textbook"), "--json")["settings_summary"]
    lines = succeeds("attend", "apple phone", *toy("--preset", "textbook"), env=WIDE).stdout.splitlines()
    assert lines[0] == f"vectors  notes_toy.txt (4 words, 3d, source: {TOY})"
    assert lines[1] == f"settings {summary}"
    assert "preset textbook" in summary


def test_tokens_line_marks_out_of_vocabulary_tokens():
    stdout = succeeds("attend", "apple xqzzv phone", *toy("--preset", "textbook")).stdout
    assert "tokens   apple xqzzv∅ phone" in stdout
    assert "∅ no vector (skipped" in stdout  # the mark's legend


def test_matrix_has_token_labels_and_the_weights():
    # scores / (sqrt(3) * 10): apple row [29, 10], phone row [10, 25]
    stdout = succeeds("attend", "apple phone", *toy("--preset", "textbook", "--temperature", "10")).stdout
    header, rows = grid(stdout, "attention weights, layer 0")
    apple = sigmoid((29 - 10) / (SQRT3 * 10))
    phone = sigmoid((25 - 10) / (SQRT3 * 10))
    assert header == ["apple", "phone"]
    assert numbers(rows) == [["apple", approx(apple), approx(1 - apple)], ["phone", approx(1 - phone), approx(phone)]]
    assert round(apple, 2) == 0.75  # the hand computation itself, in case both sides drift


def test_per_token_table_lists_most_attended_and_cosine():
    stdout = succeeds("attend", "apple phone", *toy("--preset", "textbook", "--temperature", "10")).stdout
    header, rows = table(stdout, "per token")
    w = sigmoid((29 - 10) / (SQRT3 * 10))
    context = np.array([5 * w, 2 * w + 5 * (1 - w), 0])  # w * apple + (1 - w) * phone
    cos = context @ [5, 2, 0] / (np.linalg.norm(context) * math.sqrt(29))
    assert header == ["#", "token", "attends most to", "cos(static, contextual)"]
    position, token, attended, printed_cos = rows[0]
    assert (position, token) == ("0", "apple")
    listed = [(word, float(weight)) for word, weight in re.findall(r"(\w+) ([\d.]+)", attended)]
    assert listed == [("apple", approx(w)), ("phone", approx(1 - w))]
    assert float(printed_cos) == approx(cos) and round(cos, 3) == 0.968


def test_top_limits_the_most_attended_list():
    doc = run_json(
        "attend", "apple phone the", *toy("--preset", "textbook", "--temperature", "10", "--top", "1"), "--json"
    )
    assert [[t["text"] for t in tops] for tops in doc["top_attended"]] == [["apple"], ["phone"], ["the"]]


# ------------------------------------------------------------------------------ scores, scale, temperature
def test_scale_divides_scores_by_sqrt_d():
    scaled = weights("apple phone", *toy("--preset", "textbook", "--temperature", "10"))
    unscaled = weights("apple phone", *toy("--preset", "textbook", "--temperature", "10", "--no-scale"))
    assert scaled[0, 0, 0, 1] == pytest.approx(sigmoid(-(29 - 10) / (SQRT3 * 10)), rel=1e-5)
    assert unscaled[0, 0, 0, 1] == pytest.approx(sigmoid(-(29 - 10) / 10), rel=1e-5)


def test_temperature_divides_scores():
    w = weights("apple phone", *toy("--preset", "notes", "--temperature", "20"))
    assert w[0, 0, 1, 0] == pytest.approx(sigmoid(-(25 - 10) / 20), rel=1e-5)


def test_notes_preset_does_not_scale():
    w = weights("apple phone", *toy("--preset", "notes"))
    assert w[0, 0, 0, 1] == pytest.approx(sigmoid(-(29 - 10)), rel=1e-4)


def test_sum_normalization_divides_by_the_row_sum():
    w = weights("apple phone", *toy("--preset", "textbook", "--normalization", "sum"))
    assert np.allclose(w[0, 0], [[29 / 39, 10 / 39], [10 / 35, 25 / 35]], rtol=1e-6)


# ------------------------------------------------------------------------------ projections
def test_random_projection_same_seed_same_weights():
    first = weights(SENTENCE, "--preset", "textbook", "--projection", "random", "--seed", "1")
    again = weights(SENTENCE, "--preset", "textbook", "--projection", "random", "--seed", "1")
    assert np.array_equal(first, again)


def test_random_projection_other_seed_other_weights():
    first = weights(SENTENCE, "--preset", "textbook", "--projection", "random", "--seed", "1")
    other = weights(SENTENCE, "--preset", "textbook", "--projection", "random", "--seed", "2")
    identity = weights(SENTENCE, "--preset", "textbook")
    assert np.abs(first - other).max() > 0.01
    assert np.abs(first - identity).max() > 0.01


def test_projection_file_equals_the_random_projection_it_was_saved_from(tmp_path):
    path = tmp_path / "proj.npz"
    save_projections(path, random_params(100, 100, AttentionConfig(), seed=5))
    from_file = weights(SENTENCE, "--preset", "textbook", "--projection", "file", "--weights", path)
    drawn = weights(SENTENCE, "--preset", "textbook", "--projection", "random", "--seed", "5")
    assert np.allclose(from_file, drawn, atol=1e-5)
    assert np.abs(from_file - weights(SENTENCE, "--preset", "textbook")).max() > 0.01


def test_weights_file_alone_selects_the_file_projection(tmp_path):
    path = tmp_path / "proj.npz"
    save_projections(path, random_params(100, 100, AttentionConfig(), seed=5))
    doc = run_json("attend", SENTENCE, "--preset", "textbook", "--weights", path, "--json")
    assert doc["settings"]["projection"] == "file"
    assert doc["settings"]["weights_file"] == str(path)


def test_projection_file_with_wrong_shapes_is_a_data_error(tmp_path):
    path = tmp_path / "proj.npz"
    save_projections(path, random_params(3, 3, AttentionConfig(), seed=5))  # 3-d, the store is 100-d
    message = fails(1, "attend", SENTENCE, "--preset", "textbook", "--weights", path)
    assert str(path) in message


# ------------------------------------------------------------------------------ masks
@pytest.mark.parametrize("mode", ["before", "after"])
def test_causal_weights_are_zero_above_the_diagonal(mode):
    w = weights(SENTENCE, "--preset", "textbook", "--causal", "--causal-mode", mode)[0, 0]
    assert np.all(w[np.triu_indices(len(w), k=1)] == 0.0)
    assert w.sum(axis=1) == pytest.approx(np.ones(len(w)), abs=1e-5)
    assert w[0, 0] == pytest.approx(1.0)  # the first token sees only itself


def test_causal_modes_agree():
    before = weights(SENTENCE, "--preset", "textbook", "--causal", "--causal-mode", "before")
    after = weights(SENTENCE, "--preset", "textbook", "--causal", "--causal-mode", "after")
    assert np.allclose(before, after, atol=1e-6)


def test_exclude_self_zeroes_the_diagonal():
    w = weights(SENTENCE, "--preset", "textbook", "--exclude-self")[0, 0]
    assert np.all(np.diag(w) == 0.0)
    assert w.sum(axis=1) == pytest.approx(np.ones(len(w)), abs=1e-5)


def test_exclude_self_on_the_toy_vectors_by_hand():
    w = weights("apple phone the", *toy("--preset", "notes", "--exclude-self", "--normalization", "sum"))[0, 0]
    # apple: [-, 10, 0] -> phone 1; the: [0, 0, -] -> both clamped to 0 -> uniform over the allowed keys
    assert np.allclose(w, [[0, 1, 0], [1, 0, 0], [0.5, 0.5, 0]])


def test_exclude_twins_masks_the_other_copy_and_the_document_lists_it():
    sentence = "we walked along the bank to the river bank"  # bank at 4 and 8, the at 3 and 6
    doc = run_json("attend", sentence, "--preset", "textbook", "--exclude-self", "--exclude-twins", "--json")
    w = np.array(doc["weights"])[0, 0]
    assert w[4, 8] == 0.0 and w[8, 4] == 0.0 and w[3, 6] == 0.0
    assert doc["masked_keys"][4] == [4, 8] and doc["masked_keys"][3] == [3, 6] and doc["masked_keys"][0] == [0]
    assert w.sum(axis=1) == pytest.approx(np.ones(len(w)), abs=1e-5)
    kept = weights(sentence, "--preset", "textbook", "--exclude-self")[0, 0]
    assert kept[8, 4] > 0.5  # the copy takes most of the weight when twins are kept


def test_one_token_with_exclude_self_has_an_all_zero_row():
    assert weights("bank", "--preset", "textbook", "--exclude-self").tolist() == [[[[0.0]]]]


@pytest.mark.parametrize("preset", ["default", "textbook"])
def test_json_weight_rows_sum_to_one(preset):
    w = weights("we sat on the river bank", "--preset", preset)
    assert w.sum(axis=-1) == pytest.approx(np.ones(w.shape[:-1]), abs=1e-5)


# ------------------------------------------------------------------------------ heads, layers, residual, norm
def test_heads_give_one_matrix_per_head():
    w = weights(SENTENCE, "--preset", "textbook", "--heads", "4")
    assert w.shape == (1, 4, 6, 6)
    assert w.sum(axis=-1) == pytest.approx(np.ones((1, 4, 6)), abs=1e-5)


def test_identity_heads_attend_over_slices_of_the_vector():
    # 3 heads on the 3-d toy vectors: head 0 sees only the first component, head 1 only the second
    w = weights("apple phone", *toy("--preset", "notes", "--heads", "3"))
    assert np.allclose(w[0, 0], [[1, sigmoid(-25)], [0.5, 0.5]], atol=1e-9)  # apple 5, phone 0
    assert w[0, 1, 0].tolist() == pytest.approx([sigmoid(-6), sigmoid(6)])  # apple 2, phone 5: [4, 10]


def test_layers_give_one_matrix_per_layer():
    stacked = weights(SENTENCE, "--preset", "textbook", "--layers", "3")
    single = weights(SENTENCE, "--preset", "textbook")
    assert stacked.shape == (3, 1, 6, 6)
    assert np.allclose(stacked[0], single[0], atol=1e-6)  # layer 0 does not depend on what follows
    assert np.abs(stacked[2] - stacked[0]).max() > 0.01


def test_residual_adds_the_input_to_the_context():
    plain = run_json("attend", SENTENCE, "--preset", "textbook", "--with-vectors", "--json")
    residual = run_json("attend", SENTENCE, "--preset", "textbook", "--residual", "--with-vectors", "--json")
    expected = np.array(plain["static"]) + np.array(plain["contextual"])
    assert np.allclose(residual["contextual"], expected, atol=1e-5)


def test_layer_norm_gives_mean_zero_variance_one():
    doc = run_json("attend", SENTENCE, "--preset", "textbook", "--residual", "--layer-norm", "--with-vectors", "--json")
    contextual = np.array(doc["contextual"])
    assert contextual.mean(axis=1) == pytest.approx(np.zeros(6), abs=1e-5)
    assert contextual.var(axis=1) == pytest.approx(np.ones(6), abs=1e-3)


def test_without_positions_word_order_only_permutes_the_weights():
    forward = weights("Apple makes phones", "--preset", "textbook")[0, 0]
    backward = weights("phones makes Apple", "--preset", "textbook")[0, 0]
    reverse = [2, 1, 0]
    assert np.allclose(backward, forward[np.ix_(reverse, reverse)], atol=1e-6)


def test_with_positions_word_order_changes_the_weights():
    forward = weights("Apple makes phones", "--preset", "textbook", "--positions")[0, 0]
    backward = weights("phones makes Apple", "--preset", "textbook", "--positions")[0, 0]
    reverse = [2, 1, 0]
    assert np.abs(backward - forward[np.ix_(reverse, reverse)]).max() > 0.01


# ------------------------------------------------------------------------------ what is shown
def test_all_heads_shows_the_heads_side_by_side():
    stdout = succeeds(
        "attend", "apple phone", *toy("--preset", "notes", "--heads", "3", "--all-heads"), env=WIDE
    ).stdout
    assert "attention weights, layer 0, every head" in stdout
    lines = stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if "every head" in line)
    assert lines[at + 1].split() == ["head", "0", "head", "1", "head", "2"]
    assert lines[at + 2].split() == ["apple", "phone"] * 3
    phone = lines[at + 4].translate({ord(g): " " for g in GLYPH_CHARS}).split()
    # head 0 [0.5, 0.5], head 1 [0, 1], head 2 [0.5, 0.5]
    assert numbers([phone]) == [["phone", approx(0.5), approx(0.5), 0, approx(1), approx(0.5), approx(0.5)]]


def test_head_selects_one_head():
    stdout = succeeds(
        "attend", "apple phone", *toy("--preset", "notes", "--heads", "3", "--head", "1"), env=WIDE
    ).stdout
    assert re.findall(r"attention weights, ([^(]+)\(", stdout) == ["layer 0, head 1 "]
    # head 1 sees the second components, apple 2 and phone 5: scores [4, 10] and [10, 25]
    rows = numbers(grid(stdout, "attention weights")[1])
    assert rows == [["apple", approx(sigmoid(-6)), approx(sigmoid(6))], ["phone", approx(0), approx(1)]]


def test_without_head_the_mean_of_heads_is_shown():
    stdout = succeeds("attend", "apple phone", *toy("--preset", "notes", "--heads", "3"), env=WIDE).stdout
    assert "attention weights, layer 0, mean of 3 heads" in stdout
    # phone: head 0 [0.5, 0.5], head 1 [0, 1], head 2 (0 and 0) [0.5, 0.5] -> mean [0.33, 0.67]
    assert numbers(grid(stdout, "attention weights")[1])[1] == ["phone", approx(1 / 3), approx(2 / 3)]


def test_layer_selects_a_layer():
    stdout = succeeds("attend", SENTENCE, "--preset", "textbook", "--layers", "2", "--layer", "0").stdout
    assert "attention weights, layer 0 (" in stdout and "layer 1" not in stdout


def test_layer_out_of_range_is_a_usage_error():
    message = fails(2, "attend", SENTENCE, "--preset", "textbook", "--layers", "2", "--layer", "2")
    assert "--layer 2" in message and "has 2 layers" in message


def test_head_out_of_range_is_a_usage_error():
    assert "--head 3" in fails(2, "attend", "apple phone", *toy("--preset", "notes", "--heads", "3", "--head", "3"))


def test_max_display_shows_a_window_with_a_note():
    sentence = " ".join(["the river bank was wide"] * 8)
    assert len(sentence.split()) == 40
    stdout = succeeds(
        "attend", sentence, "--preset", "textbook", "--max-display", "10", "--start", "5", env=WIDE
    ).stdout
    assert "window: tokens #5 to #14 of 40 (rows and columns)" in stdout
    labels = [line.split()[0] for line in stdout.splitlines() if re.match(r"^\s*\d+ [\w#]+ ", line)]
    assert labels[:10] == [str(n) for n in range(5, 15)]


def test_short_sentence_has_no_window_note():
    assert "window:" not in succeeds("attend", SENTENCE, "--preset", "textbook").stdout


# ------------------------------------------------------------------------------ --explain
def test_explain_prints_raw_scores_unscaled_with_notes_preset():
    stdout = succeeds("attend", "apple phone", *toy("--preset", "notes", "--explain")).stdout
    assert numbers(table(stdout, "3. raw scores")[1]) == [["apple", 29, 10], ["phone", 10, 25]]
    assert "4. no scaling (--no-scale): scaled scores = raw scores" in stdout


def test_explain_prints_scaled_scores_with_textbook_preset():
    stdout = succeeds("attend", "apple phone", *toy("--preset", "textbook", "--explain")).stdout
    assert f"{29 / SQRT3:.2f}" == "16.74" and f"{10 / SQRT3:.2f}" == "5.77"
    assert table(stdout, "4. scaled scores: divided by 1.732")[1] == [
        ["apple", "16.74", "5.77"],
        ["phone", "5.77", "14.43"],
    ]


def test_explain_prints_weights_and_weighted_sums():
    stdout = succeeds(
        "attend", "apple phone", *toy("--preset", "textbook", "--normalization", "sum", "--explain")
    ).stdout
    rows = numbers(table(stdout, "6. weights, sum")[1])
    assert rows == [["apple", approx(29 / 39), approx(10 / 39)], ["phone", approx(10 / 35), approx(25 / 35)]]
    apple = (29 * np.array([5, 2, 0]) + 10 * np.array([0, 5, 0])) / 39  # [3.72, 2.77, 0]
    phone = (10 * np.array([5, 2, 0]) + 25 * np.array([0, 5, 0])) / 35  # [1.43, 4.14, 0]
    lines = [line.strip() for line in stdout.splitlines()]
    at = lines.index("apple = 0.74·apple + 0.26·phone")
    assert lines[at + 1] == "= [" + ", ".join(f"{x:.2f}" for x in apple) + "]" == "= [3.72, 2.77, 0.00]"
    at = lines.index("phone = 0.29·apple + 0.71·phone")
    assert lines[at + 1] == "= [" + ", ".join(f"{x:.2f}" for x in phone) + "]"


def test_explain_json_has_the_same_numbers():
    steps = run_json("attend", "apple phone", *toy("--preset", "textbook", "--explain"), "--json")["explain"]
    assert steps["raw_scores"] == [[29.0, 10.0], [10.0, 25.0]]
    assert steps["divisor"] == pytest.approx(SQRT3)
    assert steps["scaled_scores"][0] == pytest.approx([29 / SQRT3, 10 / SQRT3])


def test_explain_says_identity_projection_has_no_parameters():
    stdout = succeeds(
        "attend", "apple phone", *toy("--preset", "textbook", "--projection", "identity", "--explain")
    ).stdout
    assert "2. queries, keys, values: q = k = v = x (no parameters)" in stdout


def test_explain_says_random_projection_projects():
    stdout = succeeds("attend", "the river bank", "--preset", "textbook", "--projection", "random", "--explain").stdout
    assert "2. queries, keys, values: projected to d_k = 100" in stdout


# ------------------------------------------------------------------------------ --with-vectors
def test_with_vectors_adds_static_and_contextual():
    doc = run_json(
        "attend", "apple phone", *toy("--preset", "textbook", "--normalization", "sum", "--with-vectors"), "--json"
    )
    assert doc["static"] == [[5.0, 2.0, 0.0], [0.0, 5.0, 0.0]]
    assert doc["contextual"][0] == pytest.approx([145 / 39, 108 / 39, 0.0], rel=1e-6)


def test_without_with_vectors_there_are_no_vectors():
    doc = run_json("attend", "apple phone", *toy("--preset", "textbook"), "--json")
    assert "static" not in doc and "contextual" not in doc


# ------------------------------------------------------------------------------ input and output
def test_dash_reads_the_sentence_from_stdin():
    doc = run_json("attend", "-", *toy("--preset", "textbook"), "--json", input="apple phone\n")
    assert doc["text"] == "apple phone"


def test_no_argument_reads_piped_stdin():
    doc = run_json("attend", *toy("--preset", "textbook"), "--json", input="phone apple\n")
    assert [t["text"] for t in doc["tokens"]] == ["phone", "apple"]


def test_stdin_that_is_not_utf8_is_a_data_error():
    assert "not valid UTF-8" in fails(1, "attend", "-", *toy("--preset", "textbook"), input=b"apple \xff\n")


def test_no_ansi_codes_when_stdout_is_not_a_terminal():
    result = succeeds("attend", "we sat on the river bank")
    assert "\x1b[" not in result.stdout and "0.00" in result.stdout


def test_no_ansi_codes_with_no_color_even_when_forced():
    env = {"NO_COLOR": "1", "TERM": "xterm-256color", "COLORTERM": "truecolor"}
    assert "\x1b[" not in succeeds("attend", "apple phone", *toy("--preset", "textbook"), env=env).stdout


def test_force_color_shades_heatmap_cells_by_value():
    env = {"FORCE_COLOR": "1", "NO_COLOR": None, "TERM": "xterm-256color", "COLORTERM": "truecolor"}
    stdout = succeeds("attend", "apple phone", *toy("--preset", "textbook", "--temperature", "10"), env=env).stdout
    # eighths of the largest weight (0.75) on the pictures' scale: 0.75 is level 8, 0.25 level 3
    from ctxembed.views.figures import colour

    for value, level in (("0.75", 8), ("0.25", 3)):
        red, green, blue = colour(level / 8)
        assert re.search(rf"\x1b\[[0-9;]*48;2;{red};{green};{blue}m +{value}\x1b\[0m", stdout), (value, stdout)


# ------------------------------------------------------------------------------ errors
def test_empty_sentence_is_a_data_error():
    assert "empty sentence" in fails(1, "attend", "  ")


def test_sentence_without_known_words_is_a_data_error():
    # vectors without subwords (the shipped store builds any word from its character n-grams)
    assert "no token is in the vocabulary: xqzzv qqxj" in fails(1, "attend", "xqzzv qqxj", *toy("--preset", "notes"))


def test_too_many_tokens_is_a_data_error_naming_the_limit():
    assert "--max-tokens 5" in fails(1, "attend", SENTENCE, "--max-tokens", "5")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--heads", "0"], "--heads"),
        (["--normalization", "foo"], "foo"),
        (["--heads", "3"], "3 heads"),
        (["--projection", "file"], "--weights"),
        (["--limit", "x"], "--limit"),
        (["--causal-mode", "sideways"], "sideways"),
        (["--oov", "drop"], "drop"),
        (["--preset", "fancy"], "fancy"),
        (["--temperature", "0"], "--temperature"),
        (["--no-such-flag"], "--no-such-flag"),
    ],
)
def test_malformed_options_are_usage_errors(args, words):
    assert words in fails(2, "attend", SENTENCE, *args)


def test_missing_weights_file_is_a_data_error(tmp_path):
    assert "no such file" in fails(1, "attend", SENTENCE, "--weights", tmp_path / "none.npz")


def test_errors_never_show_a_traceback_even_for_bad_vectors(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("2 3\napple 1 2\nphone 1 2 3\n")
    message = fails(1, "attend", "apple", "--vectors", bad)
    assert "line 2" in message


# ------------------------------------------------------------------------------ fitting the width
LONG = (
    "the old fisherman slowly walked along the muddy river bank near the village "
    "while his dog watched the two ducks on the cold water"
)


@pytest.mark.parametrize("columns", [60, 80, 120])
def test_a_24_token_sentence_fits_the_width_with_every_token_findable(columns):
    from rich.cells import cell_len

    assert len(LONG.split()) == 24
    stdout = succeeds("attend", LONG, env={"COLUMNS": str(columns)}).stdout
    lines = stdout.splitlines()
    assert max(cell_len(line) for line in lines) <= columns
    assert "…" not in stdout
    at = next(i for i, line in enumerate(lines) if line.startswith("attention weights"))
    matrix = "\n".join(lines[at : next(i for i, line in enumerate(lines) if line.startswith("per token"))])
    for position, token in enumerate(LONG.split()):
        assert re.search(rf"(^|\s){position} {token}(#\d)?(\s|$)", matrix, re.M), token  # a row label or the legend


def test_without_colour_the_weights_differ_by_glyph():
    stdout = succeeds("attend", LONG, env={"COLUMNS": "80", "NO_COLOR": "1"}).stdout
    rows = [line for line in stdout.splitlines() if re.match(r"^\s*\d+ \w+\s", line)]
    glyphs = {char for row in rows for char in row if char in GLYPH_CHARS}
    assert len(glyphs) >= 4 and "\x1b[" not in stdout


def test_focus_shows_a_row_and_a_column_for_a_long_sentence():
    stdout = succeeds("attend", LONG, "--focus", "bank", env={"COLUMNS": "60"}).stdout
    doc = run_json("attend", LONG, "--json")
    assert "attention of 'bank' (#9)" in stdout
    rows = [line for line in stdout.splitlines() if re.match(r"^│\s+\d+ │", line)]
    first = [cell.strip() for cell in rows[0].strip("│").split("│")]
    assert first[1] == "the" and float(first[2].split()[0]) == approx(doc["weights"][0][0][9][0])
    assert float(first[3].split()[0]) == approx(doc["weights"][0][0][0][9])


def test_focus_on_an_unknown_word_is_a_data_error():
    assert "--word 'zebra'" in fails(1, "attend", "the river bank", "--focus", "zebra")


@pytest.mark.parametrize(
    "args",
    [
        ("attend", "the river bank", "--focus", "money"),
        ("attend", "the river bank", "--focus", "bank#2"),
        ("attend", "the river bank", "--explain", "--focus", "money"),
        ("neighbors", "the river bank", "--word", "money"),
        ("compare", "the river bank", "a bank", "--word", "money"),
    ],
)
def test_a_word_not_in_the_sentence_exits_1_in_every_command(args):
    assert "money" in fails(1, *args) or "bank#2" in fails(1, *args)
