"""Options a model does not take are refused before any work, in one line naming the option and the model
(exit 2), never silently recorded in a document: on the command line, in the API and on the page. Each
command's help says which options each model takes, from the registry's one declaration."""

from __future__ import annotations

import pytest

import ctxembed
from ctxembed.engine.registry import MODELS, model_options
from ctxembed.errors import SettingError
from tests.cli_helpers import fails, invoke, run_json, strict_json

SENTENCE = "we sat on the river bank"

# commands that take --model, each with its own arguments; none of them reads its input before refusing
COMMANDS = [
    ("attend", SENTENCE),
    ("compare", SENTENCE, "the bank lent money", "--word", "bank"),
    ("neighbors", SENTENCE, "--word", "bank"),
    ("batch", "/nonexistent/lines.txt"),
    ("senses", "bank", "--corpus", "/nonexistent/corpus.txt"),
    ("eval", "pairs", "/nonexistent/pairs.txt"),
]
NOT_TAKEN = [
    (("--vectors", "/nonexistent.txt"), "--vectors does not apply"),
    (("--limit", "5"), "--limit does not apply"),
    (("--trust",), "--trust does not apply"),
    (("--oov", "zero"), "--oov does not apply"),
    (("--oov", "skip"), "--oov does not apply"),  # given, even at glove's default
    (("--heads", "2", "--causal"), "--causal, --heads do not apply"),
]


def test_the_reported_neighbors_command_is_refused_in_one_line():
    line = fails(
        2, "neighbors", SENTENCE, "--word", "bank", "--model", "minilm", "--vectors", "/nonexistent.txt", "--limit", "5"
    )
    assert line == (
        "ctxembed: error: --vectors, --limit do not apply to --model minilm: it runs as trained and takes only "
        "--max-tokens, --mix, --mix-norm, --window"
    )


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
@pytest.mark.parametrize(("given", "message"), NOT_TAKEN, ids=lambda g: " ".join(g) if isinstance(g, tuple) else "")
def test_every_command_refuses_what_the_trained_model_does_not_take(command, given, message):
    """Refused before the input is read (each command names a file that does not exist), whether or not
    the model is installed."""
    line = fails(2, *command, "--model", "minilm", *given)
    assert message in line and "--model minilm" in line


def test_vectors_from_the_environment_are_left_unread_by_a_model_that_reads_none(minilm_folder):
    doc = run_json("attend", SENTENCE, "--model", "minilm", "--json", env={"CTXEMBED_VECTORS": "/nonexistent.txt"})
    assert doc["vectors"]["source"] == "default" and "/nonexistent" not in str(doc)
    # named on the command line too, the same file is the environment's value: not an option given
    line = fails(
        2, "attend", SENTENCE, "--model", "minilm", "--vectors", "/other.txt", env={"CTXEMBED_VECTORS": "/x.txt"}
    )
    assert "--vectors does not apply" in line


def test_what_the_model_takes_is_accepted(minilm_folder):
    doc = run_json("attend", SENTENCE, "--model", "minilm", "--max-tokens", "20", "--json")
    assert doc["settings"]["model"] == "minilm"
    assert (
        model_options("minilm")
        == frozenset({"max_tokens", "mix", "mix_norm", "window"})
        == frozenset(ctxembed.Explorer(model="minilm").engine.card.options)
    )


@pytest.mark.parametrize(
    "keywords",
    [{"vectors": "notes-toy"}, {"limit": 5}, {"trust": True}, {"oov": "zero"}, {"heads": 2}, {"preset": "notes"}],
)
def test_the_api_raises_a_setting_error_naming_the_keyword(keywords):
    name = next(iter(keywords))
    shown = "preset 'notes'" if name == "preset" else name
    with pytest.raises(SettingError, match=rf"^{shown} does not apply to model minilm"):
        ctxembed.Explorer(model="minilm", **keywords)

    def untouched():
        raise AssertionError("a line was read before the settings were checked")
        yield

    with pytest.raises(SettingError, match=rf"^{shown} does not apply to model minilm"):
        next(ctxembed.embed_lines(untouched(), model="minilm", **keywords))


def test_the_api_defaults_are_not_options_given(minilm_folder):
    explorer = ctxembed.Explorer(model="minilm", oov="skip", trust=False, limit=None, preset="default")
    assert explorer.engine.card.name == "minilm"


def test_the_page_opens_a_model_without_the_servers_vectors(minilm_folder):
    """A server started with other vectors (and a limit) serves the trained model with its own words."""
    from ctxembed.serve.endpoints import Explorers, answer

    explorers = Explorers("notes-toy", limit=3)
    doc = answer("attend", {"sentence": SENTENCE, "model": "minilm"}, explorers)
    assert doc["vectors"]["source"] == "default" and doc["settings"]["model"] == "minilm"
    assert answer("attend", {"sentence": "apple is the phone", "preset": "notes"}, explorers)["vectors"]["words"] == 3


@pytest.mark.parametrize("command", ["attend", "batch", "neighbors", "senses", "eval pairs"])
def test_each_commands_help_says_what_each_model_takes(command):
    shown = " ".join(invoke(*command.split(), "--help").stdout.split()).replace("--mix- norm", "--mix-norm")  # wrapped
    taken = "minilm: --max-tokens, --mix, --mix-norm, --window (others are refused)."
    assert f"Options each model takes: glove: every option; {taken}" in shown
    assert set(MODELS) == {"glove", "minilm"}  # the line above lists every model of the registry


def test_dask_refuses_on_the_client_before_reading_the_file():
    pytest.importorskip("dask")
    from ctxembed.batch.scale import embed_file, to_parquet

    with pytest.raises(SettingError, match=r"^limit does not apply to model minilm"):
        embed_file("/nonexistent/corpus.txt", model="minilm", limit=3, weights=False)
    with pytest.raises(SettingError, match=r"^preset 'notes' does not apply to model minilm"):
        to_parquet("/nonexistent/corpus.txt", "/nonexistent/parts", model="minilm", preset="notes")


def test_side_by_side_gives_its_vectors_only_to_the_models_that_read_vectors(minilm_folder, tmp_path):
    path = tmp_path / "v.vec"
    path.write_text("4 3\nbank 1 0 0\nriver 0 1 0\nwe 0 0 1\nsat 1 1 0\n")
    result = invoke("side-by-side", SENTENCE, "--word", "bank", "--vectors", path, "--json")  # notes on stderr
    assert result.exit_code == 0 and "minilm default left out" not in result.stderr
    doc = strict_json(result.stdout)
    views = [(m["model"], m["preset"]) for m in doc["models"]]
    assert ("glove", "default") in views and ("minilm", "default") in views
    assert all(missing["model"] != "minilm" for missing in doc["missing"])


def test_a_trained_models_mix_norm_normalises_each_hidden_state_as_glove_s_does(tiny_model):
    """--mix-norm, which a trained model takes, reads each hidden state at unit length before mixing (it was
    accepted and ignored: the read-out mixed the raw states)."""
    import numpy as np

    from ctxembed.engine import open_engine

    plain = open_engine(model=tiny_model.name, mix="0,1,1")
    normed = open_engine(model=tiny_model.name, mix="0,1,1", mix_norm=True)
    assert normed.mix.normalize and not plain.mix.normalize
    [result] = normed.run([normed.prepare("we sat on the river bank")], weights=False)
    layers = np.stack([*result.layer_inputs, result.top])  # (K, W, D) h0 .. hL
    units = layers / np.linalg.norm(layers, axis=-1, keepdims=True)
    expected = normed.mix.gamma * (0.5 * units[1] + 0.5 * units[2])  # the mix's weights, each state at unit length
    np.testing.assert_allclose(result.contextual, expected, rtol=1e-5, atol=1e-6)
    assert "/|h1|" in normed.summary() and "/|h1|" not in plain.summary()
