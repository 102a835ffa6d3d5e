"""The training forward pass is ``encode`` (traced); its hand-written backward pass matches torch autograd (float64,
<= 1e-8) and central finite differences (no torch needed)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from ctxembed.core.attention import encode
from ctxembed.core.projections import random_params
from ctxembed.presets import build_settings
from ctxembed.train import backprop
from ctxembed.train.corpus import Batch
from ctxembed.train.trainer import Model, batch_loss, initial_params

B, T, D, V, K = 3, 6, 8, 20, 7  # sentences, tokens, dimension, corpus words, negatives


def make_case(
    layers,
    heads,
    output_projection,
    residual,
    fix_values,
    masking,
    layer_norm=False,
    positions=True,
    position_mode="input",
):
    """A model in float64 and one batch: padding, masked tokens, and with ``masking`` exclude-self + causal."""
    rng = np.random.default_rng(layers * 100 + heads * 10 + output_projection)
    settings = build_settings(
        "textbook",
        projection="random",
        layers=layers,
        heads=heads,
        output_projection=output_projection,
        residual=residual,
        layer_norm=layer_norm,
        positions=positions,
        position_mode=position_mode,
        exclude_self=masking,
        causal=masking,
        seed=3,
    )
    params = initial_params(settings, D, fix_values)
    arrays = backprop.params_to_arrays(params)
    model = Model(arrays, rng.normal(size=D), np.array([0.3]), rng.normal(size=V) * 0.1, settings)
    lengths = np.array([6, 4, 1]) if masking else np.array([6, 6, 6])
    real = np.arange(T)[None, :] < lengths[:, None]  # (B, T)
    ids = np.where(real, rng.integers(0, V, size=(B, T)), 0)  # (B, T)
    masked = (rng.random((B, T)) < 0.4) & real
    masked[:, 0] = True  # every sentence has a masked token
    negatives = rng.integers(0, V, size=K)
    negatives[0] = ids[0, 0]  # an accidental hit: the true word among the negatives
    embeddings = rng.normal(size=(V, D))  # (V, D)
    key_bias = -np.abs(rng.normal(size=V))  # (V,) like SIF: <= 0
    return model, Batch(ids, real, masked, negatives), embeddings, key_bias


COMBINATIONS = [
    dict(
        layers=L,
        heads=h,
        output_projection=wo,
        residual=res,
        fix_values=fix,
        masking=mask,
        layer_norm=(L + h) % 2 == 0,
        position_mode="query-key" if (L + h + wo + res + fix + mask) % 2 else "input",
    )
    for L, h, wo, res, fix, mask in itertools.product(
        [1, 2], [1, 2, 4], [False, True], [False, True], [False, True], [False, True]
    )
]


def case_id(case: dict) -> str:
    flags = [k for k in ("output_projection", "residual", "fix_values", "masking", "layer_norm") if case[k]]
    flags += ["qk-positions"] if case["position_mode"] == "query-key" else []
    return f"L{case['layers']}h{case['heads']}" + ("-" + "-".join(flags) if flags else "")


@pytest.mark.parametrize("case", COMBINATIONS[::5], ids=case_id)
def test_training_forward_is_encode(case):
    """Training runs ``encode`` with ``trace=True``: keeping the steps changes no number, and the steps
    hold what the backward pass reads (the layer-norm input, query-key positions) exactly when needed."""
    model, batch, embeddings, key_bias = make_case(**case)
    inputs = np.where(batch.masked[:, :, None], model.mask, embeddings[batch.ids])  # (B, T, D)
    bias = np.where(batch.masked, 0, key_bias[batch.ids])  # (B, T)
    a = model.settings.attention
    traced = encode(inputs, a, model.params, token_mask=batch.real, key_bias=bias, trace=True)
    plain = encode(inputs, a, model.params, token_mask=batch.real, key_bias=bias)
    np.testing.assert_array_equal(traced.contextual, plain.contextual)
    np.testing.assert_array_equal(traced.weights, plain.weights)
    assert len(traced.steps) == a.layers
    for steps in traced.steps:
        assert (steps.pre_norm is not None) == a.layer_norm
        assert (steps.positions is not None) == (a.positions and a.position_mode == "query-key")


def test_training_forward_is_encode_on_saved_weights(tmp_path):
    """Written and read back through the weights-file keys, the weights give the same vectors."""
    from ctxembed.vectors.weights import load_projections, save_projections

    model, batch, embeddings, _ = make_case(2, 2, True, True, False, True)
    path = tmp_path / "w.npz"
    save_projections(path, model.params)
    loaded = load_projections(path, D, model.settings.attention)
    inputs = embeddings[batch.ids]  # (B, T, D)
    ours = encode(inputs, model.settings.attention, model.params, token_mask=batch.real, trace=True)
    theirs = encode(inputs, model.settings.attention, loaded, token_mask=batch.real)
    np.testing.assert_array_equal(ours.contextual, theirs.contextual)


def numeric_gradient(f, array: np.ndarray, index: tuple, eps: float = 1e-6) -> float:
    old = array[index]
    array[index] = old + eps
    plus = f()
    array[index] = old - eps
    minus = f()
    array[index] = old
    return (plus - minus) / (2 * eps)


@pytest.mark.parametrize("case", COMBINATIONS[1::7], ids=case_id)
def test_gradients_match_finite_differences(case):
    model, batch, embeddings, key_bias = make_case(**case)
    _, grads = batch_loss(model, batch, embeddings, key_bias)
    rng = np.random.default_rng(0)
    trainable = model.trainable(case["fix_values"])
    assert set(grads) >= set(trainable)
    worst = 0.0
    for name, array in trainable.items():
        for _ in range(3):
            index = tuple(int(rng.integers(0, n)) for n in array.shape)
            numeric = numeric_gradient(
                lambda: batch_loss(model, batch, embeddings, key_bias, gradients=False)[0], array, index
            )
            analytic = grads[name][index]
            worst = max(worst, abs(numeric - analytic) / max(1e-6, abs(numeric) + abs(analytic)))
    assert worst < 1e-5, worst


# ------------------------------------------------------------------------------ against torch autograd


def torch_loss(model: Model, batch: Batch, embeddings, key_bias, tensors: dict):
    """The same objective written independently in torch (float64), from the lecture-notes formulas."""
    import torch

    a = model.settings.attention
    ids = torch.from_numpy(batch.ids)
    real = torch.from_numpy(batch.real)
    masked = torch.from_numpy(batch.masked)
    E = torch.from_numpy(embeddings)
    x = torch.where(masked[:, :, None], tensors["mask"], E[ids])  # (B, T, D)
    steering = torch.zeros(T, D, dtype=torch.float64)  # what every layer adds to its queries' and keys' input
    if a.positions:
        position = torch.arange(T, dtype=torch.float64)[:, None]
        angle = position / 10000.0 ** (torch.arange(0, D, 2, dtype=torch.float64) / D)
        pe = torch.zeros(T, D, dtype=torch.float64)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle[:, : D // 2])
        if a.position_mode == "input":
            x = x + pe
        else:
            steering = pe
    bias = torch.where(masked, 0.0, torch.from_numpy(key_bias)[ids])  # (B, T)
    allowed = real[:, None, :, None] & real[:, None, None, :]  # (B, 1, T, T)
    if a.exclude_self:
        allowed = allowed & ~torch.eye(T, dtype=torch.bool)
    if a.causal:
        allowed = allowed & torch.tril(torch.ones(T, T, dtype=torch.bool))
    for layer in range(a.layers):
        heads = []
        for h in range(a.heads):
            q = (x + steering) @ tensors[f"l{layer}.h{h}.W_query"]
            k = (x + steering) @ tensors[f"l{layer}.h{h}.W_key"]
            v = x @ tensors[f"l{layer}.h{h}.W_value"]
            scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + bias[:, None, :]  # (B, T, T)
            rows = allowed[:, 0]  # (B, T, T)
            safe = torch.where(rows, scores, -torch.inf)
            safe = torch.where(rows.any(-1, keepdim=True), safe, 0.0)  # a row without keys: zero weights below
            weights = torch.softmax(safe, dim=-1) * rows
            heads.append(weights @ v)
        out = torch.cat(heads, dim=-1)  # (B, T, h * d_v)
        if f"l{layer}.W_out" in tensors:
            out = out @ tensors[f"l{layer}.W_out"]
        if a.residual:
            out = a.residual_scale * x + out
        if a.layer_norm:
            out = torch.nn.functional.layer_norm(out, (out.shape[-1],), eps=1e-5)
        x = torch.where(real[:, :, None], out, 0.0)
    predicted = x[masked]  # (M, D)
    targets = ids[masked]
    negatives = torch.from_numpy(batch.negatives)
    scale = torch.exp(tensors["log_scale"][0])
    true_logits = scale * (predicted * E[targets]).sum(-1) + tensors["word_bias"][targets]
    negative_logits = scale * predicted @ E[negatives].T + tensors["word_bias"][negatives]
    negative_logits = negative_logits.masked_fill(targets[:, None] == negatives[None, :], -torch.inf)
    logits = torch.cat([true_logits[:, None], negative_logits], dim=1)
    return -(torch.log_softmax(logits, dim=1)[:, 0]).mean()


@pytest.mark.parametrize("case", COMBINATIONS, ids=case_id)
def test_gradients_match_torch_autograd(case):
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)  # tiny tensors: threads only add start-up time
    model, batch, embeddings, key_bias = make_case(**case)
    loss, grads = batch_loss(model, batch, embeddings, key_bias)
    every = {**model.arrays, "mask": model.mask, "log_scale": model.log_scale, "word_bias": model.word_bias}
    tensors = {name: torch.tensor(value, dtype=torch.float64, requires_grad=True) for name, value in every.items()}
    reference = torch_loss(model, batch, embeddings, key_bias, tensors)
    reference.backward()
    assert abs(loss - reference.item()) <= 1e-10
    trainable = model.trainable(case["fix_values"])
    for name in trainable:
        expected = tensors[name].grad.numpy()
        difference = np.abs(grads[name] - expected).max()
        assert difference <= 1e-8, f"{name}: max |numpy - torch| = {difference:.2e}"
    if case["fix_values"]:
        assert not any(name.endswith("W_value") for name in trainable)


def test_one_layer_w_query_learns_one_direction_only():
    """With one layer the masked token's query is [MASK] @ W_query, whatever the sentence: W_query's
    gradient is the rank-one outer(mask, .), so it cannot learn anything about words. A second layer
    reads queries of real words, and W_query's gradient there has full rank."""
    model, batch, embeddings, key_bias = make_case(1, 1, False, False, False, False, positions=False)
    _, grads = batch_loss(model, batch, embeddings, key_bias)
    singular = np.linalg.svd(grads["l0.h0.W_query"], compute_uv=False)
    assert singular[1] <= 1e-12 * singular[0]
    model, batch, embeddings, key_bias = make_case(2, 1, False, True, False, False, positions=False)
    _, grads = batch_loss(model, batch, embeddings, key_bias)
    singular = np.linalg.svd(grads["l1.h0.W_query"], compute_uv=False)
    assert singular[1] > 1e-6 * singular[0]


def test_random_init_is_xavier_from_the_seed():
    settings = build_settings("textbook", projection="random", layers=2, heads=2, output_projection=True, seed=5)
    ours = backprop.params_to_arrays(initial_params(settings, D, False))
    theirs = backprop.params_to_arrays(random_params(D, D // 2, settings.attention, seed=5, output_projection=True))
    assert ours.keys() == theirs.keys()
    for name in ours:
        np.testing.assert_array_equal(ours[name], theirs[name])
