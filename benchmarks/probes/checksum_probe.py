"""What verifying the default store's checksums costs, inside one process (warm page cache).

    python benchmarks/probes/checksum_probe.py [--repeat 30]

Prints one JSON line, times in milliseconds (medians of --repeat): ``open`` (a store opens and
checks its header, vocabulary and row order), ``open_checks`` (the CRC-32 work inside that open),
``first_lookup`` (open + the rows of a 7-word sentence, which checks the few 1 MiB blocks they
sit in), ``full_verify`` (open + every checksum: the whole 24 MB), ``crc32_whole_file`` (one
CRC-32 of the file's bytes, the cost of a naive full check).
"""

from __future__ import annotations

import argparse
import json
import mmap
import statistics
import sys
import time
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from ctxembed.vectors.sources import default_store_path  # noqa: E402
from ctxembed.vectors.store import VectorStore  # noqa: E402

SENTENCE = ["we", "sat", "on", "the", "river", "bank", "today"]


def median_ms(job, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        job()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    path = default_store_path()
    store = VectorStore.open(path)  # warm the page cache
    store.verify()
    checks = store.checksums
    eager = [name for name in ("vocab", "order") if name in checks.crcs]

    def eager_crcs() -> None:
        for name in eager:
            offset, nbytes = checks.offsets[name]
            start = checks.data_start + offset
            zlib.crc32(memoryview(checks.buffer)[start : start + nbytes])

    with open(path, "rb") as fh:
        whole = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)

    def lookup() -> None:
        opened = VectorStore.open(path)
        opened.rows([row for row in map(opened.find, SENTENCE) if row is not None])

    figures = {
        "store_bytes": path.stat().st_size,
        "open": median_ms(lambda: VectorStore.open(path), args.repeat),
        "open_checks": median_ms(eager_crcs, args.repeat),
        "first_lookup": median_ms(lookup, args.repeat),
        "full_verify": median_ms(lambda: VectorStore.open(path).verify(), args.repeat),
        "crc32_whole_file": median_ms(lambda: zlib.crc32(whole), args.repeat),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
