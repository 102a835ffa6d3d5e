"""The layer mix: its maths (ctxembed.core.mix), its files (ctxembed.evaluation.mixfit) and its place in the engine."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ctxembed.core import mix
from ctxembed.engine import Engine
from ctxembed.errors import DataError, SettingError
from ctxembed.presets import build_settings
from ctxembed.vectors.mixfiles import MIX_SCHEMA, learned_path, resolve_mix
from ctxembed.vectors.sources import open_vectors


# ------------------------------------------------------------------------------ weights
def test_weights_are_normalised_to_sum_one():
    assert mix.parse_weights("1,3") == (0.25, 0.75)
    assert mix.parse_weights(" 0.2 , 0.8 ") == pytest.approx((0.2, 0.8))


def test_weights_whose_sum_overflows_are_normalised_too():
    # 1e308 + 1e308 is inf in float64: dividing by it made every weight 0 (an all-zero mix)
    assert mix.parse_weights("1e308,1e308") == (0.5, 0.5)
    assert mix.parse_weights("1.7e308,1.7e308,1.7e308") == pytest.approx((1 / 3, 1 / 3, 1 / 3))
    assert mix.parse_weights("1e308,1") == pytest.approx((1.0, 0.0))


@pytest.mark.parametrize("text", ["0.2,x", "0.5", "-1,2", "0,0", "nan,1", "inf,1"])
def test_bad_weights_are_refused(text):
    with pytest.raises(ValueError):
        mix.parse_weights(text)


def test_a_single_number_is_told_to_name_every_layer():
    with pytest.raises(ValueError, match=r"e\.g\. 0\.2,0\.8"):
        mix.check_spec("0.2")
    assert mix.check_spec("off") == "off" and mix.check_spec("learned") == "learned"
    assert mix.check_spec("my-mix.json") == "my-mix.json"  # a file: read when used


def test_two_weights_name_layer_zero_and_the_last_layer():
    assert list(mix.layer_weights((0.2, 0.8), 1)) == [0.2, 0.8]
    assert list(mix.layer_weights((0.2, 0.8), 3)) == [0.2, 0, 0, 0.8]
    assert list(mix.layer_weights((0.2, 0.3, 0.5), 2)) == [0.2, 0.3, 0.5]
    with pytest.raises(ValueError, match="3 weights but there are 4 layers"):
        mix.layer_weights((0.2, 0.3, 0.5), 3)


def test_mix_is_the_weighted_sum_times_gamma():
    layers = np.array([[[1.0, 0.0], [2.0, 2.0]], [[0.0, 4.0], [0.0, 0.0]]])  # (K=2, T=2, d=2)
    mixed = mix.mix_layers(layers, np.array([0.25, 0.75]), gamma=2.0)  # (T, d)
    assert mixed.tolist() == [[0.5, 6.0], [1.0, 1.0]]
    assert mix.LayerMix(np.array([0.25, 0.75]), 2.0).formula() == "2·(0.25·h0 + 0.75·h1)"
    assert mix.LayerMix(np.array([0.0, 1.0])).formula() == "1·h1"


def test_a_normalised_mix_scales_every_layer_to_length_one_first():
    layers = np.array([[[3.0, 4.0], [0.0, 0.0]], [[0.0, 40.0], [2.0, 0.0]]])  # (K=2, T=2, d=2)
    mixed = mix.mix_layers(layers, np.array([0.5, 0.5]), normalize=True)  # (T, d)
    np.testing.assert_allclose(mixed, [[0.3, 0.9], [0.5, 0.0]])  # a zero vector stays 0
    assert mix.LayerMix(np.array([0.5, 0.5]), normalize=True).formula() == "0.5·h0/|h0| + 0.5·h1/|h1|"


# ------------------------------------------------------------------------------ fitting maths
def _pairs(rng, n=60, K=3, d=5):
    return rng.normal(size=(n, K, d)), rng.normal(size=(n, K, d))


def test_gram_cosines_equal_the_cosines_of_the_mixed_vectors():
    rng = np.random.default_rng(0)
    first, second = _pairs(rng)
    s = np.array([0.2, 0.5, 0.3])
    u, v = np.einsum("k,nkd->nd", s, first), np.einsum("k,nkd->nd", s, second)  # (n, d)
    direct = (u * v).sum(1) / (np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1))
    assert mix.mixed_cosines(*mix.gram(first, second), s) == pytest.approx(direct)


def test_gradient_matches_finite_differences():
    rng = np.random.default_rng(1)
    A, B, C = mix.gram(*_pairs(rng))
    targets = rng.uniform(size=60)
    weight = np.full(60, 1 / 60)
    theta = np.array([0.3, -0.2, 0.1, 0.4, -0.5])
    _, grad = mix.objective(theta, A, B, C, targets, weight, 1e-3)
    step = 1e-6
    for i in range(len(theta)):
        up, down = theta.copy(), theta.copy()
        up[i] += step
        down[i] -= step
        numeric = (
            mix.objective(up, A, B, C, targets, weight, 1e-3)[0]
            - mix.objective(down, A, B, C, targets, weight, 1e-3)[0]
        ) / (2 * step)
        assert grad[i] == pytest.approx(numeric, abs=1e-6)


def test_fit_recovers_a_planted_mix():
    # Soft labels equal to the model's own probabilities: the cross-entropy is smallest exactly there.
    rng = np.random.default_rng(2)
    A, B, C = mix.gram(*_pairs(rng, n=400))
    planted, gamma, bias = np.array([0.6, 0.1, 0.3]), 2.0, -0.5
    targets = 1 / (1 + np.exp(-(gamma**2 * mix.mixed_cosines(A, B, C, planted) + bias)))
    fitted = mix.fit(A, B, C, targets, ridge=1e-9)
    assert fitted.converged
    assert fitted.weights == pytest.approx(planted, abs=1e-3)
    assert fitted.gamma == pytest.approx(gamma, rel=1e-3) and fitted.bias == pytest.approx(bias, abs=1e-3)
    assert fitted.weights.sum() == pytest.approx(1)


# ------------------------------------------------------------------------------ in the engine
@pytest.fixture(scope="module")
def store():
    return open_vectors(None)


def test_contextual_is_the_mix_of_the_input_and_the_last_layer(store):
    engine = Engine(store, build_settings("default", mix="0.3,0.7"))
    [result] = engine.run([engine.prepare("we sat on the river bank")])
    assert np.allclose(result.contextual, 0.3 * result.inputs + 0.7 * result.top, atol=1e-6)
    assert result.layers().shape == (2, 6, 100)


def test_the_previous_default_is_the_mix_point_one(store):
    # residual 1/9 gave x/9 + context = (0.1 x + 0.9 context) / 0.9: the same direction as mix 0.1,0.9
    old = Engine(store, build_settings("default", mix="off", residual=True, residual_scale=1 / 9))
    new = Engine(store, build_settings("default", mix="0.1,0.9"))
    [a], [b] = (
        old.run([old.prepare("the bank approved the loan")]),
        new.run([new.prepare("the bank approved the loan")]),
    )
    assert np.allclose(a.contextual * 0.9, b.contextual, atol=1e-5)


def test_mix_norm_weighs_unit_layers(store):
    engine = Engine(store, build_settings("default", mix="0.5,0.5", mix_norm=True))
    [result] = engine.run([engine.prepare("we sat on the river bank")])
    unit = lambda v: v / np.linalg.norm(v, axis=-1, keepdims=True)  # noqa: E731
    assert np.allclose(result.contextual, 0.5 * unit(result.inputs) + 0.5 * unit(result.top), atol=1e-6)
    assert "layers scaled to length 1" in engine.settings.summary()


def test_mix_off_gives_the_last_layer(store):
    engine = Engine(store, build_settings("default", mix="off"))
    [result] = engine.run([engine.prepare("the river bank")])
    assert engine.mix is None and result.top is None and result.last_layer is result.contextual


def test_mix_over_layers_of_another_size_is_a_usage_error(store):
    with pytest.raises(SettingError, match="use output_projection, or mix off"):
        Engine(store, build_settings("textbook", projection="random", d_out=8, mix="0.5,0.5"))


# ------------------------------------------------------------------------------ files
def _write(path, **fields):
    doc = {"schema": MIX_SCHEMA, "weights": [0.25, 0.75], "gamma": 1.5} | fields
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_a_mix_file_and_learned_are_read(tmp_path):
    resolved = resolve_mix(str(_write(tmp_path / "m.json")), 1)
    assert list(resolved.weights) == [0.25, 0.75] and resolved.gamma == 1.5
    _write(learned_path(), weights=[0.5, 0.5])
    assert list(resolve_mix("learned", 1).weights) == [0.5, 0.5]


def test_learned_before_any_fit_says_how_to_make_one():
    with pytest.raises(DataError, match="run `ctxembed eval fit-mix` first"):
        resolve_mix("learned", 1)


@pytest.mark.parametrize(
    "fields",
    [{"schema": "ctxembed.attend/3"}, {"weights": [0.5, 0.6]}, {"weights": [1]}, {"gamma": 0}, {"gamma": "1"}],
)
def test_a_bad_mix_file_is_a_data_error(tmp_path, fields):
    with pytest.raises(DataError, match="m.json"):
        resolve_mix(str(_write(tmp_path / "m.json", **fields)), 1)


def test_a_missing_or_garbled_file_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        resolve_mix(str(tmp_path / "none.json"), 1)
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    with pytest.raises(DataError, match="not a mix file"):
        resolve_mix(str(tmp_path / "bad.json"), 1)


def test_a_file_fitted_for_other_layers_is_a_usage_error(tmp_path):
    with pytest.raises(SettingError, match="another number of layers"):
        resolve_mix(str(_write(tmp_path / "m.json", weights=[0.2, 0.3, 0.5])), 1)
    assert math.isclose(resolve_mix(str(_write(tmp_path / "m.json")), 3).weights[-1], 0.75)
