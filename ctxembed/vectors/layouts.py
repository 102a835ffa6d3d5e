"""What each trained family installs: its converter, the files it writes and pins, its checked loader.

    >>> layout_of("minilm").files                              # a BERT's, what installed.json pins
    ('encoder.safetensors', 'vocab.txt', 'config.json', 'words.ctxv')

A model's catalogue entry names its family; :data:`LAYOUTS` gives that family's :class:`Layout`, declared
once here (its parts live in the family's own module: :mod:`ctxembed.vectors.bert`). ``ctxembed models
install`` (:mod:`ctxembed.vectors.install`) converts the checked upstream files with the layout's
``convert``, reads each of its ``files`` once for its sha256 (the ``weights`` checked finite on the same
bytes) and records the sha256, size and mtime of each in installed.json. :func:`verify`
(``ctxembed models verify``, and install to see whether a model already there is intact) hashes them,
checks every number of its ``weights`` finite on the bytes it hashes (one read) and opens the folder
with its ``load``, the loader the engine opens it with (:mod:`ctxembed.engine.families` refers to the
same record). A second family is its own module and one entry here; install, verify and the engine name
no family.

Every layout writes the neighbour store (:data:`ctxembed.vectors.models.NEIGHBOURS`) among its files:
the trained engine opens it beside the weights, with the width of the config ``load`` gives
(``config.hidden``), and every loader begins with the checks of
:func:`ctxembed.vectors.integrity.open_checked`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxembed.errors import DataError, UsageError
from ctxembed.vectors import bert
from ctxembed.vectors.catalogue import find, packages
from ctxembed.vectors.models import (
    INSTALLED,
    NEIGHBOURS,
    damaged,
    models_dir,
    package_of,
    parse_json,
    read_record,
    read_small,
    unknown_model,
)

if TYPE_CHECKING:
    from ctxembed.vectors.catalogue import ModelPackage


@dataclass(frozen=True)
class Layout:
    """One trained family's installed folder: how it is written and what is checked of it."""

    family: str  # the family's name (ctxembed.engine.families.FAMILIES), the catalogue entries' ``family``
    # the converted files: each one's sha256, size and mtime are recorded at install and checked at each
    # open; the neighbour store is one of them
    files: tuple[str, ...]
    weights: str  # the safetensors file among them whose every number must be finite
    # (package, upstream folder, into) -> the files it wrote (install hashes them and checks ``weights`` finite)
    convert: Callable[[ModelPackage, Path, Path], Collection[str]]
    # folder -> (config with .hidden, weights, PieceTokenizer), after the checks (DataError: one line)
    load: Callable[[Path], tuple[Any, Any, Any]]


LAYOUTS: dict[str, Layout] = {
    "bert": Layout("bert", files=bert.FILES, weights=bert.WEIGHTS, convert=bert.convert_bert, load=bert.load_bert),
}


def layout_of(model: str) -> Layout:
    """The layout of catalogue model ``model``'s family; UsageError (exit 2) for a model none installs."""
    entry = find(model)
    layout = LAYOUTS.get(entry.family) if entry is not None and entry.package is not None else None
    if layout is None:
        raise unknown_model(model)
    return layout


def layout_in(name: str, folder: Path, record: dict) -> Layout:
    """The layout of the family whose files installed model ``name``'s record pins: its own family's, or
    (a fine-tuned derived model, ``derived_from`` its parent) its parent's."""
    parent = record.get("derived_from", name)
    try:
        return layout_of(parent if isinstance(parent, str) else name)
    except UsageError:
        raise damaged(name, folder / INSTALLED, f"no family installs {parent!r}") from None


def verify(name: str) -> dict:
    """The full check of installed model ``name``: every file its family's layout pins hashed against
    installed.json, every weight finite, then the cheap checks its loader makes (a fine-tuned derived
    model's too: its record names its parent). Returns what was checked; DataError on damage."""
    from ctxembed.vectors.integrity import file_stat, open_store, pinned, verify_files  # lazy: as bert.load_bert

    folder = models_dir() / name
    if not (folder / INSTALLED).is_file():
        if (folder / "derived.json").is_file():  # a frozen derived model: a head over its parent's weights
            record = parse_json(name, folder / "derived.json", read_small(name, folder / "derived.json"))
            parent = record.get("parent") if isinstance(record, dict) else None
            if not isinstance(parent, str):  # derived.read_derived's check, which this layer cannot import
                raise DataError(
                    f"{folder / 'derived.json'} is not a derived model's record (train it again with "
                    f"`ctxembed train {{name}} {name}`)",
                    "name",
                )
            raise UsageError(f"{name} holds no weights of its own (a head over {parent}'s): verify {parent}")
        if name not in packages():  # not installed, and no model of that name installs: UsageError naming them
            raise unknown_model(name, to="verify")
    record = read_record(name, folder)
    package_of(record.get("derived_from", name))
    layout = layout_in(name, folder, record)  # the files its family's converter wrote, and its loader
    pinned(name, folder, record, layout.files)
    for file in layout.files:
        file_stat(name, folder / file)
    verify_files(name, folder, record, list(layout.files), layout.weights)
    config, _, _ = layout.load(folder)
    open_store(name, folder / NEIGHBOURS, config)
    return {"model": name, "path": str(folder), "files": list(layout.files), "verified": True}
