"""fastText character n-gram hashing, in pure Python, so cached fastText stores need no gensim.

Mirrors fastText (and gensim's ``ft_ngram_hashes``): the word is wrapped as ``<word>``, its
n-grams of ``min_n``..``max_n`` characters are taken over UTF-8 bytes (never splitting a
character), and each is hashed with 32-bit FNV-1a, bytes sign-extended as in fastText's C++.
"""

from __future__ import annotations

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
