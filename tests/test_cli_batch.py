"""`ctxembed batch`: one JSON line per input line, in order, bad lines as error records."""

from __future__ import annotations

import numpy as np
import pytest

from tests.cli_helpers import TOY, fails, invoke, json_lines, succeeds


def batch(*args, input: bytes | str | None = None) -> list[dict]:
    return json_lines(succeeds("batch", *args, input=input).stdout)


@pytest.fixture
def mixed_file(tmp_path):
    """Good and bad lines; the comment is each line's expected outcome."""
    lines = [
        b"we sat on the river bank",  # 1 ok
        b"{not json",  # 2 invalid JSON
        b'{"id": 3, "words": "no text"}',  # 3 JSON without text
        b"caf\xe9 au lait",  # 4 not UTF-8 (latin-1)
        b"",  # 5 empty
        b"xqzzv qqxj",  # 6 ok: no row, but the shipped store builds both words from subwords
        b"the river bank was wide and deep today",  # 7 too long for --max-tokens 6
        b'{"id": "q8", "text": "the money bank"}',  # 8 ok, id echoed
        b"the bank",  # 9 ok
    ]
    path = tmp_path / "mixed.txt"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_one_output_line_per_input_line_in_order(mixed_file):
    records = batch(mixed_file, "--max-tokens", "6", "--preset", "textbook")
    assert [record["line"] for record in records] == list(range(1, 10))
    assert [("error" in record) for record in records] == [False, True, True, True, True, False, True, False, False]


def test_good_lines_carry_their_tokens(mixed_file):
    records = batch(mixed_file, "--max-tokens", "6", "--preset", "textbook")
    assert records[0]["tokens"] == ["we", "sat", "on", "the", "river", "bank"]
    assert records[8]["text"] == "the bank"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (2, "invalid JSON"),
        (3, "no string 'text' field"),
        (4, "not valid UTF-8 (byte 4)"),
        (5, "empty sentence"),
        (7, "more than --max-tokens 6"),
    ],
)
def test_bad_line_gives_an_error_record_with_its_number(mixed_file, line, expected):
    record = batch(mixed_file, "--max-tokens", "6", "--preset", "textbook")[line - 1]
    assert record["line"] == line
    assert expected in record["error"]
    assert set(record) <= {"line", "id", "error"}


def test_json_lines_input_echoes_the_id(mixed_file):
    records = batch(mixed_file, "--max-tokens", "6", "--preset", "textbook")
    assert records[7]["id"] == "q8" and records[7]["tokens"] == ["the", "money", "bank"]
    assert records[2] == {"line": 3, "id": 3, "error": "the JSON object has no string 'text' field"}


def test_non_object_json_is_read_as_a_sentence():
    [record] = batch("--preset", "textbook", "--no-weights", input="[1, 2]\n")
    assert record["tokens"] == ["[", "1", ",", "2", "]"]


def test_stdin_gives_the_same_output_as_the_file(mixed_file):
    from_file = succeeds("batch", mixed_file, "--max-tokens", "6", "--preset", "textbook").stdout
    from_stdin = succeeds("batch", "-", "--max-tokens", "6", "--preset", "textbook", input=mixed_file.read_bytes())
    assert from_stdin.stdout == from_file


def test_stdin_is_the_default_source():
    records = batch("--preset", "textbook", input="the river bank\nthe money bank\n")
    assert [record["text"] for record in records] == ["the river bank", "the money bank"]


def test_weights_of_sentences_of_different_lengths():
    # sentences are padded into one batch; each record keeps its own (L, h, T, T) weights
    records = batch("--preset", "textbook", input="we sat on the river bank\nthe bank\n")
    long, short = (np.array(record["weights"]) for record in records)
    assert long.shape == (1, 1, 6, 6) and short.shape == (1, 1, 2, 2)
    assert long.sum(axis=-1) == pytest.approx(np.ones((1, 1, 6)), abs=1e-5)
    alone = json_lines(succeeds("batch", "--preset", "textbook", input="the bank\n").stdout)[0]
    assert np.allclose(short, alone["weights"], atol=1e-6)


def test_no_weights_leaves_the_weights_out():
    [record] = batch("--preset", "textbook", "--no-weights", input="the river bank\n")
    assert "weights" not in record


def test_with_vectors_adds_static_and_contextual():
    [record] = batch("--preset", "textbook", "--no-weights", "--with-vectors", input="the river bank\n")
    assert np.array(record["static"]).shape == (3, 100)
    assert np.array(record["contextual"]).shape == (3, 100)


def test_word_adds_its_contextual_vector_or_null():
    records = batch("--preset", "textbook", "--no-weights", "--with-vectors", "--word", "bank",
                    input="the river bank\nthe river\n")  # fmt: skip
    assert records[0]["word"]["position"] == 2
    assert records[0]["word"]["contextual"] == records[0]["contextual"][2]
    assert records[1]["word"] is None


def test_two_workers_give_byte_identical_output(tmp_path):
    vocabulary = "the river bank money boat muddy interest rates we sat on deposited xqzzv".split()
    rng = np.random.default_rng(0)
    lines = []
    for i in range(3000):
        if i % 97 == 0:
            lines.append("{broken")
        elif i % 89 == 0:
            lines.append("")
        else:
            lines.append(" ".join(rng.choice(vocabulary, size=rng.integers(1, 12))))
    source = tmp_path / "many.txt"
    source.write_text("\n".join(lines) + "\n")
    one = succeeds("batch", source, "--no-weights", "--workers", "1", "--chunk", "250", "--preset", "textbook")
    two = succeeds("batch", source, "--no-weights", "--workers", "2", "--chunk", "250", "--preset", "textbook")
    assert one.stdout_bytes == two.stdout_bytes
    records = json_lines(two.stdout)
    assert [record["line"] for record in records] == list(range(1, 3001))


def test_empty_input_gives_no_output():
    result = succeeds("batch", input="")
    assert result.stdout == ""


def test_missing_file_is_a_data_error(tmp_path):
    assert "no such file" in fails(1, "batch", tmp_path / "none.txt")


def test_invalid_json_error_says_at_once():
    lines = '{"text": "the bank\nthe bank\n'
    [record, _] = json_lines(succeeds("batch", "-", "--no-weights", input=lines).stdout)
    assert record["error"] == "invalid JSON: Unterminated string starting at column 10"


def test_a_batch_of_only_error_records_fails_and_says_so():
    result = invoke("batch", "-", "--no-weights", input="\n{bad\n")
    assert result.exit_code == 1
    assert [r["line"] for r in json_lines(result.stdout)] == [1, 2]  # the records are still written
    assert result.stderr.startswith("ctxembed: error: no line could be used: all 2 records are errors")


def test_some_error_records_and_lines_without_the_word_are_counted_on_stderr():
    result = invoke("batch", "-", "--no-weights", "--word", "bank", input="the river bank\n\nthe river\n")
    assert result.exit_code == 0
    assert [r.get("word") is None for r in json_lines(result.stdout)] == [False, True, True]
    assert "batch: 1 of 2 sentences lack 'bank'" in result.stderr
    assert "batch: 1 of 3 lines could not be used" in result.stderr


def test_a_line_without_any_vector_is_an_error_record(tmp_path):
    path = tmp_path / "oov.txt"
    path.write_bytes(b"xqzzv qqxj\napple phone\n")
    records = batch(path, "--vectors", TOY, "--preset", "notes")  # the toy vectors have no subwords
    assert "no token is in the vocabulary" in records[0]["error"] and "error" not in records[1]


@pytest.mark.parametrize(
    ("encoding", "message"),
    [
        ("utf-16", "UTF-16 text (it starts with the byte-order mark FF FE)"),
        ("utf-32", "UTF-32 text (it starts with the byte-order mark FF FE 00 00)"),
        ("utf-16-le", "not UTF-8 text (NUL bytes in its first block"),  # no mark: one NUL in every other byte
        ("utf-16-be", "not UTF-8 text (NUL bytes in its first block"),
    ],
)
def test_utf16_and_utf32_input_is_refused_in_one_line(tmp_path, encoding, message):
    """They were read as records of NUL-separated letters."""
    data = "we sat on the river bank\nI paid into the bank\n".encode(encoding)
    source = tmp_path / "utf16.txt"
    source.write_bytes(data)
    assert fails(1, "batch", source).startswith(f"ctxembed: error: {source}: {message}")
    assert message in fails(1, "batch", "-", input=data)
    assert message in fails(1, "attend", "--json", "-", input=data)


def test_a_stray_nul_in_a_text_line_is_still_that_line_s_record():
    records = batch("--no-weights", input=b"the\x00bank\nwe sat on the river bank\n")
    assert [r["line"] for r in records] == [1, 2] and "tokens" in records[1]
