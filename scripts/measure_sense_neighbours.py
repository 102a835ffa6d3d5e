"""Do a word's top-10 contextual neighbours follow its sense? Measured on data/ambiguous.tsv.

Run from the repository: `python scripts/measure_sense_neighbours.py [--model minilm] [--space input]`
(other keywords of Explorer.neighbors as `--among N`, the read-out as `--model minilm@N`; another set
as `--set data/ambiguous-check.tsv`).

For every sentence of the set (data/ambiguous.tsv: 20 ambiguous words, two senses, two sentences per
sense; data/ambiguous-check.tsv: 15 other words, kept apart to confirm a change chosen on the first,
both written for this project), the word's top-10 contextual neighbours as `ctxembed neighbors` lists
them (the sentence's words left out). A word *follows the sense* when every pair of its lists from the
same sense shares more words than every pair from different senses. Prints one line per word and the
share of words that follow.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data" / "ambiguous.tsv"


def read_set(path: Path = DATA) -> dict[str, dict[str, list[str]]]:
    """word -> sense -> sentences, in the file's order."""
    words: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    with open(path, encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            words[row["word"]][row["sense"]].append(row["sentence"])
    return words


def follows(lists: dict[str, list[set[str]]]) -> tuple[bool, int, int]:
    """(whether every same-sense overlap beats every cross-sense one, the lowest same, the highest cross)."""
    same = [len(a & b) for sets in lists.values() for a, b in itertools.combinations(sets, 2)]
    cross = [
        len(a & b) for one, two in itertools.combinations(lists.values(), 2) for a, b in itertools.product(one, two)
    ]
    return min(same) > max(cross), min(same), max(cross)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="glove")
    parser.add_argument("--space", default=None, help="the neighbour space (default: the model's)")
    parser.add_argument("--among", type=int, default=None)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--set", type=Path, default=DATA, help="the set of sentences (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="one JSON document instead of lines")
    args = parser.parse_args(argv)
    import ctxembed

    keywords = {} if args.space is None else {"space": args.space}
    explorer = ctxembed.Explorer(model=args.model)
    started = time.process_time()
    rows, space = [], None
    for word, senses in read_set(args.set).items():
        lists = {}
        for sense, sentences in senses.items():
            lists[sense] = []
            for text in sentences:
                doc = explorer.neighbors(text, word, args.k, among=args.among, **keywords).document()
                space = doc.get("space")
                lists[sense].append({n["word"] for n in doc["contextual"]})
        ok, same, cross = follows(lists)
        rows.append({"word": word, "follows": ok, "lowest_same": same, "highest_cross": cross,
                     "lists": {s: [sorted(x) for x in v] for s, v in lists.items()}})  # fmt: skip
    share = sum(r["follows"] for r in rows) / len(rows)
    summary = {"set": args.set.name, "model": args.model, "space": space, "words": len(rows),
               "follow": sum(r["follows"] for r in rows), "share": round(share, 3),
               "cpu_seconds": round(time.process_time() - started, 1)}  # fmt: skip
    if args.json:
        json.dump({**summary, "rows": rows}, sys.stdout, indent=1)
        print()
        return 0
    for r in rows:
        mark = "follows" if r["follows"] else "-      "
        print(f"{r['word']:8} {mark} same >= {r['lowest_same']}  cross <= {r['highest_cross']}")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
