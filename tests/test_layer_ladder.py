"""eval's per-layer ladder: NAME@N reads configuration NAME out at layer N, the same vectors the
engine computed at that layer."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ctxembed.engine import Engine
from ctxembed.errors import UsageError
from ctxembed.evaluation.evaluate import Occurrence, named_settings, target_vectors
from ctxembed.vectors.sources import open_vectors
from tests.cli_helpers import run_json
from tests.conftest import FIXTURES

SENTENCES = ["we sat on the river bank".split(), "I deposited money in the bank".split()]


@pytest.fixture(scope="module")
def store():
    return open_vectors(None)


def test_a_layer_rung_is_its_configuration_read_out_at_that_layer():
    learned = named_settings("learned")
    rung = named_settings("learned@1")
    assert rung.attention == learned.attention and rung.weights_file == learned.weights_file
    assert (rung.mix, rung.mix_norm, rung.preset) == ("0,1,0", False, "learned@1")
    assert named_settings("default@0").mix == "1,0"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("learned@3", "learned@3: learned has no hidden state 3; its hidden states are 0 (the input) to 2"),
        ("static@0", "static@0: static has no layers to read out"),
        ("learned@x", "learned@x: the hidden state after @ must be a whole number, as in learned@1"),
        ("learned@1@0", "learned@1@0: the hidden state after @ must be a whole number, as in learned@1"),
        ("nope@1", "unknown configuration 'nope'"),
    ],
)
def test_impossible_rungs_are_usage_errors(name, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        named_settings(name)


@pytest.mark.parametrize("layer", [0, 1, 2])
def test_layer_rungs_give_the_engines_own_layer_vectors(store, layer):
    occurrences = [Occurrence(words, len(words) - 1, "bank") for words in SENTENCES]
    vectors, found, _ = target_vectors(store, named_settings(f"learned@{layer}"), occurrences)
    assert found.all()
    engine = Engine(store, named_settings("learned"))
    for words, vector in zip(SENTENCES, vectors, strict=True):
        [result] = engine.run([engine.prepare(" ".join(words), words=words)])
        expected = result.layers()[layer, -1]  # (L + 1, T, d): h0 the attention input ... h2
        np.testing.assert_allclose(vector, expected, rtol=1e-5, atol=1e-6)


def test_eval_pairs_takes_layer_rungs():
    doc = run_json("eval", "pairs", FIXTURES / "scws_tiny.txt", "-c", "learned@0", "-c", "learned@2", "--json")
    assert [row["name"] for row in doc["configs"]] == ["learned@0", "learned@2"]
    assert doc["configs"][0]["spearman"] != doc["configs"][1]["spearman"]
