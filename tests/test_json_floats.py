"""One float form per value: the shortest decimal that reads back as the same float32."""

from __future__ import annotations

import json
import re

import numpy as np

from ctxembed.output import dumps, shortest_float32
from tests.cli_helpers import succeeds


def test_shortest_float32_form():
    assert shortest_float32(0.7109222412109375) == 0.71092224
    assert shortest_float32(0.9999999999999999) == 1.0
    assert shortest_float32(np.float32(0.1)) == 0.1
    assert shortest_float32(float("nan")) is None and shortest_float32(1e39) is None
    document = {"x": np.array([[0.9999999999999999, 0.5]]), "y": np.float64(1 / 3)}
    assert dumps(document) == '{"x":[[1.0,0.5]],"y":0.33333334}'


def test_a_weight_prints_the_same_in_weights_and_top_attended():
    text = succeeds("attend", "we sat on the river bank", "--json", "--preset", "textbook", "--top", "6").stdout
    doc = json.loads(text)
    printed = set(re.findall(r'"weight":([0-9.e-]+)', text))
    assert printed
    weights_text = text[text.index('"weights":') : text.index('"top_attended":')]
    for number in printed:  # top_attended's numbers appear verbatim among the weights
        assert number in weights_text, number
    assert len(doc["top_attended"]) == len(doc["tokens"])


def test_the_static_diagonal_is_exactly_one():
    doc = json.loads(
        succeeds("compare", "-w", "bank", "the river bank", "the money bank", "--json", "--preset", "textbook").stdout
    )
    text = json.dumps(doc)
    assert "0.9999999999999999" not in text and "1.0000000000000002" not in text
    word = doc["words"][0] if "words" in doc else doc
    matrix = word.get("static_similarity") or word.get("static")
    assert all(matrix[i][i] == 1.0 for i in range(len(matrix)))
