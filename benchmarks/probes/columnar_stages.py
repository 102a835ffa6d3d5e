"""CPU time per Brown line of each stage of a columnar batch worker (driver.columnar_work), in one
process: parsing, prepare_many (tokens and lookups), the engine's groups (columns.arrays), the Arrow
batch, the IPC stream, and the rest (the chunk's columns built from the groups). Two chunks of 4,096
lines, run once to warm the token table, then the best of three runs (time.process_time, which a
loaded machine disturbs less than wall time). ``--cold`` times the first run instead: a worker's
token table starts empty, and fills as it meets new words.

    .venv/bin/python benchmarks/probes/columnar_stages.py parquet            # with weights
    .venv/bin/python benchmarks/probes/columnar_stages.py parquet --word the # --no-weights --word the
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from ctxembed.api import Explorer  # noqa: E402
from ctxembed.batch import column_chunk, columnar, columns, driver, records  # noqa: E402

CHUNK = driver.COLUMNAR_CHUNK
spent: dict[str, float] = {}


def timed(name: str, function):
    def run(*args, **kwargs):
        start = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.process_time() - start

    return run


def timed_groups(function):
    """columns.arrays is a generator: only the time inside it counts."""

    def run(*args, **kwargs):
        groups = function(*args, **kwargs)
        while True:
            start = time.process_time()
            try:
                item = next(groups)
            except StopIteration:
                return
            finally:
                spent["arrays"] = spent.get("arrays", 0.0) + time.process_time() - start
            yield item

    return run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("format", choices=["parquet", "npz"])
    parser.add_argument("--word", help="--no-weights --word W (else: the weights)")
    parser.add_argument("--cold", action="store_true", help="time the first run, the token table empty")
    args = parser.parse_args()
    if args.format == "parquet":
        import pyarrow.compute  # noqa: F401 - batch's parent loads it (ParquetSink) before its workers fork
        import pyarrow.ipc  # noqa: F401
    engine = Explorer().engine
    engine.lexicon.prepare_bulk()  # as batch does before it forks
    records.one_blas_thread()
    with gzip.open(REPO / "data" / "brown.txt.gz", "rb") as fh:
        lines = fh.read().split(b"\n")[: 2 * CHUNK]
    chunks = [[(s + i + 1, line) for i, line in enumerate(lines[s : s + CHUNK])] for s in range(0, len(lines), CHUNK)]
    options = {"with_vectors": False, "weights": args.word is None, "word": args.word, "digits": None}
    options["format"] = args.format
    column_chunk.parse_chunk = timed("parse", column_chunk.parse_chunk)
    columns.prepare_many = timed("prepare_many", columns.prepare_many)
    columns.arrays = timed_groups(columns.arrays)
    columnar.parquet_batch = timed("arrow batch", columnar.parquet_batch)
    columnar._ipc_bytes = timed("ipc", columnar._ipc_bytes)
    runs = []
    for _ in range(1 if args.cold else 4):
        spent.clear()
        start = time.process_time()
        for chunk in chunks:
            driver.columnar_work(engine, chunk, options)
        runs.append(dict(spent, total=time.process_time() - start))
    best = runs[0] if args.cold else min(runs[1:], key=lambda run: run["total"])  # the first run warms the table
    best["columns (the rest)"] = 2 * best["total"] - sum(best.values())
    line = " ".join(f"{name} {seconds / len(lines) * 1e6:.1f}" for name, seconds in best.items())
    print(f"{line} us/line; load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
