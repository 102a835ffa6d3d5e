"""A trained model's read-out is spelled one way everywhere: NAME@N (hidden state N alone) and --mix FILE
(the file `eval fit-mix --model NAME` writes) in every command that takes --model, the API and the server."""

from __future__ import annotations

import json

import pytest

from tests.cli_helpers import invoke, json_lines, run_json

RIVER = "we sat on the river bank"
MONEY = "she paid money into the bank today"


def _scws(tmp_path):
    path = tmp_path / "scws.txt"
    river, money = "we sat on the river <b> bank </b> all day", "she paid money into the <b> bank </b> today"
    shore, shop = "waves broke on the <b> shore </b> at dusk", "i paid in <b> cash </b> at the shop"
    rows = [("bank", "bank", river, money, "2"), ("bank", "shore", river, shore, "7")]
    rows += [("cash", "shore", shop, shore, "0.5"), ("cash", "bank", shop, money, "8")]
    path.write_text("".join(f"{n}\t{a}\tn\t{b}\tn\t{c1}\t{c2}\t{r}\n" for n, (a, b, c1, c2, r) in enumerate(rows)))
    return path


def test_eval_under_model_name_at_n_reads_that_hidden_state(tiny_model, tmp_path):
    doc = run_json("eval", "pairs", _scws(tmp_path), "--model", f"{tiny_model.name}@1", "--json")
    assert [row["name"] for row in doc["configs"]] == ["static", "tiny@1"]  # not the model's own mean
    assert doc["configs"][1]["settings"]["readout"] == "1·h1"


def test_every_command_reads_the_mix_file_eval_fit_mix_writes(tiny_model, tmp_path):
    mix = tmp_path / "mix.json"
    fit = invoke("eval", "fit-mix", _scws(tmp_path), "--model", tiny_model.name, "--out", mix, "--json")
    assert fit.exit_code == 0, fit.stderr
    fitted = json.loads(fit.stdout)
    readout = fitted["formula"]  # the read-out the file holds, as every document of it says
    given = ("--model", tiny_model.name, "--mix", mix)
    compared = run_json("compare", RIVER, MONEY, "--word", "bank", *given, "--json")
    assert compared["settings"]["readout"] == readout
    near = run_json("neighbors", RIVER, "--word", "bank", "--space", "input", *given, "--json")
    assert near["settings"]["readout"] == readout
    out = invoke("batch", "-", "--word", "bank", "--no-weights", *given, input=RIVER + "\n")
    assert out.exit_code == 0, out.stderr
    [record] = json_lines(out.stdout)
    assert (
        record["word"]["contextual"]
        != json_lines(
            invoke(
                "batch", "-", "--word", "bank", "--no-weights", "--model", tiny_model.name, input=RIVER + "\n"
            ).stdout
        )[0]["word"]["contextual"]
    )  # the file's mix, not the model's own mean
    evaluated = run_json("eval", "pairs", _scws(tmp_path), *given, "--json")
    assert [row["name"] for row in evaluated["configs"]] == ["static", "custom"]
    assert evaluated["configs"][1]["settings"]["readout"] == readout


def test_the_api_and_the_server_take_name_at_n(tiny_model):
    import ctxembed
    from ctxembed.serve.endpoints import Explorers, answer

    explorer = ctxembed.Explorer(model=f"{tiny_model.name}@2")
    assert explorer.compare([RIVER, MONEY], "bank").to_dict()["settings"]["readout"] == "1·h2"
    doc = answer("compare", {"sentences": [RIVER, MONEY], "word": "bank", "model": f"{tiny_model.name}@1"}, Explorers())
    assert doc["settings"]["readout"] == "1·h1" and doc["settings"]["preset"] == "tiny@1"


def test_fit_mix_refuses_one_hidden_state(tiny_model, tmp_path):
    from tests.cli_helpers import fails

    out = tmp_path / "mix.json"
    line = fails(2, "eval", "fit-mix", _scws(tmp_path), "--model", f"{tiny_model.name}@1", "--out", out)
    assert line.endswith("--model tiny@1 reads one hidden state: a layer mix is fitted over all of them (--model tiny)")
    assert not out.exists()


@pytest.mark.parametrize(
    ("spelled", "message"),
    [
        ("tiny@3", "tiny@3: tiny has no hidden state 3; its hidden states are 0 (the input) to 2"),
        ("tiny@x", "tiny@x: the hidden state after @ must be a whole number, as in tiny@1"),
        ("tiny@-1", "tiny@-1: the hidden state after @ must be a whole number, as in tiny@1"),
        ("tiny@", "tiny@: the hidden state after @ must be a whole number, as in tiny@1"),
    ],
)
def test_a_mistaken_name_at_n_gets_one_message_from_model_and_config(tiny_model, tmp_path, spelled, message):
    """--model NAME@N and eval's -c NAME@N are parsed and checked by one function: one line, exit 2."""
    from tests.cli_helpers import fails

    as_model = fails(2, "neighbors", RIVER, "--word", "bank", "--space", "input", "--model", spelled)
    as_config = fails(2, "eval", "pairs", _scws(tmp_path), "--model", tiny_model.name, "-c", spelled)
    assert as_model == as_config == f"ctxembed: error: {message}"


def test_the_readout_module_docstring_runs():
    import doctest

    from ctxembed.engine import readout

    failures, tried = doctest.testmod(readout)
    assert tried > 0 and failures == 0
