"""Rewrite tests/fixtures/batch/golden.json's hashes and record counts, and the stored *.jsonl.gz copies,
from what `ctxembed batch` prints now on tests/fixtures/batch/lines.txt.

Run it only when a change is meant to change batch's output (new default vectors, a deliberate change
of the maths), say why in the commit, and check the diff of a few records first. Each case runs in a
fresh process on the golden BLAS kernel, as tests/test_batch_golden.py runs it.

    python scripts/build_batch_golden.py
"""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.test_batch_golden import CASES, GOLDEN, golden_kernel_missing, run_case_on_golden_kernel  # noqa: E402


def main() -> None:
    if reason := golden_kernel_missing():
        raise SystemExit(f"{reason}: the golden bytes need that kernel")
    for name in sorted(CASES):
        output = run_case_on_golden_kernel(name)
        CASES[name]["sha256"] = hashlib.sha256(output).hexdigest()
        CASES[name]["records"] = output.count(b"\n")
        stored = GOLDEN / f"{name}.jsonl.gz"
        if stored.exists():  # fixed timestamp: the same output gives the same file
            stored.write_bytes(gzip.compress(output, mtime=0))
        print(name, CASES[name]["records"], CASES[name]["sha256"][:12])
    (GOLDEN / "golden.json").write_text(json.dumps(CASES, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
