"""The BERT encoder of core/encoder.py: equal to a BERT written here in torch (and to transformers'
BertModel when importable) on a tiny randomly initialised model, padding-blind, and built on the
textbook path's own attention function."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from ctxembed.core import encoder as encoder_module
from ctxembed.core.encoder import (
    FFN_ROWS,
    GELU_ROWS,
    EncoderConfig,
    EncoderWeights,
    encode,
    feed_forward,
    gelu,
    random_weights,
)
from ctxembed.vectors import safetensors

TINY = EncoderConfig(vocab_size=23, hidden=32, layers=2, heads=4, ffn=64, max_positions=40)
SENTENCES = [[2, 10, 11, 12, 5, 6, 7, 18, 3], [2, 13, 14, 15, 8, 9, 5, 7, 3], [2, 20, 21, 22, 19, 20, 3], [2, 5, 3]]


def padded(sentences):
    T = max(map(len, sentences))
    ids = np.zeros((len(sentences), T), np.int64)  # (B, T)
    real = np.zeros((len(sentences), T), bool)  # (B, T)
    for row, pieces in enumerate(sentences):
        ids[row, : len(pieces)] = pieces
        real[row, : len(pieces)] = True
    return ids, real


def torch_bert(tensors: dict[str, np.ndarray], config: EncoderConfig, ids: np.ndarray, real: np.ndarray):
    """BERT's forward pass written with torch's own operations, from the Hugging Face tensors."""
    import torch

    t = {name: torch.from_numpy(np.array(array)) for name, array in tensors.items()}
    hidden, attentions = torch_bert_tensors(t, config, ids, real)
    return [h.numpy() for h in hidden], [a.numpy() for a in attentions]


def torch_bert_tensors(t: dict, config: EncoderConfig, ids: np.ndarray, real: np.ndarray):
    """:func:`torch_bert` on torch tensors (which may require gradients): (hidden states, attentions) as tensors."""
    import torch
    import torch.nn.functional as F

    ids_t, B, T = torch.from_numpy(ids), *ids.shape
    H, dh = config.heads, config.head_dim
    x = t["embeddings.word_embeddings.weight"][ids_t] + t["embeddings.position_embeddings.weight"][:T]
    x = x + t["embeddings.token_type_embeddings.weight"][0]

    def norm(h, name):
        return F.layer_norm(h, (config.hidden,), t[name + ".weight"], t[name + ".bias"], config.eps)

    x = norm(x, "embeddings.LayerNorm")
    bias = torch.zeros(B, 1, 1, T, dtype=x.dtype).masked_fill(~torch.from_numpy(real)[:, None, None, :], -torch.inf)
    hidden, attentions = [x], []
    for n in range(config.layers):
        p = f"encoder.layer.{n}."

        def lin(h, name, p=p):
            return F.linear(h, t[p + name + ".weight"], t[p + name + ".bias"])

        def heads(h):
            return h.view(B, T, H, dh).transpose(1, 2)

        q, k, v = (heads(lin(x, f"attention.self.{name}")) for name in ("query", "key", "value"))
        w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dh) + bias, dim=-1)
        context = (w @ v).transpose(1, 2).reshape(B, T, config.hidden)
        x = norm(x + lin(context, "attention.output.dense"), p + "attention.output.LayerNorm")
        inner = F.gelu(lin(x, "intermediate.dense"))  # exact erf GELU, torch's default
        x = norm(x + lin(inner, "output.dense"), p + "output.LayerNorm")
        hidden.append(x)
        attentions.append(w)
    return hidden, attentions


def worst(ours, theirs, real):
    """Largest |difference| over real pieces (hidden) and real query-key pairs (weights)."""
    hidden = max(float(np.abs(a[real] - b[real]).max()) for a, b in zip(ours.hidden, theirs[0], strict=True))
    pairs = real[:, None, :, None] & real[:, None, None, :]  # (B, 1, T, T)
    weights = max(
        float(np.abs(a - b)[np.broadcast_to(pairs, a.shape)].max())
        for a, b in zip(ours.weights, theirs[1], strict=True)
    )
    return hidden, weights


def test_tiny_bert_equals_torch_written_by_hand():
    pytest.importorskip("torch")
    weights = random_weights(TINY, seed=1)
    ids, real = padded(SENTENCES)
    ours = encode(weights, ids, real)
    theirs = torch_bert(weights.to_tensors(), TINY, ids, real)
    hidden, attention = worst(ours, theirs, real)
    assert hidden < 1e-5 and attention < 1e-5, (hidden, attention)
    # and the comparison can fail: one changed weight is seen
    weights.layers[1].W_1[0, 0] += 0.5
    assert worst(encode(weights, ids, real), theirs, real)[0] > 1e-3


def test_tiny_bert_equals_transformers_bert_model(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    hf_config = transformers.BertConfig(
        vocab_size=TINY.vocab_size,
        hidden_size=TINY.hidden,
        num_hidden_layers=TINY.layers,
        num_attention_heads=TINY.heads,
        intermediate_size=TINY.ffn,
        max_position_embeddings=TINY.max_positions,
        attn_implementation="eager",
    )
    model = transformers.BertModel(hf_config, add_pooling_layer=False).eval()
    model.save_pretrained(tmp_path, safe_serialization=True)
    weights = EncoderWeights.from_tensors(TINY, safetensors.load(tmp_path / "model.safetensors"))
    ids, real = padded(SENTENCES)
    with torch.no_grad():
        out = model(
            input_ids=torch.from_numpy(ids),
            attention_mask=torch.from_numpy(real.astype(np.int64)),
            output_hidden_states=True,
            output_attentions=True,
        )
    theirs = [h.numpy() for h in out.hidden_states], [a.numpy() for a in out.attentions]
    hidden, attention = worst(encode(weights, ids, real), theirs, real)
    assert hidden < 1e-5 and attention < 1e-5, (hidden, attention)


def test_float64_matches_torch_float64_to_rounding():
    pytest.importorskip("torch")
    weights = random_weights(TINY, seed=2, dtype=np.float64)
    ids, real = padded(SENTENCES)
    hidden, attention = worst(encode(weights, ids, real), torch_bert(weights.to_tensors(), TINY, ids, real), real)
    assert hidden < 1e-12 and attention < 1e-12


def test_a_sentence_gives_the_same_numbers_alone_and_padded_in_a_batch():
    weights = random_weights(TINY, seed=3)
    ids, real = padded(SENTENCES)
    batch = encode(weights, ids, real)
    for row, pieces in enumerate(SENTENCES):
        alone = encode(weights, np.array([pieces]), np.ones((1, len(pieces)), bool))
        n = len(pieces)
        np.testing.assert_allclose(batch.hidden[:, row, :n], alone.hidden[:, 0], atol=2e-6)
        np.testing.assert_allclose(batch.weights[:, row, :, :n, :n], alone.weights[:, 0], atol=2e-6)
        assert not batch.weights[:, row, :, :, n:].any()  # padding keys get exactly 0


def test_the_per_token_steps_run_on_the_real_pieces_alone(monkeypatch):
    """Padding rows skip the feed-forward (and the other per-token steps); a batch without padding
    runs every row, written straight into hidden. Padding rows of hidden stay finite (0 after the
    embeddings), as the next layer's keys need."""
    rows_seen = []

    def spy(rows, layer, out=None, keep=None):
        rows_seen.append(len(rows))
        return feed_forward(rows, layer, out, keep)

    monkeypatch.setattr(encoder_module, "feed_forward", spy)
    weights = random_weights(TINY, seed=5)
    ids, real = padded(SENTENCES)
    out = encode(weights, ids, real)
    assert rows_seen == [int(real.sum())] * TINY.layers and real.sum() < real.size
    assert not out.hidden[1:, ~real].any() and np.isfinite(out.hidden).all()
    rows_seen.clear()
    full = encode(weights, ids[:2, :9], real[:2, :9])  # two 9-piece sentences: no padding
    assert rows_seen == [18] * TINY.layers
    np.testing.assert_allclose(full.hidden[:, :2], out.hidden[:, :2], atol=2e-6)


def test_weights_are_rows_of_probabilities_per_layer_and_head():
    weights = random_weights(TINY, seed=4)
    out = encode(weights, *padded(SENTENCES[:1]))
    assert out.weights.shape == (2, 1, 4, 9, 9) and out.hidden.shape == (3, 1, 9, 32)
    assert out.weights.dtype == np.float32 and out.hidden.dtype == np.float32
    np.testing.assert_allclose(out.weights.sum(-1), 1, atol=1e-6)


def test_the_encoder_runs_the_textbook_attention_function(monkeypatch):
    """One attention implementation: replacing core.attention's function changes the encoder's weights."""
    from ctxembed.core import attention as core_attention

    calls = []

    def spy(q, k, v, **keywords):
        calls.append(q.shape)
        return core_attention.attention(q, k, v, **keywords)

    monkeypatch.setattr(encoder_module, "attention", spy)
    encode(random_weights(TINY), *padded(SENTENCES))
    assert calls == [(4, 4, 9, 8)] * TINY.layers
    monkeypatch.undo()
    assert encoder_module.attention is core_attention.attention


def test_gelu_is_the_exact_erf_gelu():
    rows = 3 * GELU_ROWS + 4  # several blocks, the last one partial
    x = np.linspace(-8, 8, rows * 1536, dtype=np.float32).reshape(rows, 1536)
    exact = np.vectorize(lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))))(x.astype(np.float64))
    got = gelu(x.copy())
    assert np.abs(got - exact).max() < 1e-6
    tanh_approx = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    assert np.abs(tanh_approx - exact).max() > 1e-4  # the tanh form would not pass


def test_the_feed_forward_in_row_blocks_equals_the_formula():
    layer = random_weights(TINY).layers[0]
    rows = np.random.default_rng(1).standard_normal((2 * FFN_ROWS + 3, TINY.hidden)).astype(np.float32)
    inner = rows.astype(np.float64) @ layer.W_1 + layer.b_1  # (N, F) in float64, every row at once
    exact_gelu = np.vectorize(lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))))(inner)
    expected = exact_gelu @ layer.W_2 + layer.b_2  # (N, D)
    np.testing.assert_allclose(feed_forward(rows, layer), expected, atol=1e-5)


def test_a_config_json_this_encoder_cannot_run_is_refused():
    good = {
        "vocab_size": 5,
        "hidden_size": 8,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 16,
    }
    assert EncoderConfig.from_json(good).head_dim == 4
    with pytest.raises(ValueError, match="gelu"):
        EncoderConfig.from_json({**good, "hidden_act": "relu"})
    with pytest.raises(ValueError, match="absolute"):
        EncoderConfig.from_json({**good, "position_embedding_type": "relative_key"})


def test_too_many_pieces_is_a_clear_error():
    weights = random_weights(TINY)
    with pytest.raises(ValueError, match="at most 40"):
        encode(weights, np.zeros((1, 41), np.int64), np.ones((1, 41), bool))


def test_the_stored_layout_loads_as_a_memory_map_without_copies(tmp_path):
    """What `models install` stores (EncoderWeights.arrays) comes back from the file as views of its
    memory map, equal to what was saved; and the Hugging Face layout round-trips through from_tensors."""
    weights = random_weights(TINY, seed=3)
    safetensors.save(weights.arrays(), tmp_path / "encoder.safetensors")
    mapped = safetensors.load(tmp_path / "encoder.safetensors")
    loaded = EncoderWeights.from_arrays(TINY, mapped)
    file_map = mapped["word"].base
    for name, array in loaded.arrays().items():
        assert np.shares_memory(array, file_map), name  # no copy: the array reads the file's pages
        assert type(array) is np.ndarray and np.array_equal(array, weights.arrays()[name]), name
    ids, real = padded(SENTENCES)
    assert np.array_equal(encode(loaded, ids, real).hidden, encode(weights, ids, real).hidden)
    again = EncoderWeights.from_tensors(TINY, weights.to_tensors())
    assert all(np.array_equal(a, again.arrays()[name]) for name, a in weights.arrays().items())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda a: a.pop("layers.1.W_o"), "'layers.1.W_o' is missing"),
        (lambda a: a.update({"layers.0.W_1": a["layers.0.W_1"].T}), "'layers.0.W_1' is float32 (64, 32)"),
        (lambda a: a.update({"norm.gain": a["norm.gain"].astype(np.float64)}), "'norm.gain' is float64"),
    ],
)
def test_arrays_of_another_layout_are_refused(change, message):
    arrays = random_weights(TINY).arrays()
    change(arrays)
    with pytest.raises(ValueError, match=re.escape(message)):
        EncoderWeights.from_arrays(TINY, arrays)


def test_safetensors_round_trip(tmp_path):
    tensors = {
        "b": np.arange(6, dtype=np.float32).reshape(2, 3),
        "a": np.array([1, -2], np.int64),
        "h": np.ones(3, np.float16),
    }
    safetensors.save(tensors, tmp_path / "x.safetensors", {"format": "np"})
    back = safetensors.load(tmp_path / "x.safetensors")
    assert sorted(back) == ["a", "b", "h"]
    for name, array in tensors.items():
        assert back[name].dtype == array.dtype and np.array_equal(back[name], array)
    safetensors.save(tensors, tmp_path / "y.safetensors", {"format": "np"})
    assert (tmp_path / "x.safetensors").read_bytes() == (tmp_path / "y.safetensors").read_bytes()


@pytest.mark.parametrize(
    "damage",
    [
        b"",
        b"\x05\x00\x00\x00\x00\x00\x00\x00{bad}",
        b"\xff" * 8 + b"{}",
        b"\x3c\x00\x00\x00\x00\x00\x00\x00" + b'{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}    ',
    ],
)
def test_damaged_safetensors_is_a_value_error(tmp_path, damage):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(damage)
    with pytest.raises(ValueError):
        safetensors.load(path)
