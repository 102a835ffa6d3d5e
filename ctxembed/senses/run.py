"""``ctxembed senses`` as a library call: the senses of words across a corpus, as the ``ctxembed.senses/2``
document its ``--json`` prints (the Python API: ``Explorer.senses``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np

from ctxembed.engine import ContextEngine
from ctxembed.errors import UsageError
from ctxembed.output import check_projector_path, write_projector
from ctxembed.presets import SenseOptions
from ctxembed.progress import scanning
from ctxembed.report import settings_block
from ctxembed.senses.induce import find_senses, search_forms
from ctxembed.senses.occurrences import open_corpus, parse_forms
from ctxembed.vectors.shipped import shipped_path


def default_corpus() -> Path:
    """The shipped Brown example corpus (data/brown.txt.gz; packaged as ctxembed/data/brown.txt.gz)."""
    return shipped_path("brown.txt.gz")


def check_words(words: Iterable[str]) -> list[str]:
    """The words, stripped; a blank one or one holding a space is a UsageError."""
    words = list(words)
    if not words:
        raise UsageError("give at least one WORD")
    for word in words:
        if not word.strip() or any(c.isspace() for c in word.strip()):
            raise UsageError(f"{word!r} is not a single word")
    return [w.strip() for w in words]


def senses(
    engine: ContextEngine,
    vectors: dict,
    words: Sequence[str],
    corpus: str | PathLike | None = None,
    *,
    forms: Sequence[str] = (),
    exact: bool = False,
    projector: Sequence[str | PathLike] = (),
    **options: Any,
) -> tuple[dict, list[str]]:
    """Scan ``corpus`` (a text file, ``.gz``, ``"-"`` for stdin; default: the shipped Brown sample) once for
    every word's forms, then cluster each word's occurrences. ``forms``: ``"bank:bank,banks"`` strings;
    ``exact``: the word alone, no inflections; ``options``: :class:`ctxembed.presets.SenseOptions`.

    Returns the ``ctxembed.senses/2`` document and one message per word that could not be clustered
    (it does not occur, or has fewer usable occurrences than ``k``); such a word is still in the
    document, without senses. ``projector``: paths (``.tsv``, or a folder) where the TensorBoard
    Projector pair of the occurrences is written when some word has senses (:func:`found_senses`)."""
    chosen = SenseOptions(**{k: v for k, v in options.items() if v is not None})
    words = check_words(words)
    for path in projector or []:
        check_projector_path(path, "save")  # a directory named map.tsv: refused now, not after the scan
    given = parse_forms(forms, words)
    word_forms = search_forms(engine.store, words, given, exact=exact)
    corpus_name = str(corpus) if corpus is not None else str(default_corpus())
    stream, shown_name = open_corpus(corpus_name)
    if corpus_name == str(default_corpus()):
        shown_name = "brown.txt.gz (the shipped example corpus)"
    keep: dict | None = {} if projector else None  # the occurrences' vectors, for the Projector pair
    with stream, scanning(corpus_name) as progress:
        found, problems = find_senses(engine, word_forms, stream, shown_name, chosen, progress=progress, keep=keep)
    doc = {
        "schema": found.pop("schema"),
        "vectors": vectors,
        **settings_block(engine, window=engine.window),
        **found,
    }
    if projector and found_senses(doc):
        points, rows = projector_points(doc, keep)
        for path in projector:
            write_projector(path, points, PROJECTOR_HEADER, rows)
    return doc, problems


def found_senses(doc: dict) -> bool:
    """Whether some word of a senses document was clustered: whether it has anything to show."""
    return any(entry["k"] for entry in doc["words"])


PROJECTOR_HEADER = ("word", "sense", "label", "line", "form", "sentence")


def projector_points(doc: dict, kept: dict) -> tuple[np.ndarray, list[tuple]]:
    """The points of a Projector map of ``doc``'s senses: every clustered occurrence's unit vector
    (n, d) and its metadata row (word, sense number, the sense's label words, line, form, sentence)."""
    vectors, rows = [], []
    for entry in doc["words"]:
        if entry["word"] not in kept:
            continue
        unit, texts = kept[entry["word"]]
        labels = {s["sense"]: ", ".join(w["word"] for w in s["label"]) for s in entry["senses"]}
        vectors.append(unit)
        for o, text in zip(entry["occurrences"], texts, strict=True):
            rows.append((entry["word"], o["sense"], labels[o["sense"]], o["line"], o["form"], text))
    return (np.concatenate(vectors) if vectors else np.zeros((0, 0), np.float32)), rows
