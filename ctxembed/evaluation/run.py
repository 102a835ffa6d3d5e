"""The ``eval`` commands as library calls: each returns the document ``ctxembed eval ... --json`` prints.

Each evaluates a list of configurations (:func:`sweep`): names of the ingredient ladder
(:func:`ctxembed.evaluation.ladder.ladder`), or ``custom`` for the settings the caller gives. The Python
API reaches them through :class:`ctxembed.Explorer` (``ex.evaluate_wic(folder)``, ...).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from os import PathLike
from pathlib import Path
from typing import Any

from ctxembed.engine.registry import DEFAULT_MODEL, model_of
from ctxembed.errors import SettingError, UsageError, counted
from ctxembed.evaluation.evaluate import (
    LADDER,
    default_senses_path,
    described,
    evaluate_scws,
    evaluate_senses,
    evaluate_wic,
    evaluate_word_pairs,
    is_scws,
    named_settings,
    read_scws,
    read_senses,
    read_wic,
    resolve_pairs_file,
)
from ctxembed.evaluation.mixfit import fit_document, read_labelled
from ctxembed.output import check_output_path
from ctxembed.presets import SenseOptions, Settings
from ctxembed.progress import enabled, steps
from ctxembed.senses.wsi import contextual_vectors, differing, evaluate_baselines, read_wsi, score_clusters
from ctxembed.vectors.mixfiles import learned_path, write_mix_file
from ctxembed.vectors.store import VectorStore
from ctxembed.vectors.weights import fits_learned_weights

Note = Callable[[str], None]
# eval pairs on SCWS: the default with and without the layer mix, and the projections `ctxembed train` learned
PAIRS_LADDER = ("static", "textbook", "previous-default", "default", "learned")
WSI_LADDER = ("static", "textbook", "default")


def _quiet(text: str) -> None:
    pass


def sweep(
    names: Sequence[str] | None,
    store: VectorStore,
    custom: Settings,
    default: Sequence[str],
    evaluate: Callable[[str, Settings | None], dict],
    window: int | None = None,
) -> list[dict]:
    """Evaluate each chosen configuration (default: ``default``, without ``learned`` when the vectors
    are not the ones it was trained on); ``custom`` is the caller's own settings. One row each.
    Under a trained model (``custom`` is its settings: ``--model minilm``) the default is ``static`` and
    the model as the command line reads it out (``--model minilm@3``: ``minilm@3``; ``--mix FILE``:
    ``custom``), and a configuration of another model is refused: it would not compute the model asked for."""
    model = model_of(custom)  # --model: a trained model's ladder is its own (static: its input embeddings)
    chosen = list(names or (default if model == DEFAULT_MODEL else ("static", read_out_as(custom, model))))
    if not names and "learned" in chosen and not fits_learned_weights(store):  # trained on the shipped vectors
        chosen.remove("learned")
    configured = {name: named_settings(name, custom, store) for name in chosen}
    for name, settings in configured.items():  # refused before any is computed
        if settings is not None and model != DEFAULT_MODEL and model_of(settings) != model:
            raise UsageError(
                f"{{config}} {name} is a configuration of the {model_of(settings)} model, not of {{model}} {model}: "
                f"choose static, custom, {model} or {model}@N",
                "config",
                "model",
            )
    rows = []
    with steps(f"evaluating {counted(len(chosen), 'configuration')}", total=len(chosen)) as progress:
        for name in chosen:
            progress.describe(f"evaluating {name}")
            settings = configured[name]
            rows.append({"name": name, "settings": described(store, settings, window), **evaluate(name, settings)})
            progress.done()
    return rows


def read_out_as(custom: Settings, model: str) -> str:
    """The configuration a trained model's command line names: ``NAME@N`` for ``--model NAME@N``,
    ``custom`` for a ``--mix`` of its own, else the model's name (its own read-out)."""
    if custom.preset != model:  # --model minilm@3: its preset is minilm@3
        return custom.preset
    return "custom" if custom.mix else model


def wic(
    store: VectorStore,
    settings: Settings,
    vectors: dict,
    directory: str | PathLike,
    *,
    tune_on: str = "train",
    configs: Sequence[str] | None = None,
    on_note: Note | None = None,
    window: int | None = None,
) -> dict:
    """Word-in-Context accuracy (``ctxembed.eval-wic/1``): same sense or not, by thresholding the cosine
    of the target's vectors; the threshold is tuned on the split ``tune_on``."""
    note = on_note or _quiet
    splits = read_wic(directory)

    def evaluate(name: str, chosen: Settings | None) -> dict:
        if not enabled():  # a log rather than a terminal (where a bar shows it): one line per configuration
            note(f"evaluating {name} on {', '.join(s.name for s in splits)} ...")
        return evaluate_wic(store, splits, chosen, tune_on, window=window)

    rows = sweep(configs, store, settings, tuple(LADDER), evaluate, window)
    primary = next((r for r in rows if r["name"] == "default"), rows[0])
    return {
        "schema": "ctxembed.eval-wic/1",
        "vectors": vectors,
        "directory": str(directory),
        "tuned_on": tune_on,
        "config": primary["name"],
        "threshold": primary["threshold"],
        "splits": primary["splits"],
        "configs": rows,
    }


def senses(
    store: VectorStore,
    settings: Settings,
    vectors: dict,
    path: str | PathLike | None = None,
    *,
    configs: Sequence[str] | None = None,
    window: int | None = None,
) -> dict:
    """The polysemy suite (``ctxembed.eval-senses/1``; default: the shipped one): the share of ambiguous
    words whose same-sense pairs all beat their cross-sense pairs."""
    file = Path(path) if path is not None else default_senses_path()
    sentences = read_senses(file)

    def evaluate(name: str, chosen: Settings | None) -> dict:
        return evaluate_senses(store, sentences, chosen, window=window)

    rows = sweep(configs, store, settings, tuple(LADDER), evaluate, window)
    return {"schema": "ctxembed.eval-senses/1", "vectors": vectors, "file": str(file), "configs": rows}


def pairs(
    store: VectorStore,
    settings: Settings,
    vectors: dict,
    path: str | PathLike,
    *,
    configs: Sequence[str] | None = None,
    on_note: Note | None = None,
    window: int | None = None,
) -> dict:
    """Graded similarity (``ctxembed.eval-pairs/2``): Spearman ρ in context for an SCWS-layout file, or
    gensim's Pearson and Spearman of the static vectors for a word-pair file (or wordsim353/simlex999).
    A word-pair file has no sentences, so only ``static`` applies: any other configuration asked for is
    checked as for an SCWS file (an unknown name is a UsageError), then listed in ``skipped`` with the
    reason, and said to ``on_note``."""
    file = resolve_pairs_file(str(path))
    skipped: list[dict] = []
    if is_scws(file):
        items = read_scws(file)

        def evaluate(name: str, chosen: Settings | None) -> dict:
            return evaluate_scws(store, items, chosen, window=window)

        rows = sweep(configs, store, settings, PAIRS_LADDER, evaluate, window)
        doc = {"schema": "ctxembed.eval-pairs/2", "layout": "scws", "file": str(file), "configs": rows}
    else:
        why = "a word-pair file has no sentences: only the static vectors can be scored"
        for name in dict.fromkeys(configs or ()):  # a name that is no configuration is refused, not skipped
            named_settings(name, settings, store)
        skipped = [{"name": name, "reason": why} for name in dict.fromkeys(configs or ()) if name != "static"]
        if skipped:
            (on_note or _quiet)(f"note: skipped {', '.join(s['name'] for s in skipped)}: {why}")
        doc = {
            "schema": "ctxembed.eval-pairs/2",
            "layout": "word-pairs",
            "file": str(file),
            "configs": [{"name": "static", **evaluate_word_pairs(store, file)}],
        }
    doc["skipped"] = skipped
    doc["vectors"] = vectors
    return doc


def wsi(
    store: VectorStore,
    settings: Settings,
    vectors: dict,
    path: str | PathLike,
    *,
    configs: Sequence[str] | None = None,
    max_tokens: int = 4096,
    on_note: Note | None = None,
    window: int | None = None,
    **clustering: Any,
) -> dict:
    """Word-sense induction (``ctxembed.eval-wsi/1``): clusters of each word's occurrences against sense
    labels (ARI, V-measure, pair accuracy), beside the one-cluster and bag-of-words baselines.
    ``clustering``: ``k``, ``k_max``, ``min_share``, ``sample_seed``, ``drop_own`` of :class:`SenseOptions`."""
    note = on_note or _quiet
    unknown = set(clustering) - {"k", "k_max", "min_share", "sample_seed", "drop_own"}
    if unknown:
        raise TypeError(f"unknown clustering option(s): {', '.join(sorted(unknown))}")
    chosen = SenseOptions(**{k: v for k, v in clustering.items() if v is not None})
    items = read_wsi(path)
    if (message := differing(items)) is not None:
        note(f"{path}: {message}")
    options = {"k": chosen.k, "k_max": chosen.k_max, "min_share": chosen.min_share, "seed": chosen.sample_seed}

    def evaluate(name: str, settings_: Settings | None) -> dict:
        if sys.stderr.isatty():
            note(f"evaluating {name} ...")
        found_vectors, found = contextual_vectors(
            store, settings_, items, drop_own=chosen.drop_own, max_tokens=max_tokens, window=window
        )
        return score_clusters(items, found_vectors, found, **options)

    rows = evaluate_baselines(store, items, **options)
    rows += sweep(configs, store, settings, WSI_LADDER, evaluate, window)
    return {
        "schema": "ctxembed.eval-wsi/1",
        "vectors": vectors,
        "file": str(path),
        "words": len({item.word for item in items}),
        "occurrences": len(items),
        "clustering": {
            **options,
            "k": options["k"] or "auto",
            "own_term": "dropped" if chosen.drop_own else "kept",
        },
        "configs": rows,
    }


def fit_mix(
    store: VectorStore,
    settings: Settings,
    vectors: dict,
    sources: Sequence[str | PathLike],
    *,
    split: str = "train",
    out: str | PathLike | None = None,
    on_note: Note | None = None,
    window: int | None = None,
) -> dict:
    """Learn ELMo's layer mix (weights s_j and scale γ) over the layers of ``settings`` on labelled pairs
    (WiC folders and/or SCWS-style files, each weighing the same) and write it to ``out`` (default: the
    cache folder, which ``mix="learned"`` reads). Returns the ``ctxembed.mix-fit/1`` document."""
    note = on_note or _quiet
    if settings.model is not None and settings.preset != settings.model:  # --model minilm@3: one hidden state
        raise SettingError(
            f"{{model}} {settings.preset} reads one hidden state: a layer mix is fitted over all of them "
            f"({{model}} {settings.model})",
            "model",
        )
    if out is not None:
        check_output_path(out, "out")  # before the fit, not after it
    labelled = [read_labelled(str(source), split) for source in sources]
    note(f"fitting the layer mix on {', '.join(s.path for s in labelled)} ...")
    doc = fit_document(store, settings, labelled, vectors, window=window)
    target = Path(out) if out is not None else learned_path()
    doc["written"] = str(target)
    write_mix_file(doc, target)
    return doc
