"""What a sentence may cost is decided before the cost is paid: too many tokens are counted cheaply
and refused before any token's vector is built (F3), and a very long word's subwords are bounded (F4)."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxembed.errors import DataError
from ctxembed.vectors.lexicon import Lexicon
from tests.cli_helpers import measured
from tests.conftest import FIXTURES
from tests.test_fast_paths import EXAMPLES, subword_store, texts

MARKS = "e" + "\u0301" * 19999  # 20,000 tokens: a combining mark is a symbol, a token of its own


@pytest.fixture(scope="module")
def lexicons(tmp_path_factory):
    from ctxembed.vectors.sources import open_vectors

    shipped = open_vectors()  # n-grams of 3 to 6 characters: every token has a vector
    cased = open_vectors(str(FIXTURES / "batch" / "cased.txt"))  # no n-grams, case and clitic fallbacks
    small = subword_store(tmp_path_factory.mktemp("subwords"))  # n-grams of 2 to 4 characters
    return [Lexicon(store, oov=oov) for store in (shipped, cased, small) for oov in ("skip", "zero")]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=texts, extra=st.sampled_from(["", " \u0301\u0301 x", " don't DON'T Bank's", " a" * 30]))
def test_the_cheap_count_is_the_number_of_tokens_that_enter_attention(lexicons, batch, extra):
    from ctxembed.vectors.lexicon import entering

    for lexicon in lexicons:
        for text in batch:
            resolved = lexicon.sentence(text + extra, max_tokens=1 << 30)
            assert entering(lexicon.store, resolved.token_keys, oov=lexicon.oov) == len(resolved.used), text


def test_too_many_tokens_are_refused_before_any_vector_is_built(lexicons, monkeypatch):
    def no_vectors(*args, **kwargs):
        raise AssertionError("a subword vector was built for a sentence that is refused")

    for lexicon in lexicons:
        if lexicon.oov == "skip" and lexicon.store.subwords is None:  # the marks have no vector: skipped
            assert len(lexicon.sentence(MARKS, max_tokens=512).used) <= 1
            continue
        monkeypatch.setattr(lexicon.store, "subword_vectors", no_vectors)
        with pytest.raises(DataError, match="^sentence has 20000 tokens, more than max_tokens 512"):
            lexicon.sentence(MARKS, max_tokens=512)
        with pytest.raises(DataError, match="^sentence has over 512 tokens"):  # refused before the rest is read
            lexicon.sentence(" ".join([MARKS[:4000]] * 20), max_tokens=512)


def test_a_20000_mark_sentence_is_refused_at_once():
    from ctxembed.engine import Engine
    from ctxembed.presets import build_settings
    from ctxembed.vectors.sources import open_vectors

    engine = Engine(open_vectors(), build_settings("default"))
    engine.prepare("warm the lookups up")
    start = time.process_time()
    with pytest.raises(DataError, match="sentence has 20000 tokens"):
        engine.prepare(MARKS)
    assert time.process_time() - start < 0.25  # CPU seconds; each mark's vector built first: 0.8 s


def test_attend_refuses_a_line_of_20000_marks_in_one_line_and_little_memory(tmp_path):
    source = tmp_path / "marks.txt"
    source.write_text(MARKS + "\n", encoding="utf-8")
    code, peak, seconds, cpu, stdout, stderr = measured("attend", "--json", "-", stdin=source)
    assert code == 1 and stdout == "" and stderr.startswith("ctxembed: error: sentence has 20000 tokens")
    assert stderr.count("\n") == 1 and peak < 200, (peak, cpu)


def test_a_long_batch_line_of_marks_is_one_error_record_at_once(tmp_path):
    source = tmp_path / "marks.txt"
    source.write_text("the bank\n" + "e" + "\u0301" * 250_000 + "\n", encoding="utf-8")  # 500 KB, under the line limit
    code, peak, seconds, cpu, stdout, stderr = measured("batch", "--no-weights", "--workers", "1", source)
    records = stdout.splitlines()
    assert code == 0 and len(records) == 2 and '"error":"sentence has 250001 tokens, more than' in records[1]
    assert peak < 200 and cpu < 2.0, (peak, cpu)  # CPU seconds, start-up included


@pytest.mark.parametrize("characters", [1_000_000])
def test_one_word_of_a_million_characters_stays_under_200_mb(tmp_path, characters):
    source = tmp_path / "word.txt"
    source.write_text("ab" * (characters // 2) + "\n", encoding="ascii")
    code, peak, seconds, cpu, stdout, stderr = measured(
        "batch", "--no-weights", "--workers", "1", "--max-tokens", "1024", source
    )
    assert code == 0 and stdout.startswith('{"line":1,"text":"abab') and '"in_vocab":[true]' in stdout, stderr
    assert peak < 200, f"peak {peak:.0f} MB"  # every n-gram row of the word read at once: 2,000 MB
