"""The reference for cold start: the job of ``ctxembed compare ... --json``, done the plain gensim way.

Load the same 200,000 GloVe vectors through gensim's KeyedVectors from a word2vec binary file,
tokenise both sentences, take their static vectors, run textbook attention softmax(X Xᵀ / sqrt(d)) X
on each, and print the static and contextual cosine of the shared word as JSON. (ctxembed's default
preset does more than the textbook; the reference does not need to: almost all of its time is the
gensim import and the load.)

    python benchmarks/reference_gensim.py VECTORS.bin bank "we sat on the river bank" "I deposited money in the bank"
"""

from __future__ import annotations

import json
import math
import re
import sys

import numpy as np
from gensim.models import KeyedVectors

TOKEN = re.compile(r"[^\W_]+(?:[-.][^\W_]+)*|[^\w\s]")  # words, numbers, hyphenated words; other symbols alone


def textbook_attention(x: np.ndarray) -> np.ndarray:
    """softmax(X Xᵀ / sqrt(d)) X: (T, d) -> (T, d)."""
    scores = x @ x.T / math.sqrt(x.shape[1])  # (T, d) x (d, T) -> (T, T)
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))  # (T, T) stable softmax
    weights /= weights.sum(axis=1, keepdims=True)
    return weights @ x  # (T, T) x (T, d) -> (T, d)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def main() -> None:
    path, word, *sentences = sys.argv[1:]
    kv = KeyedVectors.load_word2vec_format(path, binary=True)  # (200000, 100) float32
    static, contextual = [], []
    for sentence in sentences:
        tokens = [t for t in TOKEN.findall(sentence.lower()) if t in kv.key_to_index]
        x = kv[tokens]  # (T, d) static vectors
        row = tokens.index(word)
        static.append(x[row])
        contextual.append(textbook_attention(x)[row])
    n = len(sentences)
    print(
        json.dumps(
            {
                "word": word,
                "sentences": sentences,
                "static_similarity": [[cosine(static[i], static[j]) for j in range(n)] for i in range(n)],
                "contextual_similarity": [[cosine(contextual[i], contextual[j]) for j in range(n)] for i in range(n)],
            }
        )
    )


if __name__ == "__main__":
    main()
