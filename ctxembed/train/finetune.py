"""Fine-tuning the trained encoder on labelled pairs (BERT's way), in NumPy: every weight learns.

A pair is two sentences, each with a marked word, and a label: 1 when the word keeps its sense, 0 when
it does not (or a graded score in [0, 1]). One step::

    out   = encode(weights, ids, real, tape=True)             # (2P, T) pieces: both sentences of P pairs
    u, v  = pooled(out.hidden[-1], pooling)                   # (P, D) each: the marked words' mean piece vector
    p     = sigmoid(scale * cos(u, v) + bias)                 # (P,) the head: same sense or not
    loss  = mean binary cross-entropy(p, labels)
    grads = encode_backward(d_top, out.tape, weights)         # ctxembed.train.encoder_backprop

The head is a scaled cosine (two numbers): the derived model's judgement is a monotone function of the
very cosine ``compare`` shows, so the probability and the similarity never disagree on an order, and
two numbers cannot overfit a few thousand pairs. The optimiser is AdamW with a linear warm-up and
decay (:mod:`ctxembed.train.optim`), gradients clipped by their global norm, and mini-batches of pairs
of similar length (:func:`pair_batches`), so little of a batch is padding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ctxembed.core.encoder import EncoderWeights, encode
from ctxembed.train.encoder_backprop import encode_backward
from ctxembed.train.optim import Adam, clip_gradients


@dataclass(frozen=True)
class Pair:
    """Two sentences as piece ids (with [CLS] and [SEP]), the marked word's pieces in each, and the label."""

    first: Sequence[int]  # piece ids of sentence 1
    second: Sequence[int]  # piece ids of sentence 2
    first_span: tuple[int, int]  # [start, stop) of the marked word's pieces in sentence 1
    second_span: tuple[int, int]
    label: float  # 1 = same sense, 0 = not (or a graded score in [0, 1])


@dataclass(frozen=True)
class PairBatch:
    """P pairs as one padded batch of 2P sentences: rows 2i and 2i + 1 are pair i's two sentences."""

    ids: np.ndarray  # (2P, T) piece ids, 0 at padding
    real: np.ndarray  # (2P, T) bool: True = a piece
    pooling: np.ndarray  # (2P, T) 1/n on the marked word's n pieces, 0 elsewhere
    labels: np.ndarray  # (P,)


def make_batch(pairs: Sequence[Pair], dtype=np.float32) -> PairBatch:
    """Pairs -> one padded batch (see :class:`PairBatch`)."""
    sentences = [s for pair in pairs for s in (pair.first, pair.second)]
    spans = [span for pair in pairs for span in (pair.first_span, pair.second_span)]
    T = max(map(len, sentences))
    ids = np.zeros((len(sentences), T), np.int64)  # (2P, T)
    real = np.zeros((len(sentences), T), bool)  # (2P, T)
    pooling = np.zeros((len(sentences), T), dtype)  # (2P, T)
    for row, (pieces, (start, stop)) in enumerate(zip(sentences, spans, strict=True)):
        ids[row, : len(pieces)], real[row, : len(pieces)] = pieces, True
        pooling[row, start:stop] = 1 / (stop - start)
    return PairBatch(ids, real, pooling, np.array([pair.label for pair in pairs], dtype))  # labels (P,)


def pair_batches(pairs: Sequence[Pair], batch_pairs: int, rng: np.random.Generator | None = None) -> list[PairBatch]:
    """Mini-batches of ``batch_pairs`` pairs sorted by length (the longer sentence of a pair), so pairs of
    similar length share a batch and little is padding; with ``rng`` the batches come in a shuffled order
    (pairs of equal length are shuffled too), the same for the same generator state."""
    length = np.array([max(len(p.first), len(p.second)) for p in pairs])  # (n,)
    tie = np.arange(len(pairs)) if rng is None else rng.permutation(len(pairs))  # (n,)
    order = np.lexsort((tie, length))  # (n,) by length, then by the tie-break
    chunks = [order[start : start + batch_pairs] for start in range(0, len(order), batch_pairs)]
    if rng is not None:
        chunks = [chunks[i] for i in rng.permutation(len(chunks))]
    return [make_batch([pairs[i] for i in chunk]) for chunk in chunks]


def epoch_batches(pairs: Sequence[Pair], batch_pairs: int, seed: int, epoch: int) -> list[PairBatch]:
    """Epoch ``epoch``'s batches (:func:`pair_batches`) in an order drawn from (seed, epoch) alone, so a run
    resumed at any step of any epoch sees the batches an uninterrupted run would."""
    return pair_batches(pairs, batch_pairs, np.random.default_rng([seed, epoch]))


# ---------------------------------------------------------------------------------------- the head


def cosine_head(
    u: np.ndarray, v: np.ndarray, labels: np.ndarray, scale: float, bias: float
) -> tuple[float, np.ndarray, np.ndarray, np.ndarray, float, float]:
    """p = sigmoid(scale * cos(u, v) + bias), loss = mean binary cross-entropy against ``labels`` (P,):
    u, v (P, D) -> (loss, p (P,), dL/du (P, D), dL/dv (P, D), dL/dscale, dL/dbias)."""
    norm_u = np.linalg.norm(u, axis=1)  # (P,)
    norm_v = np.linalg.norm(v, axis=1)  # (P,)
    cos = np.einsum("pd,pd->p", u, v) / (norm_u * norm_v)  # (P,)
    z = scale * cos + bias  # (P,)
    p = 1 / (1 + np.exp(-z))  # (P,)
    # -[y log p + (1 - y) log(1 - p)] = softplus(z) - y z, written so no large |z| overflows
    loss = float(np.mean(np.logaddexp(0, z) - labels * z))
    d_z = (p - labels) / len(labels)  # (P,) dL/dz
    d_cos = d_z * scale  # (P,)
    # d cos / du = v / (|u| |v|) - cos u / |u|^2, and the same with u and v swapped
    d_u = d_cos[:, None] * (v / (norm_u * norm_v)[:, None] - cos[:, None] * u / (norm_u**2)[:, None])  # (P, D)
    d_v = d_cos[:, None] * (u / (norm_u * norm_v)[:, None] - cos[:, None] * v / (norm_v**2)[:, None])  # (P, D)
    return loss, p, d_u, d_v, float(d_z @ cos), float(d_z.sum())


@dataclass(frozen=True)
class StepResult:
    loss: float
    probabilities: np.ndarray  # (P,) the head's p(same sense) before the step
    norm: float  # the gradients' global norm before clipping


def marked_words(weights: EncoderWeights, batch: PairBatch, *, tape: bool = False, layer: int = -1):
    """The encoder's output on a batch (with its tape when asked) and each sentence's marked word at ``layer``
    (the last by default): the mean of its pieces' vectors, (2P, D); rows 2i and 2i + 1 are pair i's."""
    out = encode(weights, batch.ids, batch.real, keep_weights=False, tape=tape)
    return out, np.einsum("st,std->sd", batch.pooling, out.hidden[layer])  # (2P, T) x (2P, T, D) -> (2P, D)


def pair_loss(weights: EncoderWeights, head: dict[str, np.ndarray], batch: PairBatch, *, backward: bool = True):
    """The forward pass (and with ``backward`` the gradients) of one batch: (loss, p (P,), encoder grads
    keyed like :meth:`EncoderWeights.arrays`, head grads {"scale", "bias"}); grads None without backward."""
    out, words = marked_words(weights, batch, tape=backward)  # (2P, D)
    u, v = words[0::2], words[1::2]  # (P, D) each
    loss, p, d_u, d_v, d_scale, d_bias = cosine_head(
        u, v, batch.labels, float(head["scale"][0]), float(head["bias"][0])
    )
    if not backward:
        return loss, p, None, None
    d_words = np.empty_like(words)  # (2P, D)
    d_words[0::2], d_words[1::2] = d_u, d_v
    d_top = batch.pooling[:, :, None] * d_words[:, None, :]  # (2P, T, D) spread over the word's pieces
    grads = encode_backward(d_top[batch.real], out.tape, weights)  # d_top (N, D) at the real pieces
    head_grads = {"scale": np.array([d_scale], head["scale"].dtype), "bias": np.array([d_bias], head["bias"].dtype)}
    return loss, p, grads, head_grads


def decayed_names(names: Sequence[str]) -> list[str]:
    """The arrays AdamW decays: matrices and embedding tables, not biases or LayerNorm gains (BERT's recipe)."""
    return [
        name for name in names if not (name.rsplit(".", 1)[-1] in ("bias", "gain") or name.split(".")[-1][:2] == "b_")
    ]


class FineTuner:
    """One optimiser state for the encoder's arrays (AdamW) and one for the head (Adam, its own learning rate:
    two numbers that start far from their fit, where the encoder's weights start at theirs)."""

    def __init__(
        self,
        weights: EncoderWeights,
        head: dict[str, np.ndarray],
        *,
        weight_decay: float = 0.01,
        clip: float = 1.0,
    ):
        self.weights, self.head, self.clip = weights, head, clip
        self.arrays = weights.arrays()  # the encoder's own arrays: updated in place
        for name, array in self.arrays.items():
            if not array.flags.writeable:
                raise ValueError(f"array {name!r} is read-only: fine-tune a copy of the weights")
        shapes = {name: array.shape for name, array in self.arrays.items()}
        names = list(self.arrays)
        self.adam = Adam(names, shapes, weights.dtype, weight_decay=weight_decay, decayed=decayed_names(names))
        self.head_adam = Adam(list(head), {name: a.shape for name, a in head.items()}, weights.dtype)

    def state(self) -> dict[str, np.ndarray]:
        """Everything a resumed run needs, as flat named arrays (np.savez writes them): the encoder's and
        the head's arrays and both optimisers' moments and step counts. :meth:`restore` puts them back."""
        named = {f"weights.{n}": a for n, a in self.arrays.items()} | {f"head.{n}": a for n, a in self.head.items()}
        for prefix, adam in (("adam", self.adam), ("head_adam", self.head_adam)):
            named |= {f"{prefix}.m.{n}": m for n, m in adam.m.items()} | {
                f"{prefix}.v.{n}": v for n, v in adam.v.items()
            }
            named[f"{prefix}.t"] = np.array(adam.t)
        return named

    def restore(self, state: dict[str, np.ndarray]) -> None:
        """Copy a :meth:`state` back into this tuner's arrays, in place (ValueError for a missing array)."""
        missing = sorted(set(self.state()) - set(state))
        if missing:
            raise ValueError(f"the saved state lacks {len(missing)} arrays, {missing[0]!r} first")
        for name, array in self.state().items():
            if array.ndim and array is not state[name]:  # a resumed run may tune the state's own arrays
                array[...] = state[name]
        self.adam.t, self.head_adam.t = int(state["adam.t"]), int(state["head_adam.t"])

    def step(self, batch: PairBatch, lr: float, head_lr: float) -> StepResult:
        """Forward, backward, clip (encoder and head together), one AdamW step."""
        loss, p, grads, head_grads = pair_loss(self.weights, self.head, batch)
        norm = clip_gradients(grads | {f"head.{name}": g for name, g in head_grads.items()}, self.clip)
        self.adam.step(self.arrays, grads, lr)
        self.head_adam.step(self.head, head_grads, head_lr)
        return StepResult(loss, p, norm)


def trainable_copy(weights: EncoderWeights) -> EncoderWeights:
    """The same weights in fresh writable arrays (installed weights are a read-only memory map)."""
    return EncoderWeights.from_arrays(weights.config, {name: np.array(a) for name, a in weights.arrays().items()})


def engine_pairs(engine, items: Sequence[tuple[Sequence[str], int, Sequence[str], int, float]]) -> list[Pair]:
    """Pairs from a trained engine's own tokenizer: items (words 1, index 1, words 2, index 2, label) of
    pre-tokenised sentences (WiC's layout) -> :class:`Pair` s whose spans are the marked words' pieces."""

    def pieces(words: Sequence[str], index: int) -> tuple[np.ndarray, tuple[int, int]]:
        sentence = engine.prepare(" ".join(words), words=list(words))
        where = np.flatnonzero(sentence.owner == sentence.used.index(index))  # (n,) the word's pieces, in a run
        return sentence.piece_ids, (int(where[0]), int(where[-1]) + 1)

    pairs = []
    for words1, index1, words2, index2, label in items:
        (first, span1), (second, span2) = pieces(words1, index1), pieces(words2, index2)
        pairs.append(Pair(first.tolist(), second.tolist(), span1, span2, float(label)))
    return pairs
