"""Trained weights files: the projections ``--weights`` reads, plus what they were trained on.

A weights file written by ``ctxembed train`` is an ``.npz`` holding

- the projection arrays under the names :func:`ctxembed.core.projections.load_projections` reads
  (``l0.h0.W_query`` ... ``l1.W_out``), so ``--projection file --weights FILE`` uses it directly;
- ``meta``: one JSON string (schema ``ctxembed.weights/1``): the vectors it was trained on (name,
  dimension, fingerprint), the attention settings it was trained with, the initialisation (seed,
  so the untrained model can be rebuilt), the training options, a hash of the corpus and the losses;
- ``train.*``: arrays only training needs (the learned [MASK] vector, the logit scale and, in a
  checkpoint, Adam's moments). Inference ignores them.

Only NumPy and the standard library are imported here: the attend path reads the metadata.
"""

from __future__ import annotations

import hashlib
import json
from os import PathLike
from pathlib import Path

import numpy as np

from ctxembed.errors import DataError
from ctxembed.vectors.shipped import shipped_path

META_KEY = "meta"
TRAIN_PREFIX = "train."
WEIGHTS_SCHEMA = "ctxembed.weights/1"
FINGERPRINT_WORDS = 1000


LEARNED_FILE = "learned-brown-2x4.npz"  # the shipped weights (scripts/build_learned_weights.py)


def learned_weights_path() -> Path:
    """The shipped learned weights: inside the installed package, or data/ in a source checkout."""
    return shipped_path(LEARNED_FILE)


def trained_settings(path: str | PathLike) -> dict | None:
    """The settings a weights file was trained with ({"attention": {...}, "abtt": ..., ...}), or None."""
    meta = read_metadata(path) if Path(path).is_file() else None
    return None if meta is None else meta.get("settings")


def describe_weights(path: str | PathLike) -> str:
    """One line for ``--explain``: which matrices a weights file holds and, if ``ctxembed train``
    wrote it, which of them were learned, on what, and how far the held-out loss fell."""
    try:
        meta = read_metadata(path) if Path(path).is_file() else None
    except DataError:
        meta = None
    if meta is None:
        return f"W_query, W_key, W_value (and any W_out) are read from {path}"
    kinds = sorted({name.rsplit(".", 1)[-1] for name in meta.get("learned", [])})
    losses = meta.get("losses", {})
    fell = ""
    if losses.get("held_out_initial") is not None and losses.get("held_out") is not None:
        fell = f", held-out loss {losses['held_out_initial']:.3f} -> {losses['held_out']:.3f}"
    fixed = "; W_value is fixed to the identity" if meta.get("init", {}).get("fix_values") else ""
    corpus = meta.get("corpus", {})
    return (
        f"{', '.join(kinds)} were learned by `ctxembed train` from random (Xavier, seed "
        f"{meta.get('init', {}).get('seed')}) weights: {meta.get('steps', 0):,} steps of masked-word "
        f"prediction on {corpus.get('source') or 'a corpus'} ({corpus.get('tokens', 0):,} tokens{fell}){fixed}"
    )


def fits_learned_weights(store) -> bool:
    """Whether the shipped learned weights were trained on these vectors (the ladder's ``learned`` rung)."""
    path = learned_weights_path()
    meta = read_metadata(path) if path.is_file() else None
    return (
        meta is not None
        and meta["vectors"]["dim"] == store.dim
        and meta["vectors"]["fingerprint"] == vectors_fingerprint(store)
    )


def vectors_fingerprint(store) -> str:
    """A short content hash of a vector store: its dimension, first 1,000 words and their vectors.

    The same vectors give the same fingerprint wherever the file lives (unlike a path or mtime);
    ``--limit`` above 1,000 words keeps it.
    """
    n = min(FINGERPRINT_WORDS, len(store))
    digest = hashlib.sha256(f"{store.dim}\0".encode())
    digest.update("\0".join(store.words[:n]).encode())
    digest.update(np.ascontiguousarray(store.rows(np.arange(n)), dtype=np.float32).tobytes())  # (n, d)
    return digest.hexdigest()[:16]


def vectors_record(store) -> dict:
    return {
        "name": store.meta.get("name", Path(store.path).name if store.path else "vectors"),
        "dim": store.dim,
        "fingerprint": vectors_fingerprint(store),
    }


def read_metadata(path: str | PathLike) -> dict | None:
    """The ``meta`` record of a weights file, or None when it has none (a hand-made projections file)."""
    import zipfile

    try:
        loaded = np.load(path, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            return None  # a bare .npy array: load_projections says what is wrong with it
        with loaded as archive:
            if META_KEY not in archive.files:
                return None
            text = str(archive[META_KEY])
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile):
        return None  # load_projections reports an unreadable file with its own message
    try:
        meta = json.loads(text)
    except json.JSONDecodeError:
        raise DataError(f"{path}: its metadata is not valid JSON") from None
    if not isinstance(meta, dict) or meta.get("schema") != WEIGHTS_SCHEMA:
        raise DataError(f"{path}: metadata of an unknown kind (expected schema {WEIGHTS_SCHEMA})")
    return meta


def check_vectors(path: str | PathLike, meta: dict, store) -> None:
    """Refuse weights trained on other vectors or another dimension, in one line."""
    trained = meta.get("vectors", {})
    if trained.get("dim") != store.dim:
        raise DataError(
            f"{path} was trained on {trained.get('dim')}-dimensional vectors ({trained.get('name')}), "
            f"but these vectors have {store.dim} dimensions; pass the same --vectors or train again"
        )
    if trained.get("fingerprint") != vectors_fingerprint(store):
        name = store.meta.get("name", "these vectors")
        raise DataError(
            f"{path} was trained on other vectors ({trained.get('name')}), not {name}; "
            "pass the same --vectors or train again"
        )


def check_trained_weights(settings, store) -> None:
    """Refuse ``settings.weights_file`` when ``ctxembed train`` wrote it for other vectors."""
    path = settings.weights_file
    if settings.projection != "file" or not path or not Path(path).is_file():
        return
    meta = read_metadata(path)
    if meta is not None:
        check_vectors(path, meta, store)


def read_training_arrays(path: str | PathLike) -> dict[str, np.ndarray]:
    """The ``train.*`` arrays of a weights file or checkpoint, without their prefix."""
    with np.load(path, allow_pickle=False) as archive:
        return {name[len(TRAIN_PREFIX) :]: archive[name] for name in archive.files if name.startswith(TRAIN_PREFIX)}


def write_weights(
    path: str | PathLike, arrays: dict[str, np.ndarray], meta: dict, training: dict[str, np.ndarray]
) -> None:
    """Write projections, metadata and training arrays atomically: a temporary file in the same folder,
    then a rename, so an interrupted or failed write never leaves a half-written file at ``path``.

    Raises DataError naming the path when it cannot be written.
    """
    from ctxembed.vectors.store import atomic_file

    path = Path(path)
    contents = dict(arrays)
    contents[META_KEY] = np.array(json.dumps({"schema": WEIGHTS_SCHEMA, **meta}, sort_keys=True))
    contents.update({TRAIN_PREFIX + name: value for name, value in training.items()})
    if path.is_dir():
        raise DataError(f"{path}: is a directory; give a file name for the weights")
    try:
        with atomic_file(path) as file:
            np.savez(file, **contents)
    except OSError as exc:
        raise DataError(f"cannot write {path}: {exc.strerror or exc}") from None
