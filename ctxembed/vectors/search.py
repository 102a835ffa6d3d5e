"""Nearest vocabulary words of a vector, in the store's own space or after all-but-the-top removal.

A search reads only the rows asked for (the ``among`` most frequent words, or all of them) from a
matrix of those rows at unit length, in the space searched: built once from the store, a block at a
time, and kept memory-mapped in the cache folder (:func:`ctxembed.vectors.cache.mapped_array`), so a
search is one matrix-vector product. The shipped store's whole vocabulary (``--among 0``: 400,000 rows
of 100 dimensions, 160 MB) is cached the same way: made block by block it took seconds on every call.
Past ``CACHED_FLOATS`` floats (a larger foreign store) the rows are made block by block for each search
instead, by the same function, so both ways give the same numbers.
"""

from __future__ import annotations

import numpy as np

from ctxembed.core.abtt import TopRemoval
from ctxembed.vectors.cache import mapped_array
from ctxembed.vectors.store import VectorStore

CACHED_FLOATS = 48 * 1024 * 1024  # 192 MB of float32: the shipped 400,000 rows of 100 dimensions and more
_BLOCK_ROWS = 16_384


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
    rows = min(among, len(store)) if among else len(store)
    query = np.asarray(vector, dtype=np.float32)  # (d,)
    length = np.float32(np.linalg.norm(query))
    if length > 0:
        query = query / length  # (d,) unit length: a row's product with it is their cosine
    if rows * store.dim <= CACHED_FLOATS:
        scores = unit_rows(store, rows, removal) @ query  # (rows, d) @ (d,) -> (rows,)
    else:
        scores = np.empty(rows, dtype=np.float32)  # (rows,)
        for start in range(0, rows, _BLOCK_ROWS):
            stop = min(start + _BLOCK_ROWS, rows)
            scores[start:stop] = _unit_block(store, start, stop, removal) @ query  # (b, d) @ (d,) -> (b,)
    return store.top_words(scores, k, exclude)


def unit_rows(store: VectorStore, rows: int, removal: TopRemoval | None) -> np.ndarray:
    """The first ``rows`` rows of the store at unit length (zero rows stay zero), after ``removal`` when
    given: (rows, d) float32, memory-mapped from the cache folder once built."""
    kind = f"unit-{rows}"
    if removal is not None:
        import hashlib  # lazy: a trained model's start searches nothing, and needs no OpenSSL

        digest = hashlib.sha256(np.ascontiguousarray(removal.mean, dtype=np.float64).tobytes())
        digest.update(np.ascontiguousarray(removal.top, dtype=np.float64).tobytes())
        kind += f"-abtt-{digest.hexdigest()[:12]}"

    def build() -> np.ndarray:
        units = np.empty((rows, store.dim), dtype=np.float32)  # (rows, d)
        for start in range(0, rows, _BLOCK_ROWS):
            stop = min(start + _BLOCK_ROWS, rows)
            units[start:stop] = _unit_block(store, start, stop, removal)
        return units

    return mapped_array(store, kind, (rows, store.dim), build)


def _unit_block(store: VectorStore, start: int, stop: int, removal: TopRemoval | None) -> np.ndarray:
    """Rows start..stop at unit length, (b, d) float32. The store's own rows are divided by their stored
    norms; removed rows are computed and measured in float64 (a row whose removal leaves almost
    nothing, length <= 1e-9, becomes zero, as a zero row)."""
    block = store.rows(np.arange(start, stop))  # (b, d) float32
    if removal is None:
        lengths = store.norms[start:stop][:, None]  # (b, 1)
        return np.divide(block, lengths, out=np.zeros_like(block), where=lengths > 0)  # (b, d)
    removed = removal(block.astype(np.float64))  # (b, d) (m - mu) P
    lengths = np.linalg.norm(removed, axis=1, keepdims=True)  # (b, 1)
    units = np.divide(removed, lengths, out=np.zeros_like(removed), where=lengths > 1e-9)  # (b, d)
    return units.astype(np.float32)
