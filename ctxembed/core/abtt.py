"""All-but-the-top (Mu & Viswanath 2018): the vocabulary's mean and principal directions, and their removal.

The statistics of a vocabulary are its mean (d,) and every principal direction (d, d), columns by
descending variance (:func:`statistics_from_blocks`); where they come from (a store section, a cache
file or one pass over a store) is :mod:`ctxembed.vectors.statistics`.

All d directions are kept, so removing any number D <= d of them never computes anything again.
:class:`TopRemoval` is the map x -> (x - mean) (I - U Uᵀ) with U the top D directions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Statistics:
    """The mean and principal directions of the ``words`` most frequent words of a store."""

    mean: np.ndarray  # (d,) float32
    directions: np.ndarray  # (d, d) float32, columns by descending variance
    variances: np.ndarray  # (d,) float32, descending
    words: int

    def as_arrays(self) -> dict[str, np.ndarray]:
        """The arrays as a store section or cache file holds them."""
        return {
            "mean": self.mean,
            "directions": self.directions,
            "variances": self.variances,
            "words": np.array(self.words, dtype=np.int64),
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> Statistics:
        return cls(
            np.asarray(arrays["mean"], dtype=np.float32),
            np.asarray(arrays["directions"], dtype=np.float32),
            np.asarray(arrays["variances"], dtype=np.float32),
            int(np.asarray(arrays["words"]).item()),  # () in a store, (1,) in a cache file
        )


def statistics_from_blocks(blocks: Iterable[tuple[int, np.ndarray]], n_words: int, dim: int) -> Statistics:
    """One pass over the first ``n_words`` rows, given as (first row, (b, d) block) in row order:
    float64 mean and scatter, then an eigendecomposition."""
    mean = np.zeros(dim, dtype=np.float64)  # (d,)
    scatter = np.zeros((dim, dim), dtype=np.float64)  # (d, d) sum of x xᵀ
    for start, block in blocks:
        if start >= n_words:
            break
        block = block[: n_words - start].astype(np.float64)  # (b, d)
        mean += block.sum(axis=0)
        scatter += block.T @ block  # (d, b) x (b, d) -> (d, d)
    mean /= n_words
    covariance = scatter / n_words - np.outer(mean, mean)  # (d, d)
    eigenvalues, eigenvectors = np.linalg.eigh(covariance)  # ascending eigenvalues
    return Statistics(
        mean.astype(np.float32),  # (d,)
        np.ascontiguousarray(eigenvectors[:, ::-1], dtype=np.float32),  # (d, d) largest first
        np.ascontiguousarray(eigenvalues[::-1], dtype=np.float32),  # (d,)
        n_words,
    )


@dataclass(frozen=True)
class TopRemoval:
    """x -> (x - mean) P with P = I - U Uᵀ: the mean and the top D directions U (d, D) removed.

    P is applied in its low-rank form, y - (y U) Uᵀ: 2dD flops a vector instead of d² (D = 3,
    d = 100: ~16x fewer), and row by row, so a vector's result never depends on the others."""

    mean: np.ndarray  # (d,)
    top: np.ndarray  # (d, D)

    @classmethod
    def from_statistics(cls, found: Statistics, directions: int) -> TopRemoval:
        top = np.ascontiguousarray(found.directions[:, :directions])  # (d, D)
        return cls(found.mean, top)

    def remove_top(self, vectors: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
        """(..., d) -> (..., d) P: the top directions removed (not the mean). P is symmetric.
        ``out`` (may be ``vectors`` itself) receives the result instead of a new array."""
        top = self.top.astype(vectors.dtype, copy=False)  # (d, D)
        return np.subtract(vectors, (vectors @ top) @ top.T, out=out)  # (..., d) x (d, D) x (D, d) -> (..., d)

    def __call__(self, vectors: np.ndarray) -> np.ndarray:
        """(..., d) -> (..., d) with the mean and the top directions removed."""
        centred = vectors - self.mean  # (..., d), a new array: the rest is done in it
        return self.remove_top(centred, out=centred)  # (..., d)
