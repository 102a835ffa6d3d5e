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
    against: list[str] | None = default("against"),
    word: str | None = default("word"),
) -> dict:
    """``ctxembed before-after --json``: ``sentence``'s attention with a trained weights file (default:
    the shipped ``--preset learned`` one) at its initial and at its trained weights, as the
    ``ctxembed.before-after/1`` document; ``vectors``, ``limit``, ``trust`` as for an Explorer.
    ``model``: the model whose attention was trained, the default (glove); a pretrained model is refused, and
    a derived model (``train --name``) is shown beside its parent (:func:`before_and_after_model`; ``against``
    and ``word``: the word's cosine across sentences under each).
    ``layer``, ``head``: the view to be shown, checked against the trained model before any work."""
    OPTIONS["top"].check(top)
    from ctxembed.engine.registry import entry_of

    if entry_of(model).parent is not None:  # a derived model: its parent before, itself after
        return as_json(
            before_and_after_model(sentence, model, against=against or (), word=word, top=top, layer=layer, head=head)
        )
    if against or word is not None:
        raise DataError(
            "{against} and {word} compare a derived model with its parent ({model} NAME)", "against", "word", "model"
        )
    check_trainable(model, "before-after")
    store = open_vectors(vectors, limit=limit, trust=trust, on_convert=on_note or (lambda text: None))
    source = "default" if vectors is None else str(vectors)
    return as_json(before_and_after(store, sentence, weights_file, source=source, top=top, layer=layer, head=head))


BEFORE_AFTER_MODEL_SCHEMA = "ctxembed.before-after-model/1"


def head_changes(before, after) -> list[dict]:
    """How far each head's attention moved: weights (L, h, T, T) before and after -> one entry per head,
    {"layer", "head", "change"}, the change the mean over query words of the total variation distance
    ½ Σ_k |a_after - a_before| (0: the same, 1: disjoint), the heads that moved most first."""
    import numpy as np

    moved = 0.5 * np.abs(np.asarray(after) - np.asarray(before)).sum(axis=-1).mean(axis=-1)  # (L, h)
    entries = [
        {"layer": int(layer), "head": int(head), "change": float(moved[layer, head])}
        for layer, head in np.ndindex(moved.shape)
    ]
    return sorted(entries, key=lambda e: (-e["change"], e["layer"], e["head"]))


def before_and_after_model(
    text: str, model: str, *, against=(), word: str | None = None, top: int, layer, head
) -> dict:
    """One sentence through a derived model's parent (before training) and the derived model (after):
    both ``ctxembed.attend/5`` documents, every head's change (:func:`head_changes`) and, with ``against``
    sentences and ``word``, the word's cosines across the sentences under each (the change too)."""
    import numpy as np

    from ctxembed.engine.registry import entry_of, open_engine
    from ctxembed.report import cosine_matrix, locate_word

    after_engine = open_engine(model=model)
    before_engine = open_engine(model=after_engine.card.parent)
    check_view(after_engine.layers, after_engine.heads, layer, head)
    if against and word is None:
        raise DataError("{against} compares a word across sentences: give the {word}", "against", "word")
    sentences = [text, *against]
    documents, results, cosines = {}, {}, {}
    for name, engine in (("before", before_engine), ("after", after_engine)):
        results[name] = engine.run([engine.prepare(s) for s in sentences])
        vectors = {"source": engine.model, "name": engine.model, "words": len(engine.store), "dim": engine.dim}
        documents[name] = attend_document(results[name][0], engine, vectors, top=top)
        if word is not None and against:
            rows = [
                locate_word(r, word, f"sentence {i + 1} ({s!r})")[0]
                for i, (r, s) in enumerate(zip(results[name], sentences, strict=True))
            ]
            contextual = np.stack([r.contextual[i] for r, i in zip(results[name], rows, strict=True)])  # (N, d)
            cosines[name] = cosine_matrix(contextual.astype(np.float64))  # (N, N)
    record = entry_of(model).derived
    return {
        "schema": BEFORE_AFTER_MODEL_SCHEMA,
        "model": model,
        "parent": before_engine.model,
        "way": record["way"],
        "data": record["data"],
        "figures": record["figures"],
        "heads": head_changes(results["before"][0].weights, results["after"][0].weights),
        "word": word if cosines else None,
        "sentences": sentences,
        "cosines": None
        if not cosines
        else {"before": cosines["before"], "after": cosines["after"], "change": cosines["after"] - cosines["before"]},
        **documents,
    }
