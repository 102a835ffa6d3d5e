"""A derived model's own head on a WiC split: the share of pairs where p(same sense) > 0.5 agrees with the
gold label (``eval wic -c NAME`` scores the read-out's cosine against a threshold tuned on train instead).

    CTXEMBED_MODELS=SCRATCH .venv/bin/python benchmarks/probes/derived_head_wic.py NAME WIC_DIR [--split dev]
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from ctxembed.engine.registry import open_engine
from ctxembed.evaluation.evaluate import read_wic
from ctxembed.train.derived import layer_words
from ctxembed.train.finetune import engine_pairs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("wic")
    parser.add_argument("--split", default="dev")
    args = parser.parse_args()
    engine = open_engine(model=args.name)
    split = {s.name: s for s in read_wic(args.wic)}[args.split]
    items = [(a.words, a.index, b.words, b.index, float(g)) for (a, b), g in zip(split.pairs, split.gold, strict=True)]
    pairs = engine_pairs(engine, items)
    first, second = layer_words(engine.weights, pairs)  # (n, K, D) each
    from ctxembed.core.heads import same_sense

    p = same_sense(engine.head, engine.mix.weights, first, second)  # (n,)
    gold = np.array([pair.label for pair in pairs])
    print(
        json.dumps(
            {
                "model": args.name,
                "split": args.split,
                "pairs": len(pairs),
                "head_accuracy": float(np.mean((p > 0.5) == (gold > 0.5))),
            }
        )
    )


if __name__ == "__main__":
    main()
