"""Layer-mix files: the ``ctxembed.mix-fit/1`` JSON document that ``eval fit-mix`` prints and writes.

``--mix FILE`` reads its ``weights`` and ``gamma``; ``--mix learned`` reads the one written last to
the cache folder (:func:`learned_path`); ``--mix 0.2,0.8`` gives the weights inline (:func:`resolve_mix`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ctxembed.core.mix import LEARNED, OFF, LayerMix, check_spec, is_weights, layer_weights, parse_weights
from ctxembed.errors import DataError, SettingError
from ctxembed.output import atomic_file, dumps
from ctxembed.vectors.cache import cache_dir

MIX_SCHEMA = "ctxembed.mix-fit/1"
MAX_MIX_FILE = 1 << 20  # bytes: a mix file is a few hundred
MAX_GAMMA = 1e6  # eval fit-mix finds a few units; far larger scales only overflow the mixed vectors


def learned_path() -> Path:
    """Where ``eval fit-mix`` writes by default and ``--mix learned`` reads: the cache folder."""
    return cache_dir() / "mix-learned.json"


def resolve_mix(spec: str | None, layers: int) -> LayerMix | None:
    """The mix a ``--mix`` value names, for a model of ``layers`` attention layers (None: no mix)."""
    if spec is None or spec.strip() == OFF:
        return None
    try:
        spec = check_spec(spec)
        if is_weights(spec):
            return LayerMix(layer_weights(parse_weights(spec), layers), 1.0, spec)
    except ValueError as exc:
        raise SettingError(f"{{mix}} {spec}: {exc}", "mix") from None
    path = learned_path() if spec == LEARNED else Path(spec).expanduser()
    if spec == LEARNED and not path.exists():
        raise DataError(f"{{mix}} learned: no learned mix yet ({path}); run `ctxembed eval fit-mix` first", "mix")
    weights, gamma = read_mix_file(path)
    try:
        return LayerMix(layer_weights(weights, layers), gamma, spec)
    except ValueError as exc:
        raise SettingError(f"{{mix}} {spec}: {exc} (it was fitted for another number of layers)", "mix") from None


def read_mix_file(path: Path) -> tuple[tuple[float, ...], float]:
    """The weights and γ of a ``ctxembed.mix-fit/1`` file; DataError naming the file otherwise."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_MIX_FILE + 1)
        if len(data) > MAX_MIX_FILE:
            raise DataError(f"{{mix}} {path}: not a mix file (longer than {MAX_MIX_FILE:,} bytes)", "mix")
        doc = json.loads(data.decode("utf-8"))
    except FileNotFoundError:
        raise DataError(
            f"{{mix}} {path}: no such file (give weights such as 0.2,0.8, off, learned or a file)", "mix"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{{mix}} {path}: not a mix file ({getattr(exc, 'strerror', None) or exc})", "mix") from None
    except RecursionError:
        raise DataError(f"{{mix}} {path}: not a mix file (JSON nested too deeply)", "mix") from None
    if not isinstance(doc, dict) or doc.get("schema") != MIX_SCHEMA:
        raise DataError(f"{{mix}} {path}: not a mix file (expected a JSON document with schema {MIX_SCHEMA})", "mix")
    weights, gamma = doc.get("weights"), doc.get("gamma")
    numbers = isinstance(weights, list) and len(weights) >= 2 and all(_finite(w) and w >= 0 for w in weights)
    if not numbers or not abs(sum(weights) - 1) < 1e-6:
        raise DataError(f"{{mix}} {path}: 'weights' must be 2 or more numbers >= 0 that sum to 1", "mix")
    if not (_finite(gamma) and 0 < gamma <= MAX_GAMMA):
        raise DataError(f"{{mix}} {path}: 'gamma' must be a number > 0 and at most {MAX_GAMMA:g}", "mix")
    return tuple(float(w) for w in weights), float(gamma)


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def write_mix_file(doc: dict, path: Path) -> None:
    try:
        with atomic_file(path) as fh:
            fh.write((dumps(doc, indent=2) + "\n").encode())  # the numbers exactly as --json prints them
    except OSError as exc:
        raise DataError(f"{path}: cannot write the mix ({exc.strerror})") from None
