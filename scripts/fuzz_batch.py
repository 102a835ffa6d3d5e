"""Fuzz the real `ctxembed batch` command: random files of good and bad lines, in one process and
with worker processes, through files and pipes; count what comes back.

    python scripts/fuzz_batch.py --rounds 20 --lines 500      # `make fuzz` runs this

Prints one JSON object: lines tried, records written, records out of order or not valid JSON,
runs with a non-zero exit, with a traceback or with anything on stderr, and hangs (no exit
within --timeout seconds). Every figure but the first two must be 0.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.batch_lines import random_line  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--lines", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    totals = dict.fromkeys(
        ["runs", "lines_tried", "records_written", "out_of_order", "invalid_json", "nonzero_exit", "tracebacks",
         "stderr_output", "hangs"], 0)  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "CTXEMBED_CACHE_DIR": folder}
        for round_number in range(args.rounds):
            lines = [random_line(rng) for _ in range(args.lines)]
            data = b"\n".join(lines) + b"\n"
            path = Path(folder) / "in.txt"
            path.write_bytes(data)
            workers = ("--workers", "1") if round_number % 2 == 0 else ("--workers", "2")
            chunk = ("--chunk", str(rng.choice([1, 7, 64, 1024])))
            via_pipe = round_number % 4 >= 2
            command = [sys.executable, "-m", "ctxembed", "batch", "-" if via_pipe else str(path), *workers, *chunk]
            command += ["--preset", rng.choice(["textbook", "default"])]
            totals["runs"] += 1
            totals["lines_tried"] += len(lines)
            try:
                done = subprocess.run(
                    command, input=data if via_pipe else None, capture_output=True, timeout=args.timeout, env=env
                )
            except subprocess.TimeoutExpired:
                totals["hangs"] += 1
                continue
            out = done.stdout.splitlines()
            totals["records_written"] += len(out)
            totals["nonzero_exit"] += done.returncode != 0
            totals["tracebacks"] += b"Traceback" in done.stderr
            totals["stderr_output"] += bool(done.stderr.strip())
            numbers = []
            for line in out:
                try:
                    numbers.append(json.loads(line)["line"])
                except (ValueError, KeyError):
                    totals["invalid_json"] += 1
            totals["out_of_order"] += numbers != list(range(1, len(lines) + 1))
    print(json.dumps(totals))
    bad = {k: v for k, v in totals.items() if k not in ("runs", "lines_tried", "records_written") and v}
    sys.exit(1 if bad or totals["records_written"] != totals["lines_tried"] else 0)


if __name__ == "__main__":
    main()
