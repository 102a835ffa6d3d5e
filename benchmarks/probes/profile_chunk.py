"""CPU time per sentence of batch's per-chunk work (records.process_chunk), one core, bulk lookups.

Usage: python benchmarks/probes/profile_chunk.py [--sentences N] [--file PATH] [--profile]
CPU time (time.process_time) rather than wall time, so other processes on the machine matter less.
``--file`` takes the first N lines of a text file (``.gz`` too) instead of the benchmark corpus, e.g.
``--file data/brown.txt.gz`` for real text, where most lines hold punctuation or an unknown word.
``--prepare`` times Engine.prepare_many alone (tokenising and lookups), chunk by chunk.
"""

from __future__ import annotations

import argparse
import cProfile
import gzip
import itertools
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # make_corpus

from make_corpus import make_sentences  # noqa: E402

from ctxembed.api import Explorer  # noqa: E402
from ctxembed.batch import records  # noqa: E402

CHUNK = 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sentences", type=int, default=20000)
    parser.add_argument("--file", help="lines of this file instead of the benchmark corpus")
    parser.add_argument("--prepare", action="store_true", help="time prepare_many alone")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    engine = Explorer().engine
    engine.bulk()
    records.one_blas_thread()
    if args.file:
        with (gzip.open if args.file.endswith(".gz") else open)(args.file, "rt", encoding="utf-8") as fh:
            lines = [line.rstrip("\n") for line in itertools.islice(fh, args.sentences)]
    else:
        lines = make_sentences(args.sentences)
    chunks = [
        [(start + i + 1, line.encode()) for i, line in enumerate(lines[start : start + CHUNK])]
        for start in range(0, len(lines), CHUNK)
    ]
    options = {"weights": True, "with_vectors": False, "word": None}
    texts = [lines[start : start + CHUNK] for start in range(0, len(lines), CHUNK)]

    def run(chunk, block):
        return engine.prepare_many(block) if args.prepare else records.process_chunk(engine, chunk, options)

    run(chunks[0], texts[0])  # warm up
    profiler = cProfile.Profile() if args.profile else None
    best = float("inf")
    for _ in range(1 if profiler else 5):
        start = time.process_time()
        if profiler:
            profiler.enable()
        for chunk, block in zip(chunks, texts, strict=True):
            run(chunk, block)
        if profiler:
            profiler.disable()
        best = min(best, time.process_time() - start)
    print(f"{best / len(lines) * 1e6:.1f} us CPU per sentence ({len(lines) / best:,.0f} sentences/s per core)")
    if profiler:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
