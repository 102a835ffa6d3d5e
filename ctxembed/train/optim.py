"""The optimiser and its schedules, shared by both trainers (the projections' ``train`` and the encoder's
fine-tuning): Adam with decoupled weight decay (AdamW), clipping by the global norm, and learning rates
with a linear warm-up followed by cosine or linear decay. Plain NumPy, arrays updated in place."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np


@dataclass
class RowGradient:
    """The gradient of an embedding table, zero but at the rows a batch used: what the word table's
    gradient is (a batch uses a few hundred of its 30,522 rows), kept without the (V, D) of zeros, which
    nothing builds. The optimiser's step and clipping with it equal those with that table, bit for bit
    (adding 0 changes nothing): tests/test_finetune.py builds the table to show it."""

    shape: tuple[int, int]  # (V, D) the table's
    rows: np.ndarray  # (U,) distinct row numbers
    values: np.ndarray  # (U, D) the gradient of those rows

    def __imul__(self, factor: float) -> RowGradient:
        self.values *= factor
        return self


class Adam:
    """Adam (Kingma & Ba 2015) with bias correction, updating arrays in place; with ``weight_decay`` it is
    AdamW (Loshchilov & Hutter 2019): each array named in ``decayed`` first shrinks by lr * weight_decay,
    apart from the gradient, as torch.optim.AdamW does."""

    def __init__(
        self,
        names: list[str],
        shapes: dict[str, tuple],
        dtype,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay: float = 0.0,
        decayed: Iterable[str] = (),
    ):
        self.beta1, self.beta2, self.eps = betas[0], betas[1], eps
        self.weight_decay, self.decayed = weight_decay, frozenset(decayed)
        self.m = {name: np.zeros(shapes[name], dtype=dtype) for name in names}
        self.v = {name: np.zeros(shapes[name], dtype=dtype) for name in names}
        self.t = 0

    def step(self, arrays: dict[str, np.ndarray], grads: dict[str, np.ndarray], lr: float) -> None:
        self.t += 1
        correction1 = 1 - self.beta1**self.t
        correction2 = 1 - self.beta2**self.t
        for name, value in arrays.items():
            g = grads[name]
            m, v = self.m[name], self.v[name]
            if self.weight_decay and name in self.decayed:
                value *= 1 - lr * self.weight_decay  # decoupled: the decay never enters m or v
            m *= self.beta1
            v *= self.beta2
            if isinstance(g, RowGradient):  # the other rows' gradient is 0: their m and v only decay
                m[g.rows] += (1 - self.beta1) * g.values
                v[g.rows] += (1 - self.beta2) * g.values * g.values
            else:
                m += (1 - self.beta1) * g
                v += (1 - self.beta2) * g * g
            value -= (lr / correction1) * m / (np.sqrt(v / correction2) + self.eps)


def clip_gradients(grads: dict[str, np.ndarray], max_norm: float) -> float:
    """Scale every gradient down in place when their global L2 norm exceeds ``max_norm``; return the norm."""
    parts = (g.values if isinstance(g, RowGradient) else g for g in grads.values())
    norm = math.sqrt(sum(float(np.vdot(part, part)) for part in parts))
    if max_norm and norm > max_norm:
        for g in grads.values():
            g *= max_norm / norm
    return norm


def learning_rate(step: int, total: int, peak: float, warmup: int) -> float:
    """Linear warm-up over ``warmup`` steps (at most a tenth of the run), then cosine decay to peak / 10."""
    warmup = min(warmup, max(1, total // 10))
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))))


def linear_schedule(step: int, total: int, peak: float, warmup: int) -> float:
    """BERT's fine-tuning schedule: linear warm-up to ``peak`` over ``warmup`` steps, then linear decay to 0
    at step ``total`` (step counts from 0; Hugging Face's get_linear_schedule_with_warmup, taken before the step)."""
    if step < warmup:
        return peak * step / max(1, warmup)
    return peak * max(0.0, (total - step) / max(1, total - warmup))
