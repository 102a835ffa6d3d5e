"""What opening an installed model checks: the cheap checks every time, the full one when a file changed.

Every open (:func:`load_bert`, the BERT family's loader, and :func:`open_store`) checks, in about a
millisecond and without reading the weights:

- each converted file is a regular file (a FIFO or a device is refused before it is read, so nothing
  hangs) whose size and mtime are the ones ``installed.json`` recorded, or those of the last full check
  (remembered in the cache folder); when one differs, the full check of that file runs first;
- ``installed.json`` is a record of the current layout with a sha256 for every converted file;
- ``config.json`` holds the pinned upstream values (heads, layers, widths, epsilon, ...);
- the safetensors header is the one the converter writes for that config: every name, shape and dtype,
  the offsets laid end to end in name order, its metadata, and nothing after the last tensor;
- ``vocab.txt`` gives one id to each row of the word embeddings, no more;
- the neighbour store opens (its own header checksum) with the model's width.

The full check (:func:`verify`: at install, on ``ctxembed models verify``, and for a file whose size or
mtime changed) hashes the files against ``installed.json`` and reads every weight for a non-finite one.
Non-finite weights are refused at each open in the arrays every sentence uses whole
(:func:`check_used_finite`: one sum each, a few ms), and in the word embeddings through the hidden states
they give (:func:`check_finite`, called by the engine). A finite change written in place with the file's
mtime put back (a row zeroed, a layer scaled) passes the cheap checks: ``ctxembed models verify`` finds it.
Every refusal is one line naming the file and ``ctxembed models install NAME``, which installs it again.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from ctxembed.errors import DataError, UsageError
from ctxembed.output import atomic_file
from ctxembed.vectors.models import (
    FILES,
    FORMAT,
    INSTALLED,
    NEIGHBOURS,
    SMALL,
    WEIGHTS,
    ModelPackage,
    damaged,
    install_command,
    models_dir,
    package_of,
    parse_json,
    read_record,
    read_small,
)

STAMPS = "verified-models.json"  # in the cache folder: each file's stat when its full check passed


def file_stat(name: str, path: Path) -> os.stat_result:
    """``path``'s stat, refused unless it is a regular file: a FIFO, a device or a folder is never opened."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        raise damaged(name, path, "missing") from None
    except OSError as error:
        raise damaged(name, path, error.strerror or type(error).__name__) from None
    if not stat.S_ISREG(found.st_mode):
        raise damaged(name, path, "not a regular file")
    return found


# ------------------------------------------------------------------ opening


def load_bert(folder: Path):
    """A converted BERT folder (the model named by its folder's name) as (EncoderConfig, EncoderWeights over
    a memory map, WordPiece), after the cheap checks, and the full one for a file that changed since it was
    last checked. DataError: one line naming the damaged file and the install command."""
    name = folder.name
    record = read_record(name, folder)
    package = package_of(record.get("derived_from", name))  # a fine-tuned model: its parent's package
    stats = {file: file_stat(name, folder / file) for file in FILES}
    changed = [file for file in FILES if not _as_checked(record, folder, file, stats[file])]
    if changed:
        verify_files(name, folder, record, changed)
    config = check_config(name, folder / "config.json", package)
    weights = check_weights(name, folder / WEIGHTS, package, config, stats[WEIGHTS].st_size)
    check_used_finite(name, folder / WEIGHTS, weights)
    return config, weights, check_vocab(name, folder / "vocab.txt", config)


def _as_checked(record: dict, folder: Path, file: str, found: os.stat_result) -> bool:
    """Whether ``file`` has the size and mtime installed.json recorded, or those of its last full check."""
    recorded = record.get("files", {}).get(file)
    if recorded is not None and (found.st_size, found.st_mtime_ns) == (recorded["bytes"], recorded["mtime_ns"]):
        return True
    return _stamps().get(str((folder / file).resolve())) == _stamp(found)


def check_config(name: str, path: Path, package: ModelPackage):
    """The config, refused unless every pinned upstream value is there as pinned."""
    from ctxembed.core.encoder import EncoderConfig  # lazy: `models list` needs no numpy

    config = parse_json(name, path, read_small(name, path))
    if not isinstance(config, dict):
        raise damaged(name, path, f"a JSON {type(config).__name__}, not an object")
    for key, pinned in package.config.items():
        value = config.get(key)
        if type(value) is not type(pinned) or value != pinned:
            raise damaged(name, path, f"{key} is {value!r}, the model's is {pinned!r}")
    try:
        return EncoderConfig.from_json(config)
    except (ValueError, TypeError, KeyError, ZeroDivisionError) as error:
        raise damaged(name, path, str(error) or type(error).__name__) from None


def expected_metadata(package: ModelPackage) -> dict[str, str]:
    """The safetensors metadata the converter writes."""
    return {"converted_by": "ctxembed", "source": package.upstream, "format": str(FORMAT)}


def check_weights(name: str, path: Path, package: ModelPackage, config, size: int):
    """The encoder's weights over a memory map, refused unless the header is the converter's: float32
    tensors in name order, laid end to end from 0 to the file's end, the config's names and shapes."""
    from ctxembed.core.encoder import EncoderWeights
    from ctxembed.vectors import safetensors

    try:
        header, start = safetensors.read_header(path)
    except (OSError, ValueError) as error:
        raise damaged(name, path, str(error).splitlines()[0] or type(error).__name__) from None
    if header.get("__metadata__") != expected_metadata(package):
        raise damaged(name, path, "not written by ctxembed's converter")
    names = sorted(n for n in header if n != "__metadata__")
    end = 0
    for tensor in names:
        info = header[tensor]
        if info["dtype"] != "F32" or info["data_offsets"][0] != end:
            raise damaged(name, path, f"tensor {tensor} is not where the converter put it")
        end = info["data_offsets"][1]
    if start + end != size:
        raise damaged(name, path, f"{size - start - end:+,} bytes after its tensors")
    try:
        weights = EncoderWeights.from_arrays(config, safetensors.mapped(path, header, start))
    except (OSError, ValueError) as error:
        raise damaged(name, path, str(error).splitlines()[0] or type(error).__name__) from None
    extra = set(names) - set(weights.arrays())
    if extra:
        raise damaged(name, path, f"tensor {min(extra)} is not the model's")
    return weights


def check_vocab(name: str, path: Path, config):
    """The WordPiece vocabulary, refused unless it gives one id to each row of the word embeddings."""
    from ctxembed.vectors.wordpiece import WordPiece

    try:
        vocab = WordPiece.from_file(path)
    except (OSError, ValueError) as error:
        raise damaged(name, path, str(error).splitlines()[0] or type(error).__name__) from None
    if len(vocab.vocab) != config.vocab_size or max(vocab.vocab.values()) != config.vocab_size - 1:
        raise damaged(name, path, f"{len(vocab.vocab):,} pieces for {config.vocab_size:,} embeddings")
    return vocab


def open_store(name: str, path: Path, config):
    """The neighbour store, with the install command in any error it gives now or when a block is read."""
    from ctxembed.vectors.store import VectorStore

    try:
        store = VectorStore.open(path)
    except DataError as error:
        raise DataError(f"{error.message}: reinstall with `{install_command(name)}`") from None
    if store.dim != config.hidden:
        raise damaged(name, path, f"{store.dim}-dimensional, the model is {config.hidden}")
    store.damage_hint = f"reinstall with `{install_command(name)}`"
    return store


def check_used_finite(name: str, path: Path, weights) -> None:
    """Refuse a NaN or an infinity in the arrays every sentence uses whole (each layer's, the positions',
    the last LayerNorm's: all but the word embeddings, of which a sentence reads a few rows, checked in
    the hidden states they give). A sum is non-finite when one of its terms is, and costs one pass with
    no temporary array over pages the first sentence reads anyway."""
    import numpy as np

    for tensor, array in weights.arrays().items():
        if tensor != "word" and not np.isfinite(np.add.reduce(array, axis=None)):
            raise damaged(name, path, f"tensor {tensor} holds a non-finite number")


def check_finite(name: str, array, what: str = WEIGHTS) -> None:
    """Refuse numbers a damaged weight gave: any non-finite value in ``array`` (the encoder's hidden
    states: a NaN or an infinity in a weight the sentence used reaches them)."""
    import numpy as np

    if not np.isfinite(array).all():
        raise damaged(name, models_dir() / name / what, "a weight gives non-finite numbers")


# ------------------------------------------------------------------ the full check


def verify(name: str) -> dict:
    """The full check of installed model ``name``: every converted file's sha256 against installed.json,
    every weight finite, then the cheap checks (a fine-tuned derived model's too: its record names its
    parent). Returns what was checked; DataError on damage."""
    folder = models_dir() / name
    if not (folder / INSTALLED).is_file():
        if (folder / "derived.json").is_file():  # a frozen derived model: a head over its parent's weights
            parent = parse_json(name, folder / "derived.json", read_small(name, folder / "derived.json")).get("parent")
            raise UsageError(f"{name} holds no weights of its own (a head over {parent}'s): verify {parent}")
        package_of(name)  # a name that is no model: UsageError naming the ones there are
    record = read_record(name, folder)
    package_of(record.get("derived_from", name))
    for file in FILES:
        file_stat(name, folder / file)
    verify_files(name, folder, record, list(FILES))
    config, _, _ = load_bert(folder)
    open_store(name, folder / NEIGHBOURS, config)
    return {"model": name, "path": str(folder), "files": list(FILES), "verified": True}


def verify_files(name: str, folder: Path, record: dict, files: list[str]) -> None:
    """Hash ``files`` against installed.json (and read the weights for a non-finite one); remember each
    file's stat once it passes, so the next open checks cheaply."""
    from ctxembed.vectors.models import sha256_of  # models' own name: tests count its calls

    passed = {}
    for file in files:
        path = folder / file
        before = file_stat(name, path)
        if sha256_of(path) != record["sha256"][file]:
            raise damaged(name, path, "its sha256 is not the one recorded at install")
        if file == WEIGHTS:
            check_all_finite(name, path)
        if _stamp(file_stat(name, path)) == _stamp(before):  # not written while it was read
            passed[str(path.resolve())] = _stamp(before)
    _remember(passed)


def check_all_finite(name: str, path: Path) -> None:
    """Refuse a NaN or an infinity anywhere in the weights file (a full read: one sum per tensor)."""
    import numpy as np

    from ctxembed.vectors import safetensors

    try:
        tensors = safetensors.load(path)
    except (OSError, ValueError) as error:
        raise damaged(name, path, str(error).splitlines()[0] or type(error).__name__) from None
    for tensor, array in tensors.items():
        if array.dtype.kind == "f" and not np.isfinite(np.add.reduce(array, axis=None)):
            raise damaged(name, path, f"tensor {tensor} holds a non-finite number")


def _stamp(found: os.stat_result) -> list[int]:
    return [found.st_size, found.st_mtime_ns, found.st_ctime_ns, found.st_ino, found.st_dev]


def _stamps_path() -> Path:
    from ctxembed.vectors.cache import cache_dir

    return cache_dir() / STAMPS


def _stamps() -> dict:
    try:
        with open(_stamps_path(), "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return {}
            stamps = json.loads(f.read(SMALL))
    except (OSError, ValueError, RecursionError):
        return {}
    return stamps if isinstance(stamps, dict) else {}


def _remember(passed: dict) -> None:
    """Add the stats of files that passed their full check to the cache's stamps (best effort: a cache
    that cannot be written only means the next open checks them again)."""
    if not passed:
        return
    stamps = {**_stamps(), **passed}
    try:
        with atomic_file(_stamps_path()) as fh:
            fh.write(json.dumps(stamps, sort_keys=True).encode())
    except OSError:
        pass
