"""--mix on every command that has a contextual vector, and `ctxembed eval fit-mix`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.cli_helpers import fails, invoke, json_lines, run_json, strict_json, succeeds
from tests.conftest import FIXTURES
from tests.test_json_schema import assert_valid

BANKS = ("we sat on the river bank", "I paid into the bank")


def _bank_cosine(*args) -> float:
    doc = run_json("compare", *BANKS, "--word", "bank", *args, "--json")
    return doc["contextual_similarity"][0][1]


def test_settings_carry_the_mix_and_the_default_has_one():
    doc = run_json("attend", "the river bank", "--json")
    assert doc["settings"]["mix"] == "0.2,0.8" and "layer mix 0.2,0.8" in doc["settings_summary"]
    assert run_json("attend", "the river bank", "--mix", "off", "--json")["settings"]["mix"] == "off"


def test_more_of_layer_zero_brings_two_occurrences_of_a_word_closer():
    # h0 is the same vector in both sentences: the more of it, the higher their cosine
    cosines = [_bank_cosine("--mix", f"{s},{1 - s}") for s in (0.0, 0.2, 0.5, 1.0)]
    assert cosines == sorted(cosines) and cosines[-1] == pytest.approx(1.0)


def test_batch_vectors_are_the_mixed_vectors():
    lines = json_lines(
        succeeds("batch", "--with-vectors", "--word", "bank", "--no-weights", input=BANKS[0] + "\n").stdout
    )
    plain = json_lines(
        succeeds("batch", "--with-vectors", "--no-weights", "--mix", "off", input=BANKS[0] + "\n").stdout
    )
    attend = run_json("attend", BANKS[0], "--with-vectors", "--json")
    assert np.allclose(lines[0]["contextual"], attend["contextual"], atol=1e-6)
    assert np.allclose(lines[0]["word"]["contextual"], attend["contextual"][-1], atol=1e-6)
    assert not np.allclose(lines[0]["contextual"], plain[0]["contextual"], atol=1e-3)


def test_eval_custom_with_a_mix(tmp_path):
    doc = run_json("eval", "pairs", FIXTURES / "scws_tiny.txt", "-c", "custom", "--mix", "1,0", "--json")
    static = run_json("eval", "pairs", FIXTURES / "scws_tiny.txt", "-c", "static", "--json")
    assert doc["configs"][0]["settings"]["mix"] == "1,0" and doc["configs"][0]["spearman"] is not None
    assert static["configs"][0]["spearman"] is not None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0.2", "one weight per layer"),
        ("0.2,0.3,0.5", "3 weights but there are 2 layers"),
        ("0.2,x", "comma-separated"),
    ],
)
def test_bad_mix_values_are_usage_errors(value, message):
    assert message in fails(2, "compare", *BANKS, "--mix", value)


def test_a_missing_mix_file_is_a_data_error(tmp_path):
    assert "no such file" in fails(1, "compare", *BANKS, "--mix", tmp_path / "none.json")


# ------------------------------------------------------------------------------ fit-mix
def test_fit_mix_writes_a_file_that_mix_reads(tmp_path):
    out = tmp_path / "mix.json"
    result = invoke("eval", "fit-mix", FIXTURES / "wic", FIXTURES / "scws_tiny.txt", "--out", out, "--json")
    assert result.exit_code == 0 and f"wrote {out}" in result.stderr
    doc = strict_json(result.stdout)
    assert_valid(doc, "ctxembed.mix-fit/1")
    assert json.loads(out.read_text(encoding="utf-8")) == doc and doc["written"] == str(out)
    assert sum(doc["weights"]) == pytest.approx(1) and doc["gamma"] > 0 and doc["layers"] == 1
    assert [s["kind"] for s in doc["sources"]] == ["wic", "scws"] and doc["settings"]["mix"] is None
    used = run_json("compare", *BANKS, "--word", "bank", "--mix", out, "--json")
    assert used["settings"]["mix"] == str(out)
    weights = ",".join(f"{w!r}" for w in doc["weights"])
    assert used["contextual_similarity"][0][1] == pytest.approx(_bank_cosine("--mix", weights), abs=1e-6)


def test_fit_mix_by_default_writes_the_learned_mix(tmp_path):
    env = {"CTXEMBED_CACHE_DIR": str(tmp_path)}
    result = invoke("eval", "fit-mix", FIXTURES / "wic", env=env)
    assert result.exit_code == 0 and "--mix learned" in result.stderr and (tmp_path / "mix-learned.json").exists()
    assert "layer mix fitted" in result.stdout
    learned = run_json("attend", "the river bank", "--mix", "learned", "--json", env=env)
    assert learned["settings"]["mix"] == "learned"


def test_fit_mix_errors():
    assert "no labelled split 'test'" in fails(2, "eval", "fit-mix", FIXTURES / "wic", "--split", "test")
    assert "not an SCWS-style file" in fails(1, "eval", "fit-mix", FIXTURES / "wordpairs_tiny.tsv")


# ------------------------------------------------------------------------------ mix files that would overflow
def _mix_file(tmp_path, gamma, weights=(0.5, 0.5)) -> str:
    path = tmp_path / "mix.json"
    path.write_text(json.dumps({"schema": "ctxembed.mix-fit/1", "weights": list(weights), "gamma": gamma}))
    return str(path)


@pytest.mark.parametrize("command", [("compare", *BANKS, "--word", "bank"), ("neighbors", BANKS[0], "--word", "bank")])
def test_a_gamma_of_1e308_is_refused_in_one_line(tmp_path, command):
    line = fails(1, *command, "--mix", _mix_file(tmp_path, 1e308), "--json")
    assert "'gamma' must be a number > 0 and at most 1e+06" in line


def test_a_gamma_that_overflows_these_vectors_is_refused(tmp_path):
    """Within the bound, but the vectors are large (1e12, accepted): the mixed vectors pass 1e15."""
    vectors = tmp_path / "big.txt"
    vectors.write_text("3 2\nthe 1e12 2e12\nriver 3e12 1e12\nbank 2e12 2e12\n")
    line = fails(
        1, "attend", "the river bank", "--vectors", vectors, "--abtt", "0", "--mix", _mix_file(tmp_path, 1e6), "--json"
    )
    assert "gives values past 1e+15" in line and "smaller gamma" in line and "--mix" in line


def test_a_mix_file_nested_deeply_is_one_line(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    assert "nested too deeply" in fails(1, "compare", *BANKS, "--mix", path)


def test_weights_near_the_float_limit_give_a_real_similarity_matrix():
    # their sum overflowed to inf, and the mix came out all zeros: exit 0 with a matrix of 0s, in
    # which a sentence was not even similar to itself
    doc = run_json("compare", *BANKS, "--word", "bank", "--mix", "1e308,1e308", "--json")
    same = run_json("compare", *BANKS, "--word", "bank", "--mix", "1,1", "--json")
    matrix = np.array(doc["contextual_similarity"])
    assert np.allclose(np.diag(matrix), 1.0)
    assert matrix.tolist() == same["contextual_similarity"]
