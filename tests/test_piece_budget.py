"""A trained model's cost is counted in word pieces, before anything is cut or allocated (issue 45, group
2): a text sure to give more pieces than the model takes is refused unread, a sentence whose attention
over its pieces (layers x heads x pieces²) passes the weights budget is refused at prepare, a run is
budgeted in pieces, and a group of one length keeps its weights under the budget. The real model's
cases run in a child process under a memory limit, so that without the checks they fail, not swap."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

import pytest

from ctxembed.budget import BUDGET, WEIGHTS_BUDGET, check_pieces, group_size, pieces_at_least
from ctxembed.errors import DataError
from tests.cli_helpers import fails
from tests.conftest import REPO

LIMIT = 1500 << 20  # bytes of address space the child may map: the refusals need a fraction of it


def test_pieces_are_bounded_below_without_cutting():
    assert pieces_at_least("we sat on the river bank", 100) == 6
    assert pieces_at_least("a " * 1_000_000, 510) == 511  # counting stops past the limit
    assert pieces_at_least("\x00\x01 \ufffd bank", 10) == 1  # what BERT drops gives no piece
    assert pieces_at_least("银行 bank", 10) == 2
    start = time.perf_counter()
    with pytest.raises(DataError, match="more than 510 word pieces"):
        check_pieces(" ".join(["zqxv"] * 1_000_000), 510)
    assert time.perf_counter() - start < 0.5
    check_pieces("word " * 510, 510)  # at the limit: accepted


def test_a_group_keeps_its_weights_under_the_budget():
    assert group_size(30, 6, 12, 4096 // 30) == 4096 // 30  # short sentences: the pieces bound, as before
    assert group_size(480, 6, 12, 4096 // 480) == 1  # 16.6 M weights a sentence: one at a time
    assert group_size(200, 6, 12, 4096 // 200) * 6 * 12 * 200**2 <= BUDGET.weights


def test_the_tiny_models_text_past_its_pieces_is_refused_before_it_is_cut(tiny_model, monkeypatch):
    from ctxembed.engine import open_engine
    from ctxembed.vectors.wordpiece import WordPiece

    engine = open_engine(None, "default", model=tiny_model.name)
    cut = []
    monkeypatch.setattr(WordPiece, "encode", lambda self, text: cut.append(text) or [])
    with pytest.raises(DataError, match="more than 62 word pieces"):
        engine.prepare(" ".join(["bank"] * 200_000))
    assert cut == []


def test_a_run_of_the_tiny_model_is_budgeted_in_pieces(tiny_model):
    """600 sentences of 62 pieces: 2 layers x 4 heads x 62² x 600 = 18.5 M weights over the pieces, past
    the budget's 16.8 M, while their 10 words each would be 0.5 M: refused as pieces, exit 1, one line."""
    sentence = " ".join(["xyzzyq"] * 10)  # 6 pieces a word: 62 with [CLS] and [SEP]
    line = fails(1, "compare", "--model", tiny_model.name, *[sentence] * 600, "--json")
    assert "600 sentence(s) of 37,200 word pieces (2 layers x 4 heads)" in line
    assert "use shorter or fewer sentences" in line and "--heads" not in line


def _child(args: list[str], stdin: bytes | None = None) -> tuple[subprocess.CompletedProcess, float]:
    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

    env = dict(os.environ, PYTHONPATH=str(REPO))
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "ctxembed", *args],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=120,
        preexec_fn=limited,
    )
    return done, time.perf_counter() - start


CHINESE = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(500))  # 500 characters, a piece each


@pytest.mark.parametrize(
    "sentence, pieces",
    [("-".join(["a"] * 255), 511), (CHINESE, 502)],
    ids=["one 509-piece word", "500 Chinese characters"],
)
def test_compare_of_32_long_sentences_is_refused_in_one_line(minilm_folder, sentence, pieces):
    done, _ = _child(["compare", "--model", "minilm", *[sentence] * 32, "--json"])
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 1 and done.stdout == b"" and len(lines) == 1, done.stderr.decode()[-500:]
    assert lines[0].startswith(f"ctxembed: error: a sentence of {pieces} word pieces keeps")
    assert f"the limit is {WEIGHTS_BUDGET >> 20} MB" in lines[0]


def test_batch_with_weights_on_200_long_chinese_lines_stays_bounded(minilm_folder, tmp_path):
    (tmp_path / "lines.txt").write_text((CHINESE + "\n") * 200, encoding="utf-8")
    out = tmp_path / "out.jsonl"
    done, _ = _child(["batch", "--model", "minilm", str(tmp_path / "lines.txt"), "--out", str(out)])
    assert done.returncode == 1, done.stderr.decode()[-500:]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 200 and all("502 word pieces" in record["error"] for record in records)


def test_4_mib_of_words_on_stdin_is_refused_before_it_is_cut(minilm_folder):
    words = (" ".join(f"w{i:x}q" for i in range(600_000)).encode())[: 4 << 20]
    done, seconds = _child(["attend", "--model", "minilm", "-", "--json"], stdin=words)
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr.decode()[-500:]
    assert "more than 510 word pieces" in lines[0]
    assert seconds < 30  # a cold start and the read: cutting them took 47 s before


def test_a_batch_chunk_of_a_trained_model_keeps_its_weights_bounded():
    """batch reads lines before they are cut into pieces: a chunk stops once its lines' bound (a piece a
    byte, a sentence at most BUDGET.weights) passes CHUNK_COST; a line alone past it is a chunk of one."""
    import io
    from types import SimpleNamespace

    from ctxembed.batch.driver import CHUNK_COST, LineSource
    from ctxembed.budget import line_weights

    cost = line_weights(SimpleNamespace(layers=6, heads=12))
    assert cost(30) == 6 * 12 * 32**2 and cost(100_000) == BUDGET.weights
    text = b"".join(b"x" * 600 + b"\n" for _ in range(40))  # each line at the most a sentence keeps
    lines = LineSource(io.BytesIO(text), 1 << 20, line_cost=cost)
    sizes = []
    while (chunk := lines.next_chunk(1024)) is not None:
        sizes.append(len(chunk))
    assert sizes == [CHUNK_COST // BUDGET.weights] * 5
    plain = LineSource(io.BytesIO(text), 1 << 20)  # the glove model, or no weights kept: as before
    assert len(plain.next_chunk(1024)) == 40
