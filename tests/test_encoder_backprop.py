"""The trained encoder's hand-written backward pass (ctxembed.train.encoder_backprop): its gradients equal
torch autograd through BERT written in torch (tests/test_encoder.py's torch_bert) on a tiny random BERT
and on the real model's first layer, in float64 to 1e-8 and float32 to 1e-4; the forward pass that
keeps its tape gives encode's numbers bit for bit; GELU's slope is the derivative of what GELU computes.

The tiny model is core.encoder.random_weights on tests/test_encoder.py's TINY config."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ctxembed.core import encoder as encoder_module
from ctxembed.core.encoder import EncoderConfig, EncoderWeights, encode, gelu, random_weights
from ctxembed.train.encoder_backprop import encode_backward
from ctxembed.train.optim import RowGradient
from tests.test_encoder import SENTENCES, TINY, padded, torch_bert_tensors

TOLERANCE = {np.float64: 1e-8, np.float32: 1e-4}


def as_table(gradient: RowGradient) -> np.ndarray:
    """A row gradient as the (V, D) table it stands for: zero but at its rows (what the product never builds)."""
    full = np.zeros(gradient.shape, gradient.values.dtype)  # (V, D)
    full[gradient.rows] = gradient.values  # (U, D) into their rows
    return full


def dense(grads: dict) -> dict[str, np.ndarray]:
    """Every gradient as a plain array (a :class:`RowGradient` as its table), to compare with torch's."""
    return {name: as_table(g) if isinstance(g, RowGradient) else g for name, g in grads.items()}


def numpy_gradients(weights: EncoderWeights, ids, real, direction):
    """Loss = sum(hidden[-1][real] * direction): the loss and every gradient, in torch's layout and names."""
    out = encode(weights, ids, real, tape=True)
    top = out.hidden[-1][real]  # (N, D)
    grads = dense(encode_backward(direction.astype(weights.dtype), out.tape, weights))
    as_weights = EncoderWeights.from_arrays(weights.config, grads)
    return float((top * direction).sum()), as_weights.to_tensors()


def torch_gradients(weights: EncoderWeights, ids, real, direction):
    """The same loss through torch autograd: the loss and every gradient by Hugging Face name."""
    torch = pytest.importorskip("torch")
    t = {name: torch.tensor(np.array(array), requires_grad=True) for name, array in weights.to_tensors().items()}
    hidden, _ = torch_bert_tensors(t, weights.config, ids, real)
    loss = (hidden[-1][torch.from_numpy(real)] * torch.from_numpy(direction.astype(weights.dtype))).sum()
    loss.backward()
    return float(loss.detach()), {name: tensor.grad.numpy() for name, tensor in t.items()}


def worst_gradient(ours: dict, theirs: dict) -> tuple[float, str]:
    """The largest |ours - theirs| over every gradient, and which gradient it is in."""
    assert ours.keys() == theirs.keys()
    gaps = {name: float(np.abs(ours[name].astype(np.float64) - theirs[name]).max()) for name in ours}
    name = max(gaps, key=gaps.get)
    return gaps[name], name


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
def test_tiny_bert_gradients_equal_torch_autograd(dtype):
    pytest.importorskip("torch")
    weights = random_weights(TINY, seed=3, dtype=dtype)
    ids, real = padded(SENTENCES)  # four sentences of 3 to 9 pieces: padding inside attention
    direction = np.random.default_rng(0).standard_normal((int(real.sum()), TINY.hidden))  # (N, D)
    loss, ours = numpy_gradients(weights, ids, real, direction)
    torch_loss, theirs = torch_gradients(weights, ids, real, direction)
    gap, where = worst_gradient(ours, theirs)
    print(f"tiny BERT {np.dtype(dtype).name}: largest |numpy - torch| gradient {gap:.2e} ({where})")
    assert abs(loss - torch_loss) < 1e3 * TOLERANCE[dtype]
    assert gap < TOLERANCE[dtype], (gap, where)
    # the comparison can fail: a gradient off by one part in 10^4 is seen
    ours["encoder.layer.0.attention.self.key.weight"] *= 1 + 1e-4 if dtype == np.float64 else 1 + 1e-2
    assert worst_gradient(ours, theirs)[0] > TOLERANCE[dtype]


def test_real_first_layer_gradients_equal_torch_autograd(minilm_folder):
    pytest.importorskip("torch")
    from ctxembed.vectors.bert import load_encoder

    config, encoder = load_encoder(minilm_folder)
    one = EncoderConfig(**(vars(config) | {"layers": 1}))
    ids, real = padded([[101, 2057, 2938, 2006, 1996, 2314, 2924, 102], [101, 1045, 2253, 2000, 1996, 2924, 102]])
    direction = np.random.default_rng(1).standard_normal((int(real.sum()), one.hidden))  # (N, D)
    for dtype in (np.float64, np.float32):
        arrays = {name: np.array(array, dtype=dtype) for name, array in encoder.arrays().items()}
        arrays = {name: array for name, array in arrays.items() if not name.startswith("layers.") or name[7] == "0"}
        weights = EncoderWeights.from_arrays(one, arrays)
        _, ours = numpy_gradients(weights, ids, real, direction)
        _, theirs = torch_gradients(weights, ids, real, direction)
        gap, where = worst_gradient(ours, theirs)
        print(f"MiniLM layer 0 {np.dtype(dtype).name}: largest |numpy - torch| gradient {gap:.2e} ({where})")
        assert gap < TOLERANCE[dtype], (dtype, gap, where)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_tape_changes_no_number_of_the_forward_pass(dtype):
    weights = random_weights(TINY, seed=4, dtype=dtype)
    for ids, real in (padded(SENTENCES), padded(SENTENCES[:2])):  # with padding, and without
        plain, taped = encode(weights, ids, real), encode(weights, ids, real, tape=True)
        assert plain.tape is None and len(taped.tape.layers) == TINY.layers
        assert np.array_equal(plain.hidden, taped.hidden) and np.array_equal(plain.weights, taped.weights)


def test_the_tape_keeps_the_forward_pass_own_arrays():
    """The tape holds what the forward computed: the attention weights it returns, the layer inputs."""
    weights = random_weights(TINY, seed=4)
    ids, real = padded(SENTENCES)
    out = encode(weights, ids, real, tape=True)
    for number, tape in enumerate(out.tape.layers):
        assert np.array_equal(tape.weights, out.weights[number])
        assert np.array_equal(tape.rows, out.hidden[number][real])


def polynomial_gelu64(x: np.ndarray, slope: np.ndarray | None = None) -> np.ndarray:
    """The float32 path's formula (Abramowitz & Stegun) evaluated in float64: exact enough to differentiate."""
    h = x.astype(np.float64)  # (n, F)
    scratch = np.empty((4, *h.shape))  # (4, n, F)
    encoder_module._gelu_block(h, *scratch[:3], slope, None if slope is None else scratch[3])
    return h


def test_gelu_slope_is_the_derivative_of_the_polynomial_it_computes():
    x = np.linspace(-6, 6, 2401).reshape(49, 49)  # (49, 49) both signs, 0, and the tails
    slope = np.empty_like(x)
    polynomial_gelu64(x, slope)
    step = 1e-6
    numeric = (polynomial_gelu64(x + step) - polynomial_gelu64(x - step)) / (2 * step)  # (49, 49)
    assert np.abs(slope - numeric).max() < 1e-8
    # and differs from the exact GELU's slope by the polynomial's own error only
    exact = np.empty_like(x)
    gelu(x.copy(), exact)  # float64: exact erf
    assert 1e-9 < np.abs(slope - exact).max() < 1e-5


def test_float32_gelu_slope_and_output_keep_their_float32_values():
    x = np.random.default_rng(2).standard_normal((70, 33)).astype(np.float32) * 3  # (70, 33) more than one block
    slope = np.empty_like(x)
    with_slope = gelu(x.copy(), slope)
    assert np.array_equal(with_slope, gelu(x.copy()))  # the slope changes no output bit
    expected = np.empty(x.shape)
    polynomial_gelu64(x.astype(np.float64), expected)
    assert np.abs(slope - expected).max() < 1e-5


def test_exact_gelu_slope_in_float64():
    x = np.linspace(-5, 5, 101)
    slope = np.empty_like(x)
    gelu(x.copy(), slope)
    phi = np.array([0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x])
    assert np.abs(slope - (phi + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi))).max() < 1e-15


def test_a_training_process_keeps_its_freed_memory():
    """glibc takes both malloc settings (run in a child: the test process keeps its defaults)."""
    import subprocess
    import sys

    code = "from ctxembed.train.memory import keep_freed_memory; print(keep_freed_memory())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    import platform

    assert out == ("True" if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc" else out)
