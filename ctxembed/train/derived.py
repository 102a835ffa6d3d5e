"""Training a derived model on labelled pairs: what ``ctxembed train --model minilm PAIRS --name NAME`` does.

Two ways, as the course notes contrast them:

- fine-tuning (BERT's way, :mod:`ctxembed.train.finetune`): every weight learns; AdamW with a linear warm-up
  and decay, gradients clipped, mini-batches of pairs of similar length; the head a scaled cosine at the last
  hidden state, started from its logistic fit on the frozen encoder's cosines. A held-out share of the pairs
  is scored after each epoch: training stops after an epoch that does not beat the best, and the best
  epoch's weights are written. Ctrl-C (or ``stop``) writes a checkpoint at the next step; ``resume``
  continues from it to the same weights, bit for bit, as a run never stopped.
- ``freeze`` (ELMo's way): the encoder stays as it is; learn the softmax-normalised layer mix and its scale
  (:func:`ctxembed.core.mix.fit`, as ``eval fit-mix``) and a logistic head over the mixed cosine and each
  hidden state's own cosine (:mod:`ctxembed.core.heads`).

Both write a derived model (:mod:`ctxembed.vectors.derived`) and return the ``ctxembed.train-derived/1``
document.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ctxembed.core.heads import head_features, same_sense
from ctxembed.errors import DataError, UsageError
from ctxembed.train.finetune import (
    FineTuner,
    Pair,
    engine_pairs,
    epoch_batches,
    pair_batches,
    pair_loss,
    trainable_copy,
)
from ctxembed.train.optim import linear_schedule

SCHEMA = "ctxembed.train-derived/1"


@dataclass(frozen=True)
class FineTuneOptions:
    """What one run uses, from the declared training options (ctxembed.presets.TrainOptions) and the
    command's --batch-pairs."""

    epochs: int
    lr: float
    batch_pairs: int
    warmup: int
    clip: float
    seed: int
    head_lr: float = 1e-3  # the head's two numbers start near their fit; BERT's lr would barely move them


def split_pairs(n: int, held_out: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices (train, held out) of n pairs: a seeded share ``held_out`` kept out (at least one of each)."""
    order = np.random.default_rng([seed, 7]).permutation(n)  # (n,)
    kept = min(n - 1, max(1, round(n * held_out))) if held_out > 0 else 0
    return np.sort(order[kept:]), np.sort(order[:kept])


def layer_words(weights, pairs: list[Pair]) -> tuple[np.ndarray, np.ndarray]:
    """Every pair's marked word at every hidden state, the encoder as it is: (first, second), (n, L + 1, D) each."""
    from ctxembed.core.encoder import encode

    first, second = [None] * len(pairs), [None] * len(pairs)
    order = sorted(range(len(pairs)), key=lambda i: max(len(pairs[i].first), len(pairs[i].second)))
    for start in range(0, len(order), 64):
        chunk = order[start : start + 64]
        [batch] = pair_batches([pairs[i] for i in chunk], len(chunk))  # one batch, the chunk's order kept
        out = encode(weights, batch.ids, batch.real, keep_weights=False)
        words = np.einsum("st,kstd->skd", batch.pooling, out.hidden)  # (2P, T) x (K, 2P, T, D) -> (2P, K, D)
        for row, i in enumerate(chunk):
            first[i], second[i] = words[2 * row], words[2 * row + 1]
    return np.stack(first), np.stack(second)  # (n, K, D) each


def fit_logistic(features: np.ndarray, labels: np.ndarray, steps: int = 50, ridge: float = 1e-3) -> np.ndarray:
    """Logistic regression by Newton's method: features (n, F), labels in [0, 1] (n,) -> (F + 1,), the bias last."""
    X = np.hstack([features, np.ones((len(features), 1))]).astype(np.float64)  # (n, F + 1)
    w = np.zeros(X.shape[1])  # (F + 1,)
    for _ in range(steps):
        p = 1 / (1 + np.exp(-X @ w))  # (n,)
        hessian = X.T @ (X * (p * (1 - p))[:, None]) + ridge * np.eye(len(w))  # (F + 1, F + 1)
        w -= np.linalg.solve(hessian, X.T @ (p - labels) + ridge * w)
    return w


def accuracy(p: np.ndarray, labels: np.ndarray) -> float | None:
    return None if not len(labels) else float(np.mean((p > 0.5) == (labels > 0.5)))


# ------------------------------------------------------------------------------------ ELMo's way


def fit_frozen(weights, train: list[Pair], held: list[Pair]) -> dict:
    """The layer mix (softmax weights, γ) and the logistic head over the frozen encoder's cosines:
    {"mix", "head", "train_accuracy", "held_out_accuracy"}."""
    from ctxembed.core.mix import fit, gram

    first, second = layer_words(weights, train + held)  # (n, K, D) each
    labels = np.array([p.label for p in train + held])  # (n,)
    n = len(train)
    found = fit(*gram(first[:n], second[:n]), labels[:n])  # ELMo's mix on the training pairs
    mix = {"weights": [float(s) for s in found.weights], "gamma": float(found.gamma)}
    occurrences = np.concatenate([first[:n], second[:n]]).astype(np.float64)  # (2n, K, D) the training words
    head = {"kind": "layer-cosines", "centre": occurrences.mean(0), "spread": occurrences.std(0) + 1e-6}  # (K, D)
    features = head_features(head, found.weights, first, second)  # (n, 1 + 2K)
    w = fit_logistic(features[:n], labels[:n])
    head |= {"mix_weight": float(w[0]), "weights": [float(x) for x in w[1:-1]], "bias": float(w[-1])}
    p = same_sense(head, found.weights, first, second)  # (n,)
    head |= {key: head[key].tolist() for key in ("centre", "spread")}  # JSON: the record holds the head
    return {
        "mix": mix,
        "head": head,
        "train_accuracy": accuracy(p[:n], labels[:n]),
        "held_out_accuracy": accuracy(p[n:], labels[n:]),
    }


# ------------------------------------------------------------------------------------ BERT's way


def held_out_accuracy(weights, head, held: list[Pair]) -> float | None:
    right = 0
    for batch in pair_batches(held, 64):
        _, p, _, _ = pair_loss(weights, head, batch, backward=False)
        right += int(np.sum((p > 0.5) == (batch.labels > 0.5)))
    return right / len(held) if held else None


class FineTuneRun:
    """One fine-tuning run: its tuner, where it is (epoch, batch of the epoch), its history and its best
    epoch's arrays; :meth:`state` and :meth:`restore` make a checkpoint of all of it."""

    def __init__(
        self, weights, train: list[Pair], held: list[Pair], options: FineTuneOptions, state: dict | None = None
    ):
        """A run from its start, or with ``state`` (a checkpoint's :meth:`state`) from where that one stopped."""
        self.train, self.held, self.options = train, held, options
        if state is None:
            first, second = layer_words(weights, train)  # the frozen encoder's cosines start the head
            labels = np.array([p.label for p in train])
            w = fit_logistic(head_features({"kind": "scaled-cosine", "layer": -1}, None, first, second), labels)
        else:  # the head comes from the checkpoint: no forward pass to fit it
            w = np.zeros(2)
        head = {"scale": np.array([w[0]], weights.dtype), "bias": np.array([w[1]], weights.dtype)}
        self.tuner = FineTuner(tuned_weights(weights, state), head, clip=options.clip)
        self.per_epoch = -(-len(train) // options.batch_pairs)
        self.total = options.epochs * self.per_epoch
        self.epoch, self.batch, self.history, self.best = 0, 0, [], None  # best: (accuracy, epoch, arrays)
        self.right = self.seen = 0  # this epoch's training pairs judged right before their step
        self.done = False
        if state is not None:
            self.restore(state)

    @property
    def step(self) -> int:
        return self.epoch * self.per_epoch + self.batch

    def state(self) -> dict[str, np.ndarray]:
        named = dict(self.tuner.state())
        where = [self.epoch, self.batch, self.right, self.seen, int(self.done)]
        named["run.where"] = np.array(where)
        named["run.history"] = np.array(json.dumps(self.history))
        if self.best is not None:
            named["run.best"] = np.array(json.dumps(self.best[:2]))
            named |= {f"best.{name}": array for name, array in self.best[2].items()}
        return named

    def restore(self, state: dict[str, np.ndarray]) -> None:
        self.tuner.restore(state)
        self.epoch, self.batch, self.right, self.seen, done = (int(x) for x in state["run.where"])
        self.done = bool(done)
        self.history = json.loads(str(state["run.history"]))
        if "run.best" in state:
            accuracy_, epoch = json.loads(str(state["run.best"]))
            self.best = (accuracy_, epoch, {n[5:]: np.array(a) for n, a in state.items() if n.startswith("best.")})

    def run(self, on_step: Callable[[dict], None], on_epoch: Callable[[dict], None], stop: Callable[[], bool]) -> bool:
        """Train to the end (True) or until ``stop`` says so at a step boundary (False)."""
        o = self.options
        started, self.pairs = time.perf_counter(), 0  # for the bar's speed
        while self.epoch < o.epochs and not self.done:
            batches = epoch_batches(self.train, o.batch_pairs, o.seed, self.epoch)
            while self.batch < len(batches):
                if stop():
                    return False
                lr = linear_schedule(self.step, self.total, o.lr, warmup=min(o.warmup, max(1, self.total // 10)))
                batch = batches[self.batch]
                result = self.tuner.step(batch, lr, o.head_lr * lr / o.lr)
                self.right += int(np.sum((result.probabilities > 0.5) == (batch.labels > 0.5)))
                self.seen += len(batch.labels)
                self.batch += 1
                self.pairs += len(batch.labels)
                speed = self.pairs / max(1e-9, time.perf_counter() - started)
                on_step({"step": self.step, "epoch": self.epoch + 1, "loss": result.loss, "pairs_per_second": speed})
            self._end_epoch(on_epoch)
        return True

    def _end_epoch(self, on_epoch: Callable[[dict], None]) -> None:
        held = held_out_accuracy(self.tuner.weights, self.tuner.head, self.held)
        entry = {"epoch": self.epoch + 1, "train_accuracy": self.right / max(1, self.seen), "held_out_accuracy": held}
        self.history.append(entry)
        self.epoch, self.batch, self.right, self.seen = self.epoch + 1, 0, 0, 0
        better = self.best is None or held is None or held > self.best[0]
        if better:
            arrays = self.tuner.state()
            keep = {n: np.array(a) for n, a in arrays.items() if n.startswith(("weights.", "head."))}
            self.best = (held, self.epoch, keep)
        else:  # early stopping: an epoch that does not beat the best ends the run; the best is written
            self.done = True
        on_epoch(entry | {"best": better, "epochs": self.options.epochs})

    def best_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict]:
        """The best epoch's (encoder arrays, head arrays, its history entry)."""
        _, epoch, arrays = self.best if self.best is not None else (None, 0, self.tuner.state())
        encoder = {n[8:]: a for n, a in arrays.items() if n.startswith("weights.")}
        head = {n[5:]: a for n, a in arrays.items() if n.startswith("head.")}
        return encoder, head, self.history[epoch - 1] if epoch else {}


def tuned_weights(weights, state: dict[str, np.ndarray] | None):
    """The arrays a run tunes in place: a checkpoint's own (``state``, read by :func:`read_checkpoint`: fresh
    writable arrays), each of the parent's shape and dtype, so a resumed run holds no copy of the parent's
    weights for the checkpoint to overwrite (MiniLM's: 90 MB, each page of the map read); otherwise a copy of
    ``weights``, which a checkpoint's :meth:`FineTuneRun.restore` overwrites or refuses as it is."""
    from ctxembed.core.encoder import EncoderWeights

    if state is None:
        return trainable_copy(weights)
    parent = weights.arrays()
    saved = {name: state.get(f"weights.{name}") for name in parent}
    if all(
        isinstance(array, np.ndarray)
        and array.shape == parent[name].shape
        and array.dtype == parent[name].dtype
        and array.flags.writeable
        and array.flags.c_contiguous
        for name, array in saved.items()
    ):
        return EncoderWeights.from_arrays(weights.config, saved)
    return trainable_copy(weights)


def write_checkpoint(path: Path, run: FineTuneRun, meta: dict) -> None:
    """The run's state and what it was started with, through the atomic writer: never half-written."""
    from ctxembed.output import atomic_file

    with atomic_file(path) as out:
        np.savez(out, **run.state(), **{"meta.json": np.array(json.dumps(meta, sort_keys=True))})


def read_checkpoint(path: Path, meta: dict) -> dict[str, np.ndarray]:
    """A checkpoint of this run (same parent, data and options), or DataError in one line."""
    if not path.is_file():
        raise DataError(f"{path}: no checkpoint to resume from")
    try:
        with np.load(path, allow_pickle=False) as found:
            state = {name: found[name] for name in found.files}
        theirs = json.loads(str(state.pop("meta.json")))
    except (OSError, ValueError, KeyError) as error:
        raise DataError(f"{path}: not a fine-tuning checkpoint ({type(error).__name__})") from None
    differs = sorted(key for key in meta if theirs.get(key) != meta[key])
    if differs:
        raise DataError(
            f"{path} was made by another run (its {', '.join(differs)} differ): run without {{resume}}", "resume"
        )
    return state


def check_name(name: str | None) -> str:
    if not name:
        raise UsageError("a trained model's training writes a derived model: give it a {name}", "name")
    if not all(c.isalnum() or c in "-_." for c in name) or name.startswith(".") or len(name) > 64:
        raise UsageError(f"{{name}} {name!r}: letters, digits, '-', '_' and '.' only (at most 64)", "name")
    return name


def pairs_for(engine, items) -> list[Pair]:
    try:
        return engine_pairs(engine, items)
    except DataError as error:
        raise DataError(f"a training pair: {error.message}") from None


# ------------------------------------------------------------------------------------ the job


def train_derived(
    pairs_path: str | Path,
    *,
    model: str,
    name: str | None,
    freeze: bool = False,
    options,
    batch_pairs: int = 16,
    checkpoint: str | Path | None = None,
    resume: bool = False,
    on_note: Callable[[str], None] = lambda text: None,
    stop: Callable[[], bool] | None = None,
) -> dict:
    """Train derived model ``name`` from trained model ``model`` on the labelled pairs at ``pairs_path``
    (:mod:`ctxembed.train.pairs`), fine-tuned or (``freeze``) a head over the frozen encoder; write it into
    the models folder and return the ``ctxembed.train-derived/1`` document. ``options``: the declared
    training options (epochs, lr, held_out, warmup, clip, seed). A stopped fine-tuning run writes
    ``checkpoint`` (default NAME.checkpoint.npz in the models folder) and ``resume`` continues it."""
    from threadpoolctl import threadpool_limits  # training only: one BLAS thread, as the engine and the trainer

    from ctxembed.engine.registry import entry_of
    from ctxembed.train.memory import keep_freed_memory
    from ctxembed.vectors.catalogue import MODELS
    from ctxembed.vectors.catalogue import find as find_in_catalogue

    name = check_name(name)
    if find_in_catalogue(name) is not None:  # refused before any work, not after an epoch
        raise UsageError(f"{{name}} {name!r} names a model of the registry: choose another", "name")
    entry = entry_of(model)
    if entry.name not in MODELS or entry.package is None:
        raise UsageError(f"{{model}} {model}: train a derived model from an installed model of the registry", "model")
    if freeze and resume:
        raise UsageError("{resume} continues a fine-tuning run; {freeze} fits in one pass", "resume", "freeze")
    keep_freed_memory()  # a step frees and retakes the same large arrays: keep them (train/memory.py)
    with threadpool_limits(limits=1, user_api="blas"):  # faster per CPU-second, the same sums each run
        return _train(name, entry, pairs_path, freeze, options, batch_pairs, checkpoint, resume, on_note, stop)


def _train(name, entry, pairs_path, freeze, options, batch_pairs, checkpoint, resume, note, stop) -> dict:
    from ctxembed.core.encoder import EncoderWeights
    from ctxembed.engine.registry import open_engine
    from ctxembed.progress import Training
    from ctxembed.train.pairs import read_pairs
    from ctxembed.vectors.derived import SCHEMA as RECORD_SCHEMA
    from ctxembed.vectors.derived import write_derived
    from ctxembed.vectors.models import model_path, models_dir

    items, data = read_pairs(pairs_path)
    engine = open_engine(model=entry.name)
    pairs = pairs_for(engine, items)
    train_rows, held_rows = split_pairs(len(pairs), options.held_out, options.seed)
    train, held = [pairs[i] for i in train_rows], [pairs[i] for i in held_rows]
    note(f"{len(train):,} pairs to train on, {len(held):,} held out ({data['name']}, sha256 {data['sha256'][:12]}...)")
    record = {
        "schema": RECORD_SCHEMA,
        "model": name,
        "parent": entry.name,
        "upstream": entry.package.upstream,
        "licence": entry.package.licence,
        "data": data,
    }
    if freeze:
        fitted = fit_frozen(engine.weights, train, held)
        figures = {k: fitted[k] for k in ("train_accuracy", "held_out_accuracy")} | {"epochs": None}
        record |= {"weights": "parent", "way": "freeze", "mix": fitted["mix"], "head": fitted["head"]}
        record["figures"] = figures | {"pairs": len(train), "held_out_pairs": len(held)}
        folder = write_derived(name, record, on_note=note)
        return _document(record, folder, None, interrupted=False, history=[])
    tuning = FineTuneOptions(options.epochs, options.lr, batch_pairs, options.warmup, options.clip, options.seed)
    checkpoint = Path(checkpoint) if checkpoint is not None else models_dir() / f"{name}.checkpoint.npz"
    meta = {"parent": entry.name, "data": data["sha256"], "options": tuning.__dict__, "name": name}
    state = read_checkpoint(checkpoint, meta) if resume else None
    note(f"{'resuming: ' if state else ''}fine-tuning every weight of {entry.name}: {tuning.epochs} epochs ...")
    run = FineTuneRun(engine.weights, train, held, tuning, state)
    del state  # restored: the moments and best arrays it read were copied into the run, so they are let go
    with Training(run.total, note, unit="pairs") as progress:
        stopped = stop or progress.stop
        finished = run.run(progress.on_step, progress.on_epoch, lambda: stopped() or progress.stop())
    if not finished:
        write_checkpoint(checkpoint, run, meta)
        note(
            f"interrupted at step {run.step} of {run.total}: checkpoint written to {checkpoint}; "
            "run the same command with --resume to continue"
        )
        return _document(record | {"figures": None}, None, checkpoint, interrupted=True, history=run.history)
    encoder, head, best = run.best_arrays()
    weights = EncoderWeights.from_arrays(engine.weights.config, encoder)
    K = engine.layers + 1
    record |= {
        "weights": "own",
        "way": "fine-tune",
        "mix": {"weights": [0.0] * (K - 1) + [1.0], "gamma": 1.0},  # the head reads the last hidden state
        "head": {
            "kind": "scaled-cosine",
            "layer": K - 1,
            "scale": float(head["scale"][0]),
            "bias": float(head["bias"][0]),
        },
        "figures": {
            "train_accuracy": best.get("train_accuracy"),
            "held_out_accuracy": best.get("held_out_accuracy"),
            "epochs": len(run.history),
            "best_epoch": best.get("epoch"),
            "pairs": len(train),
            "held_out_pairs": len(held),
        },
        "options": tuning.__dict__,
    }
    folder = write_derived(name, record, weights, model_path(entry.name), on_note=note)
    checkpoint.unlink(missing_ok=True)
    return _document(record, folder, checkpoint, interrupted=False, history=run.history)


def _document(record: dict, folder, checkpoint, *, interrupted: bool, history: list) -> dict:
    return {
        "schema": SCHEMA,
        "model": record["model"],
        "parent": record["parent"],
        "way": record.get("way", "fine-tune"),
        "data": record["data"],
        "figures": record.get("figures"),
        "history": history,
        "licence": record["licence"],
        "path": None if folder is None else str(folder),
        "checkpoint": None if checkpoint is None else str(checkpoint),
        "interrupted": interrupted,
    }
