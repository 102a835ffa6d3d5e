"""Fine-tune all-MiniLM-L6-v2 on WiC train in NumPy and score WiC dev; and the head's choice on frozen features.

    .venv/bin/python benchmarks/probes/finetune_wic.py WIC_DIR [--epochs 1] [--batch 16] [--lr 5e-5] [--limit N]

WIC_DIR holds train.data.txt, train.gold.txt, dev.data.txt and dev.gold.txt (scripts/get_eval_data.py lays
them out; the data is never copied into the project). Prints JSON lines:

1. ``frozen``: the encoder as installed, the marked word's mean piece vector at the last layer, and two
   heads fitted on train by logistic regression: the scaled cosine (p = sigmoid(s cos(u, v) + b), the
   head ctxembed.train.finetune trains) and a logistic over [u . v, |u - v|]; train and dev accuracy.
2. ``epoch``: fine-tuning every weight (ctxembed.train.finetune.FineTuner: AdamW, weight decay 0.01,
   linear warm-up over 10% of the steps and decay, clipping at norm 1, length-sorted batches of pairs),
   the head starting at the frozen cosine fit; CPU and wall seconds of the epoch, its mean loss, and
   dev accuracy at p > 0.5.

Nothing is written: the fitted weights die with the process (no weights fitted on eval data ship).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from ctxembed.engine import open_engine
from ctxembed.evaluation.evaluate import read_wic
from ctxembed.train.finetune import (
    FineTuner,
    engine_pairs,
    marked_words,
    pair_batches,
    pair_loss,
    trainable_copy,
)
from ctxembed.train.memory import keep_freed_memory
from ctxembed.train.optim import linear_schedule


def fit_logistic(features: np.ndarray, labels: np.ndarray, steps: int = 50) -> np.ndarray:
    """Logistic regression by Newton's method: features (n, k) -> weights (k + 1,), the last the bias."""
    X = np.hstack([features, np.ones((len(features), 1))]).astype(np.float64)  # (n, k + 1)
    w = np.zeros(X.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-X @ w))  # (n,)
        hessian = X.T @ (X * (p * (1 - p))[:, None]) + 1e-6 * np.eye(len(w))  # (k + 1, k + 1)
        w -= np.linalg.solve(hessian, X.T @ (p - labels))
    return w


def accuracy(features: np.ndarray, labels: np.ndarray, w: np.ndarray) -> float:
    return float(np.mean(((features @ w[:-1] + w[-1]) > 0) == (labels > 0.5)))


def frozen_features(weights, pairs) -> dict[str, np.ndarray]:
    """cos(u, v) (n, 1) and [u . v, |u - v|] (n, 2) of the marked words at the last layer, the encoder as it is."""
    u_all, v_all = [], []
    for batch in pair_batches(pairs, 64):  # sorted by length, in order: put back in the pairs' order below
        _, words = marked_words(weights, batch)  # (2P, D)
        u_all.append(words[0::2])
        v_all.append(words[1::2])
    order = np.lexsort((np.arange(len(pairs)), [max(len(p.first), len(p.second)) for p in pairs]))
    u, v = np.empty((len(pairs), weights.config.hidden)), np.empty((len(pairs), weights.config.hidden))
    u[order], v[order] = np.concatenate(u_all), np.concatenate(v_all)
    dot = np.einsum("nd,nd->n", u, v)  # (n,)
    cos = dot / (np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1))  # (n,)
    return {"cosine": cos[:, None], "dot_distance": np.stack([dot, np.linalg.norm(u - v, axis=1)], axis=1)}


def dev_accuracy(weights, head, pairs) -> float:
    right = 0
    for batch in pair_batches(pairs, 64):
        _, p, _, _ = pair_loss(weights, head, batch, backward=False)
        right += int(np.sum((p > 0.5) == (batch.labels > 0.5)))
    return right / len(pairs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("wic")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--head-lr", type=float, default=1e-3)
    parser.add_argument("--limit", type=int, default=0, help="train on the first N pairs only")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    keep_freed_memory()
    engine = open_engine(model="minilm")
    splits = {split.name: split for split in read_wic(args.wic)}

    def items(split):
        return [
            (a.words, a.index, b.words, b.index, float(g)) for (a, b), g in zip(split.pairs, split.gold, strict=True)
        ]

    train = engine_pairs(engine, items(splits["train"]))
    dev = engine_pairs(engine, items(splits["dev"]))
    train = train[: args.limit] if args.limit else train
    weights = trainable_copy(engine.weights)
    y_train = np.array([p.label for p in train])
    y_dev = np.array([p.label for p in dev])
    start = time.process_time()
    features_train, features_dev = frozen_features(weights, train), frozen_features(weights, dev)
    fitted = {}
    for name in features_train:
        w = fit_logistic(features_train[name], y_train)
        fitted[name] = w
        record = {"frozen": name, "weights": w.round(4).tolist(), "train": accuracy(features_train[name], y_train, w)}
        record |= {"dev": accuracy(features_dev[name], y_dev, w), "pairs": [len(train), len(dev)]}
        print(json.dumps(record), flush=True)
    print(json.dumps({"frozen_cpu_s": time.process_time() - start}), flush=True)
    scale, bias = fitted["cosine"]
    head = {"scale": np.array([scale], np.float32), "bias": np.array([bias], np.float32)}
    tuner = FineTuner(weights, head, weight_decay=0.01, clip=1.0)
    rng = np.random.default_rng(args.seed)
    steps_per_epoch = -(-len(train) // args.batch)
    total = args.epochs * steps_per_epoch
    step = 0
    for epoch in range(args.epochs):
        cpu, wall, losses = time.process_time(), time.perf_counter(), []
        for batch in pair_batches(train, args.batch, rng):
            lr = linear_schedule(step, total, args.lr, warmup=max(1, total // 10))
            losses.append(tuner.step(batch, lr, args.head_lr * lr / args.lr).loss)
            step += 1
            if step % 50 == 0:
                print(json.dumps({"step": step, "loss_last_50": float(np.mean(losses[-50:]))}), flush=True)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        record = {"epoch": epoch + 1, "cpu_s": cpu, "wall_s": wall, "loss": float(np.mean(losses))}
        record |= {"dev": dev_accuracy(weights, head, dev), "head": [float(head["scale"][0]), float(head["bias"][0])]}
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
