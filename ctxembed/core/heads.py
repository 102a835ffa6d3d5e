"""A derived model's head: the probability that a word keeps its sense across two sentences, from the
word's hidden states in each. Two kinds, as their record (derived.json's ``head``) says:

- ``scaled-cosine`` (fine-tuning, :mod:`ctxembed.train.finetune`): p = σ(scale · cos(h_L u, h_L v) + bias),
  the word's vectors at the last hidden state;
- ``layer-cosines`` (``--freeze``, ELMo's way): p = σ(a · cos(mix u, mix v) + Σ_j w_j cos(h_j u, h_j v)
  + Σ_j w'_j cos(z_j u, z_j v) + b), the learned layer mix's cosine beside each hidden state's own, raw and
  standardised (z_j = (h_j - centre_j) / spread_j, each dimension's mean and spread over the training
  occurrences, kept in the head: measured on WiC, standardised cosines gain 0.026 of dev accuracy).

Used by training (its held-out accuracy) and by ``compare`` (the probability beside the cosine): one path.
"""

from __future__ import annotations

import numpy as np

from ctxembed.core.similarity import row_cosines


def head_features(head: dict, mix: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The head's inputs for n pairs: first, second (n, K, D) the word's K = L + 1 hidden states in each
    sentence, mix (K,) the read-out's layer weights -> (n, F): [cos at the head's layer] for a scaled
    cosine, [cos of the mix, cos_0 ... cos_L, standardised cos_0 ... cos_L] for layer cosines."""
    if head["kind"] == "scaled-cosine":
        return row_cosines(first[:, head["layer"]], second[:, head["layer"]])[:, None]  # (n, 1)
    mixed = row_cosines(np.tensordot(first, mix, axes=([1], [0])), np.tensordot(second, mix, axes=([1], [0])))  # (n,)
    columns = [mixed[:, None], row_cosines(first, second)]  # (n, 1), (n, K)
    if "centre" in head:
        centre, spread = np.asarray(head["centre"]), np.asarray(head["spread"])  # (K, D) each
        columns.append(row_cosines((first - centre) / spread, (second - centre) / spread))  # (n, K)
    return np.hstack(columns)  # (n, 1 + K) or (n, 1 + 2K)


def head_coefficients(head: dict) -> tuple[np.ndarray, float]:
    """(coefficients (F,), bias) of the head's logistic link over :func:`head_features`."""
    if head["kind"] == "scaled-cosine":
        return np.array([head["scale"]]), float(head["bias"])
    return np.array([head["mix_weight"], *head["weights"]]), float(head["bias"])


def same_sense(head: dict, mix: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """p(same sense) of n pairs: first, second (n, K, D) -> (n,)."""
    coefficients, bias = head_coefficients(head)
    z = head_features(head, mix, first, second) @ coefficients + bias  # (n, F) x (F,) -> (n,)
    return 1 / (1 + np.exp(-z))
