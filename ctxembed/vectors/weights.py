"""Trained weights files: the projections ``--weights`` reads, plus what they were trained on.

A weights file written by ``ctxembed train`` is an ``.npz`` holding

- the projection arrays under the names :func:`load_projections` reads
  (``l0.h0.W_query`` ... ``l1.W_out``), so ``--projection file --weights FILE`` uses it directly;
- ``meta``: one JSON string (schema ``ctxembed.weights/1``): the vectors it was trained on (name,
  dimension, fingerprint), the attention settings it was trained with, the initialisation (seed,
  so the untrained model can be rebuilt), the training options, a hash of the corpus and the losses;
- ``train.*``: arrays only training needs (the learned [MASK] vector, the logit scale and, in a
  checkpoint, Adam's moments). Inference ignores them.

Only NumPy and the standard library are imported here: the attend path reads the metadata.

The projection arrays' ``.npz`` layout (layer and head indices start at 0, every array real-valued)::

    l{layer}.h{head}.W_query   (d_layer, d_k)      d_layer = d_in for layer 0, else the previous output size
    l{layer}.h{head}.W_key     (d_layer, d_k)
    l{layer}.h{head}.W_value   (d_layer, d_v)
    l{layer}.h{head}.b_query   (d_k,)              optional, likewise b_key (d_k,) and b_value (d_v,)
    l{layer}.W_out             (heads * d_v, d_model)  optional output projection
    l{layer}.b_out             (d_model,)          optional, only together with W_out

With one layer and one head the plain names ``W_query``, ``W_key``, ``W_value``, ``b_query``, ``b_key``,
``b_value``, ``W_out`` and ``b_out`` are accepted as well.
"""

from __future__ import annotations

import json
import math
import re
import struct
import tokenize
import zlib
from os import PathLike
from pathlib import Path

import numpy as np

from ctxembed.core.projections import HEAD_ARRAYS, LAYER_ARRAYS, HeadProjection, LayerParams, validate_params
from ctxembed.declarations import LEARNED_WEIGHTS_FILE, AttentionConfig
from ctxembed.errors import DataError
from ctxembed.output import atomic_file
from ctxembed.vectors.shipped import shipped_path

META_KEY = "meta"
TRAIN_PREFIX = "train."
WEIGHTS_SCHEMA = "ctxembed.weights/1"
FINGERPRINT_WORDS = 1000


LEARNED_FILE = LEARNED_WEIGHTS_FILE  # the shipped weights (scripts/build_learned_weights.py)


def learned_weights_path() -> Path:
    """The shipped learned weights: inside the installed package, or data/ in a source checkout."""
    return shipped_path(LEARNED_FILE)


def weights_path(weights_file: str) -> str:
    """The file a ``weights_file`` setting names: a path as given, or, for the shipped weights' file name
    (what the learned preset declares) when no such file is here, the shipped file's path."""
    if weights_file == LEARNED_FILE and not Path(weights_file).exists():
        return str(learned_weights_path())
    return weights_file


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
    import hashlib  # lazy: only learned weights are fingerprinted; a trained model's start needs no OpenSSL

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
    try:
        arrays = read_npz(path, only=(META_KEY,))
    except (ValueError, OSError):
        return None  # load_projections reports an unreadable file with its own message
    if META_KEY not in arrays:
        return None
    meta_array = arrays[META_KEY]
    if meta_array.dtype.kind != "U" or meta_array.ndim != 0:
        raise DataError(f"{path}: its metadata is not one JSON string")
    text = str(meta_array)
    try:
        meta = json.loads(text)
    except json.JSONDecodeError:
        raise DataError(f"{path}: its metadata is not valid JSON") from None
    except RecursionError:
        raise DataError(f"{path}: its metadata is nested too deeply to be a weights record") from None
    if not isinstance(meta, dict) or meta.get("schema") != WEIGHTS_SCHEMA:
        raise DataError(f"{path}: metadata of an unknown kind (expected schema {WEIGHTS_SCHEMA})")
    if problem := _metadata_problem(meta):
        raise DataError(f"{path}: damaged metadata ({problem})")
    return meta


# The fields ``ctxembed train`` records and their types: metadata of the right schema that lacks one
# or holds another type was edited or damaged, and is refused in one line instead of failing later.
_NUMBER = (int, float)
_META_FIELDS = {
    "vectors": {"name": str, "dim": int, "fingerprint": str},
    "settings": {"attention": dict},
    "init": {"seed": int, "fix_values": bool},
    "options": {},
    "corpus": {"sha256": str, "tokens": int},
    "learned": list,
    "steps": int,
    "losses": {"train": _NUMBER, "held_out": _NUMBER, "held_out_initial": _NUMBER},
}


def _metadata_problem(meta: dict) -> str | None:
    def kind(types) -> str:
        return "/".join(t.__name__ for t in types) if isinstance(types, tuple) else types.__name__

    for field, spec in _META_FIELDS.items():
        value = meta.get(field)
        if isinstance(spec, dict):
            if not isinstance(value, dict):
                return f"{field!r} is {_shown(value)}, not an object"
            for key, types in spec.items():
                inner = value.get(key)
                ok = isinstance(inner, types) and not (types in (int, _NUMBER) and isinstance(inner, bool))
                if not ok and not (field == "losses" and inner is None):
                    return f"{field}.{key} is {_shown(inner)}, not {kind(types)}"
        elif not isinstance(value, spec) or isinstance(value, bool):
            return f"{field!r} is {_shown(value)}, not {kind(spec)}"
    if not all(isinstance(name, str) for name in meta["learned"]):
        return "'learned' holds something other than array names"
    if meta["vectors"]["dim"] < 1:
        return f"vectors.dim is {meta['vectors']['dim']}"
    return None


def _shown(value) -> str:
    return "missing" if value is None else f"a {type(value).__name__}"


def check_vectors(path: str | PathLike, meta: dict, store) -> None:
    """Refuse weights trained on other vectors or another dimension, in one line."""
    trained = meta.get("vectors", {})
    if trained.get("dim") != store.dim:
        raise DataError(
            f"{path} was trained on {trained.get('dim')}-dimensional vectors ({trained.get('name')}), "
            f"but these vectors have {store.dim} dimensions; pass the same {{vectors}} or train again",
            "vectors",
        )
    if trained.get("fingerprint") != vectors_fingerprint(store):
        name = store.meta.get("name", "these vectors")
        raise DataError(
            f"{path} was trained on other vectors ({trained.get('name')}), not {name}; "
            "pass the same {vectors} or train again",
            "vectors",
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
    try:
        arrays = read_npz(path, only=lambda name: name.startswith(TRAIN_PREFIX))
    except (ValueError, OSError) as exc:
        raise DataError(f"{path}: {getattr(exc, 'strerror', None) or exc}") from None
    return {name[len(TRAIN_PREFIX) :]: value for name, value in arrays.items()}


def read_projection_arrays(path: str | PathLike) -> dict[str, np.ndarray]:
    """The projection arrays (``l*``) of a weights file or checkpoint, as stored."""
    try:
        return read_npz(path, only=lambda name: name.startswith("l"))
    except (ValueError, OSError) as exc:
        raise DataError(f"{path}: {getattr(exc, 'strerror', None) or exc}") from None


def write_weights(
    path: str | PathLike, arrays: dict[str, np.ndarray], meta: dict, training: dict[str, np.ndarray]
) -> None:
    """Write projections, metadata and training arrays atomically: a temporary file in the same folder,
    then a rename, so an interrupted or failed write never leaves a half-written file at ``path``.

    Raises DataError naming the path when it cannot be written.
    """
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


# ------------------------------------------------------------------------------ projection arrays
_HEAD_NAME = re.compile(r"l(\d+)\.h(\d+)\.(W_query|W_key|W_value|b_query|b_key|b_value)")
_LAYER_NAME = re.compile(r"l(\d+)\.(W_out|b_out)")


def load_projections(path: str | PathLike, d_in: int, config: AttentionConfig) -> list[LayerParams]:
    """Read projections from an .npz file (layout in the module docstring) and validate every shape.

    Raises ValueError for a missing, unknown, non-numeric or wrongly shaped array; the message names it.
    """
    # "meta" and "train.*" are what ``ctxembed train`` records beside the projections (ctxembed.vectors.weights)
    arrays = {name: value for name, value in _read_npz(path).items() if not _training_record(name)}
    plain = sorted(set(arrays) & set(HEAD_ARRAYS + LAYER_ARRAYS))
    if plain:
        if config.layers != 1 or config.heads != 1:
            raise ValueError(
                f"plain names {plain} are only accepted for 1 layer and 1 head; "
                f"use l{{layer}}.h{{head}}.W_query etc. for layers={config.layers}, heads={config.heads}"
            )
        if len(plain) != len(arrays):
            raise ValueError(f"{path} mixes plain names {plain} with prefixed names")
        arrays = {(f"l0.h0.{name}" if name in HEAD_ARRAYS else f"l0.{name}"): v for name, v in arrays.items()}

    heads: list[list[dict]] = [[{} for _ in range(config.heads)] for _ in range(config.layers)]
    outputs: list[dict] = [{} for _ in range(config.layers)]
    for name, value in arrays.items():
        if not (np.issubdtype(value.dtype, np.floating) or np.issubdtype(value.dtype, np.integer)):
            raise ValueError(f"{name} has dtype {value.dtype}, expected real numbers")
        value = value.astype(np.float64)
        _check_values(name, value)
        if match := _HEAD_NAME.fullmatch(name):
            layer, head, kind = int(match[1]), int(match[2]), match[3]
            if layer >= config.layers or head >= config.heads:
                raise ValueError(f"{name} is outside layers={config.layers}, heads={config.heads}")
            heads[layer][head][kind] = value
        elif match := _LAYER_NAME.fullmatch(name):
            layer, kind = int(match[1]), match[2]
            if layer >= config.layers:
                raise ValueError(f"{name} is outside layers={config.layers}")
            outputs[layer][kind] = value
        else:
            raise ValueError(f"unknown array {name!r} in {path}; expected names like l0.h0.W_query, l0.W_out")

    params = []
    for layer, layer_heads in enumerate(heads):
        for head, found in enumerate(layer_heads):
            missing = [kind for kind in HEAD_ARRAYS[:3] if kind not in found]
            if missing:
                names = ", ".join(missing if plain else [f"l{layer}.h{head}.{kind}" for kind in missing])
                raise ValueError(f"{path} has no array {names}")
        params.append(LayerParams([HeadProjection(**found) for found in layer_heads], **outputs[layer]))
    validate_params(params, d_in, config, plain=bool(plain))
    return params


MAX_ABS_WEIGHT = 1e4  # larger entries make scores overflow float32 long before they mean anything


def _training_record(name: str) -> bool:
    return name == "meta" or name.startswith("train.")


def _read_npz(path: str | PathLike) -> dict[str, np.ndarray]:
    """The named arrays of an .npz file; ValueError (with the reason) for anything else: a bare
    .npy array, a truncated or damaged archive, pickled objects, a FIFO or a directory."""
    from ctxembed.vectors.sources import regular_file  # `import ctxembed.cli` (help) never needs it

    try:
        regular_file(Path(path))
    except DataError as exc:
        if "no such file" in exc.message:
            raise FileNotFoundError(path) from None
        raise ValueError(exc.message.split(": ", 1)[-1]) from None
    return read_npz(path)


NPZ_BUDGET = 1 << 30  # bytes: the most an .npz may expand to; weights for 300-d vectors take a few MB


def read_npz(path: str | PathLike, only=None, budget: int = NPZ_BUDGET) -> dict[str, np.ndarray]:
    """The named arrays of an .npz archive (those in ``only``, a collection of names or a test on
    them, when given). Every member's header (shape, dtype) is read first and the declared sizes
    are added up: an archive declaring more than ``budget`` bytes, or an object (pickle) array, is
    refused before anything is expanded, so a deflated 3 MB file declaring 3 GB costs nothing.
    ValueError (with the reason) for a bare .npy, a damaged archive or pickled objects."""
    import zipfile  # a run without a weights file never needs it

    def wanted(name: str) -> bool:
        return only is None or (only(name) if callable(only) else name in only)

    try:
        with open(path, "rb") as fh:
            magic = fh.read(6)
        if magic == b"\x93NUMPY":
            raise ValueError("is a single .npy array, expected an .npz archive of named arrays (l0.h0.W_query, ...)")
        with zipfile.ZipFile(path) as archive:
            members = {
                info.filename.removesuffix(".npy"): info
                for info in archive.infolist()
                if info.filename.endswith(".npy") and wanted(info.filename.removesuffix(".npy"))
            }
            headers = {name: _member_header(archive, info) for name, info in members.items()}
            declared = sum(_declared_bytes(shape, dtype) for shape, _, dtype in headers.values())
            if declared > budget:
                biggest = max(headers, key=lambda name: _declared_bytes(headers[name][0], headers[name][2]))
                shape, _, dtype = headers[biggest]
                raise ValueError(
                    f"declares {declared:,} bytes of arrays ({biggest} is {shape} {dtype}), past the "
                    f"{budget:,}-byte budget; nothing was expanded"
                )
            return {name: _member_array(archive, members[name], *headers[name]) for name in members}
    except zipfile.BadZipFile as exc:
        if not magic.startswith(b"PK"):
            raise ValueError("not a NumPy .npz archive (it is not a zip file)") from None
        raise ValueError(f"truncated or damaged .npz archive ({exc})") from None
    except (EOFError, KeyError, zlib.error, struct.error, NotImplementedError, RuntimeError) as exc:
        raise ValueError(f"truncated or damaged .npz archive ({exc or type(exc).__name__})") from None


def _declared_bytes(shape: tuple, dtype: np.dtype) -> int:
    return math.prod(shape) * dtype.itemsize


# What numpy's .npy header parser raises on a damaged header (it evaluates the header's text, and
# for old versions re-tokenizes it first)
_HEADER_ERRORS = (ValueError, EOFError, SyntaxError, TypeError, tokenize.TokenError, RecursionError, MemoryError)


def _member_header(archive, info) -> tuple[tuple, bool, np.dtype]:
    """(shape, fortran order, dtype) from a member's .npy header, without reading its data."""
    with archive.open(info) as member:
        try:
            shape, fortran, dtype = _read_header(member)
        except _HEADER_ERRORS as exc:
            raise ValueError(f"member {info.filename} is not a NumPy array ({exc})") from None
    if dtype.hasobject:
        raise ValueError("holds pickled objects, which are never loaded; save plain arrays")
    if not all(isinstance(n, int) and n >= 0 for n in shape):
        raise ValueError(f"member {info.filename} declares the shape {shape}")
    return shape, fortran, dtype


def _read_header(member) -> tuple[tuple, bool, np.dtype]:
    version = np.lib.format.read_magic(member)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(member)
    return np.lib.format.read_array_header_2_0(member)


def _member_array(archive, info, shape: tuple, fortran: bool, dtype: np.dtype) -> np.ndarray:
    """A member's data, read into exactly the bytes its header declares (never more)."""
    nbytes = _declared_bytes(shape, dtype)
    with archive.open(info) as member:
        _read_header(member)
        data, got = bytearray(nbytes), 0
        while got < nbytes and (piece := member.read(min(nbytes - got, 1 << 24))):
            data[got : got + len(piece)] = piece
            got += len(piece)
    if got < nbytes:
        raise ValueError(f"truncated .npz archive ({info.filename} holds {got:,} of {nbytes:,} bytes)")
    array = np.frombuffer(data, dtype=dtype)
    return array.reshape(shape[::-1]).T if fortran else array.reshape(shape)


def _check_values(name: str, value: np.ndarray) -> None:
    if not np.isfinite(value).all():
        raise ValueError(f"{name} has NaN or infinite values")
    if value.size and np.abs(value).max() > MAX_ABS_WEIGHT:
        raise ValueError(f"{name} has a value of {np.abs(value).max():.3g}, past the {MAX_ABS_WEIGHT:g} limit")


def save_projections(path: str | PathLike, params: list[LayerParams]) -> None:
    """Write projections to ``path`` as an uncompressed .npz, with the prefixed names of the module doc."""
    arrays = {}
    for layer, layer_params in enumerate(params):
        if layer_params.heads is None:
            raise ValueError(f"layer {layer} uses the identity projection, which has no arrays to save")
        for head, projection in enumerate(layer_params.heads):
            for kind in HEAD_ARRAYS:
                if (value := getattr(projection, kind)) is not None:
                    arrays[f"l{layer}.h{head}.{kind}"] = np.asarray(value)
        for kind in LAYER_ARRAYS:
            if (value := getattr(layer_params, kind)) is not None:
                arrays[f"l{layer}.{kind}"] = np.asarray(value)
    with open(path, "wb") as file:  # an open file keeps the name exactly as given (no ".npz" appended)
        np.savez(file, **arrays)
