"""Vector files that would cost without bound, or fail late: a compressed line of gigabytes (F12),
a duplicate word found only after the whole file (F13), non-finite fastText rows (F15), a full
cache folder (F11)."""

from __future__ import annotations

import bz2
import gzip
import zlib

import pytest

from ctxembed.errors import DataError
from ctxembed.vectors.formats import detect_format, load_foreign
from tests.cli_helpers import measured


def _bomb(path, opener, size: int) -> None:
    """One vector line of ``size`` bytes ('w 0 0 0 ...'), compressed by ``opener``, written a piece at a time."""
    with opener(path, "wb") as fh:
        fh.write(b"w")
        for _ in range(size // (1 << 20)):
            fh.write(b" 0" * (1 << 19))
        fh.write(b"\n")


@pytest.mark.parametrize(("suffix", "opener"), [(".txt.gz", gzip.open), (".txt.bz2", bz2.open)])
def test_a_compressed_line_of_many_megabytes_is_refused_at_its_line_in_little_memory(tmp_path, suffix, opener):
    bomb = tmp_path / f"bomb{suffix}"
    _bomb(bomb, opener, 64 << 20)  # 64 MB of one line, a few hundred KB compressed
    code, peak, seconds, cpu, stdout, stderr = measured("attend", "w", "--vectors", bomb, "--json")
    assert code == 1 and stdout == "", stderr
    assert stderr.splitlines()[-1] == f"ctxembed: error: {bomb}: line 1: longer than 1,048,576 bytes (a vector " \
        "line is a word and its numbers: the file is damaged, or a compression bomb)"  # fmt: skip
    assert len(stderr.splitlines()) == 2 and stderr.startswith("converting ")
    assert peak < 200, f"peak {peak:.0f} MB"  # the line read whole, then parsed: over 1 GB


def test_a_duplicate_word_is_reported_at_its_line_before_the_rest_is_read(tmp_path, monkeypatch):
    from gensim.models import KeyedVectors

    path = tmp_path / "dup.txt.gz"
    with gzip.open(path, "wb") as fh:
        fh.write(b"200002 2\nw 0.5 1\nw 0.5 1\n")
        fh.write(b"".join(b"x%d 0.5 1\n" % i for i in range(200_000)))

    def never(*args, **kwargs):
        raise AssertionError("gensim parsed the whole file before the duplicate was reported")

    monkeypatch.setattr(KeyedVectors, "load_word2vec_format", never)
    with pytest.raises(DataError, match=r"dup\.txt\.gz: line 3: duplicate word 'w'$"):
        load_foreign(path, detect_format(path))


def test_a_compressed_stream_error_is_still_one_line(tmp_path):
    path = tmp_path / "cut.txt.gz"
    path.write_bytes(gzip.compress(b"2 2\nw 0.5 1\nx 0.5 1\n")[:-12])
    with pytest.raises(DataError, match="cut.txt.gz"):
        load_foreign(path, detect_format(path))
    assert zlib  # the reader's errors are zlib's and EOFError: read_error names the file


def test_a_fasttext_bin_with_non_finite_ngram_rows_is_refused_at_conversion(tmp_path):
    """Converted fine before: only the unknown words that hash to such a row failed, much later, in a
    message that did not name the file."""
    import numpy as np
    from gensim.models import FastText
    from gensim.models.fasttext import save_facebook_model

    from ctxembed.vectors.subwords import ngram_buckets

    sentences = [["we", "sat", "on", "the", "river", "bank"], ["money", "in", "the", "bank"]] * 10
    model = FastText(sentences, vector_size=4, min_count=1, epochs=1, bucket=50, min_n=2, max_n=3, seed=1, workers=1)
    used = {row for word in model.wv.index_to_key for row in ngram_buckets(word, 2, 3, 50)}
    unused = min(set(range(50)) - used)  # a row no vocabulary word reads: its words' vectors stay finite
    model.wv.vectors_ngrams[unused] = np.nan
    path = tmp_path / "nan.bin"
    save_facebook_model(model, str(path))
    with pytest.raises(DataError, match=rf"nan\.bin: n-gram row {unused} of 50 has NaN values"):
        load_foreign(path, detect_format(path))
