"""CPU seconds per line of batch's driver (run_batch, 2 workers: parent and workers, the process start
left out) against the bare kernel's on the same lines, in one process: a view of issue 35's shares that
a loaded machine disturbs less than wall-time rates. ``share_if_2_cores`` is the kernel's CPU per line
over half of batch's: the share of the kernel batch would reach if its two workers and the parent kept
both cores busy (an upper bound). The workers' CPU counts once they are reaped, at the end of run_batch.

    .venv/bin/python benchmarks/probes/cpu_share.py FILE parquet --word the    # --no-weights --word the
    .venv/bin/python benchmarks/probes/cpu_share.py FILE jsonl                 # JSON with weights
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bare_kernel
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import bare_kernel  # noqa: E402

from ctxembed.api import Explorer  # noqa: E402
from ctxembed.batch import driver, records  # noqa: E402


def own_cpu_seconds() -> float:
    """This process's CPU time alone: batch's parent (reading, the pool, the sink's writing)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def cpu_seconds() -> float:
    """This process's CPU time and its reaped children's (batch's workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpus")
    parser.add_argument("format", choices=["jsonl", "parquet", "npz"])
    parser.add_argument("--word", help="--no-weights --word W (else: the weights)")
    args = parser.parse_args()
    engine = Explorer().engine
    engine.lexicon.prepare_bulk()  # as batch does before it forks
    records.one_blas_thread()
    lines = sum(1 for _ in open(args.corpus, "rb"))
    folder = tempfile.mkdtemp(prefix="cpu-share-")
    out = None if args.format == "jsonl" else os.path.join(folder, f"out.{args.format}")
    saved, null = os.dup(1), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)  # JSON lines to /dev/null, as the bench's batch rows
    try:
        before, parent_before, start = cpu_seconds(), own_cpu_seconds(), time.perf_counter()
        driver.run_batch(
            engine, args.corpus, workers=2, fmt=args.format, out=out, weights=args.word is None, word=args.word
        )
        used, wall = cpu_seconds() - before, time.perf_counter() - start
        parent = own_cpu_seconds() - parent_before
    finally:
        os.dup2(saved, 1)
        shutil.rmtree(folder, ignore_errors=True)
    texts = Path(args.corpus).read_text(encoding="utf-8").splitlines()
    ids = bare_kernel.token_ids(texts)
    kernel = float("inf")
    for _ in range(3):
        start = time.process_time()
        bare_kernel.run(ids, engine.store)
        kernel = min(kernel, time.process_time() - start)
    print(
        json.dumps(
            {
                "variant": f"{args.format} " + (f"--no-weights --word {args.word}" if args.word else "with weights"),
                "batch_cpu_us_a_line": round(used / lines * 1e6, 1),
                "parent_cpu_us_a_line": round(parent / lines * 1e6, 1),  # the rest is the workers'
                "batch_wall_s": round(wall, 2),
                "kernel_cpu_us_a_line": round(kernel / lines * 1e6, 1),
                "share_if_2_cores": round((kernel / lines) / (used / lines / 2), 3),
                "loadavg": os.getloadavg(),
            }
        )
    )


if __name__ == "__main__":
    main()
