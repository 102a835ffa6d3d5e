"""The all-but-the-top statistics of a store (:class:`ctxembed.core.abtt.Statistics`), from the first
place that has them:

1. the store's own section ``"abtt"`` (the shipped store carries it, so a first run costs nothing);
2. a checksummed cache file beside the vector cache (see :func:`ctxembed.vectors.cache.stats_cache_path`);
3. one pass over the vectors (~0.1 s for 200k words x 100 dimensions), then saved to that cache
   when the cache directory is writable.
"""

from __future__ import annotations

from ctxembed.core.abtt import Statistics, statistics_from_blocks
from ctxembed.progress import slow
from ctxembed.vectors.cache import load_npz_checked, save_npz_atomic, stats_cache_path
from ctxembed.vectors.store import VectorStore

SECTION = "abtt"  # the store section's name; arrays mean (d,), directions (d, d), variances (d,), words ()


def compute_statistics(store: VectorStore, n_words: int) -> Statistics:
    """One pass over the first ``n_words`` rows of ``store``."""
    return statistics_from_blocks(store.iter_blocks(), min(n_words, len(store)), store.dim)


def statistics(store: VectorStore, n_words: int) -> Statistics:
    """The statistics of the ``n_words`` most frequent words: from the store, the cache, or computed."""
    n_words = min(n_words, len(store))
    section = store.section(SECTION)
    if (
        section is not None
        and int(section["words"].item()) == n_words
        and section["directions"].shape == (store.dim,) * 2
    ):
        return Statistics.from_arrays(section)
    cache = stats_cache_path(store, f"{SECTION}-{n_words}")
    saved = load_npz_checked(cache, ("mean", "directions", "variances", "words")) if cache is not None else None
    if saved is not None:
        return Statistics.from_arrays(saved)
    with slow(f"principal directions of {n_words:,} words (all-but-the-top, once)"):
        found = compute_statistics(store, n_words)
    if cache is not None:
        save_npz_atomic(cache, **found.as_arrays())
    return found
