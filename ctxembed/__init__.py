"""ctxembed: see how self-attention turns static word vectors into contextual ones.

The package is layered so that data flows one way::

    text --vectors.tokenize--> tokens --vectors (store, lexicon)--> static vectors
         --core.attention (driven by engine)--> contextual --report / api--> documents
         --views (rich tables, figures) / output (JSON)--> terminal or pipe

``ctxembed.core`` is pure NumPy with no I/O; the jobs (``batch``, ``senses``, ``evaluation``,
``train``) sit above the engine; ``ctxembed.cli`` only parses, calls the library and shows
(docs/architecture.md draws the layers).
The Python API (:mod:`ctxembed.api`, see docs/api.md) loads on first use, so ``import ctxembed``
costs nothing::

    import ctxembed
    ex = ctxembed.Explorer()
    ex.attend("Apple makes phones").weights.shape   # (layers, heads, query, key)
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# name -> module that defines it; imported on first access (PEP 562)
_LAZY = {
    "Explorer": "ctxembed.api",
    "AttendResult": "ctxembed.api",
    "CompareResult": "ctxembed.api",
    "NeighborsResult": "ctxembed.api",
    "embed_lines": "ctxembed.batch.embed",
    "embed_chunks": "ctxembed.batch.embed",
    "train_weights": "ctxembed.train.run",
    "before_after": "ctxembed.train.before_after",
    "vectors_info": "ctxembed.vectors.sources",
    "convert_vectors": "ctxembed.vectors.sources",
    "AttentionConfig": "ctxembed.declarations",
    "Settings": "ctxembed.presets",
    "build_settings": "ctxembed.presets",
    "PRESETS": "ctxembed.presets",
    "CtxembedError": "ctxembed.errors",
    "DataError": "ctxembed.errors",
    "UsageError": "ctxembed.errors",
    "SettingError": "ctxembed.errors",
}
__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ctxembed' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
