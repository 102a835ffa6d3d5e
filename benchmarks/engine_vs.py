"""The engine's two user-facing costs at another commit against this tree, interleaved:

    .venv/bin/python benchmarks/engine_vs.py COMMIT            # e.g. the commit before an engine change

- attend's cold start: ``python -m ctxembed attend "we sat on the river bank" --json``, wall time
  of the whole process (median of ``--runs``, alternating sides);
- one sentence's ``prepare``: ``open_engine().prepare(text)`` in a warm process, the binary-search
  lookups attend uses, microseconds per sentence (best of 7 repeats of 2,000 calls, per process;
  the median over the processes).

Each tree gets its own warm cache folder and bytecode cache (benchmarks/coldstart_vs.py).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from coldstart_vs import alternate, side_by_side

ATTEND = ["-m", "ctxembed", "attend", "we sat on the river bank", "--json"]
PREPARE = """
import timeit
from ctxembed.engine import open_engine
engine = open_engine(None, "default")
texts = ["we sat on the river bank", "I deposited money in the bank across the street yesterday"]
engine.prepare(texts[0])
best = min(timeit.repeat(lambda: [engine.prepare(t) for t in texts], number=1000, repeat=7))
print(best / 2000 * 1e6)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("commit", help="the other side")
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        envs = side_by_side(args.commit, Path(tmp))

        def attend(env: dict) -> float:
            start = time.perf_counter()
            subprocess.run([sys.executable, *ATTEND], env=env, cwd=tmp, check=True, capture_output=True)
            return 1000 * (time.perf_counter() - start)

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
