"""Batch's fast paths give what the plain paths give: prepare_many = prepare one by one, whole-read
line splitting = the line by line loop, weights alone = the weights of a full run, bit for bit."""

from __future__ import annotations

import io
import os
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxembed.batch import columns
from ctxembed.batch.driver import LineSource
from ctxembed.batch.pool import read_frame, write_frame
from ctxembed.batch.records import LongLine
from ctxembed.core.attention import AttentionConfig, encode, random_params
from ctxembed.errors import DataError
from tests.conftest import FIXTURES

EXAMPLES = int(os.environ.get("CTXEMBED_FUZZ_EXAMPLES", "60"))
# words of the shipped vocabulary, and texts that must leave the fast path for prepare()
WORDS = ["the", "river", "bank", "money", "İstanbul", "ΣΟΦΟΣ", "u.s.", "don't", "co-founder", "xyzzyq", "3.5", "naïve"]
# real text: capitals, punctuation stuck to words, clitics (straight, curly and modifier-letter apostrophes)
PROSE = [
    "The",
    "Bank's",
    "river,",
    '"no',
    'evidence"',
    "isn\u2019t",
    "it's.",
    "(1961)",
    "U.S.",
    "Jr..",
    "rock\u02bcn\u02bcroll",
    "Can't",
    "bankers'",
    "--",
    "'s",
    "DON'T",
    "e.g.",
    "naïve;",
    "ΣΟΦΟΣ'",
    "\u2018hello\u2019",
    "_x_",
    "ﬁne",
]
ODD = [
    "",
    "   ",
    "\ufeffthe bank",
    "the\u2019s bank",
    "the\x1cbank",
    "the\tbank\u2028money",
    "a" * 5000,
    "the , bank",
    "the\nbank",
    "the " * 7,
    "xyzzyq ,",
]


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    from ctxembed.engine import Engine
    from ctxembed.presets import build_settings
    from ctxembed.vectors.sources import open_vectors

    store = open_vectors()
    cased = open_vectors(str(FIXTURES / "batch" / "cased.txt"))  # case-sensitive, with clitic entries
    textbook = build_settings("textbook")
    return [
        Engine(store, build_settings("default"), max_tokens=6),
        Engine(store, textbook),
        Engine(store, textbook, oov="zero"),
        Engine(store, textbook, oov="error"),
        Engine(cased, textbook, oov="zero"),
        Engine(cased, textbook),
        Engine(subword_store(tmp_path_factory.mktemp("subwords")), textbook),
    ]


def subword_store(folder):
    """A small store with a fastText n-gram table (unknown words get vectors built from subwords) and
    rows marked as estimated from another source."""
    from ctxembed.vectors.store import Subwords, VectorStore, write_store

    rng = np.random.default_rng(3)
    words = ["the", "river", "bank", "money", "'s", "n't"]
    ngrams = Subwords(rng.standard_normal((64, 8)).astype(np.float32), 2, 4)
    estimated = {"row_source": {"estimated": np.array([0, 1, 0, 0, 1, 0], np.uint8)}}  # 'river' and "'s" estimated
    matrix = rng.standard_normal((6, 8)).astype(np.float32)
    path = write_store(folder / "sub.ctxv", words, matrix, subwords=ngrams, sections=estimated)
    return VectorStore.open(path)


def _same(a, b) -> None:
    if isinstance(b, DataError):
        assert isinstance(a, DataError) and a.message == b.message
        return
    fields = ("text", "texts", "token_keys", "in_vocab", "used", "rows", "keys")
    assert [getattr(a, f) for f in fields] == [getattr(b, f) for f in fields]
    assert a.extra.keys() == b.extra.keys()
    assert all(np.array_equal(a.extra[k], b.extra[k]) for k in a.extra)


def _one_by_one(engine, texts):
    out = []
    for text in texts:
        try:
            out.append(engine.prepare(text))
        except DataError as exc:
            out.append(exc)
    return out


texts = st.lists(
    st.one_of(
        st.lists(st.sampled_from(WORDS), min_size=0, max_size=8).map(" ".join),
        st.lists(st.sampled_from(WORDS + PROSE), min_size=0, max_size=8).map(" ".join),
        st.sampled_from(ODD),
        st.text(max_size=30),
    ),
    max_size=12,
)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=texts)
def test_prepare_many_is_prepare_one_by_one(engines, batch):
    for engine in engines:
        sentences = columns.prepare_many(engine, batch)
        assert len(sentences) == len(batch)
        for i, expected in enumerate(_one_by_one(engine, batch)):
            got = sentences.errors[i] if i in sentences.errors else sentences.sentence(i)
            _same(got, expected)
            if not isinstance(expected, DataError):
                assert sentences.columns(i) == (expected.texts, expected.in_vocab, expected.used)
                assert sentences.sources(i) == expected.sources()
                start, n = sentences.starts[i], sentences.lengths[i]
                assert sentences.rows[start : start + n].tolist() == expected.rows
                for word in ("bank", "İstanbul", "the", "u.s.", "'s", "n't", "The", "the#2", "bank#3"):
                    assert sentences.index_of(i, word) == expected.index_of(word)
                    # the whole chunk's answer at once, as batch --word reads it
                    row = int(sentences.word_rows(word)[i])
                    assert (None if row < 0 else row) == expected.index_of(word)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=texts)
def test_flat_columns_are_the_per_sentence_lists_end_to_end(engines, batch):
    for engine in engines:
        sentences = columns.prepare_many(engine, batch)
        good = [i for i in range(len(batch)) if i not in sentences.errors]
        for members in (good, good[::-1], [i for i in good if i not in sentences.prepared]):
            flat = columns.prepare_many(engine, batch).flat(members)  # before any list is made
            assert flat.tokens == [token for i in members for token in sentences.tokens[i]]
            assert flat.sources == [source for i in members for source in sentences.sources_of[i]]
            assert flat.in_vocab.tolist() == [known for i in members for known in sentences.in_vocab[i]]
            assert flat.attended.tolist() == [at for i in members for at in sentences.attended[i]]
            assert flat.token_counts.tolist() == [len(sentences.tokens[i]) for i in members]


def test_prepare_many_takes_the_fast_path_for_usual_text(engines, monkeypatch):
    engine = engines[1]
    prose = 'The Bank\u2019s river, "xyzzyq" (isn\'t it?)'
    expected = engine.prepare(prose)
    monkeypatch.setattr(engine, "prepare", lambda text: pytest.fail(f"prepare() called for {text!r}"))
    sentences = columns.prepare_many(engine, ["the river bank", prose])
    assert not sentences.prepared and not sentences.errors  # no Prepared made: the fast path, real text too
    sentence = sentences.sentence(0)
    assert sentence.texts == ["the", "river", "bank"]
    assert sentence.rows == [engine.store.find(w) for w in sentence.texts]
    tokens, in_vocab, used = sentences.columns(1)
    assert tokens == ["The", "Bank", "\u2019s", "river", ",", '"', "xyzzyq", '"', "(", "is", "n't", "it", "?", ")"]
    assert (tokens, in_vocab, used) == (expected.texts, expected.in_vocab, expected.used)
    assert 6 in used and sentences.sources(1)[6] == "subword"  # xyzzyq: no row, built from its n-grams


def test_each_distinct_word_is_tokenised_and_looked_up_once(engines, monkeypatch):
    from ctxembed.engine import Engine
    from ctxembed.vectors import lexicon

    engine = Engine(engines[1].store, engines[1].settings)
    seen = []
    real = lexicon.words_pieces
    monkeypatch.setattr(lexicon, "words_pieces", lambda words: seen.extend(words) or real(words))
    first = columns.prepare_many(engine, ["Zebras, zebras and ZEBRAS!", "zebras, Zebras isn't isn\u2019t"])
    distinct = ["Zebras,", "zebras", "and", "ZEBRAS!", "zebras,", "Zebras", "isn't", "isn\u2019t"]
    assert sorted(engine.lexicon.table().entries) == sorted(distinct)  # one entry per distinct word
    assert sorted(seen) == sorted(distinct)  # each cut once, by the tokenizer's bulk form
    second = columns.prepare_many(engine, ["ZEBRAS! zebras isn\u2019t"])
    assert sorted(seen) == sorted(distinct) and len(engine.lexicon.table().entries) == len(distinct)  # nothing new
    assert second.columns(0)[0] == ["ZEBRAS", "!", "zebras", "is", "n\u2019t"]
    assert first.columns(1)[0] == ["zebras", ",", "Zebras", "is", "n't", "is", "n\u2019t"]


def _reference_lines(data: bytes, limit: int) -> list:
    """The numbered lines of ``data`` as LineSource must give them: split at each newline (kept),
    a line longer than ``limit`` bytes (its newline included) refused."""
    pieces = data.split(b"\n")
    lines = [p + b"\n" for p in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
    return [(n, LongLine(limit) if len(line) > limit else line) for n, line in enumerate(lines, 1)]


class Trickle(io.RawIOBase):
    """A stream that gives its bytes in the given piece sizes (a pipe, a slow producer)."""

    def __init__(self, data: bytes, sizes: list[int]):
        self.data, self.sizes, self.at = data, sizes or [1], 0

    def read(self, n: int = -1) -> bytes:
        size = self.sizes[self.at % len(self.sizes)] if self.at < len(self.data) else 0
        piece = self.data[self.at : self.at + max(1, min(n, size))]
        self.at += len(piece)
        return piece


@settings(max_examples=EXAMPLES * 2, deadline=None)
@given(
    data=st.lists(st.sampled_from([b"ab", b"c\r", b"\r\n", b"\n", b"\r", b" ", b"xyz" * 9, b"\xff"]), max_size=40).map(
        b"".join
    ),
    sizes=st.lists(st.integers(1, 40), max_size=5),
    limit=st.integers(1, 30),
    chunk=st.integers(1, 9),
)
def test_lines_are_split_the_same_whatever_the_reads(data, sizes, limit, chunk):
    source = LineSource(Trickle(data, sizes), limit)
    got = []
    while (block := source.next_chunk(chunk)) is not None:
        assert 1 <= len(block) <= chunk
        got.extend(block)
    assert got == _reference_lines(data, limit)
    assert source.pending_bytes == 0


def test_frames_cross_a_pipe_whole():
    read, write = os.pipe()
    payloads = [b"", b"x", os.urandom(3 << 20), b"end"]  # bigger than any pipe: written in parts
    many = [os.urandom(n % 7) for n in range(3000)] + [os.urandom(2 << 20)]  # more pieces than one writev takes
    received = []
    frames = len(payloads) + 1
    reader = threading.Thread(target=lambda: received.extend(read_frame(read) for _ in range(frames)), daemon=True)
    reader.start()
    try:
        for payload in payloads:
            write_frame(write, [payload])
        write_frame(write, many)
        reader.join(timeout=30)
    finally:
        os.close(write)
    os.close(read)
    assert received == [*payloads, b"".join(many)]


@pytest.mark.parametrize(
    "config",
    [
        AttentionConfig(),
        AttentionConfig(heads=2, layers=3, residual=True, layer_norm=True, exclude_self=True),
        AttentionConfig(heads=4, layers=2, causal=True, causal_mode="after", normalization="sum", positions=True),
    ],
)
@pytest.mark.parametrize("learned", [False, True])
def test_weights_alone_are_the_weights_of_a_full_run(config, learned):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((5, 9, 8)).astype(np.float32)  # (B, T, d)
    params = random_params(8, 4, config, seed=3, bias=True, output_projection=True) if learned else None
    bias = rng.standard_normal((5, 9)).astype(np.float32)  # (B, T)
    full = encode(x, config, params, key_bias=bias)
    alone = encode(x, config, params, key_bias=bias, outputs=False)
    assert alone.contextual is None and len(alone.layer_outputs) == config.layers - 1
    assert alone.weights.tobytes() == full.weights.tobytes()
    for a, b in zip(alone.layer_outputs, full.layer_outputs, strict=False):
        assert a.tobytes() == b.tobytes()
    with pytest.raises(ValueError, match="trace"):
        encode(x, config, params, outputs=False, trace=True)
