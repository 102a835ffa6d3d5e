"""A corpus as rows of the vector store, and the padded, masked batches training reads it in.

Reading keeps one sentence per line, or splits running text at sentence ends; tokens are the vector
store's words (out-of-vocabulary ones left out, as ``attend --oov skip`` does).
"""

from __future__ import annotations

import gzip
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ctxembed.engine import Engine
from ctxembed.errors import DataError
from ctxembed.presets import build_settings
from ctxembed.vectors.corpus import open_corpus

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z])")
_LINE_BYTES_PER_TOKEN = 64  # a line is read up to max_tokens * this many bytes; the rest is cut off


@dataclass
class Corpus:
    """Sentences as store rows, the words they use, and what reading them counted."""

    sentences: list[np.ndarray]  # each (n,) int32 ids into ``vocabulary``
    vocabulary: np.ndarray  # (V,) int64 store rows of the words the corpus uses
    counts: np.ndarray  # (V,) occurrences of each
    sha256: str  # of the corpus bytes as read (after .gz decompression)
    stats: dict = field(default_factory=dict)


def _bounded_lines(stream, limit: int, stats: dict, digest) -> Iterator[bytes]:
    """Lines of at most ``limit`` bytes; a longer line is cut there (counted), and its rest skipped
    without ever being held in memory whole."""
    while True:
        line = stream.readline(limit)
        if not line:
            return
        digest.update(line)
        if not line.endswith(b"\n") and len(line) == limit:
            stats["cropped_lines"] += 1
            while (rest := stream.readline(limit)) and not rest.endswith(b"\n"):
                digest.update(rest)
            digest.update(rest)
        yield line


def read_corpus(source: str | Path, store, *, max_tokens: int = 128, name: str | None = None) -> Corpus:
    """Tokenise a corpus with the vector store's vocabulary. Out-of-vocabulary tokens are left out
    (as ``attend --oov skip`` does); a sentence longer than ``max_tokens`` keeps its first
    ``max_tokens`` tokens. Raises DataError when no sentence has an in-vocabulary word."""
    engine = Engine(store, build_settings("textbook"), oov="skip", max_tokens=4096)
    stats = {"lines": 0, "invalid_lines": 0, "cropped_lines": 0, "cropped_sentences": 0, "sentences_without_words": 0}
    stats |= {"oov_tokens": 0}
    digest = hashlib.sha256()
    ids: dict[int, int] = {}  # store row -> corpus id
    sentences = []
    try:
        stream, _ = open_corpus(source)
        with stream:
            for raw in _bounded_lines(stream, max(65536, max_tokens * _LINE_BYTES_PER_TOKEN), stats, digest):
                stats["lines"] += 1
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError:
                    stats["invalid_lines"] += 1
                    continue
                if "\x00" in line:
                    stats["invalid_lines"] += 1
                    continue
                for text in _SENTENCE_END.split(line.strip()):
                    if not text.strip():
                        continue
                    words = text.split()
                    if len(words) > max_tokens:  # a word gives at most two tokens: the engine's 4096 is safe
                        text = " ".join(words[:max_tokens])
                        stats["cropped_sentences"] += 1
                    try:
                        prepared = engine.prepare(text)
                    except DataError:
                        stats["sentences_without_words"] += 1
                        continue
                    rows = [row for row in prepared.rows if row >= 0]  # subword vectors have no row to predict
                    stats["oov_tokens"] += len(prepared.tokens) - len(rows)
                    if not rows:
                        stats["sentences_without_words"] += 1
                        continue
                    if len(rows) > max_tokens:
                        stats["cropped_sentences"] += len(words) <= max_tokens  # not counted twice
                        rows = rows[:max_tokens]
                    sentences.append(np.array([ids.setdefault(row, len(ids)) for row in rows], dtype=np.int32))
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise DataError(f"{source}: cannot read the corpus ({exc})") from None
    label = name or str(source)
    # mostly binary: refused even when a few lines happen to decode (random bytes give a word or two)
    if stats["invalid_lines"] and stats["invalid_lines"] * 2 >= stats["lines"]:
        raise DataError(
            f"{label}: does not look like text ({stats['invalid_lines']} of {stats['lines']} lines are not UTF-8 text)"
        )
    if not sentences:
        raise DataError(f"{label}: no sentence with an in-vocabulary word ({stats['lines']} lines read)")
    vocabulary = np.array(list(ids), dtype=np.int64)  # (V,) in order of first appearance
    counts = np.bincount(np.concatenate(sentences), minlength=len(ids))  # (V,)
    stats |= {"sentences": len(sentences), "tokens": int(counts.sum()), "vocabulary": len(ids)}
    return Corpus(sentences, vocabulary, counts, digest.hexdigest(), stats)


# ------------------------------------------------------------------------------------------ batches


@dataclass
class Batch:
    ids: np.ndarray  # (B, T) corpus ids, 0 at padding
    real: np.ndarray  # (B, T) True at real tokens
    masked: np.ndarray  # (B, T) True at tokens to predict
    negatives: np.ndarray  # (K,) corpus ids of the shared negative words


def make_batches(sentences: list[np.ndarray], order: np.ndarray, batch_tokens: int) -> list[np.ndarray]:
    """Group sentence indices into batches of similar length whose padded size B x T_max stays within
    ``batch_tokens`` (a longer sentence gets a batch of its own). ``order`` breaks ties between equal
    lengths, so a new order gives new batches."""
    lengths = np.array([len(sentences[i]) for i in order])  # (N,)
    by_length = order[np.argsort(lengths, kind="stable")]  # (N,) shortest first
    batches, current, longest = [], [], 0
    for index in by_length:
        n = len(sentences[index])
        if current and (len(current) + 1) * max(longest, n) > batch_tokens:
            batches.append(np.array(current))
            current, longest = [], 0
        current.append(index)
        longest = max(longest, n)
    if current:
        batches.append(np.array(current))
    return batches


def fill_batch(
    sentences: list[np.ndarray],
    members: np.ndarray,
    rng: np.random.Generator,
    mask_rate: float,
    sampling: np.ndarray,
    negatives: int,
) -> Batch:
    """Pad the sentences ``members`` into (B, T), choose the masked tokens (at least one per sentence)
    and draw the negatives from ``sampling`` (V,) probabilities."""
    lengths = np.array([len(sentences[i]) for i in members])  # (B,)
    B, T = len(members), int(lengths.max())
    ids = np.zeros((B, T), dtype=np.int64)  # (B, T)
    for row, index in enumerate(members):
        ids[row, : lengths[row]] = sentences[index]
    real = np.arange(T)[None, :] < lengths[:, None]  # (1, T) < (B, 1) -> (B, T)
    masked = (rng.random((B, T)) < mask_rate) & real  # (B, T)
    forced = np.floor(rng.random(B) * lengths).astype(np.int64)  # (B,) a token of each sentence
    masked[np.arange(B), forced] |= ~masked.any(axis=1)  # a sentence without a masked token gets one
    drawn = rng.choice(len(sampling), size=negatives, p=sampling)  # (K,)
    return Batch(ids, real, masked, drawn)
