"""One corpus opener for `senses` and `train`: files, gzip by content, and clear errors."""

from __future__ import annotations

import gzip

import pytest

from ctxembed.errors import DataError
from ctxembed.senses import occurrences
from ctxembed.train import corpus as train
from ctxembed.vectors.corpus import open_corpus
from tests.cli_helpers import invoke


def test_gzip_is_recognised_by_content_whatever_the_name(tmp_path):
    packed = tmp_path / "corpus.txt"  # no .gz suffix
    packed.write_bytes(gzip.compress(b"the river bank\n"))
    stream, name = open_corpus(packed)
    with stream:
        assert stream.read() == b"the river bank\n" and name == str(packed)


@pytest.mark.parametrize("make, message", [(lambda p: p.mkdir(), "is a directory"), (lambda p: None, "no such file")])
def test_a_directory_or_a_missing_file_is_a_data_error(tmp_path, make, message):
    make(tmp_path / "c")
    with pytest.raises(DataError, match=message):
        open_corpus(tmp_path / "c")


def test_senses_and_train_share_it_and_its_exit_code(tmp_path):
    assert train.open_corpus is open_corpus
    stream, _ = occurrences.open_corpus(__file__)  # the text view senses reads
    assert stream.readline().startswith('"""One corpus opener')
    stream.close()
    folder = tmp_path / "folder"
    folder.mkdir()
    for args in (["senses", "bank", "--corpus", str(folder)], ["train", str(folder), "--out", str(tmp_path / "w.npz")]):
        result = invoke(*args)
        assert result.exit_code == 1 and "is a directory, not a corpus file" in result.stderr, args


def test_binary_input_is_refused_the_same_way_by_senses_and_train(tmp_path):
    """One sniff of the first bytes (vectors/corpus.looks_binary) for every corpus reader."""
    import random

    from tests.cli_helpers import fails, invoke

    data = tmp_path / "g.bin"
    data.write_bytes(random.Random(0).randbytes(200_000))
    expected = "does not look like text (binary data"
    assert expected in fails(1, "senses", "bank", data)
    trained = invoke("train", data, "--out", tmp_path / "g.npz", "--epochs", "1")
    assert trained.exit_code == 1 and expected in trained.stderr.splitlines()[-1]
    assert not (tmp_path / "g.npz").exists()
    latin1 = tmp_path / "latin1.txt"  # text in another encoding is not binary: its lines are judged one by one
    latin1.write_bytes("the river bank\nle café près de la banque\n".encode("latin-1") * 50)
    assert expected not in fails(1, "senses", "bank", latin1)  # senses then wants UTF-8, as before
