"""Derived models: `ctxembed train --model TRAINED PAIRS --name NAME` on the tiny random BERT (fast), the
one registry listing them, and `--model NAME` in the commands."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.cli_helpers import fails, invoke, run_json

SAME = [
    ("we sat on the river bank", "the boat was by the bank", "bank", 1),
    ("she paid cash into the bank", "he deposited money in the bank", "bank", 1),
    ("we sat on the river bank", "she paid cash into the bank", "bank", 0),
    ("the boat was by the bank", "he deposited money at the bank", "bank", 0),
    ("the fish love the stream", "water in the stream was old", "stream", 1),
    ("the stream was small", "a big stream of cash", "stream", 0),
    ("they opened a savings account", "she opened an account today", "account", 1),
    ("the shore by the city", "waves broke on the shore", "shore", 1),
]


@pytest.fixture
def pairs_tsv(tmp_path):
    path = tmp_path / "pairs.tsv"
    rows = [f"{a}\t{b}\t{w}\t{y}" for a, b, w, y in SAME * 3]
    path.write_text("\n".join(rows) + "\n")
    return path


def train(tiny_model, pairs, name, *extra):
    result = invoke("train", "--model", tiny_model.name, str(pairs), "--name", name, "--epochs", "2", *extra, "--json")
    assert result.exit_code == 0, result.stderr  # its notes (pairs, epochs) on stderr
    return json.loads(result.stdout)


def test_freeze_writes_a_derived_model_the_registry_lists(tiny_model, pairs_tsv):
    doc = train(tiny_model, pairs_tsv, "tiny-frozen", "--freeze")
    assert doc["schema"] == "ctxembed.train-derived/1" and doc["way"] == "freeze" and not doc["interrupted"]
    record = json.loads((tiny_model.folder.parent / "tiny-frozen" / "derived.json").read_text())
    assert record["parent"] == tiny_model.name and record["weights"] == "parent"
    assert record["data"]["name"] == "pairs.tsv" and len(record["data"]["sha256"]) == 64
    assert record["licence"] == "CC0-1.0"
    assert abs(sum(record["mix"]["weights"]) - 1) < 1e-9 and len(record["mix"]["weights"]) == tiny_model.layers + 1
    assert not (tiny_model.folder.parent / "tiny-frozen" / "encoder.safetensors").exists()  # the parent's weights
    listed = {m["model"]: m for m in run_json("models", "list", "--json")["models"]}
    assert listed["tiny-frozen"]["parent"] == tiny_model.name
    assert listed["tiny-frozen"]["data"]["sha256"] == record["data"]["sha256"]
    assert listed["tiny-frozen"]["figures"]["train_accuracy"] is not None
    assert listed["tiny-frozen"]["licence"] == "CC0-1.0"


def test_fine_tuning_writes_its_own_weights_and_every_command_takes_it(tiny_model, pairs_tsv):
    doc = train(tiny_model, pairs_tsv, "tiny-ft", "--batch-pairs", "4")
    assert doc["way"] == "fine-tune" and doc["figures"]["epochs"] >= 1
    folder = tiny_model.folder.parent / "tiny-ft"
    from ctxembed.vectors import safetensors

    tuned, parent = (
        safetensors.load(folder / "encoder.safetensors"),
        safetensors.load(tiny_model.folder / "encoder.safetensors"),
    )
    assert set(tuned) == set(parent) and any(not np.array_equal(tuned[n], parent[n]) for n in tuned)  # it learned
    attend = run_json("attend", "we sat on the river bank", "--model", "tiny-ft", "--json")
    assert attend["settings"]["model"] == "tiny-ft"
    lines = pairs_tsv.parent / "lines.txt"
    lines.write_text("we sat on the river bank\nshe paid cash into the bank\n")
    for command in (
        ["neighbors", "we sat on the river bank", "--word", "bank", "--space", "input"],
        ["compare", "--word", "bank", "we sat on the river bank", "she paid cash into the bank"],
        ["batch", str(lines), "--word", "bank", "--no-weights"],
    ):
        result = invoke(*command, "--model", "tiny-ft", *(["--json"] if command[0] != "batch" else []))
        assert result.exit_code == 0, (command, result.stderr)
        assert command[0] == "batch" or "tiny-ft" in result.stdout


def test_unknown_name_is_one_line_naming_the_derived_models(tiny_model, pairs_tsv):
    train(tiny_model, pairs_tsv, "tiny-frozen2", "--freeze")
    result = invoke("attend", "we sat", "--model", "nope")
    assert result.exit_code == 2 and "tiny-frozen2" in result.stderr


def test_glove_refuses_name_and_minilm_training_refuses_out(tiny_model, pairs_tsv, tmp_path):
    result = invoke("train", str(pairs_tsv), "--name", "x")
    assert result.exit_code == 2 and "--name" in result.stderr
    result = invoke("train", "--model", tiny_model.name, str(pairs_tsv), "--out", str(tmp_path / "w.npz"))
    assert result.exit_code == 2 and "--out" in result.stderr
    result = invoke("train", "--model", tiny_model.name, str(pairs_tsv))
    assert result.exit_code == 2 and "--name" in result.stderr


def test_interrupted_and_resumed_gives_the_uninterrupted_weights(tiny_model, pairs_tsv, monkeypatch):
    """The resumed run's steps have the uninterrupted run's losses and end at its weights, bit for bit; it
    starts from the checkpoint's head, with no forward pass over the training pairs to fit one."""
    from ctxembed.presets import TrainOptions
    from ctxembed.train import derived
    from ctxembed.train.derived import train_derived
    from ctxembed.train.finetune import FineTuner
    from ctxembed.vectors import safetensors

    fits, losses = [], []
    real_layer_words, real_step = derived.layer_words, FineTuner.step
    monkeypatch.setattr(derived, "layer_words", lambda *a: fits.append(1) or real_layer_words(*a))

    def recorded_step(tuner, *args):
        result = real_step(tuner, *args)
        losses.append(result.loss)
        return result

    monkeypatch.setattr(FineTuner, "step", recorded_step)
    options = TrainOptions(epochs=2, lr=1e-3, held_out=0.2, warmup=2, seed=3)
    common = {"model": tiny_model.name, "options": options, "batch_pairs": 4}
    whole = train_derived(pairs_tsv, name="whole", **common)
    whole_losses = losses[:]
    assert len(fits) == 1 and len(whole_losses) > 3
    losses.clear()
    calls = {"n": 0}

    def stop_after_three() -> bool:
        calls["n"] += 1
        return calls["n"] > 3  # mid-epoch: 5 batches an epoch

    stopped = train_derived(pairs_tsv, name="parted", stop=stop_after_three, **common)
    assert stopped["interrupted"] and stopped["path"] is None
    assert not (tiny_model.folder.parent / "parted").exists()
    assert len(fits) == 2 and len(losses) == 3
    resumed = train_derived(pairs_tsv, name="parted", resume=True, **common)
    assert not resumed["interrupted"] and resumed["history"] == whole["history"]
    assert len(fits) == 2  # the resumed run fitted no head
    assert losses == whole_losses  # floats compared exactly: steps 1-3, then the resumed steps
    a = safetensors.load(tiny_model.folder.parent / "whole" / "encoder.safetensors")
    b = safetensors.load(tiny_model.folder.parent / "parted" / "encoder.safetensors")
    assert all(np.array_equal(a[n], b[n]) for n in a)
    ra = json.loads((tiny_model.folder.parent / "whole" / "derived.json").read_text())
    rb = json.loads((tiny_model.folder.parent / "parted" / "derived.json").read_text())
    assert ra["head"] == rb["head"]


def test_a_checkpoint_of_other_data_is_refused(tiny_model, pairs_tsv, tmp_path):
    from ctxembed.errors import DataError
    from ctxembed.presets import TrainOptions
    from ctxembed.train.derived import train_derived

    common = {"model": tiny_model.name, "options": TrainOptions(epochs=1, lr=1e-3), "batch_pairs": 4}
    train_derived(pairs_tsv, name="c", stop=lambda: True, **common)
    other = tmp_path / "other.tsv"
    other.write_text(pairs_tsv.read_text().replace("\t1\n", "\t0\n", 1))
    with pytest.raises(DataError, match="another run"):
        train_derived(other, name="c", resume=True, **common)


def test_bad_pairs_are_one_line(tiny_model, tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("we sat on the bank\tthe river\tbank\t1\n")
    result = invoke("train", "--model", tiny_model.name, str(bad), "--name", "b")
    assert result.exit_code == 1 and "sentence2" in result.stderr and "Traceback" not in result.stderr


def test_compare_under_a_derived_model_gives_its_heads_probability(tiny_model, pairs_tsv):
    train(tiny_model, pairs_tsv, "tiny-head", "--freeze")
    sentences = ["we sat on the river bank", "she paid cash into the bank", "the boat was by the bank"]
    doc = run_json("compare", "--word", "bank", *sentences, "--model", "tiny-head", "--json")
    [entry] = doc["words"]
    p = np.array(entry["same_sense"])
    assert p.shape == (3, 3) and np.allclose(p, p.T) and ((p > 0) & (p < 1)).all()
    # the head's own formula over the document's per-layer cosines: sigmoid(a cos_mix + w . cos_j + b)
    record = json.loads((tiny_model.folder.parent / "tiny-head" / "derived.json").read_text())
    head, layers = record["head"], np.array(entry["layers"])  # (K, N, N)
    K = len(layers)
    assert len(head["weights"]) == 2 * K and np.array(head["centre"]).shape == (K, tiny_model.width)
    # the head's own formula: sigmoid(a cos_mix + w . cos_j + w' . standardised cos_j + b), the first two
    # from the document's cosines; the standardised ones from the pair's hidden states
    from ctxembed.core.heads import same_sense

    z = head["mix_weight"] * np.array(entry["contextual_similarity"]) + np.tensordot(head["weights"][:K], layers, 1)
    assert not np.allclose(p, 1 / (1 + np.exp(-(z + head["bias"]))), atol=1e-5)  # the standardised ones count
    from ctxembed.engine.registry import open_engine

    engine = open_engine(model="tiny-head")
    results = engine.run([engine.prepare(s) for s in sentences])
    words = np.stack([np.stack(r.hidden_states())[:, r.prepared.locate("bank")[0]] for r in results])  # (N, K, D)
    mix = np.array(record["mix"]["weights"])
    expected = same_sense(head, mix, words[[0, 0, 1]], words[[1, 2, 2]])  # pairs S1-S2, S1-S3, S2-S3
    assert np.allclose(expected, [p[0, 1], p[0, 2], p[1, 2]], atol=1e-6)
    text = invoke("compare", "--word", "bank", *sentences, "--model", "tiny-head").stdout
    assert "p(same sense)" in text and f"{p[0, 1]:.3f}" in text
    parent = run_json("compare", "--word", "bank", *sentences, "--model", tiny_model.name, "--json")
    assert "same_sense" not in parent["words"][0]  # the parent's document is as it was


def test_before_after_shows_what_fine_tuning_moved(tiny_model, pairs_tsv):
    train(tiny_model, pairs_tsv, "tiny-moved", "--batch-pairs", "4")
    river, money = "we sat on the river bank", "she paid cash into the bank"
    doc = run_json("before-after", river, "--model", "tiny-moved", "--word", "bank", "--with", money, "--json")
    assert doc["schema"] == "ctxembed.before-after-model/1" and doc["parent"] == tiny_model.name
    changes = [h["change"] for h in doc["heads"]]
    assert len(changes) == tiny_model.layers * tiny_model.heads and changes == sorted(changes, reverse=True)
    assert changes[0] > 0  # fine-tuning moved some head
    before, after = np.array(doc["before"]["weights"]), np.array(doc["after"]["weights"])  # (L, h, T, T)
    top = doc["heads"][0]
    moved = 0.5 * np.abs(after - before).sum(-1).mean(-1)  # (L, h)
    assert np.isclose(moved[top["layer"], top["head"]], moved.max())
    change = np.array(doc["cosines"]["after"]) - np.array(doc["cosines"]["before"])
    assert np.allclose(change, doc["cosines"]["change"], atol=1e-6) and change[0, 1] != 0
    text = invoke("before-after", river, "--model", "tiny-moved", "--word", "bank", "--with", money).stdout
    assert "the heads that moved most" in text and "S1-S2" in text


def test_before_after_refuses_with_for_the_glove_model():
    result = invoke("before-after", "we sat on the river bank", "--with", "the bank", "--word", "bank")
    assert result.exit_code in (1, 2) and "derived model" in result.stderr and "Traceback" not in result.stderr


def test_eval_takes_a_derived_model_as_a_configuration(tiny_model, pairs_tsv, tmp_path):
    train(tiny_model, pairs_tsv, "tiny-eval", "--freeze")
    wic = tmp_path / "wic"
    wic.mkdir()
    rows = [(a, b, w, y) for a, b, w, y in SAME]
    data = [f"{w}\tN\t{a.split().index(w)}-{b.split().index(w)}\t{a}\t{b}" for a, b, w, y in rows]
    for split in ("train", "dev"):
        (wic / f"{split}.data.txt").write_text("\n".join(data) + "\n")
        (wic / f"{split}.gold.txt").write_text("\n".join("T" if y else "F" for *_, y in rows) + "\n")
    result = invoke("eval", "wic", str(wic), "-c", "tiny-eval", "--json")
    assert result.exit_code == 0, result.stderr
    assert "tiny-eval" in result.stdout
    scws = tmp_path / "pairs.txt"  # SCWS's layout: id, word, pos, word, pos, context <b> word </b>, context, rating
    scws.write_text(
        "".join(
            f"{n}\t{w}\tn\t{w}\tn\t{a.replace(w, f'<b> {w} </b>', 1)}\t{b.replace(w, f'<b> {w} </b>', 1)}\t{9 * y}\n"
            for n, (a, b, w, y) in enumerate(rows)
        )
    )
    result = invoke("eval", "pairs", str(scws), "-c", "tiny-eval", "--json")
    assert result.exit_code == 0, result.stderr
    assert "tiny-eval" in result.stdout


def test_before_after_of_a_frozen_model_says_no_head_moved(tiny_model, pairs_tsv):
    train(tiny_model, pairs_tsv, "tiny-still", "--freeze")
    doc = run_json("before-after", "we sat on the river bank", "--model", "tiny-still", "--json")
    assert doc["way"] == "freeze" and all(h["change"] == 0 for h in doc["heads"])
    text = invoke("before-after", "we sat on the river bank", "--model", "tiny-still").stdout
    assert "no head moved" in text


def test_the_server_answers_under_a_derived_model(tiny_model, pairs_tsv):
    from ctxembed.serve.endpoints import Explorers, answer, registry

    train(tiny_model, pairs_tsv, "tiny-served", "--freeze")
    explorers = Explorers()
    body = {"sentences": ["we sat on the river bank", "she paid cash into the bank"], "word": "bank"}
    doc = answer("compare", body | {"model": "tiny-served"}, explorers)
    assert doc["settings"]["model"] == "tiny-served" and "same_sense" in doc["words"][0]
    assert "tiny-served" in [m["name"] for m in registry(explorers)["models"]]


def test_a_name_of_the_registry_is_refused_before_any_work(tiny_model, pairs_tsv):
    result = invoke("train", "--model", tiny_model.name, str(pairs_tsv), "--name", "minilm")
    assert result.exit_code == 2 and "names a model of the registry" in result.stderr
    assert "pairs to train on" not in result.stderr


def test_models_verify_checks_a_fine_tuned_model_and_names_a_frozen_ones_parent(tiny_model, pairs_tsv):
    train(tiny_model, pairs_tsv, "tiny-verified", "--batch-pairs", "4")
    assert run_json("models", "verify", "tiny-verified", "--json")["verified"] is True
    train(tiny_model, pairs_tsv, "tiny-headonly", "--freeze")
    result = invoke("models", "verify", "tiny-headonly")
    assert result.exit_code == 2 and f"verify {tiny_model.name}" in result.stderr


@pytest.mark.parametrize("text", ["[1, 2]", "5", "{}"])
def test_a_derived_record_that_is_no_object_is_one_line_everywhere(tmp_path, monkeypatch, text):
    """A derived.json holding a list or a number (not the record) is a data error naming the file, from
    `models verify` and from every command that looks the model up; it was an 'internal error'."""
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "derived.json").write_text(text)
    monkeypatch.setenv("CTXEMBED_MODELS", str(tmp_path))
    for args in (("models", "verify", "broken"), ("attend", "we sat", "--model", "broken")):
        line = fails(1, *args)
        assert "derived.json is not a derived model's record" in line and "internal error" not in line


def test_a_resumed_run_tunes_the_checkpoints_arrays_and_copies_no_weights(tmp_path):
    """A resumed fine-tuning run tunes the arrays its checkpoint was read into: building it allocates Adam's
    two moments (2 W) and no copy of the parent's weights for the checkpoint to overwrite (a third W, 90 MB
    for MiniLM); its state is the checkpoint's, and it steps on as the run it resumes does."""
    import tracemalloc

    from ctxembed.core.encoder import EncoderConfig, random_weights
    from ctxembed.train.derived import FineTuneOptions, FineTuneRun, read_checkpoint, write_checkpoint
    from tests.test_finetune import tiny_pairs

    parent = random_weights(EncoderConfig(vocab_size=400, hidden=64, layers=2, heads=4, ffn=128, max_positions=40))
    W = sum(array.nbytes for array in parent.arrays().values())
    pairs = tiny_pairs(20)
    options = FineTuneOptions(epochs=2, lr=3e-3, batch_pairs=6, warmup=1, clip=1.0, seed=5)

    def after(steps: int):  # a run's ``stop``: True once ``steps`` steps are taken
        asked = iter(range(100))
        return lambda: next(asked) >= steps

    first = FineTuneRun(parent, pairs[:15], pairs[15:], options)
    assert not first.run(lambda step: None, lambda epoch: None, after(2))  # 2 steps, then stopped
    write_checkpoint(tmp_path / "run.npz", first, {"run": 1})
    state = read_checkpoint(tmp_path / "run.npz", {"run": 1})
    tracemalloc.start()
    try:
        resumed = FineTuneRun(parent, pairs[:15], pairs[15:], options, state)
        _, allocated = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert 2 * W <= allocated < 2.4 * W
    theirs = first.state()
    assert all(np.array_equal(array, theirs[name]) for name, array in resumed.state().items())
    for run in (resumed, first):  # one more step each
        assert not run.run(lambda step: None, lambda epoch: None, after(1))
    theirs = first.state()
    assert all(np.array_equal(array, theirs[name]) for name, array in resumed.state().items())


def test_a_resumed_run_lets_go_of_the_checkpoint_arrays_it_copied(tiny_model, pairs_tsv, monkeypatch):
    """The arrays restore copies out of a checkpoint (Adam's moments: 2 W, 180 MB for MiniLM) are freed once
    the resumed run is built, not held while it trains."""
    import weakref

    from ctxembed.presets import TrainOptions
    from ctxembed.train import derived

    common = {"model": tiny_model.name, "options": TrainOptions(epochs=2, seed=3), "batch_pairs": 4}
    asked = iter(range(100))
    assert derived.train_derived(pairs_tsv, name="let-go", stop=lambda: next(asked) >= 3, **common)["interrupted"]
    read, copied = derived.read_checkpoint, []

    def reading(*args):
        state = read(*args)
        copied.extend(weakref.ref(array) for name, array in state.items() if name.startswith("adam."))
        return state

    monkeypatch.setattr(derived, "read_checkpoint", reading)
    alive, real_run = [], derived.FineTuneRun.run

    def run(self, *args):
        alive.append(sum(ref() is not None for ref in copied))  # as training starts
        return real_run(self, *args)

    monkeypatch.setattr(derived.FineTuneRun, "run", run)
    assert not derived.train_derived(pairs_tsv, name="let-go", resume=True, **common)["interrupted"]
    assert len(copied) > 2 * tiny_model.layers and alive == [0]
