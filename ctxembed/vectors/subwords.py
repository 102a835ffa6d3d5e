"""fastText character n-gram hashing, without gensim, so cached fastText stores need no gensim.

Mirrors fastText (and gensim's ``ft_ngram_hashes``): the word is wrapped as ``<word>``, its
n-grams of ``min_n``..``max_n`` characters are taken over UTF-8 bytes (never splitting a
character), and each is hashed with 32-bit FNV-1a, bytes sign-extended as in fastText's C++.

:func:`ft_hash`, :func:`char_ngrams` and :func:`ngram_buckets` spell this out in plain Python, one
word at a time: the reference. The stores use :func:`ngram_buckets_many`, the same in NumPy for
many words at once (tests/test_store_subwords.py holds it equal to the reference).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# A word longer than this has its vector built from the n-grams of its first MAX_WORD_CHARS characters,
# as if it ended there: a 1,000,000-character word would otherwise read millions of n-gram rows (GBs),
# and no real word comes near it (German compounds, chemical names and URLs stay under a few hundred)
MAX_WORD_CHARS = 1024
_FNV_OFFSET = 2166136261
_FNV_PRIME = 16777619


def ft_hash(data: bytes) -> int:
    """fastText's FNV-1a variant over bytes, each byte sign-extended to 32 bits first."""
    h = _FNV_OFFSET
    for byte in data:
        h ^= byte if byte < 128 else (byte - 256) & 0xFFFFFFFF
        h = (h * _FNV_PRIME) & 0xFFFFFFFF
    return h


def char_ngrams(word: str, min_n: int, max_n: int) -> list[bytes]:
    """The byte n-grams fastText uses for ``word``, in fastText's order."""
    data = f"<{word}>".encode()
    size = len(data)
    grams: list[bytes] = []
    for start in range(size):
        if data[start] & 0xC0 == 0x80:  # a continuation byte starts no character
            continue
        end, n_chars = start, 1
        while end < size and n_chars <= max_n:
            end += 1
            while end < size and data[end] & 0xC0 == 0x80:
                end += 1
            # fastText skips the lone "<" and ">" markers
            if n_chars >= min_n and not (n_chars == 1 and (start == 0 or end == size)):
                grams.append(data[start:end])
            n_chars += 1
    return grams


def ngram_buckets(word: str, min_n: int, max_n: int, bucket: int) -> list[int]:
    """Rows of the n-gram table that make up ``word``'s vector (empty when max_n is 0)."""
    if bucket <= 0 or max_n <= 0:
        return []
    return [ft_hash(gram) % bucket for gram in char_ngrams(word, min_n, max_n)]


def capped(words: Sequence[str]) -> list[str]:
    """The words whose n-grams make their vectors: each cut to its first :data:`MAX_WORD_CHARS` characters."""
    return [word[:MAX_WORD_CHARS] for word in words]


def ngram_counts(lengths: np.ndarray, min_n: int, max_n: int) -> np.ndarray:
    """How many n-grams :func:`ngram_buckets_many` gives words of ``lengths`` (k,) characters, (k,)
    int64, from the lengths alone: a cheap count for refusing a sentence before its vectors are built.

    ``<word>`` has ``c + 2`` characters: each n-gram length n of ``min_n``..``max_n`` starts at
    ``c + 3 - n`` of them, except n = 1, whose lone "<" and ">" are skipped (``c`` starts)."""
    lengths = np.asarray(lengths, np.int64)  # (k,)
    counts = np.zeros(len(lengths), np.int64)  # (k,)
    for n in range(max(min_n, 1), max_n + 1):
        counts += lengths if n == 1 else np.maximum(lengths + 3 - n, 0)
    return counts


def ngram_buckets_many(words: Sequence[str], min_n: int, max_n: int, bucket: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`ngram_buckets` of many words at once, in NumPy: (rows (G,) int64, every word's rows
    word after word, each word's in fastText's order; counts (k,) int64 rows per word).

    Each character of ``<word>`` starts an n-gram of 1, 2, ... ``max_n`` characters; their FNV-1a
    hashes grow a character at a time, one array operation per byte for every start at once
    (uint32 wrap-around is fastText's 32-bit arithmetic)."""
    if bucket <= 0 or max_n <= 0 or not len(words):
        return np.zeros(0, np.int64), np.zeros(len(words), np.int64)
    wrapped = [f"<{word}>".encode() for word in words]
    data = np.frombuffer(b"".join(wrapped), np.uint8)  # (B,) every wrapped word's UTF-8, one after the other
    signed = data.view(np.int8).astype(np.uint32)  # (B,) each byte sign-extended to 32 bits, as ft_hash
    begins = np.flatnonzero(data & 0xC0 != 0x80)  # (C,) byte where each character begins
    lengths = np.diff(begins, append=len(data))  # (C,) its bytes (a word ends where the next begins)
    sizes = np.fromiter(map(len, words), np.int64, len(words)) + 2  # (k,) characters of each, "<" and ">" too
    word_of = np.repeat(np.arange(len(words)), sizes)  # (C,) the word each character belongs to
    first = np.cumsum(sizes) - sizes  # (k,) each word's first character
    left = sizes[word_of] - (np.arange(len(begins)) - first[word_of])  # (C,) characters from it to its word's end
    # per character, its k-th byte (0 past its end) and whether it has one, then max_n characters of
    # padding, so that "the character n after each" is a slice
    chars, widest, pad = len(begins), int(lengths.max()), np.zeros(max_n, np.uint32)
    byte = [
        np.concatenate([np.where(k < lengths, signed[np.minimum(begins + k, len(data) - 1)], 0), pad])
        for k in range(widest)
    ]
    has = [np.concatenate([k < lengths, pad.astype(bool)]) for k in range(1, widest)]  # (C + max_n,) each
    hashes = np.full(chars, _FNV_OFFSET, np.uint32)  # (C,) hash of the n-gram starting at each character
    grams = np.zeros((chars, max_n), np.uint32)  # (C, max_n) hash of its n-gram of 1..max_n characters
    for n in range(max_n):  # grow every n-gram by the character n after its start
        for k in range(widest):  # one step per byte (UTF-8: at most 4), the first always there
            grown = (hashes ^ byte[k][n : n + chars]) * np.uint32(_FNV_PRIME)  # (C,)
            hashes = grown if k == 0 else np.where(has[k - 1][n : n + chars], grown, hashes)
        grams[:, n] = hashes
    n_chars = np.arange(1, max_n + 1)  # (max_n,)
    valid = (n_chars <= left[:, None]) & (n_chars >= min_n)  # (C, max_n) the n-gram exists and is long enough
    if min_n <= 1:  # fastText skips the lone "<" and ">" markers
        valid[:, 0] &= (left > 1) & (np.arange(len(begins)) != first[word_of])
    counts = np.add.reduceat(valid.sum(axis=1), first)  # (k,) every word has characters: "<" and ">"
    return grams[valid].astype(np.int64) % bucket, counts  # row-major: start after start, n growing
