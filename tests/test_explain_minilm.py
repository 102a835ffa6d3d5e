"""--explain on a real layer: one encoder layer traced step by step (core.encoder.trace_layer), the
MiniLM engine's layer_trace over the pieces, and `attend --model minilm --explain` (needs `make models`
for the real model; the core's tests run on a tiny random BERT)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ctxembed.core import attention as core_attention
from ctxembed.core import encoder as encoder_module
from ctxembed.core.encoder import encode, random_weights, trace_layer
from tests.cli_helpers import fails, invoke, run_json
from tests.test_encoder import SENTENCES, TINY, padded

SENTENCE = "we sat on the river bank"


def softmax_rows(scores: np.ndarray) -> np.ndarray:
    """An independent softmax in float64: (..., T) -> (..., T)."""
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# ------------------------------------------------------------------ core: one layer of the tiny BERT


@pytest.mark.parametrize("number", [0, 1])
def test_a_traced_layer_gives_the_encoders_own_weights_and_output(number):
    weights = random_weights(TINY, seed=5)
    pieces = SENTENCES[0]
    out = encode(weights, np.array([pieces]), np.ones((1, len(pieces)), bool))
    steps = trace_layer(weights, number, out.hidden[number, 0])  # (T, D): unbatched, the B axis dropped
    H, T, d_h = TINY.heads, len(pieces), TINY.head_dim
    assert steps.q.shape == steps.k.shape == steps.v.shape == (H, T, d_h)
    assert np.array_equal(steps.attention.weights, out.weights[number, 0])  # the same functions, the same sums
    assert np.array_equal(steps.output, out.hidden[number + 1, 0])
    # an independent computation from the trace's q and k: softmax(q k^T / sqrt(d_k)) in float64
    q, k = steps.q.astype(np.float64), steps.k.astype(np.float64)
    independent = softmax_rows(q @ k.transpose(0, 2, 1) / math.sqrt(d_h))  # (H, T, T)
    assert np.abs(independent - out.weights[number, 0]).max() < 1e-6
    assert np.allclose(steps.attention.raw_scores, steps.q @ steps.k.transpose(0, 2, 1), atol=1e-5)
    assert steps.attention.divisor == pytest.approx(math.sqrt(d_h))


def test_q_k_v_carry_their_biases_head_by_head():
    weights = random_weights(TINY, seed=6)
    x = np.random.default_rng(0).standard_normal((5, TINY.hidden)).astype(np.float32)  # (T, D)
    steps = trace_layer(weights, 1, x)
    layer, D, d_h = weights.layers[1], TINY.hidden, TINY.head_dim
    for head in range(TINY.heads):
        cols = slice(head * d_h, (head + 1) * d_h)
        q = x.astype(np.float64) @ layer.W_qkv[:, :D][:, cols] + layer.b_qkv[:D][cols]  # (T, d_h)
        k = x.astype(np.float64) @ layer.W_qkv[:, D : 2 * D][:, cols] + layer.b_qkv[D : 2 * D][cols]
        assert np.abs(steps.q[head] - q).max() < 1e-5 and np.abs(steps.k[head] - k).max() < 1e-5


def test_a_padded_batch_is_traced_with_its_mask():
    weights = random_weights(TINY, seed=7)
    ids, real = padded(SENTENCES)
    out = encode(weights, ids, real)
    key_bias = np.where(real, 0.0, -np.inf).astype(np.float32)  # (B, T) as encode builds it
    steps = trace_layer(weights, 1, out.hidden[1], key_bias)  # (B, T, D)
    assert np.array_equal(steps.attention.weights, out.weights[1])
    short = len(SENTENCES[3])
    assert not steps.attention.weights[3, :, :, short:].any()  # padding keys get exactly 0


def test_the_trace_runs_the_textbook_attention_steps(monkeypatch):
    """One attention implementation: the trace calls core.attention's attention_steps."""
    calls = []

    def spy(q, k, v, **keywords):
        calls.append(q.shape)
        return core_attention.attention_steps(q, k, v, **keywords)

    monkeypatch.setattr(encoder_module, "attention_steps", spy)
    trace_layer(random_weights(TINY), 0, np.ones((6, TINY.hidden), np.float32))
    assert calls == [(1, TINY.heads, 6, TINY.head_dim)]


def test_the_traced_q_and_k_equal_torchs_linear_layers():
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    weights = random_weights(TINY, seed=8)
    tensors = {name: torch.from_numpy(np.ascontiguousarray(array)) for name, array in weights.to_tensors().items()}
    ids, real = padded(SENTENCES[:1])
    out = encode(weights, ids, real)
    for number in range(TINY.layers):
        x = out.hidden[number, 0]  # (T, D)
        steps = trace_layer(weights, number, x)
        p = f"encoder.layer.{number}.attention.self."
        for name, ours in (("query", steps.q), ("key", steps.k), ("value", steps.v)):
            theirs = F.linear(torch.from_numpy(x), tensors[p + name + ".weight"], tensors[p + name + ".bias"])
            theirs = theirs.view(len(x), TINY.heads, TINY.head_dim).transpose(0, 1).numpy()  # (H, T, d_h)
            assert np.abs(ours - theirs).max() < 1e-5, (number, name)


# ------------------------------------------------------------------ the real model: engine and command line


@pytest.fixture
def minilm(minilm_folder):
    from ctxembed.engine.registry import open_engine

    return open_engine(model="minilm")


def test_the_engines_trace_is_the_results_own_piece_attention(minilm):
    [result] = minilm.run([minilm.prepare("I deposited the cheque at the riverside bank")], trace=True)
    P = len(result.prepared.piece_ids)
    for layer in (0, 3, 5):
        trace = minilm.layer_trace(result, layer)
        assert trace.level == "pieces" and trace.units[0] == "[CLS]" and trace.units[-1] == "[SEP]"
        assert trace.steps.q.shape == (12, P, 32)
        assert np.abs(trace.steps.attention.weights - result.piece_weights[layer]).max() < 1e-6
        assert np.abs(trace.steps.output - result.piece_hidden[layer + 1]).max() < 1e-5
        q, k = trace.steps.q.astype(np.float64), trace.steps.k.astype(np.float64)
        independent = softmax_rows(q @ k.transpose(0, 2, 1) / math.sqrt(32))  # (H, P, P)
        assert np.abs(independent - result.piece_weights[layer]).max() < 1e-6


def test_a_word_of_several_pieces_queries_with_its_first_piece(minilm):
    [result] = minilm.run([minilm.prepare("the overdraft fee")], trace=True)
    trace = minilm.layer_trace(result, 5)
    assert trace.units == ["[CLS]", "the", "over", "##dra", "##ft", "fee", "[SEP]"]
    assert trace.query_units == [1, 2, 5]  # the, over (overdraft's first piece), fee


def test_the_neuron_view_of_a_word_of_pieces_names_the_piece_and_the_word(minilm_folder):
    doc = run_json("attend", "the overdraft fee at the bank", "--model", "minilm", "--explain", "--word", "overdraft",
                   "--json")  # fmt: skip
    neuron = doc["explain"]["neuron"]
    assert (neuron["query"], neuron["token"], neuron["word"]) == (2, "over", "overdraft")
    raw = np.array(doc["explain"]["raw_scores"])
    assert np.abs(np.array(neuron["terms"]).sum(axis=1) - raw[2]).max() < 1e-4
    shown = invoke("attend", "the overdraft fee at the bank", "--model", "minilm", "--explain", "--word", "overdraft")
    assert "'over' (the first piece of 'overdraft'): q . k_j" in shown.stdout


def test_explain_json_under_minilm_has_the_piece_steps_and_a_neuron_view(minilm_folder):
    explain = ("--explain", "--layer", "2", "--head", "7", "--word", "bank")
    doc = run_json("attend", SENTENCE, "--model", "minilm", *explain, "--json")
    steps = doc["explain"]
    tokens = steps["tokens"]
    assert tokens == ["[CLS]", "we", "sat", "on", "the", "river", "bank", "[SEP]"]
    assert (steps["layer"], steps["head"], steps["heads"], steps["level"]) == (2, 7, 12, "pieces")
    assert steps["biases"] and steps["projected"] and steps["residual"] and steps["layer_norm"]
    raw = np.array(steps["raw_scores"])
    weights = np.array(steps["weights"])
    assert np.allclose(weights, softmax_rows(raw / math.sqrt(32)), atol=1e-6)
    neuron = steps["neuron"]
    assert (neuron["token"], neuron["word"], neuron["query"]) == ("bank", "bank", 6)
    terms = np.array(neuron["terms"])  # (P, d_k): row j sums to q_bank . k_j
    assert terms.shape == (8, 32)
    assert np.abs(terms.sum(axis=1) - raw[6]).max() < 1e-4
    assert len(steps["attended"]) == len(steps["output"]) == 8 and steps["mix"] is None  # layer 2 is not the last


def test_explain_under_minilm_prints_the_layer_head_and_pieces(minilm_folder):
    result = invoke("attend", SENTENCE, "--model", "minilm", "--explain")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "step by step: layer 5, head 0, over word pieces" in out
    assert "[CLS]" in out and "q = x W_q + b_q" in out and "feed-forward GELU" in out
    assert "10. layer mix" in out  # the last layer: the read-out over the words follows


@pytest.mark.parametrize(("flag", "value", "name"), [("--layer", "6", "--layer 6"), ("--head", "12", "--head 12")])
def test_a_layer_or_head_the_model_lacks_is_one_line(minilm_folder, flag, value, name):
    line = fails(2, "attend", SENTENCE, "--model", "minilm", "--explain", flag, value)
    assert line.startswith(f"ctxembed: error: {name} does not exist")
