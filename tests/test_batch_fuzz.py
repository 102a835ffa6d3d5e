"""Property: whatever the lines, batch writes one valid JSON record per line, in order.

Fast here (~40 examples); `make fuzz` runs many more (CTXEMBED_FUZZ_EXAMPLES) and
scripts/fuzz_batch.py drives the real command with worker processes."""

from __future__ import annotations

import io
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxembed.batch.driver import LineSource, _results, line_limit
from tests.batch_lines import BAD_KINDS, GOOD

EXAMPLES = int(os.environ.get("CTXEMBED_FUZZ_EXAMPLES", "40"))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**80), max_value=2**80) | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=20,
)
json_lines = st.builds(
    lambda text, ident, extra: json.dumps({"text": text, "id": ident, **extra}, allow_nan=True).encode(
        "utf-8", "surrogatepass"
    ),
    st.one_of(st.text(max_size=40), json_values),
    json_values,
    st.dictionaries(st.text(max_size=5), json_values, max_size=2),
)
lines = st.one_of(
    st.binary(max_size=80).map(lambda b: b.replace(b"\n", b" ")),
    st.text(max_size=60).map(lambda t: t.replace("\n", " ").encode("utf-8", "surrogatepass")),
    json_lines,
    st.sampled_from(list(BAD_KINDS.values()) + GOOD),
)


@pytest.fixture(scope="module")
def engine():
    from ctxembed.engine import Engine
    from ctxembed.presets import build_settings
    from ctxembed.vectors.sources import open_vectors

    return Engine(open_vectors(), build_settings("textbook"), max_tokens=512)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(lines, max_size=25), chunk=st.integers(1, 8), final_newline=st.booleans())
def test_one_valid_record_per_line_in_order(engine, batch, chunk, final_newline):
    data = b"\n".join(batch) + (b"\n" if final_newline and batch else b"")
    source = LineSource(io.BytesIO(data), line_limit(engine.max_tokens))
    options = {"with_vectors": False, "weights": True, "word": "bank"}
    out = b"".join(part for block in _results(engine, source, options, chunk, 1) for part in block.parts)
    expected = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)  # lines in the input
    records = [json.loads(line, parse_constant=_no_constant) for line in out.splitlines()]
    assert out == b"" or out.endswith(b"\n")
    assert [r["line"] for r in records] == list(range(1, expected + 1))
    for record in records:
        assert ("error" in record) != ("tokens" in record)


def _no_constant(name):
    raise ValueError(f"{name} in the output")
