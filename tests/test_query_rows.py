"""query_rows: one query row per sentence gives encode's numbers at that row, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from ctxembed.core.attention import (
    AttentionConfig,
    encode,
    identity_params,
    query_rows,
    random_params,
    sentence_twins,
)

CONFIGS = {
    "default's attention": dict(exclude_self=True, exclude_twins=True),
    "textbook": dict(),
    "two heads, residual, norm": dict(heads=2, residual=True, residual_scale=0.5, layer_norm=True),
    "positions in the input": dict(positions=True, position_mode="input", exclude_self=True),
    "positions in queries and keys": dict(positions=True, position_mode="query-key", temperature=0.7),
    "sum normaliser": dict(normalization="sum", exclude_twins=True),
}


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("projection", ["identity", "random with W_out"])
def test_query_rows_equal_encode_rows_bit_for_bit(name, projection):
    rng = np.random.default_rng(11)
    config = AttentionConfig(**CONFIGS[name])
    for T in (1, 2, 3, 7, 8, 9, 16, 23, 31, 64):
        S, d = 5, 8
        x = rng.standard_normal((S, T, d)).astype(np.float32)
        if T > 3:
            x[1, T - 1] = x[1, 0]  # a repeated word
            x[2, 1] = x[2, 2] = x[2, 3]  # a thrice repeated word
        bias = np.log(rng.uniform(0.1, 1.0, (S, T))).astype(np.float32)  # (S, T) a SIF-like key prior
        params = (
            identity_params(config)
            if projection == "identity"
            else random_params(d, 4, config, seed=3, output_projection=True)
        )
        twins = sentence_twins(x) if config.exclude_twins else None
        full = encode(x, config, params, key_bias=bias, twins=twins).contextual  # (S, T, d_model)
        for rows in (np.zeros(S, np.int64), np.full(S, T - 1), rng.integers(0, T, S)):
            got = query_rows(x, config, params[0], rows, key_bias=bias, twins=twins)  # (S, d_model)
            want = full[np.arange(S), rows]
            assert got.dtype == want.dtype == np.float32
            np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=f"T={T} rows={rows}")


def test_query_rows_refuses_causal_attention():
    x = np.ones((1, 3, 2), np.float32)
    with pytest.raises(ValueError, match="non-causal"):
        query_rows(x, AttentionConfig(causal=True), identity_params(AttentionConfig())[0], np.array([0]))


# ------------------------------------------------------------------------------ batch's --word records
def brown_lines(count: int) -> list[bytes]:
    import gzip

    from tests.conftest import REPO

    with gzip.open(REPO / "data" / "brown.txt.gz", "rb") as fh:
        return [next(fh).rstrip(b"\n") for _ in range(count)]


def word_vectors(records: list[dict]) -> list:
    return [None if r.get("word") is None else (r["word"]["position"], r["word"]["contextual"]) for r in records]


def assert_same_words(fast: list[dict], full: list[dict]) -> None:
    assert [r.get("error") for r in fast] == [r.get("error") for r in full]
    found = 0
    for mine, theirs in zip(word_vectors(fast), word_vectors(full), strict=True):
        assert (mine is None) == (theirs is None)
        if mine is not None:
            assert mine[0] == theirs[0]
            assert mine[1].dtype == theirs[1].dtype == np.float32
            np.testing.assert_array_equal(mine[1].view(np.uint32), theirs[1].view(np.uint32))
            found += 1
    assert found > 100


@pytest.mark.parametrize("preset", ["default", "textbook"])
@pytest.mark.parametrize("word", ["the", "#3"])
def test_batch_word_alone_gives_the_full_paths_vectors(preset, word):
    """--no-weights --word W computes one softmax row per sentence (Engine.run_rows); --with-vectors
    computes every row (Engine.run_group). The word's vectors are the same float32 numbers."""
    from ctxembed.batch.embed import embed_lines

    lines = brown_lines(1500) + [b"", b"{bad json", b"xyzzy qwrtp", b"the the the", b"the"]
    fast = list(embed_lines(lines, weights=False, word=word, preset=preset))
    full = list(embed_lines(lines, weights=False, with_vectors=True, word=word, preset=preset))
    assert_same_words(fast, full)


def test_batch_word_alone_takes_the_full_path_when_a_bound_fails(monkeypatch):
    from ctxembed.batch.embed import embed_lines
    from ctxembed.engine import glove
    from ctxembed.engine.glove import Engine

    calls = {"rows": 0}
    run_rows = Engine.run_rows

    def counted(self, *args):
        calls["rows"] += 1
        return run_rows(self, *args)

    monkeypatch.setattr(Engine, "run_rows", counted)
    lines = brown_lines(300)
    fast = list(embed_lines(lines, weights=False, word="the"))
    assert calls["rows"] > 0
    monkeypatch.setattr(glove, "_surely_in_range", lambda engine, static: False)  # as for a store of huge vectors
    bounded = list(embed_lines(lines, weights=False, word="the"))
    assert_same_words(fast, bounded)


def test_run_rows_declines_vectors_that_run_group_might_refuse():
    from ctxembed.api import Explorer

    engine = Explorer().engine
    static = np.ones((2, 4, engine.dim), np.float32)  # (B, T, d)
    rows = np.array([0, 3])
    assert engine.run_rows(static, None, rows) is not None
    assert engine.run_rows(static * 1e18, None, rows) is None  # scores past float32's range
    static[1, 2, 0] = np.nan
    assert engine.run_rows(static, None, rows) is None
