"""Searching the contextual neighbour space (:mod:`ctxembed.engine.space` builds it and opens it).

One search reads the means (K, V, D), one per hidden state h0 ... hL: :meth:`NeighbourSpace.neighbours`,
for `neighbors` and for the sense labels of `senses`. A word's hidden states in a sentence (or a sense's
mean hidden states) are compared with every word's means *hidden state by hidden state* (each state
centred on the mean word and at unit length, so no state's size outweighs the others), at the states the
read-out mixes, the cosines averaged with the mix's weights; h0 is left out when the mix reads any other
state, since it holds the word and its position and nothing of the sentence. The candidates are the words
met in the corpus: a rare word's template vector (one neutral sentence) sits apart from the corpus means
and came up in lists whatever the sentence. On data/ambiguous.tsv and data/ambiguous-check.tsv this
follows the sense for 15 of 20 and 12 of 15 words, against 14 and 8 for the mixed read-out among all
words (docs/senses.md).

    space.neighbours(hidden_states(result, row), engine.mix, word="bank", k=10, exclude={"river"})
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ctxembed.core.mix import LayerMix
from ctxembed.core.similarity import unit_rows
from ctxembed.errors import DataError
from ctxembed.vectors.cache import crc, mapped_file

# how much of the word's own type direction a query loses: 0.5, 0.6, 0.7 followed the sense for 9, 12
# and 14 of the 20 words of data/ambiguous.tsv in the mixed read-out (docs/senses.md)
OWN = 0.7


@dataclass
class NeighbourSpace:
    """A built space: ``words`` (V,), ``means`` (K, V, D) float16, one per hidden state, ``counts`` (V,)
    the occurrences each mean is over (0: from the template)."""

    folder: Path
    words: list[str]
    means: np.ndarray  # (K, V, D) float16, memory-mapped
    counts: np.ndarray  # (V,) int32
    meta: dict

    def __post_init__(self):
        self.row_of = {w: i for i, w in enumerate(self.words)}
        self._states: States | None = None

    @property
    def templated(self) -> int:
        """How many words have their vectors from the template sentence."""
        return int((self.counts == 0).sum())

    @property
    def templated_words(self) -> set[str]:
        """The words whose vectors come from the template sentence."""
        return {self.words[i] for i in np.flatnonzero(self.counts == 0)}

    def describe_neighbours(self, mix: LayerMix) -> dict:
        """The JSON record of the search :meth:`neighbours` makes under ``mix`` (neighbors' ``search``)."""
        compared = states_name(search_weights(mix))
        candidates = len(self.words) - self.templated
        return {
            "kind": "contextual",
            "about": f"each word's mean hidden states over {self.meta['lines']:,} Brown sentences, compared "
            f"state by state ({compared}), among the {candidates:,} words met there",
            "words": len(self.words),
            "corpus": self.meta["corpus"],
            "lines": self.meta["lines"],
            "templated": self.templated,
            "readout": readout_name(mix),
            "version": self.meta["version"],
            "compared": compared,
            "candidates": candidates,
        }

    def states(self) -> States:
        """The space hidden state by hidden state: each state's centre (the mean word) and the unit rows of the
        words met in the corpus, centred; built once, kept beside the means and memory-mapped after."""
        if self._states is None:
            K, _, D = self.means.shape
            met = np.flatnonzero(self.counts > 0)  # (n,) the candidates

            def build() -> np.ndarray:
                self._check_means()  # read whole now anyway: a damaged byte is refused, never searched
                means = self.means.astype(np.float32)  # (K, V, D)
                centres = means.mean(axis=1, dtype=np.float64).astype(np.float32)  # (K, D)
                rows = np.stack([unit_rows(means[k, met] - centres[k]) for k in range(K)], axis=1)  # (n, K, D)
                return np.concatenate([rows, centres[None]])  # (n + 1, K, D)

            packed = mapped_file(self.folder / "states", (len(met) + 1, K, D), build)
            self._states = States(packed[:-1], packed[-1], met)
        return self._states

    def neighbours(
        self, states: np.ndarray, mix: LayerMix, *, word: str | None, k: int, exclude: set[str]
    ) -> list[tuple[str, float]]:
        """The ``k`` words met in the corpus nearest a word's hidden states ``states`` (K, D) in a sentence,
        best first, skipping ``exclude``: at each state the mix reads (:func:`search_weights`), the cosine of
        the state (centred, at unit length, less ``OWN`` of ``word``'s own direction there: what the sentence
        makes of the word rather than the word itself) with each word's centred mean; the cosines averaged
        with the mix's weights."""
        space = self.states()
        n, K, D = space.units.shape
        row = None if word is None else self.row_of.get(word)
        weights = search_weights(mix)  # (K,)
        queries = np.zeros((K, D), dtype=np.float32)  # each state's query, times its weight (0: not compared)
        for state in np.flatnonzero(weights):
            query = unit_rows((np.asarray(states[state], dtype=np.float32) - space.centres[state])[None])[0]  # (D,)
            if row is not None:
                own = self.means[state, row].astype(np.float32) - space.centres[state]  # (D,)
                query = query - OWN * unit_rows(own[None])[0]
            queries[state] = weights[state] * unit_rows(query[None])[0]
        scores = space.units.reshape(n, K * D) @ queries.reshape(K * D)  # (n, K·D) @ (K·D,) -> (n,): one product
        return self._best(scores, space.rows, k, exclude)

    def _best(self, scores: np.ndarray, rows: np.ndarray, k: int, exclude: set[str]) -> list[tuple[str, float]]:
        """The ``k`` best of ``scores`` (n,), over the space's ``rows`` (n,) in ascending order, skipping
        ``exclude``."""
        wanted = np.array(sorted(self.row_of[w] for w in exclude if w in self.row_of), dtype=np.int64)
        at = np.minimum(np.searchsorted(rows, wanted), max(len(rows) - 1, 0))  # where each would sit in rows
        banned = at[rows[at] == wanted] if len(rows) else at[:0]
        scores[banned] = -np.inf
        k = max(0, min(k, len(scores) - len(banned)))
        if k == 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k]  # unordered top k
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(self.words[int(rows[i])], float(scores[i])) for i in top]

    def _check_means(self) -> None:
        """Before a read-out is built from the means (read whole then anyway): their checksum, or a DataError
        naming the rebuild command."""
        if crc(self.means) != self.meta["means_crc"]:
            raise DataError(
                f"{self.folder} is damaged (its means do not match their checksum): rebuild it with "
                f"`{rebuild_command(self.meta['model'])}`"
            )


@dataclass
class States:
    """The space hidden state by hidden state (:meth:`NeighbourSpace.states`)."""

    units: np.ndarray  # (n, K, D) float32: the n words met in the corpus, each state centred, at unit length
    centres: np.ndarray  # (K, D) each state's mean word (over all V words)
    rows: np.ndarray  # (n,) the words' rows in the space


def search_weights(mix: LayerMix) -> np.ndarray:
    """(K,) the weight of each hidden state's cosine in :meth:`NeighbourSpace.neighbours`: the mix's own
    weights (negative ones as 0), without h0's when the mix reads any other state, summing to 1."""
    weights = np.clip(np.asarray(mix.weights, dtype=np.float64), 0.0, None)  # (K,)
    if weights[1:].sum() > 0:
        weights[0] = 0.0
    if weights.sum() == 0:  # no positive weight: the states the mix reads, equally
        weights = (np.asarray(mix.weights) != 0).astype(np.float64)
    return (weights / weights.sum()).astype(np.float32)


def states_name(weights: np.ndarray) -> str:
    """The states a search compares, as a person reads them: "h1..h6" for equal weights on a run, else
    "0.2·h1 + 0.8·h2"."""
    read = np.flatnonzero(weights)
    if np.allclose(weights[read], weights[read[0]]):
        if len(read) > 1 and read[-1] - read[0] == len(read) - 1:
            return f"h{read[0]}..h{read[-1]}"
        return ", ".join(f"h{i}" for i in read)
    return " + ".join(f"{weights[i]:.2g}·h{i}" for i in read)


def readout_name(mix: LayerMix) -> str:
    """A read-out as a person reads it: "mean of h0..h6" for equal weights, else its formula (1·h3)."""
    weights = np.asarray(mix.weights)
    if np.allclose(weights, weights[0]) and not mix.normalize:
        return f"mean of h0..h{len(weights) - 1}"
    return mix.formula()


def rebuild_command(model: str) -> str:
    """The command that builds the space of the model named ``model`` again."""
    return f"ctxembed models space {model} --rebuild"


_SUFFIXES = ("", "s", "es", "ed", "d", "ing", "ings", "er", "ers", "ly", "'s")


def word_forms(word: str, words: Sequence[str]) -> list[str]:
    """The forms of ``word`` among ``words`` (bank: banks, banked, banking, banker, bankers), which sit
    near every sentence's ``word`` and say nothing of its sense: ``word`` plus a suffix, with its last
    consonant doubled (planned) or its final e or y changed (saving, berries)."""
    stems = {word, word + word[-1]} if word else set()
    if word.endswith("e"):
        stems.add(word[:-1])
    found = []
    for other in words:
        if other != word and any(other.startswith(s) and other[len(s) :] in _SUFFIXES for s in stems):
            found.append(other)
        elif word.endswith("y") and other.startswith(word[:-1]) and other[len(word) - 1 :] in ("ies", "ied"):
            found.append(other)
    return found
