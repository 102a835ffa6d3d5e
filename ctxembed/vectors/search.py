"""Nearest vocabulary words of a vector, in the store's own space or after all-but-the-top removal.

Both searches stream the store block by block (never a second copy of the vocabulary).
"""

from __future__ import annotations

import numpy as np

from ctxembed.core.abtt import TopRemoval
from ctxembed.vectors.store import VectorStore


def nearest(
    store: VectorStore,
    vector: np.ndarray,
    *,
    k: int,
    exclude: set[str],
    removal: TopRemoval | None = None,
    among: int | None = None,
) -> list[tuple[str, float]]:
    """The ``k`` words most cosine-similar to ``vector`` (d,), best first, skipping ``exclude``;
    with ``among``, only the ``among`` most frequent words (the first rows) are candidates.

    With ``removal`` the vocabulary is compared after the same all-but-the-top removal the
    attention inputs went through (where contextual vectors live)."""
    scores = store.cosine_to_all(vector) if removal is None else _removed_cosines(store, vector, removal)  # (N,)
    if among:
        scores = np.array(scores)  # (N,) a copy: the store's own array is read-only
        scores[among:] = -np.inf
        k = min(k, among)
    return store.top_words(scores, k, exclude)


def _removed_cosines(store: VectorStore, vector: np.ndarray, removal: TopRemoval) -> np.ndarray:
    """Cosine of ``vector`` (d,) with every (m - mu) P, P = I - U Uᵀ, without projecting each word:
    (m - mu) P . c = m . Pc - mu . Pc and |(m - mu) P|² = |m - mu|² - |Uᵀ(m - mu)|²."""
    mu, top = removal.mean.astype(np.float64), removal.top.astype(np.float64)  # (d,), (d, D)
    direction = removal.remove_top(np.asarray(vector, dtype=np.float64))  # (d,) P c
    probes = np.column_stack([direction, mu, top]).astype(np.float32)  # (d, 2 + D)
    mu_top = mu @ top  # (D,)
    dots = np.empty(len(store), dtype=np.float64)  # (N,)
    squares = np.empty(len(store), dtype=np.float64)  # (N,)
    for start, block in store.iter_blocks():
        stop = start + len(block)
        products = (block @ probes).astype(np.float64)  # (b, d) x (d, 2 + D) -> (b, 2 + D)
        dots[start:stop] = products[:, 0] - mu @ direction
        centred = store.norms[start:stop].astype(np.float64) ** 2 - 2 * products[:, 1] + mu @ mu  # |m - mu|²
        squares[start:stop] = centred - ((products[:, 2:] - mu_top) ** 2).sum(axis=1)
    denom = np.sqrt(np.maximum(squares, 0)) * np.linalg.norm(vector)  # (N,)
    return np.divide(dots, denom, out=np.zeros_like(dots), where=denom > 1e-9)  # (N,)
