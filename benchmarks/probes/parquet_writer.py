"""CPU time the parent spends writing batch's Parquet row groups, per Brown line, under writer options.

The worker side (records -> Arrow batches) runs first, outside the clock; then the same batches are
written to one file with each set of ParquetWriter options (best of 3, process CPU time):

    .venv/bin/python benchmarks/probes/parquet_writer.py [--lines 8192] [--word the]

Measured (2026-11-27, 4,096 lines with weights, load average 7-10 on 2 cores, so only the ratios
mean much): pyarrow's defaults but dictionaries for tokens and sources 22.9 us a line; write_batch_size
2^17 20.4; without statistics 17.8; without compression 13.2 (the file 40% larger); the weights column
alone 13.1, every column but the weights 4.9. WRITER_OPTIONS keeps Snappy and drops the floats' statistics.
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
from ctxembed.batch import columnar, records  # noqa: E402

CHUNK = 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=8192)
    parser.add_argument("--word", help="--no-weights --word W instead of the weights")
    args = parser.parse_args()
    engine = Explorer().engine
    engine.lexicon.prepare_bulk()
    records.one_blas_thread()
    with gzip.open(REPO / "data" / "brown.txt.gz", "rb") as fh:
        lines = list(itertools.islice(fh, args.lines))
    chunks = [[(s + i + 1, line) for i, line in enumerate(lines[s : s + CHUNK])] for s in range(0, len(lines), CHUNK)]
    options = {"weights": args.word is None, "with_vectors": False, "word": args.word, "digits": None}
    batches = [columnar.parquet_batch(columnar.record_dicts(engine, c, options), options, engine) for c in chunks]
    names = batches[0].schema.names
    trials = {
        "as batch writes it (WRITER_OPTIONS)": (names, columnar.WRITER_OPTIONS),
        "write_batch_size 1,024 (pyarrow's default)": (names, {"use_dictionary": columnar.DICTIONARY_COLUMNS}),
        "no compression": (names, {**columnar.WRITER_OPTIONS, "compression": "none"}),
        "statistics on every column": (names, {**columnar.WRITER_OPTIONS, "write_statistics": True}),
    }
    if args.word is None:
        trials["the weights column alone"] = (["weights"], {**columnar.WRITER_OPTIONS, "use_dictionary": False})
        trials["every column but the weights"] = ([n for n in names if n != "weights"], columnar.WRITER_OPTIONS)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "probe.parquet")
        for name, (columns, options_) in trials.items():
            chosen = [b.select(columns) for b in batches]
            best = float("inf")
            for _ in range(3):
                start = time.process_time()
                with pq.ParquetWriter(path, chosen[0].schema, **options_) as writer:
                    for batch in chosen:
                        writer.write_batch(batch)
                best = min(best, time.process_time() - start)
            size = os.path.getsize(path) / 1e6
            print(f"{name:45} {best / len(lines) * 1e6:6.2f} us a line  {size:6.1f} MB")


if __name__ == "__main__":
    main()
