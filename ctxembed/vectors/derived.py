"""Derived models: models trained here on labelled pairs (``ctxembed train --model minilm PAIRS --name NAME``),
kept in the models folder beside the installed ones and found by the one lookup
(:func:`find`), so ``--model NAME`` works wherever a model name does.

A derived model is a folder ``NAME`` of the models folder holding ``derived.json``, its record: the parent
it was trained from, the training data's file name and sha256, its figures (train and held-out accuracy,
epochs), the licence it inherits, its read-out (a layer mix) and its head (the probability that a word keeps
its sense, :func:`ctxembed.core.heads.same_sense`). A fine-tuned model (``"weights": "own"``) also holds
its own weights, installed the way an installed model's are (encoder.safetensors, config.json, vocab.txt,
words.ctxv and installed.json, so every check of :mod:`ctxembed.vectors.integrity` applies); a frozen one
(``"weights": "parent"``) holds only its record and runs over its parent's weights.

The folder is staged as every writer of the models folder stages one (:mod:`ctxembed.vectors.staging`):
written into a temporary folder beside the final one, which holds a lock while it is written, then renamed
into place whole, so an interrupted write leaves no model, two trainings of one name leave the last one's
folder (never a mix), and what a killed one left is listed under ``stale`` and removed by the next install
or training.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ctxembed.errors import DataError
from ctxembed.output import atomic_file
from ctxembed.vectors import models
from ctxembed.vectors.catalogue import MODELS, ModelEntry
from ctxembed.vectors.catalogue import find as find_in_catalogue

RECORD = "derived.json"  # a folder holding it is a derived model
SCHEMA = "ctxembed.derived/1"


def find(name: str) -> ModelEntry | None:
    """The one lookup of a model by the name ``--model`` gives: the catalogue's entries (by name or alias),
    then the derived models installed in the models folder; None for no model."""
    return find_in_catalogue(name) or derived_entry(name)


def names() -> list[str]:
    """Every model ``--model`` takes by its name: the catalogue's, then the derived models installed."""
    return [*MODELS, *(name for name in derived_names() if name not in MODELS)]


def models_document() -> dict:
    """``ctxembed models list --json``: :func:`ctxembed.vectors.models.models_document` with every derived
    model beside the installed ones (its parent, data, figures and licence)."""
    document = models.models_document()
    document["models"] += [describe_derived(name) for name in derived_names()]
    return document


def derived_names() -> list[str]:
    """The derived models of the models folder, by name (folders holding a derived.json), sorted."""
    root = models.models_dir()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if not p.name.startswith(".") and (p / RECORD).is_file())


def read_derived(name: str) -> dict | None:
    """Derived model ``name``'s record, or None when the models folder has none by that name. DataError
    for a record that is not one (naming the file)."""
    if not name or "/" in name or name.startswith("."):
        return None
    path = models.models_dir() / name / RECORD
    if not path.is_file():
        return None
    record = models.parse_json(name, path, models.read_small(name, path))
    keys = ("parent", "weights", "head", "mix", "data", "licence")
    if not isinstance(record, dict) or record.get("schema") != SCHEMA or any(key not in record for key in keys):
        raise DataError(
            f"{path} is not a derived model's record (train it again with `ctxembed train {{name}} {name}`)", "name"
        )
    if record["parent"] not in MODELS or record["weights"] not in ("own", "parent"):
        raise models.damaged(name, path, f"its parent {record['parent']!r} is not a model of the registry")
    return record


def derived_entry(name: str) -> ModelEntry | None:
    """The registry entry of derived model ``name`` (its parent's family), or None when there is none."""
    record = read_derived(name)
    if record is None:
        return None
    parent = MODELS[record["parent"]]
    way = "fine-tuned" if record["weights"] == "own" else "a head over the frozen encoder"
    summary = f"{parent.name} {way} on {record['data']['name']} (derived here)"
    return ModelEntry(name, parent.family, summary, trained=True, parent=parent.name, derived=record)


def describe_derived(name: str) -> dict:
    """What ``models list`` shows of derived model ``name``: its parent, data, figures and licence."""
    record = read_derived(name)
    folder = models.models_dir() / name
    return {
        "model": name,
        "upstream": None,
        "parent": record["parent"],
        "way": "fine-tune" if record["weights"] == "own" else "freeze",
        "data": record["data"],
        "figures": record["figures"],
        "licence": record["licence"],
        "path": str(folder),
        "bytes": sum(f.stat().st_size for f in folder.iterdir() if f.is_file()),
    }


def write_derived(name: str, record: dict, weights=None, parent_folder: Path | None = None, on_note=None) -> Path:
    """Write derived model ``name``: its record, and with ``weights`` (an EncoderWeights) its own weights
    beside copies of its parent's config, vocabulary and neighbour words (from ``parent_folder``) and an
    installed.json recording their sha256. Staged and renamed into place (:func:`staging`); a model of the
    same name is replaced. Returns the folder; ``on_note`` hears of the folders killed writers left."""
    from ctxembed.vectors.layouts import layout_of
    from ctxembed.vectors.models import FORMAT, INSTALLED, recorded_stat, sha256_of
    from ctxembed.vectors.staging import staging

    if name in MODELS or any(name in entry.aliases for entry in MODELS.values()):
        raise DataError(f"{name!r} names a model of the registry: choose another {{name}}", "name")
    root = models.models_dir()
    with staging(root, name, on_note) as stage:
        staged = stage.folder
        if weights is not None:
            from ctxembed.vectors import safetensors
            from ctxembed.vectors.catalogue import packages
            from ctxembed.vectors.integrity import expected_metadata

            layout = layout_of(record["parent"])  # its parent's family's files: its own weights, the rest copied
            files = layout.files
            safetensors.save(weights.arrays(), staged / layout.weights, expected_metadata(packages()[record["parent"]]))
            for file in (f for f in files if f != layout.weights):
                with atomic_file(staged / file) as out, open(parent_folder / file, "rb") as source:
                    shutil.copyfileobj(source, out)
            installed = {
                "format": FORMAT,
                "model": name,
                "upstream": record.get("upstream"),
                "licence": record["licence"],
                "derived_from": record["parent"],
                "sha256": {file: sha256_of(staged / file) for file in files},
                "files": {file: recorded_stat(staged / file) for file in files},
            }
            with atomic_file(staged / INSTALLED) as out:
                out.write((json.dumps(installed, indent=1, sort_keys=True) + "\n").encode())
        with atomic_file(staged / RECORD) as out:  # written last: a folder without it is no derived model
            out.write((json.dumps(record, indent=1, sort_keys=True) + "\n").encode())
        stage.place()
    return stage.final
