"""BERT's uncased tokenizer, by hand: the basic tokenizer, then greedy longest-match WordPiece.

It gives the piece ids Hugging Face's ``BertTokenizer`` (and ``tokenizers``' BertNormalizer +
BertPreTokenizer + WordPiece) give for an uncased vocabulary, and keeps each piece's character span
in the original text, so each piece can be given to the ctxembed word (:mod:`ctxembed.vectors.tokenize`)
that holds it::

    >>> vocab = WordPiece({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "i", "deposit", "##ed"])})
    >>> [p.text for p in vocab.encode("I deposited")]
    ['i', 'deposit', '##ed']

The basic tokenizer removes control characters, puts spaces around CJK ideographs, lower-cases and
strips accents (NFD, marks dropped), then splits on white space and on every punctuation character.
"""

from __future__ import annotations

import re
import unicodedata
from os import PathLike

from ctxembed.vectors.pieces import Piece

SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]")
MAX_WORD_CHARS = 100  # a longer word is one [UNK], as BERT's tokenizer does


def _is_punctuation(ch: str) -> bool:
    """BERT's punctuation: every non-alphanumeric ASCII symbol, and Unicode's P* categories."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def _is_dropped(ch: str) -> bool:
    """What BERT's cleaning removes: NUL, U+FFFD and control characters other than white space."""
    if ch in "\t\n\r":
        return False
    return ch in "\x00\ufffd" or unicodedata.category(ch).startswith("C")


def _normalised(ch: str) -> str:
    """One character lower-cased and with its accents stripped (NFD, marks dropped), as BERT does,
    one character at a time (so a final capital sigma becomes a plain sigma, as in ``tokenizers``)."""
    lowered = ch.lower()
    if lowered.isascii():
        return lowered
    return "".join(c for c in unicodedata.normalize("NFD", lowered) if unicodedata.category(c) != "Mn")


_ASCII_PUNCTUATION = re.escape("".join(chr(c) for c in range(33, 127) if not chr(c).isalnum()))
_ASCII_TOKEN = re.compile(rf"[^\s{_ASCII_PUNCTUATION}]+|[{_ASCII_PUNCTUATION}]")
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def basic_tokens(text: str) -> list[tuple[str, int, int]]:
    """BERT's basic (uncased) tokenizer with offsets: (token, start, end) per token, where
    text[start:end] is the stretch of the original text the normalised token came from."""
    if text.isascii() and not _ASCII_CONTROL.search(text):  # the usual case: one regex pass
        return [(m.group().lower(), m.start(), m.end()) for m in _ASCII_TOKEN.finditer(text)]
    tokens: list[tuple[str, int, int]] = []
    word: list[str] = []
    start = 0

    def close(end: int) -> None:
        if word:
            tokens.append(("".join(word), start, end))
            word.clear()

    for at, ch in enumerate(text):
        if _is_dropped(ch):  # before white space: BERT removes a vertical tab, it does not split there
            continue
        if ch.isspace():
            close(at)
        elif _is_cjk(ord(ch)):
            close(at)
            tokens.append((ch, at, at + 1))
        else:
            for c in _normalised(ch):
                if _is_punctuation(c):
                    close(at)
                    tokens.append((c, at, at + 1))
                else:
                    if not word:
                        start = at
                    word.append(c)
    close(len(text))
    return tokens


class WordPiece:
    """A WordPiece vocabulary (token -> id) and BERT's uncased tokenization with it: a
    :class:`ctxembed.vectors.pieces.PieceTokenizer` (a piece's span is its basic token's, word-aligned)."""

    unknown = "[UNK]"

    def __init__(self, vocab: dict[str, int]):
        missing = [s for s in SPECIAL if s not in vocab]
        if missing:
            raise ValueError(f"the vocabulary lacks {', '.join(missing)}")
        self.vocab = vocab
        self.unk_id, self.cls_id, self.sep_id, self.pad_id = (vocab[s] for s in ("[UNK]", "[CLS]", "[SEP]", "[PAD]"))
        in_order = list(vocab.values()) == list(range(len(vocab)))  # a vocab.txt's: no sort needed
        self._texts = list(vocab) if in_order else sorted(vocab, key=vocab.__getitem__)
        self._cache: dict[str, list[str]] = {}

    @classmethod
    def from_file(cls, path: str | PathLike) -> WordPiece:
        """From a vocab.txt: one token a line, its id its line number (a token repeated keeps its last)."""
        with open(path, encoding="utf-8") as f:
            text = f.read()
        lines = text.split("\n")  # not splitlines(): a token may hold \x1c, \u2028 ... and stay one token
        if text.endswith("\n"):
            lines.pop()  # the last line's end, not an empty token
        return cls(dict(zip(lines, range(len(lines)), strict=True)))

    def id_of(self, piece: str) -> int:
        return self.vocab[piece]

    def text_of(self, piece_id: int) -> str:
        return self._texts[piece_id]

    def word_pieces(self, word: str) -> list[str]:
        """Greedy longest-match-first pieces of one basic token; ``[UNK]`` if some part matches nothing."""
        found = self._cache.get(word)
        if found is not None:
            return found
        pieces: list[str] = [] if len(word) <= MAX_WORD_CHARS else ["[UNK]"]
        start = 0 if not pieces else len(word)
        while start < len(word):
            end = next((e for e in range(len(word), start, -1) if self._known(word, start, e)), None)
            if end is None:  # no piece of the vocabulary starts here: the whole word is unknown
                pieces = ["[UNK]"]
                break
            pieces.append(word[start:end] if start == 0 else "##" + word[start:end])
            start = end
        if len(self._cache) < 200_000:
            self._cache[word] = pieces
        return pieces

    def _known(self, word: str, start: int, end: int) -> bool:
        return (word[start:end] if start == 0 else "##" + word[start:end]) in self.vocab

    def encode(self, text: str) -> list[Piece]:
        """Every piece of ``text`` in order, without [CLS] and [SEP]."""
        return [
            Piece(self.vocab[p], p, start, end)
            for token, start, end in basic_tokens(text)
            for p in self.word_pieces(token)
        ]
