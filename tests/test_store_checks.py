"""Store checksums and named sections: damage is found, sections round-trip, old stores still open."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ctxembed.errors import DataError
from ctxembed.presets import Settings
from ctxembed.vectors.store import VectorStore, write_store

FIXTURES = Path(__file__).parent / "fixtures"
WORDS = [f"w{i}" for i in range(3000)]


def _store(tmp_path, **keywords) -> Path:
    matrix = np.random.default_rng(0).normal(size=(len(WORDS), 100)).astype(np.float32)  # (N, 100): 1.2 MB
    return write_store(tmp_path / "s.ctxv", WORDS, matrix, **keywords)


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x40
    path.write_bytes(bytes(data))


def _blob_start(path: Path, name: str) -> int:
    raw = path.read_bytes()
    header_len = int.from_bytes(raw[8:16], "little")
    header = json.loads(raw[16 : 16 + header_len])
    data_start = 16 + header_len + (-(16 + header_len)) % 64
    return data_start + header["sections"][name][0]


def test_sections_round_trip(tmp_path):
    stats = {
        "mean": np.arange(4, dtype=np.float32),
        "directions": np.eye(4, dtype=np.float32),
        "words": np.array(3000, dtype=np.int64),
    }
    store = VectorStore.open(_store(tmp_path, sections={"abtt": stats, "other": {"x": np.ones((2, 3))}}))
    got = store.section("abtt")
    assert set(got) == {"mean", "directions", "words"}
    for key, value in stats.items():
        assert got[key].dtype == value.dtype and np.array_equal(got[key], value)
    assert int(got["words"]) == 3000
    assert store.section("other")["x"].shape == (2, 3)
    assert store.section("missing") is None
    store.verify()


def test_sections_refuse_non_finite_and_objects(tmp_path):
    with pytest.raises(DataError, match="NaN or infinite"):
        _store(tmp_path, sections={"abtt": {"mean": np.array([np.nan], dtype=np.float32)}})
    with pytest.raises(DataError, match="numeric array"):
        _store(tmp_path, sections={"abtt": {"words": np.array(["a"], dtype=object)}})


def test_flipped_matrix_byte_is_found_on_first_use_of_its_block(tmp_path):
    path = _store(tmp_path)
    row = 2900  # in block 17 of the 1.2 MB matrix (64 KiB blocks), far from w0's
    _flip(path, _blob_start(path, "matrix") + row * 400 + 3)
    store = VectorStore.open(path)  # the matrix is not read at open
    assert store.vector("w0").shape == (100,)  # the first block is intact
    with pytest.raises(DataError, match="checksum mismatch in 'matrix'"):
        store.vector(f"w{row}")
    with pytest.raises(DataError, match="checksum mismatch"):
        VectorStore.open(path).verify()
    with pytest.raises(DataError, match="checksum mismatch"):
        VectorStore.open(path).most_similar(np.ones(100, dtype=np.float32))


def test_a_lookup_verifies_only_the_blocks_it_reads(tmp_path):
    """A sentence's first lookup checks (and so reads from disk) the 64 KiB blocks of its rows, and of
    their int8 scales, not the whole matrix: that keeps the cold start of attend/compare cheap."""
    matrix = np.random.default_rng(0).normal(size=(len(WORDS), 100)).astype(np.float32)
    store = VectorStore.open(write_store(tmp_path / "q.ctxv", WORDS, matrix, quantize=True))
    store.rows(np.array([0, 5, 2900]))  # int8 rows of 100 bytes: blocks 0 and 4 of the matrix
    assert store._checks.done["matrix"].sum() == 2 and len(store._checks.done["matrix"]) > 2
    assert store._checks.done["scales"].sum() == 1  # 4-byte scales: rows 0..16383 share block 0
    assert "matrix" not in store._checks.complete


def test_flipped_vocabulary_or_order_is_found_at_open(tmp_path):
    path = _store(tmp_path)
    _flip(path, _blob_start(path, "vocab") + 1)  # "w0" -> "7"... still one word per line
    with pytest.raises(DataError, match="checksum mismatch in 'vocab'"):
        VectorStore.open(path)
    path = _store(tmp_path)
    _flip(path, _blob_start(path, "order") + 1)
    with pytest.raises(DataError, match="checksum mismatch in 'order'"):
        VectorStore.open(path)


def test_edited_header_is_found(tmp_path):
    path = _store(tmp_path)
    raw = path.read_bytes()
    edited = raw.replace(b'"count": 3000', b'"count": 2999', 1)
    assert edited != raw
    path.write_bytes(edited)
    with pytest.raises(DataError, match="header is damaged"):
        VectorStore.open(path)


def test_damage_hint_is_appended(tmp_path):
    path = _store(tmp_path)
    _flip(path, _blob_start(path, "matrix") + 10)
    store = VectorStore.open(path)
    store.damage_hint = "reinstall ctxembed"
    with pytest.raises(DataError, match=r"checksum mismatch in .matrix.\); reinstall ctxembed"):
        store.vector("w0")


def test_version_1_store_still_opens():
    store = VectorStore.open(FIXTURES / "store_v1.ctxv")
    assert store.words == ["the", "bank", "river", "money", "café"] and store.dtype == "int8"
    assert store.section("abtt") is None
    assert store.find("café") == 4 and store.vector("bank").shape == (5,)
    store.verify()  # nothing to check, nothing raised


def test_version_1_store_with_order_outside_the_vocabulary_is_refused(tmp_path):
    path = tmp_path / "v1.ctxv"
    path.write_bytes((FIXTURES / "store_v1.ctxv").read_bytes())
    data = bytearray(path.read_bytes())
    start = _blob_start(path, "order")
    data[start : start + 4] = (10**6).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    with pytest.raises(DataError, match="'order' points outside"):
        VectorStore.open(path)


def test_bad_section_offset_is_a_clean_error(tmp_path):
    path = tmp_path / "v1.ctxv"
    raw = (FIXTURES / "store_v1.ctxv").read_bytes()
    header_len = int.from_bytes(raw[8:16], "little")
    header = json.loads(raw[16 : 16 + header_len])
    header["sections"]["matrix"][0] = 999
    body = json.dumps(header).encode().ljust(header_len)
    assert len(body) == header_len
    path.write_bytes(raw[:16] + body + raw[16 + header_len :])
    with pytest.raises(DataError, match="truncated or corrupt"):
        VectorStore.open(path)


def test_pre_quantised_codes_are_written_unchanged(tmp_path):
    codes = np.array([[127, -3], [5, -127]], dtype=np.int8)
    scales = np.array([0.5, 0.25], dtype=np.float32)
    store = VectorStore.open(write_store(tmp_path / "q.ctxv", ["a", "b"], codes, scales=scales))
    assert np.array_equal(store.matrix(), codes * scales[:, None])


def test_shipped_store_carries_checksums_and_abtt_statistics():
    from ctxembed.vectors.sources import default_store_path

    store = VectorStore.open(default_store_path())
    stats = store.section("abtt")
    assert stats is not None and int(stats["words"]) == Settings().abtt_words == 200_000  # of 400,000 rows
    assert stats["directions"].shape == (100, 100) and stats["mean"].shape == (100,)
    assert np.all(np.diff(stats["variances"]) <= 0)  # descending
    assert np.allclose(stats["directions"].T @ stats["directions"], np.eye(100), atol=1e-4)
    assert store._checks.crcs  # every blob has its block checksums
