"""BERT's uncased WordPiece, by hand (vectors/wordpiece.py): hand-checked cases, each piece's character
span, the pieces given to ctxembed's words, and the same ids as Hugging Face's ``tokenizers`` on the
shipped Brown text (every other line, for time) (when ``tokenizers`` is installed)."""

from __future__ import annotations

import collections
import gzip

import pytest

from ctxembed.vectors.pieces import pieces_to_words
from ctxembed.vectors.tokenize import tokenize
from ctxembed.vectors.wordpiece import WordPiece, basic_tokens
from tests.conftest import REPO

TOY = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "i",
    "deposit",
    "##ed",
    "money",
    "in",
    "the",
    "bank",
    "don",
    "'",
    "t",
    "cafe",
    "!",
    ",",
    "we",
    "sat",
    "on",
    "river",
    "##s",
    "un",
    "##aff",
    "##able",
    "東",
    "京",
    ".",
]


@pytest.fixture(scope="module")
def toy():
    return WordPiece({t: i for i, t in enumerate(TOY)})


def texts(vocab, text):
    return [p.text for p in vocab.encode(text)]


def test_longest_match_first_pieces(toy):
    assert texts(toy, "I deposited money in the bank") == ["i", "deposit", "##ed", "money", "in", "the", "bank"]
    assert texts(toy, "unaffable banks") == ["un", "##aff", "##able", "bank", "##s"]


def test_a_word_with_an_unmatched_part_is_one_unknown(toy):
    assert texts(toy, "bankz river") == ["[UNK]", "river"]
    assert texts(toy, "a" * 101) == ["[UNK]"]


def test_basic_tokenizer_lowercases_strips_accents_splits_punctuation_and_cjk(toy):
    assert texts(toy, "Café, don't!") == ["cafe", ",", "don", "'", "t", "!"]
    assert texts(toy, "東京") == ["東", "京"]
    assert [t for t, _, _ in basic_tokens("a\x00b\tc\u200bd")] == ["ab", "cd"]  # controls removed, tab splits
    assert [t for t, _, _ in basic_tokens("ab\x0bcd")] == ["abcd"]  # a vertical tab is removed, not a space


def test_each_piece_keeps_the_characters_it_came_from(toy):
    text = "We sat, Café!"
    spans = [(p.text, text[p.start : p.end]) for p in toy.encode(text)]
    assert spans == [("we", "We"), ("sat", "sat"), (",", ","), ("cafe", "Café"), ("!", "!")]
    greek = " ΟΔΟΣ x"
    assert [greek[s:e] for _, s, e in basic_tokens(greek)] == ["ΟΔΟΣ", "x"]


def test_pieces_go_to_the_ctxembed_word_that_holds_them(toy):
    text = "I don't bank."
    words = tokenize(text)
    assert [w.text for w in words] == ["I", "do", "n't", "bank", "."]
    pieces = toy.encode(text)
    owners = pieces_to_words(pieces, [(w.start, w.end) for w in words])
    by_word = collections.defaultdict(list)
    for piece, owner in zip(pieces, owners.tolist(), strict=True):
        by_word[words[owner].text].append(piece.text)
    # BERT cuts "don't" as don ' t; "don" starts inside "do", the apostrophe and t inside "n't"
    assert dict(by_word) == {"I": ["i"], "do": ["don"], "n't": ["'", "t"], "bank": ["bank"], ".": ["."]}


def test_a_vocabulary_without_the_special_tokens_is_refused():
    with pytest.raises(ValueError, match="CLS"):
        WordPiece({"[PAD]": 0, "[UNK]": 1, "[SEP]": 2})


@pytest.mark.parametrize("end", ["\n", ""])
def test_a_vocab_file_gives_each_line_its_line_number(tmp_path, end):
    """Only "\n" ends a line: tokens holding other line-like characters stay whole, the file's last
    newline is no token, and a repeated token keeps its last line."""
    odd = ["a\x1cb", "c\u2028d", "e\x85f", "x"]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join([*TOY, *odd]) + end, encoding="utf-8", newline="")
    vocab = WordPiece.from_file(path)
    assert vocab.vocab == {t: i for i, t in enumerate([*TOY, *odd])}
    assert [vocab.text_of(i) for i in range(len(TOY) + len(odd))] == [*TOY, *odd]
    path.write_text("\n".join([*TOY, "x", "y", "x"]) + end, encoding="utf-8")
    assert WordPiece.from_file(path).vocab == {
        **{t: i for i, t in enumerate(TOY)},
        "y": len(TOY) + 1,
        "x": len(TOY) + 2,
    }


def brown_lines():
    with gzip.open(REPO / "data" / "brown.txt.gz", "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def test_same_ids_as_hugging_face_tokenizers_on_all_of_brown():
    """A vocabulary built from Brown (frequent words, every character with and without ##, common
    endings), so whole words, pieces and [UNK] all occur; `tokenizers`' BertWordPieceTokenizer with
    it must give the same ids on every line."""
    tokenizers = pytest.importorskip("tokenizers")
    lines = brown_lines()[::2] + [
        "Café naïve RÉSUMÉ, don't!",
        "ΟΔΟΣ 東京 tab\there \x00nul \ufffd ab\x0bcd e\u2028f",
        "a" * 120,
    ]
    counts = collections.Counter(t for line in lines[::7] for t, _, _ in basic_tokens(line))
    chars = sorted({c for word in counts for c in word})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars + ["##" + c for c in chars]
    vocab += [w for w, _ in counts.most_common(3000) if len(w) > 1]
    vocab += ["##" + e for e in ("s", "ed", "ing", "ly", "er", "tion", "ment")]
    vocab = list(dict.fromkeys(vocab))[:-40]  # drop a few characters' ## forms, so some words are [UNK]
    ids = {t: i for i, t in enumerate(vocab)}
    ours = WordPiece(ids)
    theirs = tokenizers.BertWordPieceTokenizer(vocab=ids, lowercase=True)
    theirs.no_truncation()
    expected = [e.ids for e in theirs.encode_batch(lines)]
    got = [[ours.cls_id, *(p.id for p in ours.encode(line)), ours.sep_id] for line in lines]
    mismatched = [line for line, a, b in zip(lines, got, expected, strict=True) if a != b]
    assert not mismatched, mismatched[:3]
    flat = [i for row in got for i in row]
    assert flat.count(ours.unk_id) > 0 and sum(1 for i in flat if vocab[i].startswith("##")) > 1000
