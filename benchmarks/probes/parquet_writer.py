"""CPU time the parent spends writing batch's Parquet row groups, per Brown line, under writer options.

The worker side (records -> Arrow batches) runs first, outside the clock; then the same batches are
written to one file with each set of ParquetWriter options (process CPU time, the best of 5 rounds):

    .venv/bin/python benchmarks/probes/parquet_writer.py [--lines 8192] [--word the] [--rounds 5]

Measured 2026-11-27 06:04 UTC, 12,288 lines with weights, 7 rounds, load average 0.9 (us a line, file):
WRITER_OPTIONS 8.2 (34.8 MB); what batch wrote before, Snappy on every column and no dictionary at all
(its list of dictionary columns named no Parquet column) 10.8 (29.6 MB); no compression 8.1 (36.8 MB);
the weights as BYTE_STREAM_SPLIT + LZ4 12.1 (26.6 MB); write_batch_size 1,024 10.9; statistics on every
column 10.0; the weights column alone 5.7, every column but the weights 3.2.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import pyarrow.parquet as pq  # noqa: E402

from ctxembed.api import Explorer  # noqa: E402
from ctxembed.batch import columnar, driver, records  # noqa: E402

CHUNK = 4096  # driver.COLUMNAR_CHUNK: a row group per chunk


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=8192)
    parser.add_argument("--word", help="--no-weights --word W instead of the weights")
    parser.add_argument("--rounds", type=int, default=5, help="best of this many rounds")
    args = parser.parse_args()
    engine = Explorer().engine
    engine.lexicon.prepare_bulk()
    records.one_blas_thread()
    with gzip.open(REPO / "data" / "brown.txt.gz", "rb") as fh:
        lines = list(itertools.islice(fh, args.lines))
    chunks = [[(s + i + 1, line) for i, line in enumerate(lines[s : s + CHUNK])] for s in range(0, len(lines), CHUNK)]
    options = {"weights": args.word is None, "with_vectors": False, "word": args.word, "digits": None}
    options["format"] = "parquet"
    batches = [columnar.parquet_batch(driver.chunk_table(engine, c, options), options, engine) for c in chunks]
    names = batches[0].schema.names
    weights, w = columnar.leaf("weights"), columnar.WRITER_OPTIONS
    trials = {
        "as batch writes it (WRITER_OPTIONS)": (names, w),
        "Snappy on every column, no dictionary": (names, {**w, "compression": "snappy", "use_dictionary": False}),
        "no compression": (names, {**w, "compression": "none"}),
        "no dictionary": (names, {**w, "use_dictionary": False}),
        "weights BYTE_STREAM_SPLIT + LZ4": (
            names,
            {
                **w,
                "compression": {**w["compression"], weights: "lz4"},
                "column_encoding": {weights: "BYTE_STREAM_SPLIT"},
            },
        ),
        "write_batch_size 1,024 (pyarrow's default)": (names, {**w, "write_batch_size": 1024}),
        "statistics on every column": (names, {**w, "write_statistics": True}),
    }
    if args.word is None:
        trials["the weights column alone"] = (["weights"], w)
        trials["every column but the weights"] = ([n for n in names if n != "weights"], w)
    best = dict.fromkeys(trials, float("inf"))
    sizes = {}
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "probe.parquet")
        for _ in range(args.rounds):  # every trial once a round: the machine's drift hits them alike
            for name, (columns, options_) in trials.items():
                chosen = [b.select(columns) for b in batches]
                start = time.process_time()
                with pq.ParquetWriter(path, chosen[0].schema, **options_) as writer:
                    for batch in chosen:
                        writer.write_batch(batch)
                best[name] = min(best[name], time.process_time() - start)
                sizes[name] = os.path.getsize(path) / 1e6
    for name in trials:
        print(f"{name:45} {best[name] / len(lines) * 1e6:6.2f} us a line  {sizes[name]:6.1f} MB")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
