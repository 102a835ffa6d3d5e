"""From a subword model's pieces back to words: a word's vector and a word's attention.

A word's vector is the mean of its pieces' vectors. A word's attention (Clark et al. 2019, "What does
BERT look at?") is the SUM over its key pieces (attention paid to any of its pieces is paid to the word)
and the MEAN over its query pieces (each of its pieces looks around; the word looks the way they do on
average), so each word's row still sums to what its pieces' rows summed to. Pieces that belong to no word
([CLS], [SEP]) are left out; ``renormalise`` then divides each row by its sum, so a row is a share of
the attention the word pays to the other WORDS.

>>> import numpy as np
>>> owner = np.array([-1, 0, 1, 1, -1])       # [CLS] I deposit ##ed [SEP]
>>> weights = np.full((5, 5), 0.2)             # every piece looks at every piece equally
>>> word_attention(weights, owner, 2)          # "deposited" gets two pieces' worth
array([[0.2, 0.4],
       [0.2, 0.4]])
>>> word_attention(weights, owner, 2, renormalise=True)
array([[0.33333333, 0.66666667],
       [0.33333333, 0.66666667]])
>>> hidden_share(weights, owner, 2)           # what renormalising hid: each word's share to [CLS], [SEP]
array([[0.2, 0.2],
       [0.2, 0.2]])
"""

from __future__ import annotations

import numpy as np


def membership(owner: np.ndarray, words: int, dtype=np.float32) -> np.ndarray:
    """(W, P) 1 where piece p belongs to word w; ``owner`` (P,) holds each piece's word, -1 for none."""
    member = np.zeros((words, len(owner)), dtype=dtype)  # (W, P)
    pieces = np.flatnonzero(owner >= 0)  # (P',) the pieces of words
    member[owner[pieces], pieces] = 1
    return member


def word_vectors(vectors: np.ndarray, owner: np.ndarray, words: int) -> np.ndarray:
    """Mean of each word's pieces: vectors (..., P, D) -> (..., W, D). Every word needs a piece."""
    member = membership(owner, words, vectors.dtype)  # (W, P)
    member /= member.sum(axis=1, keepdims=True)  # (W, P) rows of 1 / n_w
    return member @ vectors  # (W, P) x (..., P, D) -> (..., W, D)


def word_attention(weights: np.ndarray, owner: np.ndarray, words: int, *, renormalise: bool = False) -> np.ndarray:
    """Piece attention (..., P, P) -> word attention (..., W, W): keys summed, queries averaged."""
    member = membership(owner, words, weights.dtype)  # (W, P)
    to_keys = weights @ member.T  # (..., P, P) x (P, W) -> (..., P, W) keys summed
    mean_queries = member / member.sum(axis=1, keepdims=True)  # (W, P)
    result = mean_queries @ to_keys  # (W, P) x (..., P, W) -> (..., W, W) queries averaged
    if renormalise:
        total = result.sum(axis=-1, keepdims=True)  # (..., W, 1)
        result /= np.where(total > 0, total, 1)  # (..., W, W) rows sum to 1 over the words
    return result


def hidden_share(weights: np.ndarray, owner: np.ndarray, words: int) -> np.ndarray:
    """Piece attention (..., P, P) -> (..., W, S): each word's share of its attention (its query pieces
    averaged, as in :func:`word_attention`) that goes to each of the S pieces of no word ([CLS], [SEP]),
    in their order: what ``renormalise`` hides. A word's S shares plus its unrenormalised row sum to 1."""
    member = membership(owner, words, weights.dtype)  # (W, P)
    mean_queries = member / member.sum(axis=1, keepdims=True)  # (W, P)
    specials = np.flatnonzero(owner < 0)  # (S,)
    return mean_queries @ weights[..., specials]  # (W, P) x (..., P, S) -> (..., W, S)
