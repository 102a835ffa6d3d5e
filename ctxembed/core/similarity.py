"""Cosine similarity of vectors: pairs of rows, one pair, or every pair. Pure NumPy, no I/O."""

from __future__ import annotations

import numpy as np


def row_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine of each row pair (..., d), (..., d) -> (...), as (n, d), (n, d) -> (n,), in the inputs'
    dtype; zero rows give 0."""
    dots = np.einsum("...d,...d->...", a, b)  # (...)
    norms = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)  # (...)
    return np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(np.dot(a, b) / norm) if norm > 0 else 0.0


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Each row of (n, d) scaled to length 1, in the input's dtype; zero rows stay zero."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)  # (n, 1)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)  # (n, d)


def cosine_matrix(vectors: np.ndarray) -> np.ndarray:
    """Pairwise cosines of n vectors (n, d) -> (n, n); zero vectors give 0."""
    unit = unit_rows(vectors)  # (n, d)
    return np.clip(unit @ unit.T, -1.0, 1.0)  # (n, n)
