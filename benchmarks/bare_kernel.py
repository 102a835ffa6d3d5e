"""The reference for batch throughput: bare NumPy batched attention on the same token ids.

softmax(Q Kᵀ / sqrt(d)) V with Q = K = V = X, float32, over padded (B, T, d) batches: the
arithmetic every attention tool has to do, with nothing around it (no tokenising, no JSON, no
projection, no per-sentence objects). Sentences are grouped by length, 256 per batch, as
``ctxembed batch`` does. The timed part gathers each batch's vectors from the store (int8 rows
times their scales) and runs attention; turning text into token ids (batch's own rows, from
columns.prepare_many) happens before the clock. One BLAS thread, as in each of batch's workers.

    python benchmarks/bare_kernel.py benchmarks/results/cache/sentences-20000-own.txt   # prints JSON
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
GROUP = 256  # sentences per padded batch, as in ctxembed.batch.driver


def attention(x: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x (B, T, d) float32 padded with zeros, lengths (B,) -> (context (B, T, d), weights (B, T, T))."""
    B, T, d = x.shape
    scores = x @ x.transpose(0, 2, 1) / np.float32(math.sqrt(d))  # (B, T, d) x (B, d, T) -> (B, T, T)
    padding = np.arange(T)[None, :] >= lengths[:, None]  # (B, T) True for padded keys
    scores[padding[:, None, :].repeat(T, axis=1)] = -np.inf  # (B, T, T) padded keys get weight 0
    scores -= scores.max(axis=-1, keepdims=True)  # (B, T, T) stable softmax
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=-1, keepdims=True)  # (B, T, T) rows sum to 1
    return scores @ x, scores  # (B, T, T) x (B, T, d) -> (B, T, d)


def token_ids(lines: list[str]) -> list[np.ndarray]:
    """Each sentence's store rows, the ones batch attends over (columns.prepare_many, default
    settings: out-of-vocabulary tokens skipped); a line batch refuses (no known token) is left out."""
    sys.path.insert(0, str(REPO))
    from ctxembed.batch import columns
    from ctxembed.engine import Engine
    from ctxembed.presets import build_settings
    from ctxembed.vectors.sources import open_vectors

    engine = Engine(open_vectors(None), build_settings("default"))
    ids = []
    for first in range(0, len(lines), 1024):
        sentences = columns.prepare_many(engine, lines[first : first + 1024])
        for start, n in zip(sentences.starts.tolist(), sentences.lengths.tolist(), strict=True):
            if n > 0:
                ids.append(sentences.rows[start : start + n])
    return ids


def run(ids: list[np.ndarray], store) -> float:
    """Seconds to run attention over every sentence, grouped by length into padded batches."""
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    start = time.perf_counter()
    for first in range(0, len(order), GROUP):
        group = [ids[i] for i in order[first : first + GROUP]]
        lengths = np.array([len(g) for g in group])  # (B,)
        flat = np.concatenate(group)  # (sum of lengths,)
        rows = store.rows(flat)  # (n, d) float32: int8 rows times their scales
        x = np.zeros((len(group), int(lengths.max()), store.dim), dtype=np.float32)  # (B, T, d)
        x[np.arange(int(lengths.max()))[None, :] < lengths[:, None]] = rows  # scatter into the padding
        attention(x, lengths)
    return time.perf_counter() - start


def main() -> None:
    corpus = Path(sys.argv[1])
    lines = corpus.read_text(encoding="utf-8").splitlines()
    ids = token_ids(lines)
    sys.path.insert(0, str(REPO))
    from ctxembed.vectors.sources import open_vectors

    store = open_vectors(None)
    from threadpoolctl import threadpool_limits

    # One BLAS thread, as each batch worker runs: OpenBLAS's own threads spin against other
    # processes on a shared machine (Brown's longer sentences ran 1.5-8x slower with them).
    threadpool_limits(limits=1, user_api="blas")
    run(ids[:GROUP], store)  # warm-up: page in, first BLAS call
    seconds = run(ids, store)
    tokens = int(sum(len(i) for i in ids))
    print(json.dumps({"sentences": len(ids), "tokens": tokens, "seconds": seconds, "rate": len(ids) / seconds}))


if __name__ == "__main__":
    main()
