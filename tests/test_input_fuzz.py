"""Property: no input file makes ctxembed fail with anything but one clean error line. Weights files
(arrays, metadata, damaged archives), --mix files and sense-labelled TSVs drawn by hypothesis go
through the real commands (in-process): the exit code is 0, 1 or 2, never an uncaught exception.

Fast here (CTXEMBED_FUZZ_EXAMPLES, 25 by default); `make fuzz` runs many more."""

from __future__ import annotations

import io
import json
import os
import zipfile

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli_helpers import invoke
from tests.conftest import REPO

EXAMPLES = int(os.environ.get("CTXEMBED_FUZZ_EXAMPLES", "25"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
LEARNED = REPO / "data" / "learned-brown-2x4.npz"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats() | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=15,
)


def _clean(result) -> None:
    """One of the three exit codes, and on failure exactly one error line (invoke() already
    asserts that no exception escaped and no traceback was printed)."""
    assert result.exit_code in (0, 1, 2), result.output
    if result.exit_code:
        errors = [line for line in result.stderr.splitlines() if line.startswith("ctxembed: ")]
        assert len(errors) == 1 and "internal error" not in errors[0], result.stderr


# ------------------------------------------------------------------------------------------ weights files
def _learned_meta() -> dict:
    with np.load(LEARNED) as archive:
        return json.loads(str(archive["meta"]))


META_FIELDS = [("settings",), ("settings", "attention"), ("vectors",), ("vectors", "dim"), ("init",), ("learned",)]
META_FIELDS += [("steps",), ("losses",), ("corpus",), ("options",), ("init", "seed"), ("losses", "held_out")]


@st.composite
def metadata(draw) -> str:
    """The learned file's metadata with fields replaced, deleted or nested, or any JSON at all."""
    meta = _learned_meta()
    choice = draw(st.integers(0, 3))
    if choice == 0:
        return json.dumps(draw(json_values))
    if choice == 1:
        return "[" * draw(st.integers(1, 5000)) + "]" * draw(st.integers(0, 5000))
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(META_FIELDS))
        target = meta
        for key in path[:-1]:
            target = target.setdefault(key, {}) if isinstance(target, dict) else {}
        if isinstance(target, dict):
            if draw(st.booleans()):
                target.pop(path[-1], None)
            else:
                target[path[-1]] = draw(json_values)
    return json.dumps(meta, allow_nan=True)


def _filled(shape: tuple, dtype: str, fill: float) -> np.ndarray:
    """An array of ``fill``; NaN, inf and 1e30 cast to an integer type are whatever NumPy makes of them
    (the file is what is fuzzed, not the cast), without its RuntimeWarning in the test report."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.full(shape, fill).astype(dtype)


arrays = st.builds(
    _filled,
    st.lists(st.integers(0, 6), min_size=0, max_size=3).map(tuple),
    st.sampled_from(["float32", "float64", "int8", "int64", "bool", "complex64", "U3"]),
    st.sampled_from([0, 1, -1, 1e30, float("nan"), float("inf")]),
)
names = st.sampled_from(["W_query", "W_key", "W_value", "W_out", "b_out", "l0.h0.W_query", "l0.h0.W_key",
                         "l0.h0.W_value", "l1.W_out", "l9.h9.W_query", "train.mask", "x"])  # fmt: skip


@st.composite
def weights_files(draw) -> bytes:
    kind = draw(st.integers(0, 3))
    if kind == 0:  # random bytes, possibly starting like a zip or an .npy
        return draw(st.sampled_from([b"", b"PK\x03\x04", b"\x93NUMPY"])) + draw(st.binary(max_size=300))
    if kind == 1:  # the learned file, cut or with bytes flipped
        data = bytearray(LEARNED.read_bytes())
        cut = draw(st.integers(0, len(data)))
        for _ in range(draw(st.integers(0, 3))):
            data[draw(st.integers(0, len(data) - 1))] ^= draw(st.integers(1, 255))
        return bytes(data[:cut] if draw(st.booleans()) else data)
    buffer = io.BytesIO()
    if kind == 2:  # the learned arrays with fuzzed metadata
        with np.load(LEARNED) as archive:
            contents = {name: archive[name] for name in archive.files}
        contents["meta"] = np.array(draw(metadata()))
    else:  # arrays of any names, shapes and types
        contents = draw(st.dictionaries(names, arrays, max_size=6))
        if draw(st.booleans()):
            contents["meta"] = np.array(draw(metadata()))
    np.savez(buffer, **contents)
    return buffer.getvalue()


@FUZZ
@given(data=weights_files())
def test_any_weights_file_is_a_result_or_one_line(tmp_path, data):
    path = tmp_path / "fuzz.npz"
    path.write_bytes(data)
    _clean(invoke("attend", "the river bank", "--weights", path, "--json"))


# ------------------------------------------------------------------------------------------ --mix files
numbers = st.one_of(
    st.floats(), st.integers(min_value=-(2**70), max_value=2**70), st.sampled_from([0.5, 1, 1e308, 1e-308])
)


@st.composite
def mix_files(draw) -> str:
    kind = draw(st.integers(0, 2))
    if kind == 0:
        return json.dumps(draw(json_values), allow_nan=True)
    if kind == 1:
        return "[" * draw(st.integers(1, 5000)) + "]" * draw(st.integers(0, 5000))
    doc = {"schema": "ctxembed.mix-fit/1", "weights": draw(st.lists(numbers, max_size=4)), "gamma": draw(numbers)}
    if draw(st.booleans()):
        doc["weights"] = draw(st.sampled_from([[0.5, 0.5], [1, 0], [0.2, 0.8]]))
    return json.dumps(doc, allow_nan=True)


@FUZZ
@given(text=mix_files())
def test_any_mix_file_is_a_result_or_one_line(tmp_path, text):
    path = tmp_path / "mix.json"
    path.write_text(text, encoding="utf-8")
    result = invoke("compare", "we sat on the river bank", "I paid the bank", "--word", "bank", "--mix", path, "--json")
    _clean(result)
    if result.exit_code == 0:  # a result is a real one: no null similarity
        similarity = json.loads(result.stdout)["contextual_similarity"]
        assert all(value is not None for row in similarity for value in row)


# ------------------------------------------------------------------------------------------ sense-labelled TSVs
field_text = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\n\r"), max_size=12)
sentences = st.lists(
    st.sampled_from(["the", "river", "bank", "money", "banks", "x", "", "\t", "\x01", "é"]), max_size=8
)


@st.composite
def wsi_lines(draw) -> str:
    if draw(st.integers(0, 4)) == 0:
        return draw(field_text)
    words = draw(sentences)
    index = draw(st.one_of(st.integers(-2, 10), st.sampled_from(["x", "", "1e3", "99999999999999999999"])))
    word = draw(st.one_of(st.sampled_from(["bank", "river", "money"]), field_text))
    sense = draw(st.one_of(st.sampled_from(["a", "b"]), field_text))
    return f"{word}\t{sense}\t{index}\t{' '.join(words)}"


@FUZZ
@given(lines=st.lists(wsi_lines(), max_size=12), raw=st.one_of(st.none(), st.binary(max_size=200)))
def test_any_wsi_file_is_a_result_or_one_line(tmp_path, lines, raw):
    path = tmp_path / "senses.tsv"
    path.write_bytes(raw if raw is not None else "\n".join(lines).encode("utf-8", "surrogatepass"))
    _clean(invoke("eval", "wsi", path, "-c", "static", "--json"))


def test_the_zip_helpers_used_above_read_the_learned_file():
    """The fuzzed weights start from a real file: if it were unreadable, every example would be an error."""
    assert zipfile.is_zipfile(LEARNED) and "meta" in np.load(LEARNED).files
