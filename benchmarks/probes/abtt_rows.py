"""Why columns.arrays runs all-but-the-top per group, not once on a slab's flat rows.

The removal is (x - mean) - ((x - mean) U) Uᵀ: two matrix products. On a group (B, T, d) NumPy
makes one BLAS call per sentence (T rows); on a slab's flat (n, d) rows, one call for all of them.
This probe runs both on the first lines of Brown and counts the sentences whose inputs differ in
any bit, and times both, under the BLAS kernel the process runs:

    .venv/bin/python benchmarks/probes/abtt_rows.py                             # this machine's kernel
    OPENBLAS_CORETYPE=Haswell .venv/bin/python benchmarks/probes/abtt_rows.py   # the golden kernel

Measured (2026-11-24, OpenBLAS 0.3.31, 3,000 lines): Haswell 0 of 2,979 sentences differ;
SkylakeX all 2,979 differ (by up to ~1e-6), so on an AVX-512 machine a sentence's numbers would
depend on the chunk it runs in. The one-token sentence differs under both (NumPy multiplies a
one-row matrix with a matrix-vector routine). The flat products would save ~0.4-0.6 us a
sentence (per group 1.9-2.5 us, flat a slab at a time 1.6-1.9, CPU time, best of 5).
"""

from __future__ import annotations

import gzip
import itertools
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import threadpoolctl  # noqa: E402

from ctxembed.api import Explorer  # noqa: E402
from ctxembed.batch import columns, records  # noqa: E402
from ctxembed.batch.columns import SLAB_FLOATS  # noqa: E402

LINES = 3000


def main() -> None:
    records.one_blas_thread()
    kernels = [pool.get("architecture") for pool in threadpoolctl.threadpool_info()]
    engine = Explorer().engine
    with gzip.open(REPO / "data" / "brown.txt.gz", "rt", encoding="utf-8") as fh:
        texts = [line.rstrip("\n") for line in itertools.islice(fh, LINES)]
    sentences = columns.prepare_many(engine, texts)
    members = np.flatnonzero(sentences.lengths > 1)  # (S,) one-token sentences aside (see above)
    static, _ = engine._slab_rows(sentences, members)  # (n, d) every sentence's rows, one after the other
    lengths = sentences.lengths[members]  # (S,)
    cuts = np.cumsum(lengths)[:-1]  # where each sentence's rows begin
    flat = engine.project_inputs(static)  # (n, d) one product for all rows
    alone = [engine.project_inputs(rows[None])[0] for rows in np.split(static, cuts)]  # S x (T, d)
    differ = sum(not np.array_equal(a, f) for a, f in zip(alone, np.split(flat, cuts), strict=True))
    print(f"kernel {kernels}: {differ} of {len(members)} sentences differ in some bit")

    def clock(job) -> float:
        best = float("inf")
        for _ in range(5):
            start = time.process_time()
            job()
            best = min(best, time.process_time() - start)
        return best / len(members) * 1e6

    d = static.shape[1]
    by_length = [static[np.repeat(lengths == T, lengths)].reshape(-1, T, d) for T in np.unique(lengths)]
    slabs = np.split(static, range(SLAB_FLOATS // d, len(static), SLAB_FLOATS // d))  # (<= SLAB_FLOATS / d, d) each
    grouped = clock(lambda: [engine.project_inputs(group) for group in by_length])  # (B, T, d) per length
    flat = clock(lambda: [engine.project_inputs(slab) for slab in slabs])
    print(f"per group (B, T, d): {grouped:.2f} us a sentence; flat, a slab at a time: {flat:.2f}")


if __name__ == "__main__":
    main()
