"""How well contextual vectors follow word senses, on human-labelled data. No printing.

- WiC (Pilehvar & Camacho-Collados 2019): same sense or not, for a target word in two
  sentences; predicted by thresholding the cosine of the two contextual target vectors.
  The threshold is tuned on one split (train) and applied to every split.
- SCWS-style graded pairs (Huang et al. 2012): Spearman rho between the cosine of two words
  in their contexts and the mean human rating.
- Plain word pairs (WordSim-353, SimLex-999 as shipped in gensim's test data): static
  similarity, Pearson and Spearman exactly as gensim's ``evaluate_word_pairs`` reports them.
- The polysemy suite (data/senses.tsv): the share of words whose same-sense pairs are all
  more similar than their cross-sense pairs.

Configurations: ``static`` (a word's own vector, no attention) and any :class:`Settings`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ctxembed.core.similarity import row_cosines
from ctxembed.engine import ContextEngine, resolve_settings, split_word, window_span
from ctxembed.engine.readout import read_out_at, split_readout
from ctxembed.errors import DataError, UsageError
from ctxembed.evaluation.ladder import ladder
from ctxembed.presets import PRESETS, Settings, build_settings
from ctxembed.senses.wsi import data_lines
from ctxembed.vectors.shipped import shipped_path
from ctxembed.vectors.store import VectorStore
from ctxembed.vectors.tokenize import tokenize

LADDER = ladder()
CONFIG_NAMES = (*LADDER, "custom")


def named_settings(name: str, custom: Settings | None = None, store: VectorStore | None = None) -> Settings | None:
    """Settings of a ladder configuration (None for static); "custom" is the command line's.
    ``NAME@N`` reads configuration NAME out at hidden state N alone
    (:func:`ctxembed.engine.readout.read_out_at`, as ``--model NAME@N``): a per-layer ladder, over the
    layers of the model that computes NAME on ``store`` (default: the shipped vectors)."""
    base, layer = split_readout(name)
    if layer is not None:
        settings = named_settings(base, custom, store)
        if settings is None:
            raise UsageError(f"{name}: {base} has no layers to read out")
        if store is None:
            from ctxembed.vectors.sources import open_vectors  # the shipped vectors: a caller that gave none

            store = open_vectors(None)
        layers = open_for(store, settings, 4096).card.layers
        return read_out_at(settings, base, layer, layers)
    if name == "custom":
        if custom is None:
            raise UsageError("the custom configuration needs attention options")
        return custom
    if name in trained_models():
        return model_settings(name)
    if name not in LADDER:
        names = ", ".join((*CONFIG_NAMES, *trained_models()))
        raise UsageError(f"unknown configuration {name!r}; choose from {names}")
    changes = LADDER[name]
    if changes is None:
        return None
    if name in PRESETS:
        return resolve_settings(name)  # the learned preset's file found, and its recorded settings read
    return replace(build_settings("textbook", **changes), preset=name)


def trained_models() -> tuple[str, ...]:
    """The registry's models other than the default one: each is a configuration of its own name."""
    from ctxembed.engine.registry import DEFAULT_MODEL
    from ctxembed.vectors.derived import names

    return tuple(name for name in names() if name != DEFAULT_MODEL)


def model_settings(name: str) -> Settings:
    """The configuration a trained model runs as: its name as preset, the model in ``model`` (what the
    registry reads: :func:`ctxembed.engine.registry.model_of`), its own read-out."""
    from ctxembed.engine.registry import open_engine

    return open_engine(model=name).settings


def open_for(store: VectorStore, settings: Settings, max_tokens: int, window: int | None = None):
    """The engine of a configuration, from the registry (:func:`ctxembed.engine.registry.engine_for`):
    the trained model its preset names (read out by the settings' mix), else static vectors + attention.
    ``window``: the tokens either side of a target it reads (None: its model's own default)."""
    from ctxembed.engine.registry import engine_for

    return engine_for(settings, store, max_tokens=max_tokens, window=window)


def described(store: VectorStore, settings: Settings | None, window: int | None = None) -> dict | None:
    """A configuration's ``settings`` in an eval document: the block its engine describes itself with,
    as every document of that model carries it (:func:`ctxembed.report.settings_block`), with the
    ``window`` its targets were read in when one cropped them; None for static vectors, which no engine
    computes."""
    if settings is None:
        return None
    from ctxembed.report import settings_block  # the one settings block

    engine = open_for(store, settings, max_tokens=4096, window=window)
    return settings_block(engine, window=engine.window)["settings"]


def windowed(occurrences: list[Occurrence], window: int) -> list[Occurrence]:
    """Each occurrence cropped to the words at most ``window`` from its target (0: as it is), by the
    one crop of every command (:func:`ctxembed.engine.sentence.window_span`)."""
    if not window:
        return occurrences
    cropped = []
    for occurrence in occurrences:
        start, stop = window_span(len(occurrence.words), occurrence.index, window)
        cropped.append(Occurrence(occurrence.words[start:stop], occurrence.index - start, occurrence.lemma))
    return cropped


@dataclass
class Occurrence:
    """A target word in a pre-tokenised sentence."""

    words: list[str]
    index: int
    lemma: str


def target_vectors(
    store: VectorStore,
    settings: Settings | None,
    occurrences: list[Occurrence],
    *,
    max_tokens: int = 4096,
    window: int | None = None,
) -> tuple[np.ndarray, np.ndarray, dict]:
    """Contextual (or static) vectors of each target: (n, d), a (n,) mask of those that have one,
    and coverage counts. An out-of-vocabulary target falls back to its lemma. ``window``: the words
    either side of each target read (0: the whole sentence; None: the configuration's model's own)."""
    engine = open_for(store, settings or build_settings("textbook"), max_tokens, window)
    occurrences = windowed(occurrences, engine.window if settings is not None else 0)
    dim = engine.out_dim if settings is not None else store.dim
    vectors = np.zeros((len(occurrences), dim), dtype=np.float32)
    found = np.zeros(len(occurrences), dtype=bool)
    prepared, rows, coverage = _prepare_targets(engine, store, occurrences)
    if settings is None:
        for (n, sentence), row in zip(prepared, rows, strict=True):
            vectors[n], found[n] = sentence.static[row], True
        return vectors, found, coverage
    for (n, _), row, result in zip(prepared, rows, _vectors_only(engine, prepared), strict=True):
        vectors[n], found[n] = result.contextual[row], True
    return vectors, found, coverage


def target_layers(
    store: VectorStore,
    settings: Settings,
    occurrences: list[Occurrence],
    *,
    max_tokens: int = 4096,
    window: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Every layer of each target's vector, h0 (attention input) to hL: (n, L + 1, d), and the (n,) found
    mask; ``window`` as in :func:`target_vectors`."""
    engine = open_for(store, settings, max_tokens, window)
    occurrences = windowed(occurrences, engine.window)
    layers = np.zeros((len(occurrences), engine.layers + 1, engine.out_dim), dtype=np.float32)
    found = np.zeros(len(occurrences), dtype=bool)
    prepared, rows, _ = _prepare_targets(engine, store, occurrences)
    for (n, _), row, result in zip(prepared, rows, _vectors_only(engine, prepared), strict=True):
        layers[n], found[n] = result.layers()[:, row], True  # (L + 1, T, d) -> (L + 1, d)
    return layers, found


RUN_SENTENCES = 256  # sentences whose results are alive at once: a target keeps one row of its result


def _vectors_only(engine: ContextEngine, prepared: list):
    """The results of the prepared sentences ([(n, Prepared)]), in order, run a slice at a time and
    without weights: eval reads one row of each, so a dev set's results are never all alive at once."""
    for start in range(0, len(prepared), RUN_SENTENCES):
        yield from engine.run([sentence for _, sentence in prepared[start : start + RUN_SENTENCES]], weights=False)


def _prepare_targets(engine: ContextEngine, store: VectorStore, occurrences: list[Occurrence]):
    """Prepared sentences of the targets that have a vector: [(n, Prepared)], their rows, coverage counts."""
    coverage = {"targets": len(occurrences), "target_oov": 0, "lemma_fallback": 0, "no_vector": 0}
    prepared, rows = [], []
    for n, occ in enumerate(occurrences):
        words = list(occ.words)
        # a model with batch's column kernel reads words through its lexicon; one without (a subword
        # model) has none: every word gets pieces
        lexicon = None if engine.columns is None else engine.columns.lexicon
        if lexicon is not None and lexicon.row(words[occ.index]) is None:
            coverage["target_oov"] += 1
            if occ.lemma in store:
                words[occ.index] = occ.lemma
                coverage["lemma_fallback"] += 1
            else:
                coverage["no_vector"] += 1
                continue
        try:
            sentence = engine.prepare(" ".join(words), words=words)
        except DataError:
            coverage["no_vector"] += 1
            continue
        prepared.append((n, sentence))
        rows.append(sentence.used.index(occ.index))
    return prepared, rows, coverage


def rounded_row_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine of each row pair (n, d), (n, d) -> (n,), in float64 and rounded to 1e-10, so identical
    vectors tie at exactly 1 instead of scattering around it by float32 rounding."""
    cosines = row_cosines(a.astype(np.float64), b.astype(np.float64))  # (n,)
    return np.round(np.clip(cosines, -1.0, 1.0), 10)


# ---------------------------------------------------------------------------------------------- WiC
@dataclass
class WicSplit:
    name: str
    pairs: list[tuple[Occurrence, Occurrence]]
    gold: np.ndarray | None  # (n,) bool, True = same sense; None when the split has no gold file


def read_wic(directory: str | Path) -> list[WicSplit]:
    """Every ``SPLIT.data.txt`` in the directory (with ``SPLIT.gold.txt`` when present), train first."""
    directory = Path(directory)
    if not directory.is_dir():
        raise DataError(f"{directory}: not a directory of WiC files (SPLIT.data.txt, SPLIT.gold.txt)")
    splits = []
    for data_path in sorted(directory.glob("*.data.txt")):
        name = data_path.name[: -len(".data.txt")]
        pairs = []
        for number, line in enumerate(_read_lines(data_path), start=1):
            fields = line.split("\t")
            if len(fields) != 5:
                raise DataError(f"{data_path}: line {number}: expected 5 tab-separated fields, got {len(fields)}")
            lemma, _pos, indices, first, second = fields
            try:
                i, j = (int(x) for x in indices.split("-"))
            except ValueError:
                raise DataError(f"{data_path}: line {number}: bad index pair {indices!r}") from None
            words1, words2 = first.split(" "), second.split(" ")
            if not (0 <= i < len(words1) and 0 <= j < len(words2)):
                raise DataError(f"{data_path}: line {number}: index {indices} outside the sentences")
            pairs.append((Occurrence(words1, i, lemma), Occurrence(words2, j, lemma)))
        gold_path = directory / f"{name}.gold.txt"
        gold = None
        if gold_path.exists():
            labels = [x.strip() for x in _read_lines(gold_path)]
            bad = [n for n, x in enumerate(labels, start=1) if x not in ("T", "F")]
            if bad:
                raise DataError(f"{gold_path}: line {bad[0]}: expected T or F")
            if len(labels) != len(pairs):
                raise DataError(f"{gold_path}: {len(labels)} labels for {len(pairs)} pairs in {data_path.name}")
            gold = np.array([x == "T" for x in labels])
        splits.append(WicSplit(name, pairs, gold))
    if not splits:
        raise DataError(f"{directory}: no SPLIT.data.txt files")
    return sorted(splits, key=lambda s: (s.name != "train", s.name))


def _read_lines(path: Path) -> list[str]:
    return [line for line in _read_text(path).splitlines() if line.strip()]


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not valid UTF-8 (byte {exc.start})") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror})") from None


def best_threshold(scores: np.ndarray, gold: np.ndarray) -> float:
    """The cosine threshold (predict same sense when score >= t) with the highest accuracy;
    ties go to the middle of the best run, between neighbouring scores."""
    order = np.sort(np.unique(scores))
    candidates = np.concatenate([[order[0] - 1e-6], (order[:-1] + order[1:]) / 2, [order[-1] + 1e-6]])
    accuracy = (
        np.array([np.mean((scores >= t) == gold) for t in candidates])
        if len(scores) < 2000
        else _fast_accuracies(scores, gold, candidates)
    )
    best = np.flatnonzero(accuracy == accuracy.max())
    return float(candidates[best[len(best) // 2]])


def _fast_accuracies(scores: np.ndarray, gold: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    order = np.argsort(scores)
    sorted_scores, sorted_gold = scores[order], gold[order]
    below = np.searchsorted(sorted_scores, candidates, side="left")  # predicted F: the first `below`
    false_below = np.concatenate([[0], np.cumsum(~sorted_gold)])[below]
    true_above = sorted_gold.sum() - np.concatenate([[0], np.cumsum(sorted_gold)])[below]
    return (false_below + true_above) / len(scores)


def evaluate_wic(
    store: VectorStore, splits: list[WicSplit], settings: Settings | None, tune_on: str, *, window: int | None = None
) -> dict:
    by_name = {s.name: s for s in splits}
    if tune_on not in by_name or by_name[tune_on].gold is None:
        labelled = [s.name for s in splits if s.gold is not None]
        raise UsageError(f"cannot tune on {tune_on!r}: splits with gold labels are {', '.join(labelled) or 'none'}")
    scores, coverage = {}, {}
    for split in splits:
        firsts, seconds = zip(*split.pairs, strict=True)
        v1, ok1, cov1 = target_vectors(store, settings, list(firsts), window=window)
        v2, ok2, cov2 = target_vectors(store, settings, list(seconds), window=window)
        cos = rounded_row_cosines(v1, v2)
        covered = ok1 & ok2
        scores[split.name] = (cos, covered)
        coverage[split.name] = {k: cov1[k] + cov2[k] for k in cov1} | {"pairs_without_vector": int((~covered).sum())}
    tune_cos, tune_covered = scores[tune_on]
    threshold = best_threshold(tune_cos[tune_covered], by_name[tune_on].gold[tune_covered])
    results = {}
    for split in splits:
        cos, covered = scores[split.name]
        predicted = (cos >= threshold) & covered  # a pair without vectors is predicted "different"
        entry = {"n": len(split.pairs), "coverage": coverage[split.name]}
        if split.gold is not None:
            entry["accuracy"] = float(np.mean(predicted == split.gold))
            entry["accuracy_covered"] = (
                float(np.mean(predicted[covered] == split.gold[covered])) if covered.any() else None
            )
        else:
            entry["accuracy"] = None
        results[split.name] = entry
    return {"threshold": threshold, "splits": results}


# ---------------------------------------------------------------------------------------------- pairs
def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rho: Pearson correlation of the ranks, ties given their average rank."""
    return pearson(_ranks(np.asarray(a, dtype=np.float64)), _ranks(np.asarray(b, dtype=np.float64)))


def pearson(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a - a.mean(), b - b.mean()
    denom = float(np.sqrt((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / denom) if denom > 0 else float("nan")


def _ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=np.float64)
    sorted_values = values[order]
    start = 0
    while start < len(values):
        stop = start
        while stop + 1 < len(values) and sorted_values[stop + 1] == sorted_values[start]:
            stop += 1
        ranks[order[start : stop + 1]] = (start + stop) / 2 + 1
        start = stop + 1
    return ranks


_MARKED = re.compile(r"<b>\s*(.*?)\s*</b>")


def read_scws(path: Path) -> list[tuple[Occurrence, Occurrence, float]]:
    """SCWS layout: id, word1, pos1, word2, pos2, context1, context2, mean rating, ratings..."""
    items = []
    for number, line in enumerate(_read_lines(path), start=1):
        fields = line.split("\t")
        if len(fields) < 8:
            raise DataError(f"{path}: line {number}: expected at least 8 tab-separated fields (SCWS layout)")
        _, word1, _, word2, _, context1, context2, mean = fields[:8]
        try:
            rating = float(mean)
        except ValueError:
            raise DataError(f"{path}: line {number}: mean rating {mean!r} is not a number") from None
        items.append((_marked(context1, word1, path, number), _marked(context2, word2, path, number), rating))
    return items


def _marked(context: str, word: str, path: Path, number: int) -> Occurrence:
    match = _MARKED.search(context)
    if match is None:
        raise DataError(f"{path}: line {number}: no <b> ... </b> marks the target in {context[:40]!r}")
    before = context[: match.start()].split()
    target = match.group(1).split() or [word]
    after = context[match.end() :].split()
    return Occurrence(before + [target[0]] + after, len(before), word)


def evaluate_scws(store: VectorStore, items, settings: Settings | None, *, window: int | None = None) -> dict:
    firsts, seconds, ratings = zip(*items, strict=True)
    v1, ok1, _ = target_vectors(store, settings, list(firsts), window=window)
    v2, ok2, _ = target_vectors(store, settings, list(seconds), window=window)
    covered = ok1 & ok2
    cos = rounded_row_cosines(v1, v2)[covered]
    gold = np.array(ratings)[covered]
    return {"n": len(items), "covered": int(covered.sum()), "spearman": spearman(cos, gold) if len(cos) > 2 else None}


GENSIM_PAIR_FILES = {"wordsim353": "wordsim353.tsv", "simlex999": "simlex999.txt"}


def resolve_pairs_file(name: str) -> Path:
    """A path, or the name of a word-pair file shipped in gensim's test data (wordsim353, simlex999)."""
    path = Path(name)
    if path.exists():
        return path
    if name in GENSIM_PAIR_FILES:
        from gensim.test.utils import datapath  # gensim: only for its shipped word-pair files

        return Path(datapath(GENSIM_PAIR_FILES[name]))
    raise DataError(f"{name}: no such file (nor one of gensim's: {', '.join(GENSIM_PAIR_FILES)})")


def is_scws(path: Path) -> bool:
    lines = [x for x in _read_lines(path)[:5] if not x.startswith("#")]
    return bool(lines) and all(len(x.split("\t")) >= 8 and "<b>" in x for x in lines)


def evaluate_word_pairs(store: VectorStore, path: Path) -> dict:
    """Static similarity against human scores, through gensim's own ``evaluate_word_pairs``."""
    from gensim.models import KeyedVectors  # over a second: only word-pair files need gensim

    logging.getLogger("gensim").setLevel(logging.ERROR)
    kv = KeyedVectors(vector_size=store.dim)
    kv.add_vectors(store.words, store.matrix())
    try:
        (pearson_r, pearson_p), spearman_result, oov = kv.evaluate_word_pairs(str(path), restrict_vocab=len(store))
    except (ValueError, ZeroDivisionError) as exc:
        raise DataError(f"{path}: cannot evaluate word pairs ({exc})") from None
    return {
        "pearson": float(pearson_r),
        "pearson_p": float(pearson_p),
        "spearman": float(spearman_result[0]),
        "spearman_p": float(spearman_result[1]),
        "oov_percent": float(oov),
    }


# ---------------------------------------------------------------------------------------------- senses
@dataclass
class SenseSentence:
    word: str
    sense: str
    text: str


def default_senses_path() -> Path:
    return shipped_path("senses.tsv")


def read_senses(path: Path) -> list[SenseSentence]:
    """word <TAB> sense <TAB> sentence per line; blank lines, ``#`` comments and a header are skipped
    as in `eval wsi`'s files (:func:`ctxembed.senses.wsi.data_lines`)."""
    rows = []
    for number, line in data_lines(enumerate(_read_text(path).splitlines(), start=1)):
        fields = line.split("\t")
        if len(fields) != 3:
            raise DataError(f"{path}: line {number}: expected word<TAB>sense<TAB>sentence")
        rows.append(SenseSentence(*fields))
    if not rows:
        raise DataError(f"{path}: no sentences")
    return rows


def evaluate_senses(
    store: VectorStore, rows: list[SenseSentence], settings: Settings | None, *, window: int | None = None
) -> dict:
    """Per word: do all same-sense pairs beat all cross-sense pairs? Also the mean margin."""
    occurrences, lemmas = [], []
    for row in rows:
        try:
            word, number = split_word(row.word)  # bank#2: the second "bank" of the sentence
        except UsageError as exc:
            raise DataError(f"senses: {exc.message}") from None
        tokens = tokenize(row.text, lowercase=store.lowercase)
        found_at = [t.position for t in tokens if word and t.key == word.lower()]
        if len(found_at) < (number or 1):
            raise DataError(f"senses: {row.word!r} does not occur in {row.text!r}")
        occurrences.append(Occurrence([t.text for t in tokens], found_at[(number or 1) - 1], word))
        lemmas.append(word)
    vectors, found, _ = target_vectors(store, settings, occurrences, window=window)
    words: dict[str, list[int]] = {}
    for n, word in enumerate(lemmas):
        words.setdefault(word, []).append(n)
    per_word = []
    for word, members in words.items():
        members = [m for m in members if found[m]]
        same, cross = [], []
        for x, i in enumerate(members):
            for j in members[x + 1 :]:
                value = float(rounded_row_cosines(vectors[i : i + 1], vectors[j : j + 1])[0])
                (same if rows[i].sense == rows[j].sense else cross).append(value)
        separated = bool(same and cross and min(same) > max(cross))
        margin = float(np.mean(same) - np.mean(cross)) if same and cross else None
        per_word.append(
            {
                "word": word,
                "separated": separated,
                "margin": margin,
                "min_same": min(same) if same else None,
                "max_cross": max(cross) if cross else None,
            }
        )
    share = float(np.mean([w["separated"] for w in per_word]))
    margins = [w["margin"] for w in per_word if w["margin"] is not None]
    return {
        "words": len(per_word),
        "separated": share,
        "mean_margin": float(np.mean(margins)) if margins else None,
        "per_word": per_word,
    }
