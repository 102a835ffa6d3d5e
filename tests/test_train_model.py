"""`train` and `before-after` take --model like every other command: glove (the default) is the model
they train; a pretrained model is refused in one line (exit 2), before any file is read or written."""

from __future__ import annotations

import pytest

from tests.cli_helpers import fails, invoke, run_json

SENTENCE = "we sat on the river bank"


def test_before_after_takes_the_default_model_by_name():
    assert run_json("before-after", SENTENCE, "--model", "glove", "--json") == run_json(
        "before-after", SENTENCE, "--json"
    )


@pytest.mark.parametrize("flag", ["--model", "-m"])
def test_before_after_refuses_a_pretrained_model_in_one_line(flag):
    line = fails(2, "before-after", SENTENCE, flag, "minilm")
    assert "model minilm: before-after applies to the attention of the glove model" in line
    assert "pretrained" in line


def test_train_refuses_a_weights_file_for_a_pretrained_model_before_writing_anything(tmp_path):
    """A pretrained model trains into a derived model (--name, tests/test_train_derived.py), never --out."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat\n" * 20)
    out = tmp_path / "w.npz"
    line = fails(2, "train", corpus, "--out", out, "--model", "minilm", "--epochs", "1")
    assert "--out does not apply to training minilm: it writes a derived model (--name)" in line
    assert list(tmp_path.iterdir()) == [corpus]  # no weights, no checkpoint


def test_an_unknown_model_is_a_usage_error_naming_the_known_ones(tmp_path):
    line = fails(2, "before-after", SENTENCE, "--model", "gpt9")
    assert "'gpt9': no such model (known: glove, minilm)" in line


def test_train_accepts_the_default_model_by_name(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat\nthe dog sat on the log\n" * 10)
    result = invoke("train", corpus, "--out", tmp_path / "w.npz", "--model", "glove", "--epochs", "0", "--json")
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "w.npz").is_file()


def test_library_calls_refuse_the_pretrained_model_too(tmp_path):
    from ctxembed.errors import SettingError
    from ctxembed.train.before_after import before_after
    from ctxembed.train.run import train_weights

    with pytest.raises(SettingError, match="minilm's weights are pretrained"):
        before_after(SENTENCE, model="minilm")
    from ctxembed.errors import UsageError

    with pytest.raises(UsageError, match="it writes a derived model"):
        train_weights(tmp_path / "missing.txt", tmp_path / "w.npz", model="minilm")
