"""One sentence through a trained model before training (its initial weights, rebuilt from the seed the
weights file records) and after."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from os import PathLike
from pathlib import Path

from ctxembed.declarations import check_view
from ctxembed.engine import Engine
from ctxembed.engine.projections import resolve_settings
from ctxembed.engine.registry import check_trainable
from ctxembed.errors import DataError
from ctxembed.options import OPTIONS, default
from ctxembed.output import as_json, say
from ctxembed.presets import SETTINGS, build_settings
from ctxembed.report import attend_document
from ctxembed.train.trainer import initial_params
from ctxembed.vectors.sources import open_vectors
from ctxembed.vectors.weights import read_metadata

BEFORE_AFTER_SCHEMA = "ctxembed.before-after/1"


def before_and_after(
    store,
    text: str,
    weights_file: str | Path | None,
    *,
    source: str = "default",
    top: int = default("top", "before_after"),
    layer: int | None = default("layer"),
    head: int | None = default("head"),
) -> dict:
    """One sentence through a trained model at its initial weights (rebuilt from the seed the file
    records) and at its trained weights: a ``ctxembed.before-after/1`` document holding two
    ``ctxembed.attend/5`` documents. ``weights_file`` None is the shipped ``--preset learned``.
    ``layer`` and ``head``: the view the caller will show, refused before any attention is run when
    the trained model has no such layer or head."""
    given = {} if weights_file is None else {"weights_file": str(weights_file)}
    after_settings = resolve_settings("default" if given else "learned", **given)
    path = after_settings.weights_file
    meta = read_metadata(path) if Path(path).is_file() else None
    if meta is None:
        raise DataError(f"{path}: not written by `ctxembed train`, so it records no initial weights to compare with")
    check_view(after_settings.attention.layers, after_settings.attention.heads, layer, head)
    after = Engine(store, after_settings)
    trained = meta["settings"]
    flat = dict(trained["attention"]) | {k: v for k, v in trained.items() if k in SETTINGS}
    initial = build_settings("textbook", **{k: v for k, v in flat.items() if k in SETTINGS})  # the untrained model
    before = Engine(store, replace(after_settings, preset="before training"))
    before.params = initial_params(initial, store.dim, meta["init"]["fix_values"])
    vectors = {"source": source, "name": store.meta.get("name", "vectors"), "words": len(store), "dim": store.dim}
    documents = {}
    for name, engine in (("before", before), ("after", after)):
        result = engine.run([engine.prepare(text)])[0]
        documents[name] = attend_document(result, engine, vectors, top=top)
    return {
        "schema": BEFORE_AFTER_SCHEMA,
        "weights_file": str(path),
        "init": meta["init"],
        "steps": meta["steps"],
        "learned": meta["learned"],
        "losses": meta["losses"],
        "corpus": meta["corpus"],
        **documents,
    }


def before_after(
    sentence: str,
    weights_file: str | PathLike | None = None,
    *,
    vectors: str | PathLike | None = None,
    limit: int | None = default("limit"),
    trust: bool = default("trust"),
    top: int = default("top", "before_after"),
    layer: int | None = default("layer"),
    head: int | None = default("head"),
    on_note: Callable[[str], None] | None = say,
    model: str = default("model"),
) -> dict:
    """``ctxembed before-after --json``: ``sentence``'s attention with a trained weights file (default:
    the shipped ``--preset learned`` one) at its initial and at its trained weights, as the
    ``ctxembed.before-after/1`` document; ``vectors``, ``limit``, ``trust`` as for an Explorer.
    ``model``: the model whose attention was trained, the default (glove); a pretrained model is refused.
    ``layer``, ``head``: the view to be shown, checked against the trained model before any work."""
    check_trainable(model, "before-after")
    OPTIONS["top"].check(top)
    store = open_vectors(vectors, limit=limit, trust=trust, on_convert=on_note or (lambda text: None))
    source = "default" if vectors is None else str(vectors)
    return as_json(before_and_after(store, sentence, weights_file, source=source, top=top, layer=layer, head=head))
