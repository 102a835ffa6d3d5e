"""`ctxembed compare`'s per-layer cosines (``layers``): a word's cosine across sentences at the
attention input and after each layer, beside the chosen read-out, under every model."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ctxembed.api import Explorer
from tests.cli_helpers import TOY, invoke, run_json

RIVER = ["we sat on the river bank", "fishermen lined the grassy bank of the stream"]
MONEY = ["I deposited money in the bank", "she opened a savings account at the bank"]


def cos(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def by_hand(vectors: list[np.ndarray]) -> np.ndarray:
    """(N, N) cosines of N vectors, pair by pair."""
    return np.array([[cos(a, b) for b in vectors] for a in vectors])


def test_glove_layers_are_the_cosines_of_the_input_and_of_each_layer_output():
    explorer = Explorer(layers=3, heads=2)  # the default preset, three layers
    sentences = RIVER + MONEY
    doc = explorer.compare(sentences, "bank").document()
    results = explorer.contextualize(sentences)
    rows = [r.index_of("bank") for r in results]
    layers = np.array(doc["layers"])
    assert layers.shape == (4, 4, 4)  # (L + 1, N, N)
    # layer 0: the attention input (after all-but-the-top); the vectors of one word are the same there
    assert layers[0] == pytest.approx(by_hand([r.inputs[i] for r, i in zip(results, rows, strict=True)]), abs=1e-6)
    assert layers[0] == pytest.approx(np.ones((4, 4)), abs=1e-6)
    # layers 1 and 2 feed the next layer; layer 3 is the last output, before the default preset's mix
    for layer in (1, 2):
        expected = by_hand([r.layer_inputs[layer][i] for r, i in zip(results, rows, strict=True)])
        assert layers[layer] == pytest.approx(expected, abs=1e-6)
    last = by_hand([r.last_layer[i] for r, i in zip(results, rows, strict=True)])
    assert layers[3] == pytest.approx(last, abs=1e-6)
    assert not np.allclose(layers[3], doc["contextual_similarity"], atol=1e-3)  # the read-out mixes h0 in
    assert np.abs(layers[1] - layers[3]).max() > 1e-3  # the layers differ from each other


def test_without_word_each_shared_word_has_its_layers_and_the_top_level_none():
    doc = run_json(
        "compare",
        "the apple is the phone",
        "the phone is the apple",
        "--vectors",
        TOY,
        "--preset",
        "textbook",
        "--json",
    )
    assert doc["word"] is None and doc["layers"] is None
    assert [len(entry["layers"]) for entry in doc["words"]] == [2] * len(doc["words"])  # h0, one layer


def test_the_layers_table_fits_80_columns_and_holds_every_pair():
    sentences = [f"the {w} bank was there" for w in ("river", "money", "old", "new", "grassy", "savings")]
    result = invoke("compare", *sentences, "--word", "bank", "--layers", "2", env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, "\n".join(line for line in lines if len(line) > 80)
    pairs = [f"S{i}-S{j}" for i, j in itertools.combinations(range(1, 7), 2)]
    shown = [pair for pair in pairs if pair in result.stdout]
    assert shown == pairs, result.stdout  # 15 pairs, split over tables as the width holds them
    body = [line for line in lines if line.lstrip("│ ").startswith(("0 ", "1 ", "2 ", "read-out"))]
    assert len(body) >= 4 * 2  # rows 0, 1, 2 and read-out, in each of the (at least two) tables


def test_two_sentences_give_one_row_per_layer_with_the_pairs_cosine():
    doc = run_json("compare", *RIVER, "--word", "bank", "--layers", "2", "--json")
    result = invoke("compare", *RIVER, "--word", "bank", "--layers", "2", env={"COLUMNS": "80"})
    title = "cosine of 'bank' at each layer"
    after = result.stdout[result.stdout.index(title) :].splitlines()
    rows = [line.strip("│ ").split("│") for line in after if line.startswith("│")]
    got = {row[0].strip(): float(row[1]) for row in rows}
    expected = {str(layer): m[0][1] for layer, m in enumerate(doc["layers"])}
    expected["read-out"] = doc["contextual_similarity"][0][1]
    assert got == {label: pytest.approx(value, abs=5e-4) for label, value in expected.items()}


# ------------------------------------------------------------------ the trained model


def test_minilm_layers_are_the_mean_of_the_words_pieces_at_each_hidden_state(minilm_folder):
    from ctxembed.engine.registry import open_engine

    sentences = ["the unbelievable riverbank flooded", "an unbelievable riverbank of money"]
    doc = run_json("compare", *sentences, "--word", "riverbank", "--model", "minilm", "--json")
    engine = open_engine(model="minilm")
    results = engine.run([engine.prepare(s) for s in sentences])
    vectors = []  # per sentence: (L + 1, D) the mean of riverbank's pieces at each hidden state
    for result in results:
        row = result.index_of("riverbank")
        pieces = np.flatnonzero(result.prepared.owner == row)
        assert len(pieces) > 1  # the word is split: the mean is over several pieces
        vectors.append(result.piece_hidden[:, pieces].astype(np.float64).mean(axis=1))
    layers = np.array(doc["layers"])
    assert layers.shape == (7, 2, 2)  # embeddings output + 6 layers
    for layer in range(7):
        assert layers[layer, 0, 1] == pytest.approx(cos(vectors[0][layer], vectors[1][layer]), abs=1e-5)
    # the read-out: the mean of the 7 hidden states
    readout = cos(vectors[0].mean(axis=0), vectors[1].mean(axis=0))
    assert doc["contextual_similarity"][0][1] == pytest.approx(readout, abs=1e-5)


def test_minilm_four_bank_sentences_same_sense_pairs_above_every_cross_pair(minilm_folder):
    doc = run_json("compare", *RIVER, *MONEY, "--word", "bank", "--model", "minilm", "--json")
    same = [(0, 1), (2, 3)]
    cross = list(itertools.product((0, 1), (2, 3)))
    readout = np.array(doc["contextual_similarity"])
    assert min(readout[p] for p in same) > max(readout[p] for p in cross), readout.round(3)
    layers = np.array(doc["layers"])
    assert layers.shape == (7, 4, 4)
    # every attention layer separates the senses; the input (layer 0: embeddings + positions) cannot
    for layer in range(1, 7):
        assert min(layers[layer][p] for p in same) > max(layers[layer][p] for p in cross), (layer, layers[layer])
    assert layers[0][0, 2] > layers[0][0, 1]  # S1 and S3 hold 'bank' at the same position, river and money


def test_minilm_layers_table_in_the_terminal(minilm_folder):
    result = invoke("compare", *RIVER, *MONEY, "--word", "bank", "--model", "minilm", env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    after = result.stdout[result.stdout.index("cosine of 'bank' at each layer") :].splitlines()
    labels = [line.strip("│ ").split("│")[0].strip() for line in after if line.startswith("│")]
    assert labels == ["0", "1", "2", "3", "4", "5", "6", "read-out"]


def test_the_compare_figure_has_the_layers_panel(tmp_path):
    from ctxembed.views.export import save_document
    from tests.test_export import svg_texts

    doc = run_json("compare", *RIVER, MONEY[0], "--word", "bank", "--json")
    save_document(doc, tmp_path / "c.svg")
    texts = svg_texts(tmp_path / "c.svg")
    assert any(t.startswith("cosine of 'bank' at each layer (colours ") for t in texts)
    assert {"layer 0", "layer 1", "read-out", "S1-S2", "S1-S3", "S2-S3"} <= set(texts)
    from ctxembed.views.figures import build_figure

    [panel] = [p for p in build_figure(doc).panels if p.title.startswith("cosine of 'bank' at each layer")]
    layers, readout = np.array(doc["layers"]), np.array(doc["contextual_similarity"])
    expected = [[m[0, 1], m[0, 2], m[1, 2]] for m in [*layers, readout]]  # rows: layers, then the read-out
    np.testing.assert_allclose(panel.values, expected, atol=1e-12)
