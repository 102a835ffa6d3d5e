"""The engine's two user-facing costs at another commit against this tree, interleaved:

    .venv/bin/python benchmarks/engine_vs.py COMMIT            # e.g. the commit before an engine change

- attend's cold start: ``python -m ctxembed attend "we sat on the river bank" --json``, CPU time
  (user + system) of the whole process, steadier than wall time on a shared machine (median of
  ``--runs``, alternating sides);
- one sentence's ``prepare``: ``open_engine().prepare(text)`` in a warm process with the lookups
  attend uses (binary search: the store builds no word -> row dict for so few), microseconds per
  sentence, CPU time (steadier than wall time on a shared machine; best of 15 repeats of 200 calls
  per process, the median over the processes).

Each tree gets its own warm cache folder and bytecode cache (benchmarks/coldstart_vs.py).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from coldstart_vs import alternate, side_by_side

ATTEND = ["-m", "ctxembed", "attend", "we sat on the river bank", "--json"]
PREPARE = """
import time
import timeit
from ctxembed.engine import open_engine
engine = open_engine(None, "default")
texts = ["we sat on the river bank", "I deposited money in the bank across the street yesterday"]
vocabulary = getattr(engine.store, "vocabulary", None)  # None: code from before the store chose its lookups


def fresh():  # the store as a process that reads one sentence has it: no word -> row dict yet
    if vocabulary is not None:
        vocabulary._index, vocabulary._searches = None, 0


def one_by_one():
    fresh()
    for text in texts * 100:  # 200 sentences, ~3,200 lookups: fewer than make the store build its dict
        engine.prepare(text)


engine.prepare(texts[0])
print(min(timeit.repeat(one_by_one, number=1, repeat=15, timer=time.process_time)) / 200 * 1e6)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("commit", help="the other side")
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        envs = side_by_side(args.commit, Path(tmp))

        def attend(env: dict) -> float:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run([sys.executable, *ATTEND], env=env, cwd=tmp, check=True, capture_output=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            return 1000 * (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)

        def prepare(env: dict) -> float:
            done = subprocess.run([sys.executable, "-c", PREPARE], env=env, cwd=tmp, check=True, capture_output=True)
            return float(done.stdout)

        for env in envs.values():  # warm-up: bytecode and caches
            attend(env)
        for label, once, runs, unit in (
            ("attend cold start", attend, args.runs, "ms"),
            ("prepare, one sentence", prepare, max(3, args.runs // 3), "us"),
        ):
            for name, values in alternate(envs, runs, once).items():
                median = statistics.median(values)
                print(f"{label}, {name}: median {median:.1f} {unit} (min {min(values):.1f}, max {max(values):.1f})")


if __name__ == "__main__":
    main()
