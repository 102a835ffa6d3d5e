"""What batch's rate would be if one of its stages cost nothing: the bound each lever can reach.

Runs ``ctxembed batch``'s own driver (run_batch, 2 workers, output to /dev/null) on the benchmark
corpus, with stages replaced by results computed before the clock starts (and before the workers
fork, so they inherit them):

- ``real``: nothing replaced, the same run as ``make bench`` minus the process start;
- ``free-tokenize``: columns.prepare_many (parse is still done) returns the chunk's prepared columns
  at once: what a compiled tokenizer and lookup that took no time at all would give;
- ``free-records``: tokenising, looking up and attention run, but the records and their JSON are
  ready-made bytes: what a JSON writer that took no time would give;
- ``free-tokenize-records``: both; only attention (columns.arrays) and the driver remain;
- ``floats-only``: attention, then orjson writing each sentence's weights (its floats: the one
  part of a record's JSON that no faster writer exists for), and nothing else (no parsing either):
  the floor of any batch with this attention and its weights in JSON;
- ``driver-only``: every chunk's output bytes are ready: the driver, the pipes and the writes.

Each rate is the lines over run_batch's wall time, beside the bare kernel's rate measured in the
same run (benchmarks/bare_kernel.py), with the share the issue asks for (50%).

    .venv/bin/python benchmarks/whatif.py benchmarks/results/cache/sentences-200000-own.txt [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

VARIANTS = {  # name -> what it leaves to measure, as the bench's table says it
    "real": "nothing free (batch's driver, the process start left out)",
    "free-tokenize": "tokenising and lookups free (a compiled tokenizer that took no time)",
    "free-records": "records and their JSON free",
    "free-tokenize-records": "both free: attention and the driver alone",
    "floats-only": "the floor: attention, orjson of the weights' floats, the driver",
    "driver-only": "the driver alone (pipes and writes of ready output)",
}
# The same driver writing other output (issue 35's rows, benchmarks/run.py's columnar job): name ->
# (--format, weights, --word), timed like the variants above, so the rates compare with their bounds.
OUTPUTS = {
    "jsonl-word": ("jsonl", False, "the"),
    "parquet": ("parquet", True, None),
    "parquet-word": ("parquet", False, "the"),
    "npz-word": ("npz", False, "the"),
}
PREPARED = ("free-tokenize", "free-tokenize-records", "floats-only")  # variants given each chunk's columns
OUTPUT = ("free-records", "free-tokenize-records", "floats-only", "driver-only")  # ... and its output bytes
CHUNK = 1024  # batch's default --chunk


def chunks_of(path: str, engine) -> list[list]:
    """The chunks batch's reader makes of the file (the same cuts: LineSource, CHUNK lines)."""
    from ctxembed.batch.driver import LineSource, line_limit

    with open(path, "rb") as stream:
        source = LineSource(stream, line_limit(engine.max_tokens))
        return list(iter(lambda: source.next_chunk(CHUNK), None))


def run_variant(path: str, variant: str) -> float:
    """Seconds of run_batch with ``variant``'s stages replaced (this process; output to /dev/null)."""
    from ctxembed.api import Explorer
    from ctxembed.batch import columns, records
    from ctxembed.batch import driver as batch

    engine = Explorer().engine
    engine.lexicon.prepare_bulk()  # as batch's driver does before it forks
    options = {"with_vectors": False, "weights": True, "word": None}
    records.one_blas_thread()
    prepared, output = {}, {}
    for chunk in chunks_of(path, engine):  # before the clock and the fork: the workers inherit these
        key = chunk[0][0]
        if variant in PREPARED:
            texts = records.parse_chunk(chunk)[1]
            prepared[len(texts), texts[0], texts[-1]] = prepared[key] = columns.prepare_many(engine, texts)
        if variant in OUTPUT:  # by line: the run's chunks may end elsewhere (LineSource.share)
            made_here = records.encoded_records(engine, chunk, options)
            output.update(zip((number for number, _ in chunk), made_here, strict=True))

    def prepare_many(engine, texts):
        return prepared[len(texts), texts[0], texts[-1]]

    def made(chunk):
        return [output[number] for number, _ in chunk]

    def attention_then_bytes(engine, chunk, options):
        sentences = columns.prepare_many(engine, records.parse_chunk(chunk)[1])
        for _ in columns.arrays(engine, sentences, weights=True, vectors=False):
            pass
        return made(chunk)

    def attention_floats_then_bytes(engine, chunk, options):
        sentences = prepared[chunk[0][0]]  # no parsing either
        for members, group in columns.arrays(engine, sentences, weights=True, vectors=False):
            for b in range(len(members)):
                orjson.dumps(group.weights[b], option=orjson.OPT_SERIALIZE_NUMPY)
        return made(chunk)

    if variant in ("free-tokenize", "free-tokenize-records"):
        columns.prepare_many = prepare_many
    ready = {
        "free-records": attention_then_bytes,
        "free-tokenize-records": attention_then_bytes,
        "floats-only": attention_floats_then_bytes,
        "driver-only": lambda engine, chunk, options: made(chunk),
    }.get(variant)
    if variant in PREPARED:  # their columns were made for batch's chunks of CHUNK lines: keep those to the end
        batch.LineSource.share = lambda self, size, workers: size
    if ready is not None:  # the driver's JSON Lines work makes its records through Tally.records
        # (tests/test_batch_driver.py pins that seam; patching records.encoded_records reached nothing)
        records.Tally.records = lambda self, engine, chunk, options: ready(engine, chunk, options)
    fmt, weights, word = OUTPUTS.get(variant, ("jsonl", True, None))
    out = None if fmt == "jsonl" else os.path.join(tempfile.mkdtemp(prefix="whatif-"), f"out.{fmt}")
    saved, null = os.dup(1), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    try:
        start = time.perf_counter()
        batch.run_batch(engine, path, workers=2, fmt=fmt, out=out, weights=weights, word=word)
        return time.perf_counter() - start
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)
        if out is not None:
            shutil.rmtree(os.path.dirname(out), ignore_errors=True)


def measure(corpus: str, runs: int, env: dict | None = None) -> dict:
    """Each variant's seconds and the bare kernel's rate, ``runs`` rounds, every variant once a round
    (so that the machine's drift hits them alike), each run in a fresh process (with ``env``: the
    bench's, whose cache directory is its own)."""
    lines = sum(1 for _ in open(corpus, "rb"))
    seconds: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    kernel: list[float] = []
    for _ in range(runs):
        for variant in VARIANTS:
            child = [sys.executable, __file__, corpus, "--variant", variant]
            done = subprocess.run(child, capture_output=True, check=True, env=env)
            seconds[variant].append(json.loads(done.stdout)["seconds"])
        bare = [sys.executable, str(REPO / "benchmarks" / "bare_kernel.py"), corpus]
        kernel.append(json.loads(subprocess.run(bare, capture_output=True, check=True, env=env).stdout)["rate"])
    return {"sentences": lines, "seconds": seconds, "kernel_rates": kernel}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpus")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--variant", choices=[*VARIANTS, *OUTPUTS], help=argparse.SUPPRESS)  # one run, in a child
    args = parser.parse_args()
    if args.variant:
        print(json.dumps({"seconds": run_variant(args.corpus, args.variant)}))
        return
    found = measure(args.corpus, args.runs)
    lines, k = found["sentences"], statistics.median(found["kernel_rates"])
    print(f"{lines:,} sentences, 2 workers, JSON with weights; bare kernel {k:,.0f}/s (one process, median)")
    print(f"{'variant':<24} {'rate':>12} {'share of kernel':>16}")
    for variant in VARIANTS:
        rate = lines / statistics.median(found["seconds"][variant])
        print(f"{variant:<24} {rate:>10,.0f}/s {rate / k:>15.0%}")


if __name__ == "__main__":
    main()
