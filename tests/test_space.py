"""The contextual neighbour space (ctxembed/engine/space.py): built once from a corpus share, read back
checked, refused in one line when damaged, searched by `neighbors`; and --model NAME@N."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from ctxembed.engine import open_engine
from ctxembed.engine import space as sp
from ctxembed.errors import CtxembedError, DataError, SettingError

LINES = [
    "we sat on the river bank by the stream",
    "the boat lined the grassy bank of the river",
    "she deposited cash in the bank today",
    "he paid money into the savings account at the bank",
    "waves broke on the shore at dusk",
    "the old city shop opened all day",
]


@pytest.fixture
def tiny_space(tiny_model, monkeypatch):
    """The tiny model's space over six lines (each word met twice or more has its corpus mean). The space
    lives beside the model's files, which the module's tests share: each test starts and ends with none."""
    monkeypatch.setattr(sp, "corpus_share", lambda: LINES)
    engine = open_engine(model=tiny_model.name)
    shutil.rmtree(sp.space_folder(engine), ignore_errors=True)
    yield engine
    shutil.rmtree(sp.space_folder(engine), ignore_errors=True)


def test_the_space_lives_beside_the_models_files_whatever_the_cache(tiny_space, tmp_path, monkeypatch):
    """Built once per install: a process with another cache folder (each test has its own) reads the same
    space, and builds nothing; a model folder that cannot be written keeps it in the cache folder."""
    notes = []
    space = sp.open_space(tiny_space, on_note=notes.append)
    assert space.folder.parent == sp.Path(tiny_space.store.path).resolve().parent and len(notes) == 1
    monkeypatch.setenv("CTXEMBED_CACHE_DIR", str(tmp_path / "other-cache"))
    again = sp.open_space(tiny_space, on_note=notes.append)
    assert again.folder == space.folder and len(notes) == 1  # read, not built again
    shutil.rmtree(space.folder)
    monkeypatch.setattr(sp.os, "access", lambda path, mode: False)
    assert sp.space_folder(tiny_space).parent == tmp_path / "other-cache"


def test_built_once_then_read_back(tiny_space):
    notes = []
    space = sp.open_space(tiny_space, on_note=notes.append)
    assert len(notes) == 1 and "building" in notes[0]
    again = sp.open_space(tiny_space, on_note=notes.append)
    assert len(notes) == 1  # read from the folder, not built again
    assert again.words == space.words and np.array_equal(again.counts, space.counts)
    K, V, D = space.means.shape
    assert (K, V, D) == (tiny_space.layers + 1, len(space.words), tiny_space.dim)
    row = space.row_of["bank"]
    assert space.counts[row] == 4  # met four times: its vector is the corpus mean
    assert space.counts[space.row_of["love"]] == 0  # never met: from the template sentence
    assert space.templated == int((space.counts == 0).sum()) > 0


def test_a_mean_is_the_mean_of_the_occurrences(tiny_space):
    space = sp.open_space(tiny_space, on_note=lambda _: None)
    results = tiny_space.run([tiny_space.prepare(t) for t in LINES if " bank" in t], weights=False)
    hidden = [sp.hidden_states(r)[:, r.index_of("bank")] for r in results]  # each (K, D)
    expected = np.mean(hidden, axis=0)  # (K, D)
    np.testing.assert_allclose(space.means[:, space.row_of["bank"]].astype(np.float64), expected, atol=2e-3, rtol=2e-3)


def test_a_template_word_has_the_template_sentence_vector(tiny_space):
    space = sp.open_space(tiny_space, on_note=lambda _: None)
    [result] = tiny_space.run([tiny_space.prepare(sp.TEMPLATE.format(word="love"))], weights=False)
    expected = sp.hidden_states(result)[:, result.index_of("love")]
    np.testing.assert_allclose(space.means[:, space.row_of["love"]].astype(np.float64), expected, atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("damage", ["counts", "words", "json", "means"])
def test_a_damaged_space_is_refused_in_one_line(tiny_space, damage):
    space = sp.open_space(tiny_space, on_note=lambda _: None)
    folder = space.folder
    if damage == "counts":
        counts = np.load(folder / "counts.npy")
        counts[0] += 1
        np.save(folder / "counts.npy", counts)
    elif damage == "words":
        (folder / "words.txt").write_text((folder / "words.txt").read_text().replace("bank", "bonk"))
    elif damage == "json":
        (folder / "space.json").write_text("{")
    else:
        data = (folder / "means.npy").read_bytes()
        (folder / "means.npy").write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError) as caught:
        sp.open_space(tiny_space)
    message = caught.value.message
    assert "\n" not in message and "damaged" in message
    assert f"ctxembed models space {tiny_space.model} --rebuild" in message


def test_neighbors_searches_the_contextual_space_and_says_so(tiny_space, tiny_model):
    from ctxembed.api import Explorer

    explorer = Explorer(model=tiny_model.name)
    doc = explorer.neighbors("we sat on the river bank", "bank", 5).document()
    assert doc["space"].startswith("contextual") and doc["search"]["kind"] == "contextual"
    assert doc["search"]["templated"] > 0 and "template" in doc["search"]["about"]
    words = [n["word"] for n in doc["contextual"]]
    assert words and not {"we", "sat", "on", "the", "river", "bank"} & set(words)
    space = sp.open_space(explorer.engine)
    expected = space.nearest(
        explorer.contextualize(["we sat on the river bank"])[0].contextual[5], explorer.engine.mix, word="bank", k=5,
        exclude={"bank", "we", "sat", "on", "the", "river", *doc["forms"]},
    )  # fmt: skip
    assert words == [w for w, _ in expected]
    direct = explorer.neighbors("we sat on the river bank", "bank", 5, space="input").document()
    assert direct["space"] == "input embeddings" and "search" not in direct


def test_the_glove_model_has_no_contextual_space():
    from ctxembed.api import Explorer

    with pytest.raises(SettingError) as caught:
        Explorer().neighbors("we sat on the river bank", "bank", 5, space="contextual")
    assert "searches input" in caught.value.message


def test_model_at_layer_reads_that_hidden_state(tiny_model):
    plain = open_engine(model=tiny_model.name)
    at = open_engine(model=f"{tiny_model.name}@1")
    assert at.mix.weights.tolist() == [0.0, 1.0, 0.0]
    [a], [b] = (e.run([e.prepare("we sat on the river bank")], weights=False) for e in (plain, at))
    np.testing.assert_array_equal(b.contextual, b.layer_inputs[1])
    assert not np.array_equal(a.contextual, b.contextual)
    with pytest.raises(SettingError, match="hidden states are 0"):
        open_engine(model=f"{tiny_model.name}@3")
    with pytest.raises(CtxembedError, match="NAME@N"):
        open_engine(model="glove@1")


def test_word_forms():
    words = ["banks", "banking", "banked", "bankers", "bankrupt", "bark", "planned", "plans", "plant", "berries"]
    assert sp.word_forms("bank", words) == ["banks", "banking", "banked", "bankers"]
    assert sp.word_forms("plan", words) == ["planned", "plans"]
    assert sp.word_forms("berry", words) == ["berries"]


def test_space_record_is_json(tiny_space):
    space = sp.open_space(tiny_space, on_note=lambda _: None)
    record = json.loads((space.folder / "space.json").read_text())
    assert record["lines"] == len(LINES) and record["version"] == sp.VERSION


def test_sense_labels_of_a_trained_model_come_from_its_contextual_space(tiny_space):
    from ctxembed.senses.induce import sense_labels

    space = sp.open_space(tiny_space, on_note=lambda _: None)
    centres = np.random.default_rng(0).standard_normal((2, tiny_space.dim)).astype(np.float32)  # (2, d)
    labels = sense_labels(tiny_space, centres, k=3, exclude={"river"}, word="bank")
    assert len(labels) == 2 and all(len(found) == 3 for found in labels)
    words = {w for found in labels for w, _ in found}
    assert words <= set(space.words) - space.templated_words - {"river", "bank"}


def test_damaged_means_are_refused_before_a_read_out_is_built(tiny_space):
    space = sp.open_space(tiny_space, on_note=lambda _: None)
    path = space.folder / "means.npy"
    data = bytearray(path.read_bytes())
    data[-7] ^= 0xFF  # one byte of the last mean
    path.write_bytes(bytes(data))
    reopened = sp.open_space(tiny_space)
    with pytest.raises(DataError, match="means do not match their checksum.*--rebuild"):
        reopened.readout(tiny_space.mix)


def test_mix_chooses_a_trained_models_read_out(tiny_model):
    at = open_engine(model=tiny_model.name, mix="0,0,1")
    assert at.mix.weights.tolist() == [0.0, 0.0, 1.0]
    [result] = at.run([at.prepare("we sat on the river bank")], weights=False)
    np.testing.assert_array_equal(result.contextual, result.top)
    with pytest.raises(SettingError, match="reads one hidden state"):
        open_engine(model=f"{tiny_model.name}@1", mix="0,0,1")
