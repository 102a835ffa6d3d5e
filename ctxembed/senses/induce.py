"""Senses of a word in a corpus: contextual vectors of its occurrences, clustered. No printing.

    vectors = occurrence_vectors(engine, scan.occurrences["plant"])      # one row per usable occurrence
    clustering = cluster(vectors.unit, k=None)                           # k chosen by silhouette
    doc = word_document(engine, vectors, clustering, forms)              # part of ctxembed.senses/2

The vector of an occurrence is its contextual vector; with ``drop_own`` the word's own term (see
:func:`own_term`: the layer-0 share of a layer mix, the residual λ·x) is taken out, leaving what
the context adds. Dropping it is the default (docs/senses.md has the measurements). A trained
model carries the word's identity in every hidden state, not in one term: its occurrences are
clustered on their vectors less the word's type direction, with the sentence around them
(:func:`trained_features`).
The vectors are normalised and clustered by k-means (on the unit sphere,
cosine = dot product: spherical k-means as far as the assignment step goes).

Choosing k (``k=None``): for every k from 2 to ``k_max`` whose clusters all hold at least
``min_share`` of the occurrences (and 2 of them), the mean silhouette (cosine) is computed;
the k with the highest one wins. Fewer than 2·max(2, ⌈min_share·n⌉) occurrences cannot be split
and give one sense. scikit-learn does the k-means, the silhouettes and the PCA map; it is
imported here only.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from ctxembed.core.similarity import unit_rows
from ctxembed.engine import ContextEngine, window_span
from ctxembed.errors import DataError
from ctxembed.presets import SENSE_OPTIONS, SenseOptions
from ctxembed.senses.occurrences import Occurrence, scan_corpus, word_forms
from ctxembed.vectors.search import nearest
from ctxembed.vectors.tokenize import tokenize

K_MAX = SENSE_OPTIONS["k"].maximum  # largest -k accepted
AUTO_K_MAX = SENSE_OPTIONS["k_max"].default  # -k auto tries 2 .. this
MIN_SHARE = SENSE_OPTIONS["min_share"].default  # -k auto: every cluster holds at least this share
N_INIT = 10  # k-means restarts
LABEL_VOCABULARY = 50_000  # sense labels are chosen among this many most frequent words


@dataclass
class OccurrenceVectors:
    """Vectors of the usable occurrences of one word, and what happened to the others."""

    occurrences: list[Occurrence]  # the usable ones, in corpus order
    vectors: np.ndarray  # (n, d) context vectors (contextual minus the own term)
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> count
    states: np.ndarray | None = None  # (n, K, D) a trained model's hidden states h0..hL of each occurrence
    clustered: np.ndarray | None = None  # (n, d) what is clustered when it is not the vectors (a trained model's)

    @property
    def unit(self) -> np.ndarray:
        """(n, d) what is clustered, at unit length: the vectors, or :func:`trained_features` for a trained model."""
        return unit_rows(self.vectors if self.clustered is None else self.clustered)  # (n, d)


@dataclass
class Clustering:
    labels: np.ndarray  # (n,) sense of each occurrence, 0 = the largest sense
    k: int
    chosen_by: str  # "given", FEWER_THAN_GIVEN, "silhouette", "too few occurrences", "no split with ..."
    silhouette: float | None  # mean silhouette (cosine) of the result; None for one cluster
    tried: list[dict] = field(default_factory=list)  # -k auto: {k, silhouette, smallest_share}


def own_term(engine: ContextEngine, result, row: int) -> np.ndarray | None:
    """(d_out,) the part of token ``row``'s contextual vector that is its own input, not its context:
    the layer-0 term of a layer mix (γ·s₀·h0), plus the last layer's residual λ·x (weighted by the
    mix's last weight when there is a mix) when the settings have a residual and no layer norm after it.
    None when there is no such term."""
    residual = engine.card.residual
    mix = result.mix
    if mix is None:
        return residual * result.layer_inputs[-1][row] if residual else None
    weights = mix.gamma * np.asarray(mix.weights, dtype=np.float64)  # (L + 1,)
    own = weights[0] * result.inputs[row]  # (d,)
    if residual:
        own = own + weights[-1] * residual * result.layer_inputs[-1][row]
    return own


def occurrence_vectors(
    engine: ContextEngine, occurrences: list[Occurrence], *, drop_own: bool = True
) -> OccurrenceVectors:
    """Contextual vectors of each occurrence's token in its line; lines over max_tokens are skipped. With
    the engine's ``window``, each occurrence reads the tokens at most that far from it, each its own (by the
    one crop of every command, :func:`ctxembed.engine.window_span`), and no line is too long."""
    skipped = {"too_long": 0, "no_vector": 0}
    lowercase = engine.store.lowercase
    last_line, tokens, prepared_spans = None, [], {}
    usable, prepared, rows = [], [], []
    for occurrence in occurrences:
        if occurrence.line != last_line:  # occurrences come in corpus order: tokenise and prepare each line once
            last_line, prepared_spans = occurrence.line, {}
            tokens = tokenize(occurrence.text, lowercase=lowercase)
        position = next((t.position for t in tokens if t.start <= occurrence.start < t.end), None)
        start, stop = (0, len(tokens)) if position is None else window_span(len(tokens), position, engine.window)
        if stop - start > engine.max_tokens:
            skipped["too_long"] += 1
            continue
        if (start, stop) not in prepared_spans:  # the whole line, or this occurrence's window
            try:
                text = occurrence.text if (start, stop) == (0, len(tokens)) else occurrence.text[
                    tokens[start].start : tokens[stop - 1].end
                ]  # fmt: skip
                prepared_spans[start, stop] = engine.prepare(text)
            except DataError:
                prepared_spans[start, stop] = None
        sentence = prepared_spans[start, stop]
        if sentence is None or position is None or position - start not in sentence.used:
            skipped["no_vector"] += 1
            continue
        usable.append(occurrence)
        prepared.append(sentence)
        rows.append(sentence.used.index(position - start))
    vectors, states, around = targets(engine, prepared, rows, drop_own=drop_own, states=True)
    clustered = trained_features(engine, vectors, around, drop_own=drop_own)
    return OccurrenceVectors(usable, vectors, skipped, states, clustered)


def trained_features(
    engine: ContextEngine, vectors: np.ndarray, around: np.ndarray, *, drop_own: bool = True
) -> np.ndarray | None:
    """(n, d) what a trained model's occurrences of one word are clustered on, from the word's vectors
    ``vectors`` (n, d, own term dropped) and the mean read-out of each sentence's other words ``around``
    (n, d), each less its mean over the occurrences and at unit length, added:

    - the word's vector less its **type direction**: a trained model carries the word's identity in every
      hidden state, not in one term that :func:`own_term` could drop; its mean over the occurrences is
      that identity, and without it the occurrences group by what their contexts add;
    - the sentence around it: a sentence encoder's mean-pooled read-out is what it was trained to make.

    eval wsi data/wsi-senses.tsv -c minilm: ARI 0.851 on the word's vector, 0.879 less its type
    direction, 0.972 with the sentence added (docs/senses.md). None when the own term is kept, for no
    occurrence, and for an engine whose own term is exact (the GloVe engine: :func:`own_term` leaves
    its context part)."""
    if not drop_own or not engine.card.trained or not len(vectors):
        return None
    own = unit_rows(vectors - vectors.mean(axis=0))  # (n, d)
    return own + unit_rows(around - around.mean(axis=0))  # (n, d)


def targets(
    engine: ContextEngine, prepared: list, rows: list[int], *, drop_own: bool, states: bool = False
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Of token ``rows[i]`` (an index into ``used``) of sentence ``prepared[i]``: its contextual vector less
    its own term when ``drop_own`` (n, d_out), with ``states`` its hidden states h0..hL under a model with a
    contextual neighbour space (n, K, D, what sense labels search; else None), and the mean read-out of the
    sentence's other words (n, d_out; zero for a sentence of one word). A sentence listed several times
    runs once."""
    from ctxembed.engine.space import hidden_states  # the states a contextual space compares

    vectors = np.zeros((len(prepared), engine.out_dim), dtype=np.float32)  # (n, d_out)
    around = vectors.copy()  # (n, d_out)
    keep = states and engine.card.spaces[0] == "contextual"
    states = None
    if not prepared:
        return vectors, states, around
    distinct = list({id(s): s for s in prepared}.values())
    with one_thread():
        results = dict(zip(map(id, distinct), engine.run(distinct, weights=False), strict=True))  # vectors only
    for n, (sentence, row) in enumerate(zip(prepared, rows, strict=True)):
        result = results[id(sentence)]
        vectors[n] = result.contextual[row]
        if keep:
            hidden = hidden_states(result, row)  # (K, D)
            if states is None:
                states = np.zeros((len(prepared), *hidden.shape), dtype=np.float32)  # (n, K, D)
            states[n] = hidden
        own = own_term(engine, result, row) if drop_own else None
        if own is not None:
            vectors[n] -= own
        if len(result.contextual) > 1:
            around[n] = (result.contextual.sum(axis=0) - result.contextual[row]) / (len(result.contextual) - 1)
    return vectors, states, around


FEWER_THAN_GIVEN = "fewer distinct contexts than k given"


def smallest_cluster(n: int, min_share: float) -> int:
    return max(2, math.ceil(min_share * n))


def cluster(
    unit: np.ndarray, k: int | None = None, *, k_max: int = AUTO_K_MAX, min_share: float = MIN_SHARE, seed: int = 0
) -> Clustering:
    """Cluster unit vectors (n, d): ``k`` given, or chosen by silhouette (``None``)."""
    # One thread: k-means over a few thousand points gains nothing from OpenMP, and on a busy
    # machine its spinning threads made each fit 20 times slower (0.24 s against 0.012 s, measured).
    with one_thread():
        return _cluster(unit, k, k_max=k_max, min_share=min_share, seed=seed)


def _cluster(unit: np.ndarray, k: int | None, *, k_max: int, min_share: float, seed: int) -> Clustering:
    n = len(unit)
    if k is not None:
        if n < k:
            raise DataError(f"{n} occurrence(s), fewer than the {k} senses asked for")
        labels = _kmeans(unit, k, seed)
        labels, found = _relabel(labels)
        how = "given" if found == k else FEWER_THAN_GIVEN  # identical contexts cannot be split
        return Clustering(labels, found, how, _silhouette(unit, labels))
    floor = smallest_cluster(n, min_share)
    tried = []
    best: tuple[float, np.ndarray] | None = None
    for candidate in range(2, min(k_max, n // floor) + 1):
        labels = _kmeans(unit, candidate, seed)
        sizes = np.bincount(labels, minlength=candidate)  # (k,)
        entry = {"k": candidate, "silhouette": None, "smallest_share": float(sizes.min() / n)}
        tried.append(entry)
        if sizes.min() < floor:
            continue
        entry["silhouette"] = _silhouette(unit, labels)
        if best is None or entry["silhouette"] > best[0]:
            best = (entry["silhouette"], labels)
    if best is None:
        reason = "too few occurrences" if not tried else "no split with every sense large enough"
        return Clustering(np.zeros(n, dtype=np.int64), 1, reason, None, tried)
    labels, k = _relabel(best[1])
    return Clustering(labels, k, "silhouette", best[0], tried)


def _kmeans(unit: np.ndarray, k: int, seed: int) -> np.ndarray:
    from sklearn.cluster import KMeans  # scikit-learn takes over a second: imported when clustering starts

    # k-means cannot find more clusters than distinct points (scikit-learn warns, once per fit)
    k = min(k, len(np.unique(unit.round(6), axis=0)))
    if k == 1:
        return np.zeros(len(unit), dtype=np.int64)
    model = KMeans(n_clusters=k, n_init=N_INIT, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's warnings are not for our users
        return model.fit_predict(unit.astype(np.float64)).astype(np.int64)  # (n,)


def _silhouette(unit: np.ndarray, labels: np.ndarray) -> float | None:
    from sklearn.metrics import silhouette_score  # sklearn: over a second

    distinct = len(np.unique(labels))
    if distinct < 2 or distinct >= len(unit):
        return None
    return float(silhouette_score(unit, labels, metric="cosine"))


def _relabel(labels: np.ndarray) -> tuple[np.ndarray, int]:
    """Number the clusters by size, largest first (ties: first occurrence first)."""
    sizes = np.bincount(labels)  # (k,)
    present = [c for c in range(len(sizes)) if sizes[c]]
    first = {c: int(np.argmax(labels == c)) for c in present}
    order = sorted(present, key=lambda c: (-sizes[c], first[c]))
    mapping = np.zeros(len(sizes), dtype=np.int64)
    mapping[order] = np.arange(len(order))
    return mapping[labels], len(order)


def centroids(unit: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
    """(k, d) normalised mean direction of each cluster."""
    sums = np.zeros((k, unit.shape[1]), dtype=np.float64)  # (k, d)
    np.add.at(sums, labels, unit)
    return unit_rows(sums)  # (k, d)


def pca_map(unit: np.ndarray) -> tuple[np.ndarray, list[float]]:
    """(n, 2) coordinates of the first two principal components, and their explained variance ratios."""
    if len(unit) < 3 or np.abs(unit - unit.mean(axis=0)).max() < 1e-9:  # identical points: no variance to explain
        return np.zeros((len(unit), 2)), [0.0, 0.0]
    from sklearn.decomposition import PCA  # sklearn: over a second

    model = PCA(n_components=2, random_state=0)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        points = model.fit_transform(unit.astype(np.float64))  # (n, 2)
    return points, [float(x) if np.isfinite(x) else 0.0 for x in model.explained_variance_ratio_]


def sense_labels(
    engine: ContextEngine, centres: np.ndarray, *, k: int, exclude: set[str], word: str = ""
) -> list[list[tuple[str, float]]]:
    """Nearest vocabulary words of each centre's distinctive direction (the centre minus the mean of the
    centres, so words every sense shares do not label them all), among the LABEL_VOCABULARY most frequent
    words (rare words make poor labels, and the search is that much faster), alphabetic words only. A
    model whose neighbours live in its contextual space (its card's first space) is labelled there
    (:func:`contextual_labels`; ``centres`` are then mean hidden states: :func:`label_centres`)."""
    if engine.card.spaces[0] == "contextual":
        return contextual_labels(engine, centres, k=k, exclude=exclude, word=word)
    vocabulary = engine.store.head(min(LABEL_VOCABULARY, len(engine.store)))
    mean = centres.mean(axis=0) if len(centres) > 1 else np.zeros(centres.shape[1])  # (d,)
    labels = []
    for centre in centres:
        direction = (centre - mean).astype(np.float32)  # (d,)
        found = nearest(vocabulary, direction, k=4 * k + 20, exclude=exclude, removal=engine.removal)
        labels.append([(w, s) for w, s in found if w.isalpha()][:k])
    return labels


def label_centres(found: OccurrenceVectors, clustering: Clustering) -> np.ndarray:
    """What :func:`sense_labels` searches from in a contextual space (``found.states``, kept only under one):
    each sense's mean hidden states over its occurrences (k, K, D), where the space's words are."""
    sums = np.zeros((clustering.k, *found.states.shape[1:]), dtype=np.float64)  # (k, K, D)
    np.add.at(sums, clustering.labels, found.states)
    return sums / np.bincount(clustering.labels, minlength=clustering.k)[:, None, None]  # (k, K, D)


LABEL_POOL = 100  # each sense's nearest words among which its labels are chosen


def contextual_labels(
    engine: ContextEngine, centres: np.ndarray, *, k: int, exclude: set[str], word: str
) -> list[list[tuple[str, float]]]:
    """The words nearest each sense's centre ``centres`` (k, K, D), its occurrences' mean hidden states, in
    the model's contextual neighbour space (the search `neighbors` makes, :meth:`NeighbourSpace.neighbours`,
    here with no loss of the word's own direction: a centre over many occurrences is mostly that direction,
    and what is left of it after the loss is noise), minus the word's forms and ``exclude``; alphabetic words
    only. With several senses a word labels only the sense whose centre it is nearest: among each sense's
    ``LABEL_POOL`` nearest words, those nearer another sense's centre label that one (a word missing from a
    sense's pool is farther from it than the pool's last word). So the words every sense shares (music for
    every bass of Brown) label each sense they are nearest, and no sense's label is a difference of centres,
    which is noise when the senses lie close. bank, bass and plant on Brown: docs/senses.md."""
    from ctxembed.engine.space import open_space, word_forms  # lazy: only a trained model's labels read it

    space = open_space(engine)
    banned = exclude | set(word_forms(word, space.words)) | {word}
    pools = [dict(space.neighbours(centre, engine.mix, word=None, k=LABEL_POOL, exclude=banned)) for centre in centres]
    labels = []
    for own, pool in enumerate(pools):
        chosen = [
            (w, s)
            for w, s in pool.items()
            if w.isalpha() and all(s >= other.get(w, -np.inf) for j, other in enumerate(pools) if j != own)
        ]
        labels.append(chosen[:k])
    return labels


# ---------------------------------------------------------------------------------------------- documents
def word_document(
    engine: ContextEngine,
    word: str,
    forms: list[str],
    seen: int,
    found: OccurrenceVectors,
    clustering: Clustering | None,
    *,
    examples: int = 5,
    label_words: int = 8,
) -> dict:
    """One word's part of ``ctxembed.senses/2``: its senses, every occurrence, the quality, the map."""
    n = len(found.occurrences)
    entry = {
        "word": word,
        "forms": forms,
        "occurrences_found": seen,
        "occurrences_sampled": n + sum(found.skipped.values()),
        "occurrences_used": n,
        "skipped": found.skipped,
        "k": 0,
        "chosen_by": None,
        "quality": {"silhouette": None, "tried": []},
        "senses": [],
        "occurrences": [],
        "map": {"explained_variance": [0.0, 0.0]},
    }
    if clustering is None or n == 0:
        return entry
    unit = found.unit  # (n, d)
    centres = centroids(unit, clustering.labels, clustering.k)  # (k, d)
    closeness = np.einsum("nd,nd->n", unit, centres[clustering.labels])  # (n,) cosine to own centre
    labels = None
    if engine.out_dim == engine.dim:
        # the unit centroids (k, d), or in a contextual space the senses' mean hidden states (k, K, D)
        searched = centres if found.states is None else label_centres(found, clustering)
        labels = sense_labels(engine, searched, k=label_words, exclude=set(forms), word=word)
    points, explained = pca_map(unit)  # (n, 2)
    entry.update(
        k=clustering.k,
        chosen_by=clustering.chosen_by,
        quality={"silhouette": clustering.silhouette, "tried": clustering.tried},
        map={"explained_variance": explained},
    )
    for sense in range(clustering.k):
        members = np.flatnonzero(clustering.labels == sense)  # (m,)
        central = members[np.argsort(-closeness[members], kind="stable")][:examples]
        entry["senses"].append(
            {
                "sense": sense + 1,  # numbered from 1, as the tables show them
                "size": len(members),
                "share": len(members) / n,
                "label": [{"word": w, "similarity": s} for w, s in labels[sense]] if labels else [],
                "examples": [_example(found.occurrences[i], float(closeness[i])) for i in central],
            }
        )
    entry["occurrences"] = [
        {
            "line": o.line,
            "start": o.start,
            "end": o.end,
            "form": o.form,
            "sense": int(label) + 1,
            "centrality": float(c),
            "x": float(x),
            "y": float(y),
        }
        for o, label, c, (x, y) in zip(found.occurrences, clustering.labels, closeness, points, strict=True)
    ]
    return entry


def _example(occurrence: Occurrence, closeness: float) -> dict:
    return {
        "line": occurrence.line,
        "start": occurrence.start,
        "end": occurrence.end,
        "text": occurrence.text,
        "centrality": closeness,
    }


# ---------------------------------------------------------------------------------------------- one call
def search_forms(store, words: list[str], given: dict[str, list[str]], *, exact: bool = False) -> dict[str, list[str]]:
    """The forms to look for, per word: given ones, the word alone (``exact``), or its inflections that are
    in the vocabulary and not much rarer than it (rank below max(50,000, 10 x the word's rank), so that
    "apple" does not bring the surname "appling")."""
    chosen = {}
    for word in words:
        key = word.lower()
        if key in given:
            chosen[word] = given[key]
        elif exact:
            chosen[word] = [key]
        else:
            rank = store.find(key)
            limit = max(50_000, 10 * rank) if rank is not None else 50_000
            chosen[word] = word_forms(word, lambda f, limit=limit: (row := store.find(f)) is not None and row < limit)
    return chosen


def find_senses(
    engine: ContextEngine,
    forms: dict[str, list[str]],
    stream,
    name: str,
    options: SenseOptions,
    *,
    progress=None,
    keep: dict | None = None,
):
    """Scan a corpus stream once for every word's forms, then cluster each word: the ``ctxembed.senses/2``
    document (without ``vectors`` and ``settings``) and one message per word that could not be clustered.
    ``keep``, a dict, receives word -> (its occurrences' unit vectors (n, d), their lines' texts), in the
    order of the word's ``occurrences`` (what a Projector map of the senses plots)."""
    scan = scan_corpus(
        stream, forms, name=name, max_occurrences=options.max_occurrences, seed=options.sample_seed, progress=progress
    )
    if scan.blank:
        raise DataError(f"{name}: the corpus is empty")
    with one_thread():
        entries, problems = _each_word(engine, forms, scan, name, options, keep)
    trained = engine.card.trained and options.drop_own  # clustered on trained_features
    doc = {
        "schema": "ctxembed.senses/2",
        "corpus": {
            "name": name,
            "lines": scan.lines,
            "characters": scan.chars,
            "candidate_lines": scan.candidate_lines,
            "long_lines": scan.long_lines,
        },
        "options": {
            "k": options.k if options.k is not None else "auto",
            "k_max": options.k_max,
            "min_share": options.min_share,
            "max_occurrences": options.max_occurrences,
            "seed": options.sample_seed,
            "own_term": "dropped" if options.drop_own else "kept",
            **({"clustered_on": CLUSTERED_ON} if trained else {}),
            "max_tokens": engine.max_tokens,
        },
        **({"label_search": label_search(engine)} if engine.card.spaces[0] == "contextual" else {}),
        "words": entries,
    }
    return doc, problems


CLUSTERED_ON = "the word's vector less its type direction, plus the mean read-out of the sentence's other words"


def label_search(engine: ContextEngine) -> dict:
    """The record of the contextual space the senses were labelled in (as `neighbors` names its ``search``)."""
    from ctxembed.engine.space import open_space  # lazy: only a trained model's labels read it

    return open_space(engine).describe_neighbours(engine.mix)


def _each_word(engine: ContextEngine, forms: dict[str, list[str]], scan, name: str, options: SenseOptions, keep=None):
    entries, problems = [], []
    for word, word_forms_ in forms.items():
        found = occurrence_vectors(engine, scan.occurrences[word], drop_own=options.drop_own)
        n, k = len(found.occurrences), options.k
        clustering = None
        if scan.counts[word] == 0:
            problems.append(f"{word!r} does not occur in {name} (forms: {', '.join(word_forms_)})")
        elif n == 0 or (k is not None and n < k):
            why = ", ".join(f"{v} {key.replace('_', ' ')}" for key, v in found.skipped.items() if v)
            problems.append(
                f"{word!r} has {n} usable occurrence(s) in {name}"
                + (f", fewer than k = {k}" if k and n else "")
                + (f" ({why})" if why else "")
            )
        else:
            clustering = cluster(
                found.unit, k, k_max=options.k_max, min_share=options.min_share, seed=options.sample_seed
            )
            if keep is not None:
                keep[word] = (found.unit, [o.text for o in found.occurrences])
        entries.append(
            word_document(
                engine, word, word_forms_, scan.counts[word], found, clustering,
                examples=options.examples, label_words=options.label_words,
            )
        )  # fmt: skip
    return entries, problems


def one_thread():
    """BLAS and OpenMP limited to one thread: the many small products of a senses run (attention over
    short sentences, k-means over a thousand points) gain nothing from threads, and on a busy machine
    spinning threads made the whole command 2.5 times slower (27.6 s against 11.3 s wall, measured)."""
    return threadpool_limits(1)
