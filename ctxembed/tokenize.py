"""Sentence -> tokens, the way GloVe's tokenizer (Stanford PTB-style) cut its training text.

Punctuation is split off, contractions are split into the clitics GloVe knows ("don't" ->
"do" + "n't", "it's" -> "it" + "'s"), and each token keeps its surface form for display
while its lookup key is lower-cased when the vocabulary is lower-case. When a vocabulary
lacks a clitic (the shipped wink-derived GloVe subset has no apostrophe tokens), the
unambiguous ones fall back to their full word: n't -> not, 're -> are, 've -> have,
'll -> will, 'm -> am. The ambiguous 's and 'd have no fallback.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})

_TOKEN = re.compile(
    r"""
      (?:[^\W\d_]\.){2,}                       # abbreviations with dots: U.S., e.g.
    | [^\W_]+(?=n't\b)                         # the stem before n't: do|n't, ca|n't
    | n't\b
    | '(?:s|re|ve|ll|m|d)\b                    # clitics
    | [^\W_]+(?:[-.][^\W_]+)*                  # words, numbers (3.5), hyphenated compounds
    | [^\w\s]|_                                # any other symbol, one at a time
    """,
    re.VERBOSE | re.IGNORECASE,
)

CLITIC_FALLBACKS = {"n't": "not", "'re": "are", "'ve": "have", "'ll": "will", "'m": "am"}


@dataclass(frozen=True)
class Token:
    """One token: ``text`` as written, ``key`` to look up, ``position`` in the sentence."""

    text: str
    key: str
    position: int
    start: int  # character offsets in the original sentence (-1 for pre-tokenised input)
    end: int


def tokenize(sentence: str, *, lowercase: bool = True) -> list[Token]:
    """Split a sentence into tokens; ``lowercase`` sets whether keys are lower-cased."""
    normalised = sentence.translate(_APOSTROPHES)  # same length: offsets stay valid
    tokens = []
    for match in _TOKEN.finditer(normalised):
        text = sentence[match.start() : match.end()]
        key = match.group(0)
        tokens.append(Token(text, key.lower() if lowercase else key, len(tokens), match.start(), match.end()))
    return tokens


def pretokenized(words: Sequence[str], *, lowercase: bool = True) -> list[Token]:
    """Tokens from text that is already split (one word per item), e.g. the WiC data."""
    return [Token(w, (w.lower() if lowercase else w).translate(_APOSTROPHES), i, -1, -1) for i, w in enumerate(words)]


def vocabulary_key(key: str, known: Callable[[str], bool]) -> str | None:
    """The key to look up for a token: itself, its clitic fallback, or None when unknown."""
    if known(key):
        return key
    fallback = CLITIC_FALLBACKS.get(key)
    if fallback is not None and known(fallback):
        return fallback
    return None
