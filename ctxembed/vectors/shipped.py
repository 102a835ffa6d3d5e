"""Data files shipped with ctxembed: inside the installed package (ctxembed/data/, see pyproject.toml's
force-include), or data/ at the top of a source checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent  # ctxembed/


def shipped_path(file_name: str) -> Path:
    """A shipped data file's path (it may not exist when the checkout or wheel lacks it)."""
    packaged = _PACKAGE / "data" / file_name
    if packaged.exists():
        return packaged
    return _PACKAGE.parent / "data" / file_name
