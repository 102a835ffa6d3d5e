"""Training throughput: tokens per second of `ctxembed train` steps (forward, hand-written backward, Adam),
on one BLAS thread, for the smallest model (1 layer, 1 head, d = 100) and the shipped architecture
(2 layers x 4 heads with W_out, residual and positions). Run by ``benchmarks/run.py --only train``.

The corpus is the first 8,000 lines of the Brown example corpus (data/brown.txt.gz); each sample is
one fresh `ctxembed train --epochs 1 --json` process, and its figure is the report's
``tokens_per_second`` (training steps only: reading the corpus and held-out evaluations excluded).
"""

from __future__ import annotations

import gzip
import json
import statistics
import tempfile
from pathlib import Path

LINES = 8_000
SMALL = ["--layers", "1", "--heads", "1", "--no-output-projection", "--no-residual", "--no-positions"]
CONFIGS = {  # throughput depends on --batch-tokens (default 512): a step has a few ms of fixed work
    "1 layer, 1 head, 4,096-token batches": SMALL + ["--batch-tokens", "4096"],
    "2 layers x 4 heads (shipped architecture), 4,096-token batches": ["--batch-tokens", "4096"],
    "2 layers x 4 heads (shipped architecture), default 512-token batches": [],
}
TARGETS = {"1 layer, 1 head, 4,096-token batches": 100_000}  # tokens/s on one core (issue 13)
PROTOTYPE = {
    "1 layer, 1 head, 4,096-token batches": "about 120,000/s",
    "2 layers x 4 heads (shipped architecture), 4,096-token batches": "about 50,000/s (2 layers, W_out)",
    "2 layers x 4 heads (shipped architecture), default 512-token batches": "",
}


def corpus(cache: Path, repo: Path) -> Path:
    path = cache / f"brown-{LINES}.txt"
    if not path.exists():
        with gzip.open(repo / "data" / "brown.txt.gz", "rt", encoding="utf-8") as source:
            lines = [next(source) for _ in range(LINES)]
        path.write_text("".join(lines), encoding="utf-8")
    return path


def training(ctxembed: str, env: dict, cache: Path, repo: Path, repeat: int, run_process) -> tuple[list[tuple], dict]:
    """Rows (job, ctxembed, reference, ratio, target, met) and the samples."""
    text = corpus(cache, repo)
    env = dict(env, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    rows, details = [], {}
    for name, flags in CONFIGS.items():
        speeds = []
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "w.npz"
                cmd = [ctxembed, "train", str(text), "--out", str(out), "--epochs", "1", "--held-out", "0.02", "--json"]
                sample = run_process(cmd + flags, env, capture=True)
                speeds.append(json.loads(sample.stdout)["tokens_per_second"])
        median = statistics.median(speeds)
        details[name] = {"tokens_per_second": speeds, "lines": LINES}
        target = TARGETS.get(name)
        rows.append(
            (
                f"training throughput, {name}, d = 100, one thread",
                f"{median:,.0f} tokens/s ({min(speeds):,.0f}–{max(speeds):,.0f})",
                f"prototype: {PROTOTYPE[name]}" if PROTOTYPE[name] else "",
                "",
                f"≥ {target:,} tokens/s" if target else "",
                None if target is None else median >= target,
            )
        )
    return rows, details
