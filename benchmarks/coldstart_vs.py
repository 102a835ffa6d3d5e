"""Cold start of `compare` (or another command) at another commit against this tree, in one run, interleaved.

    .venv/bin/python benchmarks/coldstart_vs.py ac4c3f3        # the baseline's code against the working tree
    .venv/bin/python benchmarks/coldstart_vs.py 9391cc5 --runs 15 -- attend x --json   # another command

Each tree gets its own warm cache folder and bytecode cache; the runs alternate in both orders,
so the machine's load falls on both sides alike. Prints the median, min and max of each, and the
median CPU time (user + sys): on a shared machine wall time is noisy, CPU time much less.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ARGS = ["-m", "ctxembed", "compare", "we sat on the river bank", "I deposited money in the bank", "--json"]
# The cold-start baseline: the last commit before batch's throughput work (worker processes, bulk
# lookups, fast JSON). That work must not make the single-sentence commands start slower, so each later
# tree runs beside this commit's code, alternating, on the same machine (a fixed figure would read
# another machine's speed). A hash, not a history word, because only a hash says which code it was.
COLD_START_BASELINE = "ac4c3f3"


def extract(commit: str, dest: Path) -> Path:
    """The tree of ``commit`` (git archive) in ``dest``; raises CalledProcessError without git history."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", commit], cwd=REPO, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def tree_env(tree: Path, env: dict) -> dict:
    """``env`` made to run the ctxembed of ``tree``, with the tree's own cache and bytecode folders.
    PYTHONSAFEPATH: ``python -m`` would otherwise put the working directory first on sys.path, and
    run.py runs its commands in this checkout, whose ctxembed would win over the tree's."""
    cache, pyc = str(tree / ".cache"), str(tree / ".pyc")
    return dict(env, PYTHONPATH=str(tree), CTXEMBED_CACHE_DIR=cache, PYTHONPYCACHEPREFIX=pyc, PYTHONSAFEPATH="1")


def alternate(sides: dict, runs: int, once: Callable) -> dict[str, list[float]]:
    """``once(side)`` for every side, ``runs`` times, in alternating order (so the machine's load
    falls on both alike): the seconds it returns, per side."""
    seconds: dict[str, list[float]] = {name: [] for name in sides}
    for i in range(runs):
        for name in list(sides)[:: 1 if i % 2 else -1]:
            seconds[name].append(once(sides[name]))
    return seconds


def side_by_side(commit: str, tmp: Path) -> dict[str, dict]:
    """The environments that run ``commit``'s ctxembed and this working tree's, each copied under ``tmp``."""
    trees = {commit: tmp / "other", "working tree": tmp / "this"}
    extract(commit, trees[commit])
    for part in ("ctxembed", "data"):
        shutil.copytree(REPO / part, trees["working tree"] / part)
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("CTXEMBED_")}
    return {name: tree_env(tree, base) for name, tree in trees.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("commit", help=f"the other side, e.g. {COLD_START_BASELINE} (the cold-start baseline)")
    parser.add_argument("--runs", type=int, default=21)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)  # after --: the ctxembed arguments (default: compare)
    args = parser.parse_args(argv[:cut])
    given = argv[cut + 1 :]
    command = ["-m", "ctxembed", *given] if given else ARGS
    cpu: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        envs = side_by_side(args.commit, Path(tmp))

        def once(env: dict) -> float:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run([sys.executable, *command], env=env, cwd=tmp, check=True, capture_output=True)
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            cpu.setdefault(env["PYTHONPATH"], []).append(used)
            return wall

        for env in envs.values():  # warm-up
            once(env)
        cpu.clear()  # the warm-up runs are not counted
        times = alternate(envs, args.runs, once)
    for name, samples in times.items():
        ms = [1000 * s for s in samples]
        used = 1000 * statistics.median(cpu[envs[name]["PYTHONPATH"]])
        print(
            f"{name}: median {statistics.median(ms):.0f} ms (min {min(ms):.0f}, max {max(ms):.0f}), "
            f"CPU (user + sys) median {used:.0f} ms, {len(ms)} runs"
        )


if __name__ == "__main__":
    main()
