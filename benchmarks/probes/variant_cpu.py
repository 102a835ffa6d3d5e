"""CPU time per line of one benchmarks/whatif.py variant, split into batch's parent and its workers,
and how many of the 2 cores the run kept busy: where a format's cost goes, beside the records-free
bound's (whatif's own figure is the wall time alone). Only run_batch is counted (the variant's
preparation before the clock is not), the workers once they are reaped.

    .venv/bin/python benchmarks/probes/variant_cpu.py FILE parquet        # also: free-records, real, parquet-word
"""

from __future__ import annotations

import json
import resource
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

import whatif  # noqa: E402

from ctxembed.batch import driver  # noqa: E402


def cpu_seconds() -> tuple[float, float]:
    """(this process's CPU seconds, its reaped children's)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def main() -> None:
    corpus, variant = sys.argv[1], sys.argv[2]
    run_batch, spent = driver.run_batch, {}

    def counted(*args, **kwargs):
        parent, workers = cpu_seconds()
        try:
            return run_batch(*args, **kwargs)
        finally:
            after = cpu_seconds()
            spent["parent"], spent["workers"] = after[0] - parent, after[1] - workers

    driver.run_batch = counted
    wall = whatif.run_variant(corpus, variant)
    lines = sum(1 for _ in open(corpus, "rb"))
    total = spent["parent"] + spent["workers"]
    print(
        json.dumps(
            {
                "variant": variant,
                "wall_s": round(wall, 2),
                "parent_cpu_us_a_line": round(spent["parent"] / lines * 1e6, 1),
                "workers_cpu_us_a_line": round(spent["workers"] / lines * 1e6, 1),
                "cpu_us_a_line": round(total / lines * 1e6, 1),
                "cores_busy": round(total / wall, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
