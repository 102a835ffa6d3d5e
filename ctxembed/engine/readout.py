"""``NAME@N``: a configuration read out at hidden state N alone (0 the input, L the last layer's output).

One spelling, parsed, checked and built here for every place that takes it: ``--model minilm@3`` (the
registry and the trained engine, so every command, the API and the page) and eval's ``-c learned@1`` or
``-c minilm@3`` (:func:`ctxembed.evaluation.evaluate.named_settings`). A mistake gets one message
whichever of them it was made in.

    >>> split_readout("minilm@3")
    ('minilm', 3)
    >>> split_readout("minilm")
    ('minilm', None)
"""

from __future__ import annotations

from dataclasses import replace

from ctxembed.errors import SettingError
from ctxembed.presets import Settings


def split_readout(name: str) -> tuple[str, int | None]:
    """``NAME@N`` -> (NAME, N); a name with no ``@`` -> (name, None). SettingError (exit 2) when what
    follows the first ``@`` is not a whole number."""
    base, at, layer = name.partition("@")
    if not at:
        return name, None
    if not (layer.isascii() and layer.isdigit()):
        raise SettingError(f"{name}: the hidden state after @ must be a whole number, as in {base}@1")
    return base, int(layer)


def read_out_at(settings: Settings, name: str, layer: int, layers: int) -> Settings:
    """``settings`` (of the configuration or model ``name``, whose L is ``layers``) read out at hidden state
    ``layer`` alone, as the mix 0,...,1,...,0 that weighs it alone, unnormalised, named ``NAME@N``.
    SettingError (exit 2) for a hidden state the model does not have."""
    if not 0 <= layer <= layers:
        raise SettingError(
            f"{name}@{layer}: {name} has no hidden state {layer}; its hidden states are 0 (the input) to {layers}"
        )
    weights = ",".join("1" if j == layer else "0" for j in range(layers + 1))  # (L + 1,) h_layer alone
    return replace(settings, mix=weights, mix_norm=False, preset=f"{name}@{layer}")
