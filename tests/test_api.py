"""The Python API: docs/api.md runs as written, results equal the CLI's documents, import stays light."""

from __future__ import annotations

import doctest
import subprocess
import sys

import numpy as np
import pytest

import ctxembed
from ctxembed import api as api_module
from ctxembed.output import as_json
from tests.cli_helpers import SHARED_CACHE, invoke, run_json, strict_json, succeeds
from tests.conftest import REPO

TRAINED = "## The trained model"  # docs/api.md's section whose examples need the installed model


def test_docs_api_md_runs_as_written(tmp_path, monkeypatch, request):
    """Every example; those of the trained model's section when it is installed (CTXEMBED_REQUIRE_MODELS=1:
    they must run)."""
    try:
        request.getfixturevalue("minilm_folder")
        installed = True
    except pytest.skip.Exception:
        installed = False
    monkeypatch.chdir(tmp_path)  # the examples write file.vec and apple.html here ...
    for folder in ("data", "tests"):  # ... and read the repository's small data files
        (tmp_path / folder).symlink_to(REPO / folder)
    path = REPO / "docs" / "api.md"
    text = path.read_text(encoding="utf-8")
    start = text.index(TRAINED)
    end = text.find("\n## ", start + 1)
    section = text[start : len(text) if end < 0 else end]
    if not installed:
        text = text.replace(section, "")
    test = doctest.DocTestParser().get_doctest(text, {}, path.name, str(path), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    failures, tried = runner.summarize(verbose=False)
    assert tried > 20 and failures == 0
    assert not installed or section.count(">>> ") >= 10  # the trained model's examples ran


def test_api_module_docstring_runs():
    failures, tried = doctest.testmod(api_module)
    assert tried > 0 and failures == 0


@pytest.fixture(scope="module")
def explorer():
    return ctxembed.Explorer()


def test_attend_to_dict_equals_the_json_document(explorer):
    text = "Apple makes phones"
    assert explorer.attend(text).to_dict() == run_json("attend", text, "--json")


def test_compare_to_dict_equals_the_json_document(explorer):
    sentences = ["we sat on the river bank", "I paid the bank"]
    c = explorer.compare(sentences, word="bank")
    assert c.to_dict() == run_json("compare", *sentences, "--word", "bank", "--json")
    assert c.static.shape == c.contextual.shape == (2, 2)


def test_neighbors_to_dict_equals_the_json_document(explorer):
    n = explorer.neighbors("Apple makes phones", word="apple", k=8)
    assert n.to_dict() == run_json("neighbors", "Apple makes phones", "--word", "apple", "-k", "8", "--json")
    assert [w for w, _ in n.contextual] == [x["word"] for x in n.to_dict()["contextual"]]


def test_settings_keywords_equal_the_cli_options():
    kwargs = {"preset": "textbook", "heads": 3, "causal": True, "causal_mode": "after", "temperature": 2.0}
    a = ctxembed.Explorer(vectors="notes-toy", **kwargs).attend("apple is the phone")
    doc = run_json(
        "attend", "apple is the phone", "--vectors", "notes-toy", "--preset", "textbook", "--heads", "1",
        "--causal", "--causal-mode", "after", "--temperature", "2", "--json",
    )  # fmt: skip
    assert a.to_dict()["settings"]["attention"]["heads"] == 3 and doc["settings"]["attention"]["heads"] == 1
    assert {k: v for k, v in a.to_dict()["settings"]["attention"].items() if k != "heads"} == {
        k: v for k, v in doc["settings"]["attention"].items() if k != "heads"
    }
    np.testing.assert_array_equal(a.weights[0].sum(axis=0) > 0, np.tril(np.ones((4, 4))) > 0)


def test_results_render_in_rich(explorer):
    from rich.console import Console

    console = Console(width=120, color_system=None, record=True)
    console.print(explorer.attend("the river bank"))
    text = console.export_text()
    assert "attention weights" in text and "river" in text


def test_unknown_keyword_is_a_setting_error():
    with pytest.raises(ctxembed.SettingError, match="unknown setting"):
        ctxembed.Explorer(colour=True)


def test_import_ctxembed_loads_no_heavy_module():
    code = (
        "import sys, ctxembed; ctxembed.__version__; "
        "heavy = [m for m in ('gensim', 'rich', 'matplotlib', 'numpy', 'scipy') if m in sys.modules]; print(heavy)"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "[]"


def test_dir_lists_the_api():
    assert {"Explorer", "AttendResult", "build_settings", "__version__"} <= set(dir(ctxembed))
    with pytest.raises(AttributeError):
        ctxembed.no_such_thing  # noqa: B018


# Each command's library call returns its --json document. Timings differ between two runs.
_TIMINGS = {"seconds", "train_seconds", "tokens_per_second"}


def test_train_weights_returns_the_json_document(tmp_path):
    corpus = REPO / "tests" / "fixtures" / "train_tiny.txt"
    fast = {"epochs": 1, "batch_tokens": 128, "negatives": 64, "warmup": 5, "heads": 2}
    flags = ["--epochs", "1", "--batch-tokens", "128", "--negatives", "64", "--warmup", "5", "--heads", "2"]
    cli = strict_json(invoke("train", corpus, "--out", tmp_path / "cli.npz", *flags, "--json").stdout)
    api = ctxembed.train_weights(corpus, tmp_path / "api.npz", on_note=None, **fast)
    assert api["out"] == str(tmp_path / "api.npz") and cli["out"] == str(tmp_path / "cli.npz")
    differs = _TIMINGS | {"out", "checkpoint"}
    assert {k: v for k, v in api.items() if k not in differs} == {k: v for k, v in cli.items() if k not in differs}
    assert api["options"]["batch_tokens"] == 128 and api["settings"]["attention"]["heads"] == 2


WIC = REPO / "tests" / "fixtures" / "wic"
SUITE, WSI = REPO / "data" / "senses.tsv", REPO / "data" / "wsi-senses.tsv"
SCWS, PAIRS = REPO / "tests" / "fixtures" / "scws_tiny.txt", REPO / "tests" / "fixtures" / "wordpairs_tiny.tsv"
CORPUS = REPO / "tests" / "fixtures" / "train_tiny.txt"
TWO = {"configs": ["textbook", "default"]}


@pytest.mark.parametrize(
    ("method", "arguments", "keywords", "command"),
    [
        ("evaluate_wic", [WIC], TWO, ["eval", "wic", WIC, "-c", "textbook", "-c", "default"]),
        ("evaluate_senses", [SUITE], {"configs": ["default"]}, ["eval", "senses", SUITE, "-c", "default"]),
        ("evaluate_senses", [], {"configs": ["static"]}, ["eval", "senses", "-c", "static"]),
        ("evaluate_pairs", [SCWS], TWO, ["eval", "pairs", SCWS, "-c", "textbook", "-c", "default"]),
        ("evaluate_pairs", [PAIRS], {}, ["eval", "pairs", PAIRS]),
        (
            "evaluate_wsi", [WSI], {"configs": ["default"], "k": 2, "sample_seed": 3},
            ["eval", "wsi", WSI, "-c", "default", "-k", "2", "--sample-seed", "3"],
        ),
        (
            "senses", [["bank", "plant"], CORPUS], {"k": 2, "drop_own": False},
            ["senses", "bank", "plant", CORPUS, "-k", "2", "--keep-own"],
        ),
    ],
)  # fmt: skip
def test_each_eval_and_senses_call_returns_the_json_document(explorer, method, arguments, keywords, command):
    api = getattr(explorer, method)(*arguments, **keywords)
    cli = strict_json(invoke(*command, "--json").stdout)
    assert api == cli and api["schema"] == cli["schema"]


def test_senses_and_eval_calls_use_the_explorers_settings():
    ex = ctxembed.Explorer(preset="textbook", heads=2)
    corpus = REPO / "tests" / "fixtures" / "train_tiny.txt"
    doc = ex.senses("bank", corpus, k=1)
    assert doc == run_json("senses", "bank", corpus, "-k", "1", "--preset", "textbook", "--heads", "2", "--json")
    flags = ["--preset", "textbook", "--heads", "2", "--json"]
    assert doc["settings"]["attention"]["heads"] == 2
    custom = ex.evaluate_wic(WIC, configs=["custom"])
    cli = strict_json(invoke("eval", "wic", WIC, "-c", "custom", *flags).stdout)
    assert custom == cli and custom["configs"][0]["settings"]["attention"]["heads"] == 2


def test_fit_mix_returns_the_json_document(explorer, tmp_path):
    api = explorer.fit_mix([WIC], out=tmp_path / "api.json")
    cli = strict_json(invoke("eval", "fit-mix", WIC, "--out", tmp_path / "cli.json", "--json").stdout)
    assert api.pop("written") == str(tmp_path / "api.json") and cli.pop("written") == str(tmp_path / "cli.json")
    assert api == cli


def test_before_after_returns_the_json_document():
    sentence = "we sat on the river bank"
    assert ctxembed.before_after(sentence, top=3) == run_json("before-after", sentence, "--top", "3", "--json")


def test_vectors_info_and_convert_return_the_json_documents(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXEMBED_CACHE_DIR", str(SHARED_CACHE))  # the cache the CLI calls use, named in info
    toy = REPO / "data" / "notes_toy.txt"
    assert ctxembed.vectors_info() == run_json("vectors", "info", "--json")
    assert ctxembed.vectors_info(toy, limit=2) == run_json("vectors", "info", toy, "--limit", "2", "--json")
    api = ctxembed.convert_vectors(toy, tmp_path / "api.ctxv")
    cli = run_json("vectors", "convert", toy, tmp_path / "cli.ctxv", "--json")
    assert api.pop("out") == str(tmp_path / "api.ctxv") and cli.pop("out") == str(tmp_path / "cli.ctxv")
    assert api == cli and (tmp_path / "api.ctxv").read_bytes() == (tmp_path / "cli.ctxv").read_bytes()


def test_batch_records_equal_the_commands_lines():
    from tests.cli_helpers import json_lines

    lines = ["we sat on the river bank", "", "I paid the bank"]
    records = [as_json(record) for record in ctxembed.embed_lines(lines, word="bank")]  # arrays as lists
    assert records == json_lines(succeeds("batch", "-", "--word", "bank", input="\n".join(lines) + "\n").stdout)
