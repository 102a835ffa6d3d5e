"""The files training writes: the trained weights, and a checkpoint that ``--resume`` continues from
exactly (the weights plus Adam's moments, the step and the history)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ctxembed.errors import DataError, UsageError
from ctxembed.presets import Settings, TrainOptions
from ctxembed.train.corpus import Corpus
from ctxembed.train.trainer import Model, TrainResult
from ctxembed.vectors.weights import (
    check_vectors,
    read_metadata,
    read_projection_arrays,
    read_training_arrays,
    write_weights,
)


def _metadata(result: TrainResult, options: TrainOptions) -> dict:
    report = result.report
    return {
        "vectors": report["vectors"],
        "settings": report["settings"],
        "init": {"kind": "xavier-uniform", "seed": result.model.settings.seed, "fix_values": options.fix_values},
        "options": asdict(options),
        "corpus": {key: report["corpus"].get(key) for key in ("source", "sha256", "sentences", "tokens")},
        "learned": report["learned"],
        "steps": report["steps"],
        "complete": not result.interrupted,
        "losses": report["final"],
    }


def write_trained(result: TrainResult, path: str | Path, options: TrainOptions) -> None:
    """The weights file: projections, metadata, the [MASK] vector and the logit scale."""
    model = result.model
    write_weights(path, model.arrays, _metadata(result, options), _head_arrays(result))


def _head_arrays(result: TrainResult) -> dict[str, np.ndarray]:
    """The prediction head (training only): [MASK], logit scale, word biases and the words they belong to."""
    model = result.model
    return {
        "mask": model.mask,
        "log_scale": model.log_scale,
        "word_bias": model.word_bias,
        "vocabulary": result.vocabulary.astype(np.int32),
    }


def write_checkpoint(result: TrainResult, path: str | Path, options: TrainOptions) -> None:
    """A weights file that also holds Adam's moments and the history, so ``--resume`` continues exactly."""
    model, state = result.model, result.state
    training = {**_head_arrays(result), "step": np.array(state["step"])}
    training |= {f"adam_m.{name}": value for name, value in state["adam_m"].items()}
    training |= {f"adam_v.{name}": value for name, value in state["adam_v"].items()}
    training["history"] = np.array(json.dumps(state["history"]))
    write_weights(path, model.arrays, _metadata(result, options), training)


def read_checkpoint(path: str | Path, store, settings: Settings, options: TrainOptions, corpus: Corpus) -> dict:
    """The state :meth:`Trainer.run` resumes from; refuses a checkpoint of another run in one line."""
    if not Path(path).exists():
        raise DataError(f"{path}: no checkpoint to resume from")
    meta = read_metadata(path)
    if meta is None or "adam_m.mask" not in (arrays := read_training_arrays(path)):
        raise DataError(f"{path}: not a ctxembed training checkpoint")
    check_vectors(path, meta, store)
    if meta["corpus"]["sha256"] != corpus.sha256:
        raise DataError(f"{path} was made on another corpus (sha256 {meta['corpus']['sha256'][:12]}...)")
    differences = [
        name
        for name, (theirs, ours) in {
            **{k: (meta["settings"].get(k), v) for k, v in json.loads(json.dumps(settings.as_dict())).items()},
            **{k: (meta["options"].get(k), v) for k, v in asdict(options).items()},
        }.items()
        if theirs != ours
    ]
    if differences:
        raise UsageError(f"{path} was made with other settings ({', '.join(differences)}); give the same options")
    weights = read_projection_arrays(path)
    model = Model(weights, arrays["mask"], arrays["log_scale"], arrays["word_bias"], settings)
    names = list(model.trainable(options.fix_values))
    return {
        "model": model,
        "adam_m": {name: arrays[f"adam_m.{name}"] for name in names},
        "adam_v": {name: arrays[f"adam_v.{name}"] for name in names},
        "step": int(arrays["step"]),
        "history": json.loads(str(arrays["history"])),
    }
