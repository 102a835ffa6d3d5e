"""The engine layer: sentences -> words -> contextual vectors and attention weights, one contract.

- ``contract.py``  :class:`ContextEngine`, what every model gives: prepare -> Prepared, run -> Contextualized
- ``sentence.py``  :class:`Prepared`, :class:`Contextualized`, and how a command names a word (bank#2)
- ``registry.py``  :data:`MODELS` (the registry's entries, :mod:`ctxembed.vectors.catalogue`) and
  :func:`open_engine` (model="glove"): an entry opened through its family
- ``families.py``  :data:`FAMILIES`: how each family's models are loaded, tokenized, run and explained
- ``glove.py``     the "attention" family's engine: static word vectors -> attention layers (the model "glove")
- ``trained.py``   the one engine of every trained model (all-MiniLM-L6-v2 and any other BERT)
- ``readout.py``   ``NAME@N``, hidden state N alone: parsed, checked and built for ``--model`` and eval's ``-c``
- ``steps.py``     :func:`named_steps`: the steps of ``--explain``, named, for the view to draw
- ``projections.py`` what settings make of a store: a weights file's settings, the projections, all-but-the-top

``from ctxembed.engine import open_engine`` (or any name of ``_EXPORTS``) works: the module that
defines the name is imported when the name is first asked for, so importing one module of this
package (the contract, the registry) does not load the others.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "ContextEngine": "contract",
    "ModelCard": "contract",
    "Masks": "contract",
    "ColumnKernel": "contract",
    "Prepared": "sentence",
    "Contextualized": "sentence",
    "LayerTrace": "sentence",
    "TOKEN_SOURCES": "sentence",
    "token_sources": "sentence",
    "split_word": "sentence",
    "locate": "sentence",
    "first_match": "sentence",
    "crop": "sentence",
    "refuse_window": "sentence",
    "window_span": "sentence",
    "MODELS": "registry",
    "DEFAULT_MODEL": "registry",
    "Model": "registry",
    "FAMILIES": "families",
    "TrainedEngine": "trained",
    "open_engine": "registry",
    "Engine": "glove",
    "resolve_settings": "projections",
    "GroupArrays": "sentence",
    "DEFAULT_MAX_TOKENS": "glove",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module  # lazy: see the docstring

    return getattr(import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
