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


# Expanded size (F12): a bomb of many lines, each under the line limit, and compressed binary files.
# The floor is lowered so that small bombs (a few MB expanded) stay fast; the ratio rule is the real one.


@pytest.fixture
def small_floor(monkeypatch):
    from ctxembed.vectors import formats

    monkeypatch.setattr(formats, "EXPANSION_FLOOR", 4 << 20, raising=False)  # raising: run unfixed too
    return 4 << 20


def _counting_gzip(monkeypatch) -> list[int]:
    """Count the bytes every gzip reader in the process hands out (ours and gensim's)."""
    counted = [0]
    real = gzip.GzipFile.read

    def read(self, size=-1):
        data = real(self, size)
        counted[0] += len(data)
        return data

    monkeypatch.setattr(gzip.GzipFile, "read", read)
    return counted


@pytest.mark.parametrize(("suffix", "opener"), [(".txt.gz", gzip.open), (".txt.bz2", bz2.open)])
def test_a_compressed_file_of_many_long_lines_is_refused_past_its_expansion_budget(
    tmp_path, monkeypatch, small_floor, suffix, opener
):
    """Lines under the 1 MiB limit, each a distinct word of the right dimension: the line check
    passes them all, and gensim held every word (1 GB from a 1 MB gzip). 16 MB here."""
    bomb = tmp_path / f"lines{suffix}"
    with opener(bomb, "wb") as fh:
        fh.write(b"16 2\n")
        for i in range(16):
            fh.write(b"a" * ((1 << 20) - 20) + b"%d 0.5 1\n" % i)
    from gensim.models import KeyedVectors

    monkeypatch.setattr(KeyedVectors, "load_word2vec_format", lambda *a, **k: pytest.fail("gensim read the bomb"))
    assert bomb.stat().st_size * 100 < small_floor  # the budget is the floor: refused past 4 MiB
    with pytest.raises(DataError) as error:
        load_foreign(bomb, detect_format(bomb))
    assert error.value.message == (
        f"{bomb}: line 6: expands past 4,194,304 bytes (more than 100 times its compressed size: "
        "a compression bomb, or not a vector file)"
    )


def test_a_compressed_binary_header_announcing_more_than_the_file_can_expand_to_is_refused_before_gensim(
    tmp_path, monkeypatch
):
    """An uncompressed binary file's header was checked against its size; a compressed one's was not,
    so gensim allocated what the header announced (99,999,999 x 300 float32: 120 GB)."""
    from gensim.models import KeyedVectors

    path = tmp_path / "huge.bin.gz"
    path.write_bytes(gzip.compress(b"99999999 300\n" + b"w " + b"\0\0\x80\x3f" * 300 + b"\n"))
    monkeypatch.setattr(KeyedVectors, "load_word2vec_format", lambda *a, **k: pytest.fail("gensim was called"))
    with pytest.raises(DataError, match=r"huge\.bin\.gz: the header announces 99,999,999 vectors of 300 floats"):
        load_foreign(path, detect_format(path))


def test_a_compressed_binary_file_with_a_bomb_after_its_entries_is_not_decompressed_whole(tmp_path, monkeypatch):
    """After gensim, the whole file was decompressed once more to count its size (to find entries beyond
    the header's count): a bomb after one entry cost all of its expanded bytes. Now reading stops as
    soon as one more entry is certain."""
    path = tmp_path / "tail.bin.gz"
    with gzip.open(path, "wb") as fh:
        fh.write(b"1 4\nw " + b"\0\0\x80\x3f" * 4 + b"\n")
        for _ in range(32):
            fh.write(b"\0" * (1 << 20))
    counted = _counting_gzip(monkeypatch)
    with pytest.raises(DataError, match=r"tail\.bin\.gz: the header announces 1 vectors but the file has more"):
        load_foreign(path, detect_format(path))
    assert counted[0] < 4 << 20, f"{counted[0]:,} bytes decompressed"
