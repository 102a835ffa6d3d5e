"""A NaN or infinity arising inside the computation is an error naming its stage, never a silent
null, zero or uniform row, and numpy's warnings never reach stderr."""

from __future__ import annotations

import numpy as np
import pytest

import ctxembed.core.attention
from ctxembed.engine import Engine
from ctxembed.errors import DataError
from ctxembed.presets import build_settings
from ctxembed.vectors.sources import open_vectors


@pytest.fixture(scope="module")
def store():
    return open_vectors()


def test_nan_in_the_inputs_names_the_inputs(store, monkeypatch, capfd):
    engine = Engine(store, build_settings("textbook"))
    monkeypatch.setattr(engine, "project_inputs", lambda static: np.full_like(static, np.nan))
    with pytest.raises(DataError, match="NaN or infinite values at the input vectors"):
        engine.run([engine.prepare("the river bank")])
    assert capfd.readouterr().err == ""


def test_nan_in_a_layer_names_the_layer_and_step(store, monkeypatch, capfd):
    engine = Engine(store, build_settings("textbook", layers=2, layer_norm=True, residual=True))

    def broken_norm(x, eps=1e-5):
        return x / 0.0 - x / 0.0  # inf - inf: NaN, with numpy's warnings if they were on

    monkeypatch.setattr(ctxembed.core.attention, "layer_norm", broken_norm)
    with pytest.raises(DataError, match="at the layer output \\(residual, layer norm\\) of layer 0"):
        engine.run([engine.prepare("the river bank")])
    assert capfd.readouterr().err == ""


def test_batch_turns_it_into_error_records(store, monkeypatch):
    import io
    import json

    from ctxembed.batch.driver import LineSource, _results

    engine = Engine(store, build_settings("textbook"))
    real = engine.project_inputs
    monkeypatch.setattr(
        engine, "project_inputs", lambda static: np.full_like(static, np.nan) if static.shape[1] == 5 else real(static)
    )
    data = b"the river bank\nthe bank of the river\nthe money bank\n"
    out = b"".join(
        part
        for block in _results(
            engine, LineSource(io.BytesIO(data), 1 << 16), {"with_vectors": False, "weights": True, "word": None}, 8, 1
        )
        for part in block.parts
    )
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["line"] for r in records] == [1, 2, 3]
    assert records[1]["error"].startswith("the computation gave NaN or infinite values at the input vectors")
    assert "error" not in records[0] and "error" not in records[2]
