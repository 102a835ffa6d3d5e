"""Levers tried for batch throughput (issue 15) and not kept, each measured beside what batch does.

    .venv/bin/python benchmarks/probes/alternatives.py lookups     # dict lookups vs a NumPy sorted-hash index
    .venv/bin/python benchmarks/probes/alternatives.py json        # one orjson call per record vs one per group
    .venv/bin/python benchmarks/probes/alternatives.py groups      # GROUP_FLOATS from 2^15 to 2^20
    .venv/bin/python benchmarks/probes/alternatives.py tokenizers  # HF tokenizers (pip install tokenizers first)

µs per sentence on the 20,000-sentence benchmark corpus (make_corpus.py), best of several runs,
in one process; each comparison alternates its sides so that load hits both alike.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import numpy as np  # noqa: E402
import orjson  # noqa: E402
from inprocess import group_records  # noqa: E402
from make_corpus import make_sentences  # noqa: E402

from ctxembed.api import Explorer  # noqa: E402
from ctxembed.batch import columns, records  # noqa: E402
from ctxembed.engine import glove as explore  # noqa: E402

CHUNK = 1024


def best(jobs: dict, sentences: int, rounds: int = 5) -> None:
    """Run each job ``rounds`` times, alternating; print the best µs per sentence of each."""
    times: dict[str, float] = {name: float("inf") for name in jobs}
    for _ in range(rounds):
        for name, job in jobs.items():
            start = time.process_time()
            job()
            times[name] = min(times[name], time.process_time() - start)
    for name, seconds in times.items():
        print(f"{seconds / sentences * 1e6:6.2f} µs/sentence  {name}")


def lookups(engine, lines: list[str]) -> None:
    words = engine.store.words
    hashes = np.fromiter(map(hash, words), np.int64, len(words))
    order = np.argsort(hashes)
    ordered = hashes[order]
    last = len(ordered) - 1
    chunks = ["\n".join(lines[i : i + CHUNK]) for i in range(0, len(lines), CHUNK)]
    get = engine.store.index.get

    def with_dict():
        for text in chunks:
            np.fromiter(map(get, text.split(), itertools.repeat(-1)), np.int64)

    def with_sorted_hashes():  # no check that a hash match is the word itself: it would cost more
        for text in chunks:
            keys = text.split()
            wanted = np.fromiter(map(hash, keys), np.int64, len(keys))
            at = np.minimum(np.searchsorted(ordered, wanted), last)
            np.where(ordered[at] == wanted, order[at], -1)

    best({"dict.get over the chunk (batch)": with_dict, "hash() + searchsorted": with_sorted_hashes}, len(lines))


def json(engine, lines: list[str]) -> None:
    sentences = columns.prepare_many(engine, lines[:CHUNK])
    groups = list(columns.arrays(engine, sentences, weights=True, vectors=False))
    option = orjson.OPT_SERIALIZE_NUMPY

    def per_record():
        for _, group in groups:
            for record in group_records(group, {"weights": True, "with_vectors": False, "word": None}):
                orjson.dumps(record, option=option | orjson.OPT_APPEND_NEWLINE)

    def per_group():  # the group's weights in one call, cut at the sentence boundaries, spliced in
        for members, group in groups:
            T = group.weights.shape[-1]
            middle = b',"in_vocab":' + orjson.dumps([True] * T) + b',"attended_positions":'
            middle += orjson.dumps(list(range(T))) + b',"weights":[[[['
            parts = orjson.dumps(group.weights, option=option)[5:-5].split(b"]]]],[[[[")
            for i, part in zip(members, parts, strict=True):
                head = orjson.dumps({"line": 1, "text": sentences.texts[i], "tokens": sentences.tokens[i]})
                b"".join((head[:-1], middle, part, b"]]]]}\n"))

    best({"one orjson call per record (batch)": per_record, "one per group, spliced": per_group}, CHUNK, 20)


def groups(engine, lines: list[str]) -> None:
    numbered = [(i + 1, line.encode()) for i, line in enumerate(lines)]
    chunks = [numbered[s : s + CHUNK] for s in range(0, len(lines), CHUNK)]
    options = {"weights": True, "with_vectors": False, "word": None}
    kept = explore.GROUP_FLOATS

    def run(power: int):
        def job():
            explore.GROUP_FLOATS = 1 << power
            for chunk in chunks:
                records.process_chunk(engine, chunk, options)
            explore.GROUP_FLOATS = kept

        return job

    jobs = {f"GROUP_FLOATS = 2^{p}" + (" (batch)" if 1 << p == kept else ""): run(p) for p in range(15, 21)}
    best(jobs, len(lines), 3)


def tokenizers(engine, lines: list[str]) -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    except ImportError:
        sys.exit("tokenizers is not installed: pip install tokenizers (it is not a dependency of ctxembed)")
    vocab = dict(engine.store.index)
    vocab["[UNK]"] = len(vocab)
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    bare = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))  # lower-cased by Python, whole chunks
    bare.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    chunks = [lines[i : i + CHUNK] for i in range(0, len(lines), CHUNK)]
    get = engine.store.index.get

    def rust():
        for chunk in chunks:
            [encoding.ids for encoding in tokenizer.encode_batch(chunk, add_special_tokens=False)]

    def rust_chunk():  # one sequence a chunk: the fewest crossings between Python and Rust
        for chunk in chunks:
            np.array(bare.encode("\n".join(chunk).lower(), add_special_tokens=False).ids, np.int64)

    def rust_chunk_fast():  # the same without offsets (encode_batch_fast)
        for chunk in chunks:
            [encoding] = bare.encode_batch_fast(["\n".join(chunk).lower()], add_special_tokens=False)
            np.array(encoding.ids, np.int64)

    def python():
        for chunk in chunks:
            [list(map(get, line.lower().split())) for line in chunk]

    def python_chunk():  # what columns.prepare_many does: split the chunk, then WordLookup.rows
        for chunk in chunks:
            engine.store.find_many("\n".join(chunk).lower().split())

    best(
        {
            "tokenizers WordLevel, encode_batch, ids": rust,
            "tokenizers, one sequence a chunk, ids": rust_chunk,
            "tokenizers, one sequence a chunk, encode_batch_fast": rust_chunk_fast,
            "str.split + dict lookups, line by line": python,
            "str.split + dict lookups, a chunk at a time": python_chunk,
        },
        len(lines),
    )


def main() -> None:
    jobs = {"lookups": lookups, "json": json, "groups": groups, "tokenizers": tokenizers}
    if len(sys.argv) != 2 or sys.argv[1] not in jobs:
        sys.exit(f"usage: alternatives.py {{{','.join(jobs)}}}")
    engine = Explorer().engine
    engine.store.index  # noqa: B018 (the word -> row dict, built now: find uses it once built)
    records.one_blas_thread()
    jobs[sys.argv[1]](engine, make_sentences(20_000))


if __name__ == "__main__":
    main()
