"""The ingredient ladder that ``ctxembed eval`` climbs: configurations built from the presets' declarations.

``static`` (no attention), ``textbook``, the textbook plus each ingredient of the default preset alone,
the default without each ingredient, ``default`` and ``learned``. A rung's value is the settings that
change the textbook (None for static).
"""

from __future__ import annotations

from typing import Any

from ctxembed.presets import PRESET_CHANGES, PRESETS, SETTINGS

# Rungs of the eval ladder besides the generated ones: the default before the layer mix.
EXTRA_RUNGS: dict[str, dict[str, Any]] = {
    "previous-default": {"exclude_self": True, "residual": True, "residual_scale": 1 / 9, "abtt": 3, "sif": 1e-4},
}


def ingredients() -> dict[str, dict[str, Any]]:
    """The default preset's ingredients, each as its differences from the textbook (its own settings)."""
    found: dict[str, dict[str, Any]] = {}
    default, textbook = PRESETS["default"].values(), PRESETS["textbook"].values()
    for name, spec in SETTINGS.items():
        if spec.ingredient and default[name] != textbook[name]:
            found.setdefault(spec.ingredient, {})[name] = default[name]
    return found


def ladder() -> dict[str, dict | None]:
    """The ingredient ladder, built from the default preset's ingredients: ``static`` (no attention),
    ``textbook``, the textbook plus each ingredient alone, the default without each ingredient (named
    by the ingredients it keeps), ``default``, and ``learned`` (the shipped trained projections).
    Values are settings overriding the textbook."""
    parts = ingredients()
    rungs: dict[str, dict | None] = {"static": None, "textbook": {}}
    for name, changes in parts.items():
        rungs[f"textbook+{name}"] = dict(changes)
    if len(parts) > 2:
        for left_out in parts:
            kept = [name for name in parts if name != left_out]
            rungs["+".join(kept)] = {k: v for name in kept for k, v in parts[name].items()}
    rungs.update(EXTRA_RUNGS)
    rungs["default"] = {k: v for changes in parts.values() for k, v in changes.items()}
    rungs["learned"] = dict(PRESET_CHANGES["learned"])  # projections trained by `ctxembed train`
    return rungs
