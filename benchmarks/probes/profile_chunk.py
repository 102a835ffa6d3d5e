"""CPU time per sentence of batch's per-chunk work (records.process_chunk), one core, bulk lookups.

Usage: python benchmarks/probes/profile_chunk.py [--sentences N] [--file PATH] [--profile]
CPU time (time.process_time) rather than wall time, so other processes on the machine matter less.
``--file`` takes the first N lines of a text file (``.gz`` too) instead of the benchmark corpus, e.g.
``--file data/brown.txt.gz`` for real text, where most lines hold punctuation or an unknown word.
``--prepare`` times columns.prepare_many alone (tokenising and lookups), chunk by chunk.
``--stages`` times each stage of a chunk on its own (parse, prepare_many, attention, records, their
JSON, the weights' floats alone) and the bare kernel on the same rows, one BLAS thread.
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

from inprocess import group_records  # noqa: E402
from make_corpus import make_sentences  # noqa: E402

from ctxembed.api import Explorer  # noqa: E402
from ctxembed.batch import columns, records  # noqa: E402

CHUNK = 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sentences", type=int, default=20000)
    parser.add_argument("--file", help="lines of this file instead of the benchmark corpus")
    parser.add_argument("--prepare", action="store_true", help="time prepare_many alone")
    parser.add_argument("--stages", action="store_true", help="time each stage on its own")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    engine = Explorer().engine
    engine.lexicon.prepare_bulk()  # as batch does: the sorted word table
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
        return columns.prepare_many(engine, block) if args.prepare else records.process_chunk(engine, chunk, options)

    if args.stages:
        return stages(engine, chunks, texts, options)
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


def stages(engine, chunks: list, texts: list, options: dict) -> None:
    """CPU µs per sentence of each stage, best of 3, every chunk's table entries made first."""
    import orjson
    from bare_kernel import run as bare_kernel

    lines = sum(map(len, texts))

    def clock(label: str, job):
        best, result = float("inf"), None
        for _ in range(3):
            start = time.process_time()
            result = job()
            best = min(best, time.process_time() - start)
        print(f"{best / lines * 1e6:7.2f} us  {label}")
        return result

    clock("parse (parse_chunk)", lambda: [records.parse_chunk(chunk) for chunk in chunks])
    many = clock(
        "tokenise and look up (prepare_many)", lambda: [columns.prepare_many(engine, block) for block in texts]
    )
    groups = clock(
        "attention (columns.arrays, weights alone)",
        lambda: [g for sentences in many for g in columns.arrays(engine, sentences, weights=True, vectors=False)],
    )

    filled = clock("records (fill_group)", lambda: [r for _, g in groups for r in group_records(g, options)])
    clock("their JSON (encode_record)", lambda: [records.encode_record(record) for record in filled])
    floats = orjson.OPT_SERIALIZE_NUMPY
    clock(
        "... the weights' floats alone", lambda: [orjson.dumps(record["weights"], option=floats) for record in filled]
    )
    ids = sorted((s.rows[a : a + n] for s in many for a, n in zip(s.starts, s.lengths, strict=True) if n > 0), key=len)
    clock("bare kernel on the same rows", lambda: bare_kernel(ids, engine.store))
    clock("process_chunk, everything", lambda: [records.process_chunk(engine, chunk, options) for chunk in chunks])


if __name__ == "__main__":
    main()
