"""Lay out the evaluation data sets you downloaded the way `ctxembed eval` reads them.

ctxembed ships neither data set (their licences are not ours to pass on); get them from their authors:

- WiC (Pilehvar & Camacho-Collados, NAACL 2019), https://pilehvar.github.io/wic/, licence CC BY-NC 4.0:
  download WiC_dataset.zip, then

      python scripts/get_eval_data.py wic WiC_dataset.zip eval-data/wic
      ctxembed eval wic eval-data/wic

  The zip holds train/, dev/ and test/ folders; `eval wic` reads SPLIT.data.txt and SPLIT.gold.txt side
  by side, so they are copied into one folder (test has no gold labels: it is scored only if you add them).

- SCWS, Stanford's Contextual Word Similarities (Huang, Socher, Manning & Ng, "Improving Word
  Representations via Global Context and Multiple Word Prototypes", ACL 2012): SCWS.zip from the paper's
  page (www.socher.org); it states no licence beyond research use with a citation of the paper.
  Download SCWS.zip (or unzip it and give ratings.txt), then

      python scripts/get_eval_data.py scws SCWS.zip eval-data/scws --dev 600
      ctxembed eval pairs eval-data/scws/dev.txt

  writes ratings.txt (all 2,003 pairs) and, with --dev N, a fixed random N pairs as dev.txt and the rest
  as test.txt (seed 0), so a setting can be tuned on dev and reported on test.

Reads only the file you give it; nothing is downloaded. Exit 1 with one line on a file that is not what
it should be.
"""

from __future__ import annotations

import argparse
import random
import sys
import zipfile
from pathlib import Path

WIC_FILES = ("data.txt", "gold.txt")


def wic(source: Path, out: Path) -> list[Path]:
    """Copy every SPLIT.data.txt / SPLIT.gold.txt of a WiC zip (or folder tree) into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    if source.is_dir():
        members = {p.name: p.read_bytes for p in source.rglob("*.txt")}
    else:
        archive = zipfile.ZipFile(source)
        members = {Path(name).name: (lambda n=name: archive.read(n)) for name in archive.namelist()}
    for name, read in sorted(members.items()):
        if name.endswith(WIC_FILES) and name.count(".") == 2:
            target = out / name
            target.write_bytes(read())
            written.append(target)
    if not any(p.name.endswith(".data.txt") for p in written):
        raise ValueError(f"{source}: no SPLIT.data.txt inside; is it WiC_dataset.zip?")
    return written


def scws(source: Path, out: Path, dev: int | None, seed: int = 0) -> list[Path]:
    """ratings.txt from SCWS.zip (or the file itself); with ``dev``, a seeded dev/test split of its lines."""
    if zipfile.is_zipfile(source):
        archive = zipfile.ZipFile(source)
        names = [n for n in archive.namelist() if Path(n).name == "ratings.txt"]
        if not names:
            raise ValueError(f"{source}: no ratings.txt inside; is it SCWS.zip?")
        text = archive.read(names[0]).decode("utf-8", errors="replace")
    else:
        text = source.read_text(encoding="utf-8", errors="replace")
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or any(len(line.split("\t")) < 8 for line in lines):
        raise ValueError(f"{source}: not the SCWS layout (id, word1, POS1, word2, POS2, contexts, rating ...)")
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "ratings.txt"]
    written[0].write_text("\n".join(lines) + "\n", encoding="utf-8")
    if dev:
        if not 0 < dev < len(lines):
            raise ValueError(f"--dev {dev}: the file has {len(lines)} pairs")
        chosen = set(random.Random(seed).sample(range(len(lines)), dev))
        for name, keep in (("dev.txt", True), ("test.txt", False)):
            part = [line for i, line in enumerate(lines) if (i in chosen) == keep]
            (out / name).write_text("\n".join(part) + "\n", encoding="utf-8")
            written.append(out / name)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", choices=["wic", "scws"])
    parser.add_argument("source", type=Path, help="the zip you downloaded (or the folder or file inside it)")
    parser.add_argument("out", type=Path, help="the folder to write")
    parser.add_argument("--dev", type=int, help="scws: also split N random pairs into dev.txt, the rest test.txt")
    args = parser.parse_args(argv)
    try:
        if not args.source.exists():
            raise ValueError(f"{args.source}: no such file")
        written = wic(args.source, args.out) if args.dataset == "wic" else scws(args.source, args.out, args.dev)
    except (ValueError, OSError, zipfile.BadZipFile) as exc:
        print(f"get_eval_data: error: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
