"""Where output goes: JSON documents to stdout, tables to stdout, messages for people to stderr.

Rich already honours NO_COLOR and writes no ANSI codes when the stream is not a terminal;
``FORCE_COLOR`` forces colour on. JSON never contains NaN or Infinity: such numbers become
null (they should not occur, and a test checks that they do not).
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import numpy as np
from rich.console import Console


def stdout_console() -> Console:
    # A pipe gets a fixed generous width, so tables are not squeezed to 80 columns.
    return Console(file=sys.stdout, highlight=False, width=None if sys.stdout.isatty() else 160)


def stderr_console() -> Console:
    return Console(file=sys.stderr, highlight=False, stderr=True)


def say(message: str) -> None:
    """A note for people (progress, warnings): stderr, plain text."""
    print(message, file=sys.stderr, flush=True)


def jsonable(value: Any) -> Any:
    """Convert numpy values and nested containers to JSON types; NaN and inf become None."""
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def dumps(document: dict, *, indent: int | None = None) -> str:
    return json.dumps(jsonable(document), ensure_ascii=False, allow_nan=False, indent=indent)


def emit_json(document: dict) -> None:
    sys.stdout.write(dumps(document, indent=2 if sys.stdout.isatty() else None) + "\n")
    sys.stdout.flush()
