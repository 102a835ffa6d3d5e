"""Measurements taken inside one fresh process; run.py starts one per sample and reads its JSON line.

    python benchmarks/inprocess.py open-store [PATH] [--similar]      # open_vectors, find, most_similar, RSS
    python benchmarks/inprocess.py gensim-load PATH (--binary | --no-header)
    python benchmarks/inprocess.py coldstart-profile                  # where `compare --json` spends its time
    python benchmarks/inprocess.py batch-stages CORPUS                 # per-sentence cost of each batch stage
    python benchmarks/inprocess.py dask-batch CORPUS [--no-weights]    # the same job on a 2-process LocalCluster
    python benchmarks/inprocess.py fast-path CORPUS                    # lines batch prepares without prepare()
    python benchmarks/inprocess.py scaling --preset default --n 8,16,32
    python benchmarks/inprocess.py neighbors                           # neighbors and attend once the store is open

Times are seconds from time.perf_counter(); memory is in MB (2^20 bytes): ``rss`` the resident
set now (``anon`` private memory, ``file`` pages of mapped files such as a store), ``peak_rss``
the process's high-water mark (ru_maxrss).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
# run by hand, a probe keeps its conversions out of the user's own cache
os.environ.setdefault("CTXEMBED_CACHE_DIR", str(REPO / "benchmarks" / "results" / "cache" / "ctxembed-cache"))

SENTENCES = ["we sat on the river bank", "I deposited money in the bank"]


def memory() -> dict:
    """Resident memory now and at its peak, in MB."""
    fields = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "RssAnon", "RssFile"):
                fields[name] = int(value.split()[0]) / 1024  # kB -> MB
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux -> MB
    return {"rss": fields.get("VmRSS"), "anon": fields.get("RssAnon"), "file": fields.get("RssFile"), "peak_rss": peak}


def emit(result: dict) -> None:
    print(json.dumps(result))


def group_records(group, options: dict) -> list[dict]:
    """The records of one :class:`ctxembed.batch.columns.ColumnGroup` alone (numbered 1, no id), in the
    group's order: batch's ``fill_group`` with the records held by sentence index (read[i] = i).
    What the probes time as the records stage."""
    from ctxembed.batch.records import fill_group

    by_sentence = {i: {"line": 1} for i in group.members}
    fill_group(by_sentence, range(max(group.members) + 1), group, options)
    return list(by_sentence.values())


# ------------------------------------------------------------------------------ stores
def open_store(path: str | None, similar: bool) -> None:
    """open_vectors (the default store, or a foreign file through its cache), one find, one most_similar."""
    began = time.perf_counter()
    from ctxembed.vectors.sources import open_vectors

    imported = time.perf_counter()
    before = memory()
    start = time.perf_counter()
    store = open_vectors(path)
    opened = time.perf_counter()
    row = store.find("bank")
    found = time.perf_counter()
    result = {
        "import": imported - began,
        "open": opened - start,
        "find": found - opened,
        "row": row,
        "words": len(store),
        "dtype": store.dtype,
        "matrix_mb": len(store) * store.dim * (1 if store.dtype == "int8" else 4) / 2**20,
        "before_open": before,
        "after_open": memory(),
    }
    if similar:
        before = time.perf_counter()
        neighbours = store.most_similar(store.vector("king"), k=10, exclude={"king"})
        result["most_similar"] = time.perf_counter() - before
        result["neighbours"] = [w for w, _ in neighbours[:3]]
        result["after_most_similar"] = memory()
    emit(result)


def gensim_load(path: str, binary: bool) -> None:
    """gensim's own loader on the same file: the reference for opening vectors."""
    start = time.perf_counter()
    import logging

    from gensim.models import KeyedVectors

    logging.getLogger("gensim").setLevel(logging.ERROR)
    imported = time.perf_counter()
    kv = KeyedVectors.load_word2vec_format(path, binary=binary, no_header=not binary)
    loaded = time.perf_counter()
    after_load = memory()
    kv.most_similar("king", topn=10)
    similar = time.perf_counter()
    emit(
        {
            "import": imported - start,
            "load": loaded - imported,
            "most_similar": similar - loaded,
            "words": len(kv),
            "after_load": after_load,
            "after_most_similar": memory(),
        }
    )


# ------------------------------------------------------------------------------ cold start
def coldstart_profile() -> None:
    """cProfile of one in-process `compare --json` (after the imports): cumulative seconds of its phases."""
    import contextlib
    import cProfile
    import io
    import pstats

    start = time.perf_counter()
    from ctxembed import cli

    imported = time.perf_counter()
    sys.argv = ["ctxembed", "compare", *SENTENCES, "--json"]
    profile = cProfile.Profile()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        profile.runcall(cli.main)
    stats = pstats.Stats(profile).stats  # {(file, line, name): (calls, primitive, tottime, cumtime, callers)}
    phases = {
        "typer: build pydantic adapters for the options": ("typer/_coercion.py", "build_runtime_param"),
        "open the store": ("ctxembed/vectors/sources.py", "open_vectors"),
        "Engine(): vocabulary statistics, projections": ("ctxembed/engine/glove.py", "__init__"),
        "all-but-the-top statistics (store section, cache or computed)": ("ctxembed/core/abtt.py", "statistics"),
        "prepare the sentences": ("ctxembed/engine/glove.py", "prepare"),
        "attention (Engine.run)": ("ctxembed/engine/glove.py", "run"),
        "compare_document": ("ctxembed/report.py", "compare_document"),
        "emit_json": ("ctxembed/output.py", "emit_json"),
    }
    found = {}
    for label, (file, name) in phases.items():
        found[label] = sum(v[3] for k, v in stats.items() if k[0].endswith(file) and k[2] == name)
    total = sum(v[3] for k, v in stats.items() if k[2] == "main" and k[0].endswith("ctxembed/cli/__init__.py"))
    emit({"import ctxembed.cli": imported - start, "main (profiled)": total, "phases": found})


NEIGHBOURS_SENTENCE, NEIGHBOURS_WORD = "we walked along the bank to the river bank", "bank#2"


def neighbours(runs: int) -> None:
    """`neighbors`' library call in a fresh process once the store is open: its first call (what one
    CLI run pays: the cached unit rows mapped and checked), the median of ``runs`` later ones, and
    `attend`'s call on the same sentence beside them."""
    import ctxembed

    explorer = ctxembed.Explorer()
    explorer.attend(NEIGHBOURS_SENTENCE)  # the engine's first-use costs belong to both commands

    def timed(call) -> float:
        start = time.perf_counter()
        call()
        return time.perf_counter() - start

    first = timed(lambda: explorer.neighbors(NEIGHBOURS_SENTENCE, NEIGHBOURS_WORD))
    later = [timed(lambda: explorer.neighbors(NEIGHBOURS_SENTENCE, NEIGHBOURS_WORD)) for _ in range(runs)]
    attend = [timed(lambda: explorer.attend(NEIGHBOURS_SENTENCE)) for _ in range(runs)]
    emit({"first": first, "later": statistics.median(later), "attend": statistics.median(attend)})


# ------------------------------------------------------------------------------ batch
def batch_stages(corpus: str, n: int) -> None:
    """Per-sentence cost (µs) of each stage of ``ctxembed batch``, in one process, best of three."""
    import cProfile
    import io
    import pstats

    import bare_kernel
    import numpy as np

    from ctxembed.batch import columns
    from ctxembed.batch import records as rec
    from ctxembed.engine import Engine
    from ctxembed.presets import build_settings
    from ctxembed.vectors.sources import open_vectors
    from ctxembed.vectors.tokenize import token_pieces, tokenize

    store = open_vectors(None)
    engine = Engine(store, build_settings("default"))
    raw = Path(corpus).read_bytes().splitlines(keepends=True)[:n]
    texts = [line.decode().rstrip("\n") for line in raw]
    options = {"with_vectors": False, "weights": True, "word": None}
    per_sentence: dict[str, float] = {}

    def clock(label: str, job, sentences: int = len(texts), repeats: int = 3):
        best, result = float("inf"), None
        for _ in range(repeats):
            start = time.perf_counter()
            result = job()
            best = min(best, time.perf_counter() - start)
        per_sentence[label] = best / sentences * 1e6
        return result

    subset = texts[:300]  # fewer lookups than make the store build its dict (VectorStore.find)
    clock("prepare, binary-search lookups (as one sentence runs)", lambda: [engine.prepare(t) for t in subset], 300, 1)
    start = time.perf_counter()
    engine.lexicon.prepare_bulk()  # what batch does before its first chunk: the sorted word table
    index_seconds = time.perf_counter() - start
    engine.store.index  # noqa: B018 (the word -> row dict, for "prepare one by one"; batch builds none)
    clock("parse_line", lambda: [rec.parse_line(i, line) for i, line in enumerate(raw, 1)])
    clock("tokenize with offsets (attend's Token objects)", lambda: [tokenize(t) for t in texts])
    clock("tokenize to strings (inside prepare)", lambda: [list(token_pieces(t)) for t in texts])
    clock("prepare one by one, dict lookups", lambda: [engine.prepare(t) for t in texts])
    chunks = [texts[i : i + 1024] for i in range(0, len(texts), 1024)]
    many = clock("prepare_many, 1024 at a time (batch)", lambda: [columns.prepare_many(engine, c) for c in chunks])
    prepared = [s.sentence(i) for s in many for i in range(len(s))]
    clock("Engine.run (every array, one result object per sentence: the API)", lambda: engine.run(prepared))
    groups = clock(
        "columns.arrays, weights alone (batch)",
        lambda: [g for s in many for g in columns.arrays(engine, s, weights=True, vectors=False)],
    )
    ids = [p.ranks for p in sorted(prepared, key=lambda p: len(p.used))]
    clock("bare kernel on the same ids", lambda: bare_kernel.run(ids, store))

    records = clock("records (fill_group)", lambda: [r for _, g in groups for r in group_records(g, options)])
    clock("JSON (encode_record)", lambda: [rec.encode_record(r) for r in records])
    chunks = [list(enumerate(raw, 1))[i : i + 1024] for i in range(0, len(raw), 1024)]
    clock("process_chunk, everything", lambda: [rec.process_chunk(engine, c, options) for c in chunks])
    no_weights = dict(options, weights=False)
    clock("process_chunk, --no-weights", lambda: [rec.process_chunk(engine, c, no_weights) for c in chunks])

    profile = cProfile.Profile()
    profile.runcall(lambda: [rec.process_chunk(engine, c, options) for c in chunks])
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(12)
    top = [line.strip() for line in text.getvalue().splitlines() if "(" in line and "/" in line][:12]
    emit(
        {
            "sentences": len(texts),
            "tokens_per_sentence": float(np.mean([len(p.used) for p in prepared])),
            "index_build_seconds": index_seconds,
            "us_per_sentence": per_sentence,
            "profile_tottime": top,
        }
    )


def fast_path(corpus: str) -> None:
    """How many lines of ``corpus`` take batch's fast path (columns.prepare_many, chunks of 1,024,
    default settings), how many go through prepare() one by one, how many are refused, and the
    tokens: every token, and those that enter attention."""
    from ctxembed.batch import columns
    from ctxembed.engine import Engine
    from ctxembed.presets import build_settings
    from ctxembed.vectors.sources import open_vectors

    engine = Engine(open_vectors(None), build_settings("default"))
    texts = Path(corpus).read_text(encoding="utf-8").splitlines()
    counts = {"lines": len(texts), "fast": 0, "alone": 0, "refused": 0, "tokens": 0, "attended_tokens": 0}
    for first in range(0, len(texts), 1024):
        sentences = columns.prepare_many(engine, texts[first : first + 1024])
        counts["alone"] += len(sentences.prepared)
        counts["refused"] += len(sentences.errors)
        counts["fast"] += len(sentences) - len(sentences.prepared) - len(sentences.errors)
        counts["tokens"] += sum(len(sentences.tokens[i]) for i in range(len(sentences)) if i not in sentences.errors)
        counts["attended_tokens"] += int(sentences.lengths[sentences.lengths > 0].sum())
    emit(counts)


def dask_batch(corpus: str, workers: int, weights: bool, runs: int) -> None:
    """The batch job on a LocalCluster of ``workers`` processes, as docs/scale.md runs it:
    ``embed_file(...).to_textfiles(...)``, one file per partition on local disk. Seconds to start the
    cluster, then each run's seconds (the first one starts the workers' Explorers); the sha256 of the
    partition files joined in order, which must be batch's output."""
    import hashlib
    import shutil
    import tempfile

    from dask.distributed import Client, LocalCluster

    from ctxembed.batch.scale import embed_file

    began = time.perf_counter()
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(cluster)
    started = time.perf_counter()
    blocksize = max(1, Path(corpus).stat().st_size // (8 * workers))  # 8 partitions per worker
    seconds, digest, files = [], hashlib.sha256(), []
    with tempfile.TemporaryDirectory(dir=REPO / "benchmarks" / "results" / "cache") as out:
        for _ in range(runs):
            shutil.rmtree(out)
            start = time.perf_counter()
            files = embed_file(corpus, blocksize=blocksize, weights=weights).to_textfiles(
                f"{out}/*.jsonl", last_endline=True
            )
            seconds.append(time.perf_counter() - start)
        for name in files:  # in partition order: 0.jsonl, 1.jsonl, ...
            with open(name, "rb") as fh:
                while block := fh.read(1 << 22):
                    digest.update(block)
    client.close()
    cluster.close()
    emit(
        {
            "cluster_start": started - began,
            "runs": seconds,
            "partitions": len(files),
            "sha256": digest.hexdigest(),
        }
    )


# ------------------------------------------------------------------------------ scaling
def scaling(preset: str, sizes: list[int]) -> None:
    """Engine.run time and traced peak memory on one sentence of n tokens; the bare kernel beside it."""
    import tracemalloc

    import bare_kernel
    import numpy as np
    from make_corpus import vocabulary

    from ctxembed.engine import DEFAULT_MAX_TOKENS, Engine
    from ctxembed.presets import build_settings
    from ctxembed.vectors.sources import open_vectors

    store = open_vectors(None)
    words = vocabulary()
    rng = np.random.default_rng(7)
    engine = Engine(store, build_settings(preset), max_tokens=max(sizes))
    rows = []
    for n in sizes:
        prepared = engine.prepare(" ".join(words[i] for i in rng.integers(0, len(words), n)))
        assert len(prepared.used) == n
        x = prepared.static[None]  # (1, n, d)
        lengths = np.array([n])

        def timed(job):
            job()  # warm-up
            samples, spent = [], 0.0
            while len(samples) < 5 or (spent < 0.3 and len(samples) < 200):
                start = time.perf_counter()
                job()
                samples.append(time.perf_counter() - start)
                spent += samples[-1]
            return statistics.median(samples)

        def traced_peak(job):
            tracemalloc.start()
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            result = job()
            peak = tracemalloc.get_traced_memory()[1] - base
            tracemalloc.stop()
            del result
            return peak / 2**20

        def run(prepared=prepared):
            return engine.run([prepared])

        def kernel(x=x, lengths=lengths):
            return bare_kernel.attention(x.copy(), lengths)

        rows.append(
            {
                "n": n,
                "seconds": timed(run),
                "peak_mb": traced_peak(run),
                "kernel_seconds": timed(kernel),
                "kernel_peak_mb": traced_peak(kernel),
                "weights_mb": engine.settings.attention.layers * engine.settings.attention.heads * n * n * 4 / 2**20,
                "over_default_max_tokens": n > DEFAULT_MAX_TOKENS,
            }
        )
    emit({"preset": preset, "rows": rows})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="probe", required=True)
    p = sub.add_parser("open-store")
    p.add_argument("path", nargs="?")
    p.add_argument("--similar", action="store_true")
    p = sub.add_parser("gensim-load")
    p.add_argument("path")
    kind = p.add_mutually_exclusive_group(required=True)
    kind.add_argument("--binary", action="store_true")
    kind.add_argument("--no-header", action="store_true")
    sub.add_parser("coldstart-profile")
    p = sub.add_parser("batch-stages")
    p.add_argument("corpus")
    p.add_argument("--sentences", type=int, default=8192)
    p = sub.add_parser("fast-path")
    p.add_argument("corpus")
    p = sub.add_parser("dask-batch")
    p.add_argument("corpus")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--no-weights", action="store_true")
    p.add_argument("--runs", type=int, default=3)
    p = sub.add_parser("scaling")
    p.add_argument("--preset", default="default")
    p.add_argument("--n", default="8,16,32,64,128,256,512,1024")
    p = sub.add_parser("neighbors")
    p.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if args.probe == "open-store":
        open_store(args.path, args.similar)
    elif args.probe == "gensim-load":
        gensim_load(args.path, args.binary)
    elif args.probe == "coldstart-profile":
        coldstart_profile()
    elif args.probe == "batch-stages":
        batch_stages(args.corpus, args.sentences)
    elif args.probe == "fast-path":
        fast_path(args.corpus)
    elif args.probe == "dask-batch":
        dask_batch(args.corpus, args.workers, not args.no_weights, args.runs)
    elif args.probe == "neighbors":
        neighbours(args.runs)
    else:
        scaling(args.preset, [int(n) for n in args.n.split(",")])


if __name__ == "__main__":
    main()
