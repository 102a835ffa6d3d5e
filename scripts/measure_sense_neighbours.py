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

Beside each list, the ceiling the model sets: whether the model's own vectors of the word *separate its
senses* by the same rule (every pair of sentences of one sense more alike than every pair across senses,
as `ctxembed eval senses` counts it), under the read-out and at each hidden state alone. A
neighbour list is searched from the word's vector, so where the vectors of two senses sit closer than
those of one sense, its lists have little to follow.
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


def separated(explorer, path: Path) -> dict[str, list[bool]]:
    """Per word of the set at ``path``: whether its vectors separate its senses under the read-out, then at
    each hidden state h0 ... hL alone (``eval senses``' rule on its cosines: every same-sense pair of
    sentences more alike than every cross-sense pair)."""
    states = [f"custom@{j}" for j in range(explorer.engine.card.layers + 1)]
    doc = explorer.evaluate_senses(path, configs=["custom", *states])
    by_config = [{w["word"]: w["separated"] for w in config["per_word"]} for config in doc["configs"]]
    return {word: [config[word] for config in by_config] for word in by_config[0]}


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
    apart = separated(explorer, args.set)
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
                     "separates": apart[word][0], "separates_at": apart[word][1:],
                     "lists": {s: [sorted(x) for x in v] for s, v in lists.items()}})  # fmt: skip
    share = sum(r["follows"] for r in rows) / len(rows)
    by_state = [sum(r["separates_at"][k] for r in rows) for k in range(len(rows[0]["separates_at"]))]
    summary = {"set": args.set.name, "model": args.model, "space": space, "words": len(rows),
               "follow": sum(r["follows"] for r in rows), "share": round(share, 3),
               "separated": sum(r["separates"] for r in rows), "separated_by_state": by_state,
               "cpu_seconds": round(time.process_time() - started, 1)}  # fmt: skip
    if args.json:
        json.dump({**summary, "rows": rows}, sys.stdout, indent=1)
        print()
        return 0
    for r in rows:
        mark = "follows" if r["follows"] else "-      "
        states = "".join("Y" if at else "." for at in r["separates_at"])
        print(f"{r['word']:8} {mark} same >= {r['lowest_same']}  cross <= {r['highest_cross']}  "
              f"vectors separate: read-out {'Y' if r['separates'] else '.'}, h0.. {states}")  # fmt: skip
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
