"""Word-sense induction scored against sense labels: the clusters `ctxembed senses` would find,
compared with human senses, word by word. No printing.

File format (UTF-8, tab-separated, one occurrence per line; blank lines, lines starting with ``#``
and a header, a first line whose first field is ``word``, are skipped: :func:`data_lines`, the rule
of `eval senses` too)::

    word <TAB> sense label <TAB> token index (from 0) <TAB> space-tokenised sentence

The index is the user's: the token there is scored, whatever it is. Real sense-annotated corpora
are lemmatised (``become`` for "became", ``foot`` for "ft"), so a token that is neither the word nor
one of its known forms is counted (:attr:`LabelledOccurrence.differs`), never refused.

Per word, the occurrences' vectors are clustered exactly as `senses` clusters them (same k
choice), then scored with the adjusted Rand index, V-measure and pair accuracy (the share of
occurrence pairs on which "same cluster" agrees with "same sense"); each metric is averaged over
words. Two baselines run beside the configurations: ``one-cluster`` (every occurrence in one
sense) and ``bag-of-words`` (the mean of the other words' static vectors, clustered the same way).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ctxembed.core.similarity import unit_rows
from ctxembed.engine.registry import engine_for
from ctxembed.engine.sentence import window_span
from ctxembed.errors import DataError
from ctxembed.presets import Settings, build_settings
from ctxembed.senses.induce import cluster, targets, trained_features
from ctxembed.senses.occurrences import inflections
from ctxembed.vectors.corpus import open_file
from ctxembed.vectors.store import VectorStore


@dataclass
class LabelledOccurrence:
    word: str
    sense: str
    index: int
    words: list[str]
    line: int = 0  # its line in the file
    differs: bool = False  # the token at index is neither the word nor one of its known forms


def data_lines(lines: Iterable[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """The (number, line) pairs that hold data: without blank lines, ``#`` comments, and a header
    (the first other line, when its first field is ``word``). The rule of every sense-labelled file."""
    first = True
    for number, line in lines:
        if not line.strip() or line.startswith("#"):
            continue
        if first and line.split("\t")[0].strip() == "word":
            first = False
            continue
        first = False
        yield number, line


MAX_WSI_LINE_BYTES = 1 << 16  # a labelled sentence, not a document: a longer line is refused unread


def read_wsi(path: str | Path, *, strict: bool = False) -> list[LabelledOccurrence]:
    """The labelled occurrences of a TSV file (format in the module doc). Read line by line, each line
    bounded, so a 10 MB line costs nothing. A token at ``index`` that is not a known form of ``word``
    is marked ``differs`` (see :func:`differing`), or refused with its line when ``strict``."""
    path = Path(path)
    items = []
    try:
        with open_file(path, "a sense-labelled TSV file") as fh:
            for number, line in data_lines(_bounded_lines(path, fh)):
                items.append(_parse_line(path, number, line, strict=strict))
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror})") from None
    if not items:
        raise DataError(f"{path}: no labelled occurrences")
    return items


def differing(items: list[LabelledOccurrence]) -> str | None:
    """One line on the targets that differ from their word (lemmatised files), or None when none do:
    "7 targets differ from their word, e.g. line 400 'became' for 'become'"."""
    odd = [item for item in items if item.differs]
    if not odd:
        return None
    first = odd[0]
    return (
        f"{len(odd):,} target{'s' if len(odd) > 1 else ''} differ{'' if len(odd) > 1 else 's'} from their word, "
        f"e.g. line {first.line} {first.words[first.index]!r} for {first.word!r} (scored as the token at the "
        "index given)"
    )


def _bounded_lines(path: Path, fh) -> Iterator[tuple[int, str]]:
    """(number, text) of every line, each refused past MAX_WSI_LINE_BYTES without being read whole."""
    for number, raw in enumerate(iter(lambda: fh.readline(MAX_WSI_LINE_BYTES + 1), b""), start=1):
        if len(raw) > MAX_WSI_LINE_BYTES:
            raise DataError(
                f"{path}: line {number}: longer than {MAX_WSI_LINE_BYTES:,} bytes; a line holds one labelled sentence"
            )
        try:
            yield number, raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as exc:
            raise DataError(f"{path}: line {number}: not valid UTF-8 (byte {exc.start})") from None


def _parse_line(path: Path, number: int, line: str, *, strict: bool) -> LabelledOccurrence:
    fields = line.split("\t")
    if len(fields) != 4:
        raise DataError(
            f"{path}: line {number}: expected word<TAB>sense<TAB>index<TAB>sentence, got {len(fields)} fields"
        )
    word, sense, index, sentence = (f.strip() for f in fields)
    words = sentence.split(" ")
    try:
        position = int(index)
    except ValueError:
        raise DataError(f"{path}: line {number}: token index {index!r} is not a number") from None
    if not 0 <= position < len(words):
        raise DataError(f"{path}: line {number}: token index {position} outside the {len(words)} tokens")
    if not word or not sense:
        raise DataError(f"{path}: line {number}: empty word or sense")
    token = words[position]
    differs = token.lower() != word.lower() and token.lower() not in inflections(word)
    if differs and strict:
        raise DataError(
            f"{path}: line {number}: the token at index {position} is {token!r}, not a known form of {word!r} "
            "(indices count space-separated tokens from 0)"
        )
    return LabelledOccurrence(word, sense, position, words, number, differs)


def _by_word(items: list[LabelledOccurrence]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for n, item in enumerate(items):
        groups.setdefault(item.word, []).append(n)
    return groups


def contextual_vectors(
    store: VectorStore, settings: Settings | None, items, *, drop_own: bool = True, max_tokens=4096, window=None
):
    """(n, d) vectors of every target: contextual (own term dropped; a trained model's as `senses` clusters
    them, :func:`ctxembed.senses.induce.trained_features`), or static when ``settings`` is None;
    and a (n,) mask of the targets that got one. The engine is the registry's for ``settings``
    (:func:`ctxembed.engine.registry.engine_for`): ``-c minilm`` runs the trained model. ``window``: the
    words either side of each target read (None: the model's own; :func:`ctxembed.engine.window_span`)."""
    engine = engine_for(settings or build_settings("textbook"), store, max_tokens=max_tokens, window=window)
    crop = engine.window if settings is not None else 0
    # a model with batch's column kernel reads words through its lexicon; one without (a subword
    # model) has none: every word gets pieces
    lexicon = None if engine.columns is None else engine.columns.lexicon
    prepared, rows, kept = [], [], []
    for n, item in enumerate(items):
        start, stop = window_span(len(item.words), item.index, crop)
        words, index = list(item.words[start:stop]), item.index - start
        if lexicon is not None and lexicon.row(words[index]) is None:
            words[index] = item.word  # an unknown form falls back to the word (its lemma)
        try:
            sentence = engine.prepare(" ".join(words), words=words)
        except DataError:
            continue
        if index not in sentence.used:
            continue
        prepared.append(sentence)
        rows.append(sentence.used.index(index))
        kept.append(n)
    found = np.zeros(len(items), dtype=bool)
    found[kept] = True
    if settings is None:
        vectors = np.zeros((len(items), store.dim), dtype=np.float32)  # (n, d)
        for n, sentence, row in zip(kept, prepared, rows, strict=True):
            vectors[n] = sentence.static[row]
        return vectors, found
    vectors = np.zeros((len(items), engine.out_dim), dtype=np.float32)  # (n, d_out)
    around = vectors.copy()  # (n, d_out)
    vectors[kept], _, around[kept] = targets(engine, prepared, rows, drop_own=drop_own)
    for members in _by_word(items).values():  # a trained model's words clustered on what `senses` clusters
        have = [m for m in members if found[m]]
        clustered = trained_features(engine, vectors[have], around[have], drop_own=drop_own)
        if clustered is not None:
            vectors[have] = clustered
    return vectors, found


def bag_of_words_vectors(store: VectorStore, items) -> tuple[np.ndarray, np.ndarray]:
    """(n, d) mean static vector of the other in-vocabulary words of each sentence, and the found mask."""
    vectors = np.zeros((len(items), store.dim), dtype=np.float32)  # (n, d)
    found = np.zeros(len(items), dtype=bool)
    for n, item in enumerate(items):
        rows = [store.find(w.lower() if store.lowercase else w) for i, w in enumerate(item.words) if i != item.index]
        rows = [r for r in rows if r is not None]
        if rows:
            vectors[n], found[n] = store.rows(np.array(rows)).mean(axis=0), True  # (m, d) -> (d,)
    return vectors, found


def pair_accuracy(gold: list[str], predicted: np.ndarray) -> float:
    """Share of occurrence pairs where "same cluster" equals "same sense"."""
    gold_ids = np.unique(np.array(gold), return_inverse=True)[1]  # (n,)
    same_gold = gold_ids[:, None] == gold_ids[None, :]  # (n, n)
    same_predicted = predicted[:, None] == predicted[None, :]  # (n, n)
    upper = np.triu_indices(len(gold), k=1)
    return float(np.mean(same_gold[upper] == same_predicted[upper])) if len(gold) > 1 else 1.0


def score_clusters(items, vectors: np.ndarray | None, found: np.ndarray, *, k=None, **cluster_options) -> dict:
    """Cluster each word's vectors (``None``: one cluster for all) and score them against the senses.
    An occurrence without a vector joins the word's largest cluster."""
    from sklearn.metrics import adjusted_rand_score, v_measure_score  # over a second: only when scoring

    per_word = []
    for word, members in _by_word(items).items():
        gold = [items[m].sense for m in members]
        predicted = np.zeros(len(members), dtype=np.int64)  # (m,)
        found_k = 1
        have = [i for i, m in enumerate(members) if found[m]]
        if vectors is not None and len(have) >= 2:
            unit = unit_rows(vectors[[members[i] for i in have]].astype(np.float64))  # (h, d)
            if np.ptp(unit, axis=0).max() > 1e-9:  # identical vectors (one form, static) cannot be split
                result = cluster(unit, min(k, len(have)) if k else None, **cluster_options)
                predicted[have] = result.labels
                found_k = result.k
        per_word.append(
            {
                "word": word,
                "n": len(members),
                "senses": len(set(gold)),
                "k": found_k,
                "ari": float(adjusted_rand_score(gold, predicted)),
                "v_measure": float(v_measure_score(gold, predicted)),
                "pair_accuracy": pair_accuracy(gold, predicted),
            }
        )
    return {
        "ari": float(np.mean([w["ari"] for w in per_word])),
        "v_measure": float(np.mean([w["v_measure"] for w in per_word])),
        "pair_accuracy": float(np.mean([w["pair_accuracy"] for w in per_word])),
        "mean_k": float(np.mean([w["k"] for w in per_word])),
        "covered": int(found.sum()) if vectors is not None else len(items),
        "words": per_word,
    }


def evaluate_baselines(store: VectorStore, items, **cluster_options) -> list[dict]:
    bag, found = bag_of_words_vectors(store, items)
    return [
        {"name": "one-cluster", "settings": None, **score_clusters(items, None, np.ones(len(items), bool))},
        {"name": "bag-of-words", "settings": None, **score_clusters(items, bag, found, **cluster_options)},
    ]
