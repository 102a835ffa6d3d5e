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
