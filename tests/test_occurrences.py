"""Finding a word's occurrences in a corpus: forms, offsets, line numbers, sampling, bad input."""

from __future__ import annotations

import gzip
import io

import pytest

from ctxembed.errors import DataError, UsageError
from ctxembed.senses.occurrences import inflections, open_corpus, parse_forms, scan_corpus, word_forms


def scan(text: str, forms: dict, **options):
    return scan_corpus(io.StringIO(text), forms, **options)


def test_inflections_of_nouns_and_verbs():
    assert inflections("bank") == ["bank", "banks", "banked", "banking"]
    assert inflections("bass")[:2] == ["bass", "basses"]
    assert set(inflections("study")) >= {"studies", "studied", "studying"}
    assert set(inflections("stop")) >= {"stops", "stopped", "stopping"}
    assert set(inflections("run")) >= {"ran", "running"}
    assert set(inflections("leaf")) >= {"leaves"}


def test_word_forms_keep_only_known_forms_and_always_the_word():
    assert word_forms("bass", {"basses"}.__contains__) == ["bass", "basses"]
    assert word_forms("zzq", lambda f: False) == ["zzq"]


def test_parse_forms_assigns_each_list_to_its_word():
    assert parse_forms(["bank,banks"], ["bank", "plant"]) == {"bank": ["bank", "banks"]}
    assert parse_forms(["plant:plants,plant"], ["bank", "plant"]) == {"plant": ["plants", "plant"]}
    assert parse_forms(["banks"], ["bank"]) == {"bank": ["banks"]}
    with pytest.raises(UsageError, match="say which word"):
        parse_forms(["x,y"], ["bank", "plant"])
    with pytest.raises(UsageError, match="not one of the words"):
        parse_forms(["tree:trees"], ["bank"])
    with pytest.raises(UsageError, match="single word"):
        parse_forms(["bank:river bank"], ["bank"])


def test_offsets_and_line_numbers_point_at_the_form():
    text = "no match here\nThe Bank's loan.\n\nriver banks and a bank-note, embankment, banker\nbank"
    found = scan(text, {"bank": ["bank", "banks"]})
    spans = [(o.line, o.text[o.start : o.end]) for o in found.occurrences["bank"]]
    assert spans == [(2, "Bank"), (4, "banks"), (5, "bank")]  # not bank-note, embankment or banker
    assert found.lines == 5 and found.candidate_lines == 3
    assert found.per_form == {"bank": 2, "banks": 1}


def test_several_words_in_one_pass_and_several_occurrences_on_a_line():
    found = scan("plant a plant by the bank\nbass\n", {"plant": ["plant"], "bank": ["bank"], "bass": ["bass"]})
    assert found.counts == {"plant": 2, "bank": 1, "bass": 1}
    assert [o.start for o in found.occurrences["plant"]] == [0, 8]


def test_lines_that_cross_block_boundaries_are_found(monkeypatch):
    monkeypatch.setattr("ctxembed.senses.occurrences.BLOCK_CHARS", 7)
    found = scan("aaaa bank bbbb\ncc\nbank dd bank\n", {"bank": ["bank"]})
    assert [(o.line, o.start) for o in found.occurrences["bank"]] == [(1, 5), (3, 0), (3, 8)]
    assert found.lines == 3


def test_reservoir_sample_is_uniform_sized_and_seeded():
    text = "".join(f"line {n} bank\n" for n in range(1000))
    first = scan(text, {"bank": ["bank"]}, max_occurrences=50, seed=1).occurrences["bank"]
    again = scan(text, {"bank": ["bank"]}, max_occurrences=50, seed=1).occurrences["bank"]
    other = scan(text, {"bank": ["bank"]}, max_occurrences=50, seed=2).occurrences["bank"]
    assert len(first) == 50 and first == again and first != other
    lines = [o.line for o in first]
    assert lines == sorted(lines) and max(lines) > 500  # in corpus order, drawn from all of it


def test_over_long_lines_are_skipped_and_counted(monkeypatch):
    monkeypatch.setattr("ctxembed.senses.occurrences.BLOCK_CHARS", 16)
    text = "bank " + "x" * 100 + "\nbank ok\n" + "y" * 100 + "\n"
    found = scan(text, {"bank": ["bank"]}, max_line_chars=50)
    assert [o.line for o in found.occurrences["bank"]] == [2]
    assert found.long_lines == 1 and found.lines == 3  # the long line without the word is not counted


def test_gzip_and_binary_and_empty_corpora(tmp_path):
    packed = tmp_path / "c.txt.gz"
    packed.write_bytes(gzip.compress(b"a bank\n"))
    stream, _ = open_corpus(packed)
    assert scan_corpus(stream, {"bank": ["bank"]}).counts["bank"] == 1
    binary = tmp_path / "b.bin"
    binary.write_bytes(b"\x00\x01bank\xff\xfe" * 10)
    with pytest.raises(DataError, match="binary|UTF-8"):
        scan_corpus(open_corpus(binary)[0], {"bank": ["bank"]})
    assert scan("  \n\n", {"bank": ["bank"]}).blank
    with pytest.raises(DataError, match="no such file"):
        open_corpus(tmp_path / "missing.txt")
