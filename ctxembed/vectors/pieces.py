"""The piece tokenizer interface: what a trained model's tokenizer gives the engine.

A trained model reads pieces (WordPiece's ``bank`` and ``##ed``, a byte-level BPE's ``Ġbank``), while
every row ctxembed shows is a word of its own tokenizer (:mod:`ctxembed.vectors.tokenize`). A piece
tokenizer says, for each piece, which characters of the text it came from, aligned on words: a
piece's ``start`` is its first character that belongs to a word, never the white space a byte-level
BPE folds into the piece (``Ġbank`` of "the bank" starts at ``b``, not at the space), so
:func:`pieces_to_words` gives every piece to the word that holds it. :func:`word_aligned` is that
rule for a tokenizer whose own offsets include the space.

:class:`ctxembed.vectors.wordpiece.WordPiece` (BERT) implements it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np


class Piece(NamedTuple):
    """One piece: its vocabulary ``id`` and ``text`` (``##ed``, ``Ġbank``), and the characters it came from."""

    id: int
    text: str
    start: int  # the first character of the text it came from that belongs to a word
    end: int  # one past its last character


@runtime_checkable
class PieceTokenizer(Protocol):
    """text -> pieces with word-aligned character spans, and the ids of its special and unknown pieces."""

    unknown: str  # the piece of a stretch the vocabulary cannot spell ("[UNK]"; "" for a byte-level BPE)

    def encode(self, text: str) -> list[Piece]:
        """Every piece of ``text`` in order, without the special pieces a model adds around a sentence."""

    def id_of(self, piece: str) -> int:
        """The id of a piece of the vocabulary (a special one: "[CLS]"); KeyError for none."""


def word_aligned(text: str, start: int, end: int) -> tuple[int, int]:
    """(start, end) of a piece moved past the white space it holds at either end (a byte-level BPE's
    ``Ġbank`` spans " bank"; its word is "bank"); a piece of white space alone keeps its span."""
    stripped = text[start:end].strip()
    if not stripped:
        return start, end
    first = start + text[start:end].index(stripped)
    return first, first + len(stripped)


def pieces_to_words(pieces: Sequence[Piece], spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """(P,) index of the word holding each piece: the word whose span (start, end) holds the piece's
    first character, or the last word starting before it (BERT's "don" of "don't" goes to "do");
    -1 before the first word."""
    starts = np.array([s for s, _ in spans], dtype=np.int64)  # (W,) in order
    at = np.array([p.start for p in pieces], dtype=np.int64)  # (P,)
    return np.searchsorted(starts, at, side="right") - 1  # (P,)
