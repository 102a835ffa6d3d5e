"""Fine-tuning the trained encoder on labelled pairs (ctxembed.train.finetune, ctxembed.train.optim), on the
tiny random BERT of tests/test_encoder.py (core.encoder.random_weights): the head's gradients, a step that
lowers the loss and gives the same weights every run, AdamW against torch's, the schedule, the batches."""

from __future__ import annotations

import numpy as np
import pytest

from ctxembed.core.encoder import random_weights
from ctxembed.train.finetune import (
    FineTuner,
    Pair,
    cosine_head,
    decayed_names,
    engine_pairs,
    epoch_batches,
    make_batch,
    pair_batches,
    pair_loss,
    trainable_copy,
)
from ctxembed.train.optim import Adam, RowGradient, clip_gradients, linear_schedule
from tests.test_encoder import TINY
from tests.test_encoder_backprop import as_table, dense


def tiny_pairs(n: int, seed: int = 0) -> list[Pair]:
    """Pairs of random sentences over TINY's 23 pieces (2 = [CLS], 3 = [SEP]); the marked word is pieces
    10-12 in both, labelled 1 when the word is followed by the same piece (a "sense" the model can learn)."""
    rng = np.random.default_rng(seed)
    pairs = []
    for i in range(n):
        sentences, spans = [], []
        follower = rng.integers(13, 23, size=2)
        if i % 2:
            follower[1] = follower[0]
        for which in range(2):
            before = rng.integers(4, 10, size=rng.integers(1, 5)).tolist()
            word = [10, 11] if (i + which) % 3 else [12]
            start = 1 + len(before)
            sentences.append([2, *before, *word, int(follower[which]), 3])
            spans.append((start, start + len(word)))
        pairs.append(Pair(*sentences, *spans, label=float(follower[0] == follower[1])))
    return pairs


def head_arrays(dtype=np.float32) -> dict[str, np.ndarray]:
    return {"scale": np.array([5.0], dtype), "bias": np.array([-2.5], dtype)}


def test_the_head_gradients_equal_finite_differences():
    rng = np.random.default_rng(0)
    u, v = rng.standard_normal((5, 7)), rng.standard_normal((5, 7))  # (P, D)
    labels = np.array([1.0, 0.0, 1.0, 0.3, 0.0])
    loss, p, d_u, d_v, d_scale, d_bias = cosine_head(u, v, labels, 3.0, -0.5)
    assert p.shape == (5,) and ((p > 0) & (p < 1)).all()
    step = 1e-6
    for array, grad in ((u, d_u), (v, d_v)):
        for index in [(0, 0), (3, 6), (4, 2)]:
            array[index] += step
            up = cosine_head(u, v, labels, 3.0, -0.5)[0]
            array[index] -= 2 * step
            down = cosine_head(u, v, labels, 3.0, -0.5)[0]
            array[index] += step
            assert abs((up - down) / (2 * step) - grad[index]) < 1e-8
    numeric_scale = (
        cosine_head(u, v, labels, 3.0 + step, -0.5)[0] - cosine_head(u, v, labels, 3.0 - step, -0.5)[0]
    ) / (2 * step)
    numeric_bias = (cosine_head(u, v, labels, 3.0, -0.5 + step)[0] - cosine_head(u, v, labels, 3.0, -0.5 - step)[0]) / (
        2 * step
    )
    assert abs(numeric_scale - d_scale) < 1e-8 and abs(numeric_bias - d_bias) < 1e-8


def test_pair_loss_gradients_equal_finite_differences_through_the_encoder():
    """The pooling of the marked word's pieces and the head, on top of the backward pass torch checks."""
    weights = trainable_copy(random_weights(TINY, seed=2, dtype=np.float64))
    head = head_arrays(np.float64)
    batch = make_batch(tiny_pairs(4), dtype=np.float64)
    _, _, grads, _ = pair_loss(weights, head, batch)
    grads = dense(grads)
    arrays = weights.arrays()
    step = 1e-6
    for name, index in [("layers.1.W_qkv", (3, 40)), ("word", (10, 5)), ("layers.0.norm2.gain", (7,))]:
        arrays[name][index] += step
        up = pair_loss(weights, head, batch, backward=False)[0]
        arrays[name][index] -= 2 * step
        down = pair_loss(weights, head, batch, backward=False)[0]
        arrays[name][index] += step
        assert abs((up - down) / (2 * step) - grads[name][index]) < 1e-8, name


def train_tiny(steps: int) -> tuple[list[float], dict[str, np.ndarray], float, float]:
    weights = trainable_copy(random_weights(TINY, seed=1))
    head = head_arrays()
    pairs = tiny_pairs(24)
    every = make_batch(pairs)
    before = pair_loss(weights, head, every, backward=False)[0]
    tuner = FineTuner(weights, head, weight_decay=0.01, clip=1.0)
    losses = []
    rng = np.random.default_rng(7)
    batches = []
    for step in range(steps):
        batches = pair_batches(pairs, 8, rng) if step % 3 == 0 else batches  # a new order each epoch
        lr = linear_schedule(step, steps, 3e-3, warmup=2)
        losses.append(tuner.step(batches[step % 3], lr, head_lr=3e-2).loss)
    after = pair_loss(weights, head, every, backward=False)[0]
    return losses, weights.arrays() | head, before, after


def test_fine_tuning_lowers_the_loss_the_same_way_every_run():
    losses, arrays, before, after = train_tiny(30)
    assert after < before - 0.1, (before, after)
    again, arrays_again, _, after_again = train_tiny(30)
    assert losses == again and after == after_again
    assert all(np.array_equal(arrays[name], arrays_again[name]) for name in arrays)


def test_a_step_changes_every_array_and_refuses_read_only_weights():
    weights = trainable_copy(random_weights(TINY, seed=1))
    start = {name: array.copy() for name, array in weights.arrays().items()}
    tuner = FineTuner(weights, head_arrays())
    tuner.step(make_batch(tiny_pairs(6)), 1e-3, 1e-2)
    unchanged = [name for name, array in weights.arrays().items() if np.array_equal(array, start[name])]
    assert unchanged == []  # the segment table too: every piece is segment 0
    frozen = random_weights(TINY, seed=1)
    frozen.word.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        FineTuner(frozen, head_arrays())


def test_adamw_equals_torch_adamw():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    arrays = {"W": rng.standard_normal((4, 3)), "b_out": rng.standard_normal(3)}
    params = {name: torch.tensor(array.copy(), requires_grad=True) for name, array in arrays.items()}
    theirs = torch.optim.AdamW(
        [{"params": [params["W"]], "weight_decay": 0.1}, {"params": [params["b_out"]], "weight_decay": 0.0}],
        lr=0.01,
        betas=(0.9, 0.999),
        eps=1e-8,
    )
    ours = Adam(list(arrays), {n: a.shape for n, a in arrays.items()}, np.float64, weight_decay=0.1, decayed=["W"])
    for step in range(4):
        grads = {name: rng.standard_normal(array.shape) for name, array in arrays.items()}
        lr = linear_schedule(step, 4, 0.01, 1) or 0.01
        for group in theirs.param_groups:
            group["lr"] = lr
        for name, tensor in params.items():
            tensor.grad = torch.from_numpy(grads[name].copy())
        theirs.step()
        ours.step(arrays, grads, lr)
    for name in arrays:
        assert np.abs(arrays[name] - params[name].detach().numpy()).max() < 1e-12


def test_clipping_equals_torch_clip_grad_norm():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    grads = {"a": rng.standard_normal((5, 5)), "b": rng.standard_normal(7)}
    tensors = [
        torch.zeros(5, 5, dtype=torch.float64, requires_grad=True),
        torch.zeros(7, dtype=torch.float64, requires_grad=True),
    ]
    for tensor, name in zip(tensors, grads, strict=True):
        tensor.grad = torch.from_numpy(grads[name].copy())
    their_norm = float(torch.nn.utils.clip_grad_norm_(tensors, 1.0))
    assert abs(clip_gradients(grads, 1.0) - their_norm) < 1e-12
    assert all(np.abs(grads[n] - t.grad.numpy()).max() < 1e-6 for t, n in zip(tensors, grads, strict=True))


def test_linear_schedule_warms_up_then_decays_to_zero():
    rates = [linear_schedule(step, 10, 1.0, 4) for step in range(11)]
    assert rates[:5] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert rates[4:] == pytest.approx([1.0, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6, 0.0])


def test_batches_are_sorted_by_length_and_hold_every_pair_once():
    pairs = tiny_pairs(30)
    first = pair_batches(pairs, 8, np.random.default_rng(1))
    again = pair_batches(pairs, 8, np.random.default_rng(1))
    assert all(np.array_equal(a.ids, b.ids) for a, b in zip(first, again, strict=True))
    assert [len(b.labels) for b in first] != [8, 8, 8, 6]  # shuffled: the short batch is not last
    assert sorted(len(b.labels) for b in first) == [6, 8, 8, 8]
    sentences = {tuple(row[real].tolist()) for b in first for row, real in zip(b.ids, b.real, strict=True)}
    assert sentences == {tuple(s) for p in pairs for s in (p.first, p.second)}
    # sorted: the longest pair of a batch is never longer than the shortest pair of a later batch by length
    pair_length = [np.maximum(b.real[0::2].sum(1), b.real[1::2].sum(1)) for b in first]
    ranges = sorted((int(x.min()), int(x.max())) for x in pair_length)
    assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    # the pooling weights one word's pieces: each sentence's sum to 1
    assert all(np.allclose(b.pooling.sum(axis=1), 1) for b in first)


def test_biases_and_gains_are_not_decayed():
    names = list(random_weights(TINY).arrays())
    decayed = decayed_names(names)
    assert "word" in decayed and "layers.0.W_qkv" in decayed
    assert not any(n.endswith(("b_qkv", "b_1", "norm1.gain", "norm.bias")) for n in decayed)


def test_a_row_gradient_steps_and_clips_as_its_dense_table_does():
    rng = np.random.default_rng(5)
    table = rng.standard_normal((9, 4))
    sparse = RowGradient(table.shape, np.array([1, 4, 7]), rng.standard_normal((3, 4)))
    results = []
    for grad in (sparse, as_table(sparse)):
        arrays = {"word": table.copy()}
        adam = Adam(["word"], {"word": table.shape}, np.float64, weight_decay=0.1, decayed=["word"])
        grads = {"word": grad if grad is sparse else grad.copy()}
        norm = clip_gradients(grads, 0.5)
        for _ in range(3):
            adam.step(arrays, grads, 0.01)
        results.append((norm, arrays["word"], adam.m["word"], adam.v["word"]))
    (norm, *ours), (dense_norm, *theirs) = results
    assert norm == dense_norm and all(np.array_equal(a, b) for a, b in zip(ours, theirs, strict=True))


def wic_fixture_pairs(engine) -> list[Pair]:
    from ctxembed.evaluation.evaluate import read_wic
    from tests.conftest import FIXTURES

    train = next(split for split in read_wic(FIXTURES / "wic") if split.name == "train")
    items = [(a.words, a.index, b.words, b.index, float(g)) for (a, b), g in zip(train.pairs, train.gold, strict=True)]
    return engine_pairs(engine, items)


def test_fine_tuning_the_installed_tiny_bert_on_wic_pairs(tiny_model):
    """End to end on the registry's tiny BERT (tests/tiny_model.py, families'): the engine's own WordPiece
    makes the pairs (the marked word's pieces), and fine-tuning lowers their loss, the same bits each run."""
    from ctxembed.engine import open_engine

    engine = open_engine(model=tiny_model.name)
    pairs = wic_fixture_pairs(engine)
    assert len(pairs) == 12
    for pair in pairs:  # each span covers the marked word's pieces, never [CLS] or [SEP]
        assert 0 < pair.first_span[0] < pair.first_span[1] < len(pair.first)
        assert 0 < pair.second_span[0] < pair.second_span[1] < len(pair.second)
    runs = []
    for _ in range(2):
        weights = trainable_copy(engine.weights)  # installed weights are a read-only memory map
        head, every = head_arrays(), make_batch(pairs)
        before = pair_loss(weights, head, every, backward=False)[0]
        tuner = FineTuner(weights, head)
        for step in range(12):
            tuner.step(pair_batches(pairs, 4, np.random.default_rng(step))[step % 3], 2e-3, 2e-2)
        runs.append((before, pair_loss(weights, head, every, backward=False)[0], weights.arrays()["layers.1.W_1"]))
    (before, after, trained), (_, again, trained_again) = runs
    assert after < before - 0.05, (before, after)
    assert after == again and np.array_equal(trained, trained_again)
    assert not np.array_equal(trained, engine.weights.arrays()["layers.1.W_1"])  # the installed model is untouched


def test_an_interrupted_run_resumed_from_its_saved_state_ends_with_the_same_weights(tmp_path):
    pairs = tiny_pairs(20)

    def run(steps: range, tuner: FineTuner) -> None:
        for step in steps:
            epoch, at = divmod(step, 3)
            batch = epoch_batches(pairs, 7, seed=5, epoch=epoch)[at]  # 3 batches an epoch
            tuner.step(batch, linear_schedule(step, 8, 3e-3, 2), 3e-2)

    whole = FineTuner(trainable_copy(random_weights(TINY, seed=1)), head_arrays())
    run(range(8), whole)
    first = FineTuner(trainable_copy(random_weights(TINY, seed=1)), head_arrays())
    run(range(5), first)  # interrupted mid-epoch, after step 5 of 8
    np.savez(tmp_path / "state.npz", **first.state())
    resumed = FineTuner(trainable_copy(random_weights(TINY, seed=9)), head_arrays())  # other weights: all replaced
    with np.load(tmp_path / "state.npz") as saved:
        resumed.restore(dict(saved))
    run(range(5, 8), resumed)
    ours, theirs = resumed.state(), whole.state()
    assert ours.keys() == theirs.keys() and all(np.array_equal(ours[n], theirs[n]) for n in ours)
    assert not np.array_equal(first.state()["weights.word"], theirs["weights.word"])  # the last steps did change it
    with pytest.raises(ValueError, match="lacks"):
        resumed.restore({"adam.t": np.array(1)})
