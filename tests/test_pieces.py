"""The piece tokenizer interface (vectors/pieces.py): pieces carry word-aligned spans, so a byte-level
BPE's "Ġbank", whose own offsets start at the space before it, is given to "bank" and not to the word
before; a family with such a tokenizer and no special pieces runs through the one trained engine."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ctxembed.vectors.pieces import Piece, PieceTokenizer, pieces_to_words, word_aligned
from ctxembed.vectors.tokenize import tokenize
from ctxembed.vectors.wordpiece import WordPiece


class ToyByteBPE:
    """A byte-level-BPE-like tokenizer: each word with the space before it is one piece, "Ġbank"."""

    unknown = ""

    def __init__(self, vocab: dict[str, int], *, aligned: bool = True):
        self.vocab, self.aligned = vocab, aligned

    def id_of(self, piece: str) -> int:
        return self.vocab[piece]

    def encode(self, text: str) -> list[Piece]:
        pieces, at = [], 0
        for word in text.split(" "):
            start, end = max(at - 1, 0), at + len(word)  # its own offsets hold the space before it
            if self.aligned:
                start, end = word_aligned(text, start, end)
            piece = ("Ġ" if at else "") + word
            pieces.append(Piece(self.vocab.get(word, 1), piece, start, end))
            at = end + 1 if self.aligned else at + len(word) + 1
        return pieces


def test_a_byte_level_piece_goes_to_its_own_word_not_the_one_before():
    text = "we sat on the river bank"
    spans = [(t.start, t.end) for t in tokenize(text)]
    vocab = {w: i for i, w in enumerate(["<pad>", "<unk>", *text.split()])}
    raw = ToyByteBPE(vocab, aligned=False).encode(text)
    assert [p.text for p in raw][-1] == "Ġbank" and text[raw[-1].start] == " "
    assert pieces_to_words(raw, spans).tolist() == [0, 0, 1, 2, 3, 4]  # unaligned: each piece to the word before
    aligned = ToyByteBPE(vocab).encode(text)
    assert pieces_to_words(aligned, spans).tolist() == [0, 1, 2, 3, 4, 5]
    assert word_aligned(" bank", 0, 5) == (1, 5) and word_aligned("   ", 0, 3) == (0, 3)


def test_wordpiece_and_the_toy_bpe_are_piece_tokenizers():
    assert isinstance(WordPiece({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]"])}), PieceTokenizer)
    assert isinstance(ToyByteBPE({}), PieceTokenizer)


def test_a_family_without_special_pieces_runs_through_the_trained_engine(tiny_model, monkeypatch):
    """The tiny BERT's weights read through the toy BPE, with no [CLS] or [SEP]: every word keeps its row."""
    from ctxembed.engine import families
    from ctxembed.engine.registry import open_engine
    from ctxembed.vectors import catalogue

    bert = families.FAMILIES["bert"]

    def load(folder):
        config, weights, wordpiece = bert.load(folder)
        return config, weights, ToyByteBPE(wordpiece.vocab)

    layout = replace(bert.layout, family="toy-bpe", load=load)  # its folder: the BERT's, read with its own tokenizer
    monkeypatch.setitem(families.FAMILIES, "toy-bpe", replace(bert, name="toy-bpe", layout=layout, begin=(), end=()))
    monkeypatch.setitem(catalogue.MODELS, "toy", replace(catalogue.MODELS[tiny_model.name], family="toy-bpe"))
    monkeypatch.setattr("ctxembed.engine.trained.model_path", lambda name: tiny_model.folder)
    engine = open_engine(model="toy")
    prepared = engine.prepare("we sat on the river bank")
    assert prepared.piece_texts == ["we", "Ġsat", "Ġon", "Ġthe", "Ġriver", "Ġbank"]
    assert prepared.owner.tolist() == [0, 1, 2, 3, 4, 5]  # each piece its own word's, none hidden
    [result] = engine.run([prepared])
    assert result.weights.shape == (2, 4, 6, 6) and engine.card.masks.hidden == ()
    np.testing.assert_allclose(result.weights.sum(axis=-1), 1.0, atol=1e-5)
