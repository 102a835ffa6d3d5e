"""The shipped learned weights: `--preset learned`, `before-after`, `--explain`, and the eval ladder."""

from __future__ import annotations

import numpy as np

from ctxembed.engine.projections import resolve_settings
from ctxembed.evaluation.ladder import ladder
from ctxembed.presets import PRESETS, build_settings
from ctxembed.vectors.weights import learned_weights_path, read_metadata, weights_path
from tests.cli_helpers import TOY, invoke, strict_json, succeeds

SENTENCE = "we sat on the river bank and watched the boats"


def test_the_shipped_file_is_small_and_records_the_preset():
    path = learned_weights_path()
    assert path.stat().st_size <= 1_000_000
    meta = read_metadata(path)
    preset = PRESETS["learned"].values()
    recorded = meta["settings"]["attention"] | {k: v for k, v in meta["settings"].items() if k in ("abtt", "sif")}
    assert {k: preset[k] for k in recorded} == recorded  # the preset declares what the file was trained with
    assert meta["settings"]["attention"]["layers"] >= 2  # so W_query learns (see test_backprop)
    assert meta["complete"] and meta["losses"]["held_out"] < meta["losses"]["held_out_initial"]
    assert {"l0.h0.W_query", "l1.h0.W_query", "l1.W_out"} <= set(meta["learned"])


def test_learned_attention_differs_from_default():
    learned = strict_json(succeeds("attend", SENTENCE, "--preset", "learned", "--json").stdout)
    default = strict_json(succeeds("attend", SENTENCE, "--json").stdout)
    assert learned["settings"]["preset"] == "learned" and learned["settings"]["projection"] == "file"
    assert np.shape(learned["weights"])[:2] == (2, 4)
    ours = np.asarray(learned["weights"])[-1].mean(axis=0)
    theirs = np.asarray(default["weights"])[-1].mean(axis=0)
    assert np.abs(ours - theirs).max() > 0.05


def test_weights_flag_takes_the_architecture_from_the_file():
    path = str(learned_weights_path())
    settings = resolve_settings("default", weights_file=path)
    assert settings.attention == PRESETS["learned"].attention
    # the ingredients and the read-out the file was trained with, not the default preset's (mix 0.2,0.8)
    assert (settings.abtt, settings.sif, settings.mix, settings.mix_norm) == (3, 1e-4, "0.5,0.5", True)
    assert settings.attention.position_mode == "query-key"
    # nothing of the default preset leaks in (e.g. mix); the preset names the shipped file, found here
    assert settings.values() == PRESETS["learned"].values() | {"weights_file": path}
    assert weights_path(PRESETS["learned"].weights_file) == path
    assert resolve_settings("default", weights_file=path, heads=4).attention.heads == 4
    # the presets read no file: without the recorded settings, the default preset's own remain
    assert build_settings("default", weights_file=path).mix == PRESETS["default"].mix


def test_before_after_shows_initial_and_trained_attention():
    doc = strict_json(succeeds("before-after", SENTENCE, "--json").stdout)
    before, after = np.asarray(doc["before"]["weights"]), np.asarray(doc["after"]["weights"])
    assert before.shape == after.shape and not np.allclose(before, after)
    # "before" is exactly the untrained model: random projections from the recorded seed
    initial = strict_json(
        succeeds(
            "attend", SENTENCE, "--preset", "textbook", "--projection", "random", "--seed", str(doc["init"]["seed"]),
            "--layers", "2", "--heads", "4", "--residual", "--positions", "--position-mode", "query-key",
            "--output-projection", "--exclude-self", "--abtt", "3", "--sif", "1e-4", "--json",
        ).stdout
    )  # fmt: skip
    np.testing.assert_allclose(before, np.asarray(initial["weights"]), atol=1e-6)
    from tests.test_json_schema import assert_valid

    assert_valid(doc, "ctxembed.before-after/1")
    table = succeeds("before-after", SENTENCE).stdout
    assert "before training" in table and "after training" in table


def test_before_after_needs_a_trained_file(tmp_path):
    from ctxembed.core.projections import random_params
    from ctxembed.vectors.weights import save_projections

    plain = tmp_path / "plain.npz"
    config = build_settings("textbook", layers=1, heads=1).attention
    save_projections(plain, random_params(100, 100, config))
    result = invoke("before-after", SENTENCE, "--weights", plain)
    assert result.exit_code == 1 and "not written by `ctxembed train`" in result.stderr


def test_explain_names_the_learned_matrices():
    doc = strict_json(succeeds("attend", "the bank was closed", "--preset", "learned", "--explain", "--json").stdout)
    assert "W_query" in doc["explain"]["projections"] and "learned by `ctxembed train`" in doc["explain"]["projections"]
    assert any("read from learned-brown-2x4.npz" in line for line in build_settings("learned").explain())


def test_the_eval_ladder_has_the_learned_rung():
    assert "learned" in ladder()
    doc = strict_json(succeeds("eval", "senses", "--config", "learned", "--json").stdout)
    assert doc["configs"][0]["name"] == "learned"


def test_the_learned_rung_fits_only_the_shipped_vectors():
    from ctxembed.vectors.sources import open_vectors
    from ctxembed.vectors.weights import fits_learned_weights

    assert fits_learned_weights(open_vectors(None))
    assert not fits_learned_weights(open_vectors(TOY))


def test_before_after_refuses_a_layer_or_head_the_model_lacks_before_running_it(monkeypatch):
    import pytest

    from ctxembed.engine import Engine
    from ctxembed.errors import UsageError
    from ctxembed.train.before_after import before_after

    def must_not_run(self, *args, **kwargs):
        raise AssertionError("attention ran before the view was checked")

    monkeypatch.setattr(Engine, "run", must_not_run)
    layers = build_settings("learned").attention.layers
    with pytest.raises(UsageError, match="layer"):
        before_after(SENTENCE, layer=layers, on_note=None)
    result = invoke("before-after", SENTENCE, "--head", "99")
    assert result.exit_code == 2 and result.stdout == "" and result.stderr.startswith("ctxembed: error:")
