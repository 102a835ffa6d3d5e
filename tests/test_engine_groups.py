"""Engine.run's groups: one length per group, a cap on the floats a group holds, and --no-weights keeping none."""

from __future__ import annotations

import numpy as np
import pytest

import ctxembed.engine.glove as explore
from ctxembed.batch import columns
from ctxembed.core.attention import AttentionConfig, encode
from ctxembed.engine import Engine
from ctxembed.presets import build_settings
from ctxembed.vectors.sources import open_vectors

SENTENCES = [
    "we sat on the river bank",
    "I deposited money in the bank",
    "the bank",
    "the muddy bank of the slow river was wide",
    "money",
    "she sat on the bank",
]


@pytest.fixture(scope="module")
def engine():
    return Engine(open_vectors(None), build_settings("textbook", heads=2, layers=2))


def test_groups_hold_one_length_and_respect_the_float_budget(engine, monkeypatch):
    prepared = [engine.prepare(s) for s in SENTENCES * 5]
    monkeypatch.setattr(explore, "GROUP_FLOATS", 2_000)
    for weights in (True, False):
        for members, results in engine.groups(prepared, weights=weights):
            lengths = {len(prepared[i].used) for i in members}
            assert len(lengths) == 1
            T = lengths.pop()
            per_sentence = T * max(2 * T * (2 if weights else 1), engine.dim)
            assert len(members) == 1 or len(members) * per_sentence <= 2_000
            assert all((r.weights is None) != weights for r in results)


def test_a_sentence_gives_the_same_bytes_alone_and_in_any_group(engine, monkeypatch):
    prepared = [engine.prepare(s) for s in SENTENCES * 3]
    together = engine.run(prepared)
    monkeypatch.setattr(explore, "GROUP_FLOATS", 1)  # every sentence alone
    alone = engine.run(prepared)
    for a, b in zip(together, alone, strict=True):
        assert a.weights.tobytes() == b.weights.tobytes()
        assert a.contextual.tobytes() == b.contextual.tobytes()
    single = engine.run([engine.prepare(SENTENCES[0])])[0]
    assert single.weights.tobytes() == together[0].weights.tobytes()


def test_no_weights_keeps_none_and_changes_nothing_else(engine):
    prepared = [engine.prepare(s) for s in SENTENCES]
    with_weights = engine.run(prepared)
    without = engine.run(prepared, weights=False)
    for a, b in zip(with_weights, without, strict=True):
        assert b.weights is None
        assert np.array_equal(a.contextual, b.contextual)


def test_encode_without_weights_returns_none_and_the_same_output():
    x = np.random.default_rng(0).standard_normal((3, 5, 8)).astype(np.float32)  # (B, T, d)
    config = AttentionConfig(heads=2, layers=3, residual=True)
    kept, dropped = encode(x, config), encode(x, config, keep_weights=False)
    assert kept.weights.shape == (3, 3, 2, 5, 5) and dropped.weights is None
    assert np.array_equal(kept.contextual, dropped.contextual)


def test_the_store_rows_of_many_groups_at_once_change_no_byte(monkeypatch):
    """columns.arrays gathers the static vectors of a run of groups in one go (SLAB_FLOATS): the
    numbers are those of every group gathered alone, with subword vectors, one-token sentences and
    a sentence off the fast path among them."""
    engine = Engine(open_vectors(None), build_settings("default"))
    long = "the zxqvbank of the river " + "extraordinarily " * 300  # past the tokenizer's window: off the fast path
    texts = [*SENTENCES, "the zxqvbank of the river", "bank", "I", long, "money"] * 3
    sentences = columns.prepare_many(engine, texts)
    assert sentences.prepared and (sentences.vectors >= 0).any()  # both kinds of built vector take part

    def run():
        return {
            i: [group.static[b].tobytes(), group.inputs[b].tobytes(), group.weights[b].tobytes()]
            + [group.contextual[b].tobytes()]
            for members, group in columns.arrays(engine, sentences)
            for b, i in enumerate(members)
        }

    together = run()
    monkeypatch.setattr(columns, "SLAB_FLOATS", 1)  # each group gathered alone
    assert run() == together
    assert len(together) == len(texts)


@pytest.mark.parametrize("preset", ["default", "textbook"])
def test_batch_columns_give_the_bytes_of_engine_run(preset):
    """batch/columns.py's seam: prepare_many + arrays (one TokenTable per chunk, slabs of store rows)
    give every sentence the bytes engine.run([engine.prepare(text)]) gives it alone, with subword
    vectors, one-token sentences and a sentence off the fast path among them."""
    engine = Engine(open_vectors(None), build_settings(preset, heads=2, layers=2))
    long = "the zxqvbank of the river " + "extraordinarily " * 300  # past the tokenizer's window
    texts = [*SENTENCES, "the zxqvbank of the river", "bank", "I", long, "money", ""]
    sentences = columns.prepare_many(engine, texts)
    assert sentences.prepared and (sentences.vectors >= 0).any() and list(sentences.errors) == [len(texts) - 1]
    seen = set()
    for members, group in columns.arrays(engine, sentences):
        for b, i in enumerate(members):
            [alone] = engine.run([engine.prepare(texts[i])])
            for name in ("static", "inputs", "weights", "contextual"):
                assert getattr(group, name)[b].tobytes() == getattr(alone, name).tobytes(), (texts[i], name)
            seen.add(i)
    assert seen == set(range(len(texts) - 1))
