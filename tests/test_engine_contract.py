"""The engine contract and the model registry: commands open an engine by model name and read it
through ContextEngine alone; rows are words of ctxembed's tokenizer."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from ctxembed.engine import MODELS, ContextEngine, Engine, open_engine
from ctxembed.errors import SettingError


@pytest.fixture(scope="module")
def engine():
    return open_engine(None, "textbook", heads=2, layers=2)


def test_the_default_model_is_the_glove_engine_and_keeps_the_contract(engine):
    assert isinstance(engine, Engine) and engine.model == "glove"
    assert isinstance(engine, ContextEngine)
    assert (engine.layers, engine.heads) == (2, 2)
    assert engine.describe() == engine.settings.as_dict() and engine.summary() == engine.settings.summary()


def test_every_registered_model_opens_an_engine_named_after_its_entry():
    for name, entry in MODELS.items():
        assert entry.name == name and entry.summary
    assert open_engine(None, model="glove").model == "glove"


def test_an_unknown_model_is_a_setting_error_naming_the_known_ones():
    with pytest.raises(SettingError, match="no such model.*known: glove") as caught:
        open_engine(None, model="no-such-model")
    assert caught.value.render(lambda name: f"--{name}").startswith("--model 'no-such-model'")


def test_rows_are_words_and_weights_are_layers_heads_words_words(engine):
    [result] = engine.run([engine.prepare("we sat on the river bank by the bank")])
    T = len(result.prepared.used)
    assert T == 9 and result.contextual.shape == (T, engine.out_dim)
    assert result.weights.shape == (engine.layers, engine.heads, T, T)
    first, second = result.index_of("bank"), result.index_of("bank#2")
    assert (first, second) == (5, 8)
    # the textbook path without positions gives a word's copies one vector: positions tell them apart
    placed = open_engine(None, "textbook", heads=2, layers=2, positions=True)
    [result] = placed.run([placed.prepare("we sat on the river bank by the bank")])
    assert not np.array_equal(result.contextual[first], result.contextual[second])  # context differs


def test_importing_the_contract_or_the_registry_does_not_load_an_engine():
    code = (
        "import sys; import ctxembed.engine.contract, ctxembed.engine.registry; "
        "print('ctxembed.engine.glove' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


def test_the_glove_card_says_what_its_settings_make_it():
    from ctxembed.engine.contract import ModelCard

    card = open_engine(None, "default").card
    assert isinstance(card, ModelCard) and (card.name, card.family, card.units) == ("glove", "attention", "words")
    assert (card.layers, card.heads, card.out_dim) == (1, 1, card.dim) and card.dim > 0
    assert card.masks.masked == ("self", "twins") and not card.masks.causal and not card.masks.hidden
    assert card.readout == "0.2·h0 + 0.8·h1" and not card.trained
    assert {"vectors", "limit", "trust", "oov", "max_tokens", "causal", "heads"} <= card.options
    causal = open_engine(None, "textbook", causal=True, residual=True, residual_scale=0.5, layers=2).card
    assert causal.masks.masked == ("causal",) and causal.readout == "the last layer" and causal.residual == 0.5


def test_the_column_kernel_is_declared_not_probed(engine):
    from ctxembed.engine.contract import ColumnKernel

    assert engine.columns is engine and isinstance(engine.columns, ColumnKernel)


def test_the_trained_card_hides_its_special_pieces_and_takes_only_max_tokens(minilm_folder):
    engine = open_engine(model="minilm")
    card = engine.card
    assert (card.name, card.family, card.units, card.trained) == ("minilm", "bert", "wordpieces", True)
    assert (card.layers, card.heads, card.dim, card.out_dim) == (6, 12, 384, 384)
    assert card.masks.masked == () and card.masks.hidden == ("[CLS]", "[SEP]")
    assert card.options == frozenset({"max_tokens", "mix", "mix_norm", "window"}) and engine.columns is None
    assert card.readout.count("h") == 7  # the mean of h0 ... h6


@pytest.fixture(params=[*MODELS, "tiny"])
def registered(request):
    """Every model of the registry, and the tiny second BERT (tests/tiny_model.py) registered beside them."""
    name = request.param
    if name == "tiny":
        request.getfixturevalue("tiny_model")
    elif MODELS[name].trained:
        request.getfixturevalue("minilm_folder")
    return name


def test_every_registered_model_keeps_the_contract_its_card_states(registered):
    from ctxembed.engine.contract import ColumnKernel, ModelCard
    from ctxembed.engine.registry import entry_of

    engine = open_engine(model=registered)
    card = engine.card
    assert isinstance(engine, ContextEngine) and isinstance(card, ModelCard) and engine.model == card.name == registered
    assert card.trained == entry_of(registered).trained and card.units in ("words", "wordpieces") and card.options
    assert engine.columns is None or isinstance(engine.columns, ColumnKernel)
    sizes = (engine.layers, engine.heads, engine.dim, engine.out_dim)
    assert sizes == (card.layers, card.heads, card.dim, card.out_dim)
    [result] = engine.run([engine.prepare("we sat on the river bank by the bank")])
    T = len(result.prepared.used)
    assert result.weights.shape == (card.layers, card.heads, T, T) and result.contextual.shape == (T, card.out_dim)
    np.testing.assert_allclose(result.weights.sum(axis=-1), 1.0, atol=1e-5)  # every word's row is a distribution
    assert engine.describe() and card.name in engine.summary() + engine.describe().get("model", "glove")


def test_the_model_a_configuration_reads_out_is_a_field_not_a_preset_string(tiny_model):
    from dataclasses import replace

    from ctxembed.engine.registry import model_of
    from ctxembed.evaluation.evaluate import named_settings
    from ctxembed.presets import build_settings

    at_1 = named_settings("tiny@1")
    assert (at_1.model, at_1.preset, at_1.mix) == ("tiny", "tiny@1", "0,1,0") and model_of(at_1) == "tiny"
    named_like_it = replace(build_settings("textbook"), preset="tiny@1")  # a name is only a name
    assert model_of(named_like_it) == "glove" and "model" not in named_like_it.as_dict()
