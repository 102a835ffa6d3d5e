"""batch says, before a run, how many bytes of weights it will write when that is a lot (m3: a 6 x 12
model's weights made 1.17 GB of JSONL for 2,000 lines with no word of warning)."""

from __future__ import annotations

import pytest

from ctxembed.batch import size
from ctxembed.engine import open_engine
from tests.cli_helpers import invoke

LINES = ["we sat on the river bank", "I paid the money into the bank", "the sentence has no such word"] * 20


@pytest.fixture
def sentences(tmp_path):
    path = tmp_path / "s.txt"
    path.write_text("\n".join(LINES) + "\n")
    return path


def test_a_large_run_is_announced_with_its_size_and_the_way_out(sentences, monkeypatch):
    monkeypatch.setattr(size, "NOTE_BYTES", 1000)
    result = invoke("batch", str(sentences), "--out", str(sentences.with_suffix(".jsonl")))
    assert result.exit_code == 0, result.stderr
    note = result.stderr.splitlines()[0]
    assert note.startswith("batch: every line keeps the weights of 1 layers x 1 heads") and "--no-weights" in note


def test_no_note_without_weights_or_below_the_budget(sentences, monkeypatch):
    out = str(sentences.with_suffix(".jsonl"))
    assert "keeps the weights" not in invoke("batch", str(sentences), "--out", out).stderr
    monkeypatch.setattr(size, "NOTE_BYTES", 1000)
    assert "keeps the weights" not in invoke("batch", str(sentences), "--no-weights", "--out", out).stderr


def test_the_estimate_counts_layers_heads_and_words():
    engine = open_engine(None, "default")
    per_line, text = size.weights_bytes(engine, ["we sat on the river bank"], "jsonl", None)
    assert per_line == pytest.approx(1 * 1 * 6 * 6 * size.JSON_NUMBER)
    assert text == len("we sat on the river bank") + 1
    assert size.weights_bytes(engine, ["we sat on the river bank"], "jsonl", 3)[0] == 6 * 6 * 6
