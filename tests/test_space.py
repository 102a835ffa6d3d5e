"""The contextual neighbour space (ctxembed/engine/space.py): built once from a corpus share, read back
checked, refused in one line when damaged, searched by `neighbors`; and --model NAME@N."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

from ctxembed.engine import open_engine
from ctxembed.engine import space as sp
from ctxembed.engine.space_search import OWN
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
    assert space.folder.parent == sp.Path(tiny_space.store.path).absolute().parent and len(notes) == 1
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
    assert doc["search"]["compared"] == "h1..h2" and "state by state (h1..h2)" in doc["space"]
    space = sp.open_space(explorer.engine)
    assert doc["search"]["templated"] == space.templated > 0
    assert doc["search"]["candidates"] == len(space.words) - space.templated
    assert f"among the {doc['search']['candidates']:,} words met there" in doc["search"]["about"]
    words = [n["word"] for n in doc["contextual"]]
    assert words and not {"we", "sat", "on", "the", "river", "bank"} & set(words)
    [result] = explorer.contextualize(["we sat on the river bank"])
    expected = space.neighbours(
        sp.hidden_states(result)[:, 5], explorer.engine.mix, word="bank", k=5,
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
    with pytest.raises(SettingError, match="tiny@3: tiny has no hidden state 3; its hidden states are 0"):
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
    K, _, D = space.means.shape
    centres = np.random.default_rng(0).standard_normal((2, K, D)).astype(np.float32)  # (2, K, D) mean states
    labels = sense_labels(tiny_space, centres, k=3, exclude={"river"}, word="bank")
    assert len(labels) == 2 and all(0 < len(found) <= 3 for found in labels)
    words = [w for found in labels for w, _ in found]
    assert len(set(words)) == len(words)  # a word labels the one sense it is nearest
    assert set(words) <= set(space.words) - space.templated_words - {"river", "bank"}


def test_damaged_means_are_refused_before_a_search_is_built(tiny_space):
    space = sp.open_space(tiny_space, on_note=lambda _: None)
    path = space.folder / "means.npy"
    data = bytearray(path.read_bytes())
    data[-7] ^= 0xFF  # one byte of the last mean
    path.write_bytes(bytes(data))
    reopened = sp.open_space(tiny_space)
    with pytest.raises(DataError, match="means do not match their checksum.*--rebuild"):
        reopened.states()


def _unit(vector):
    return vector / np.linalg.norm(vector)


def test_neighbours_compare_state_by_state_among_the_words_met(tiny_space):
    """By hand: at h1 and h2 (the mean read-out's states less h0), the word's state centred on the mean word,
    less OWN of the word's own centred mean, against every met word's centred mean; the cosines averaged.
    Words from the template sentence are never listed, and h0 (the word and its position) adds nothing."""
    space = sp.open_space(tiny_space, on_note=lambda _: None)
    [result] = tiny_space.run([tiny_space.prepare("we sat on the river bank")], weights=False)
    states = sp.hidden_states(result)[:, result.index_of("bank")]  # (K, D)
    found = space.neighbours(states, tiny_space.mix, word="bank", k=len(space.words), exclude={"bank"})
    means = space.means.astype(np.float64)  # (K, V, D)
    centres = means.mean(axis=1)  # (K, D)
    bank = space.row_of["bank"]
    expected = {}
    for row, word in enumerate(space.words):
        if space.counts[row] == 0 or word == "bank":
            continue
        cosines = []
        for state in (1, 2):
            query = _unit(_unit(states[state] - centres[state]) - OWN * _unit(means[state, bank] - centres[state]))
            cosines.append(_unit(means[state, row] - centres[state]) @ query)
        expected[word] = np.mean(cosines)
    assert dict(found).keys() == expected.keys() and not dict(found).keys() & space.templated_words
    for word, similarity in found:
        assert similarity == pytest.approx(expected[word], abs=1e-4)
    assert [w for w, _ in found] == sorted(expected, key=lambda w: -expected[w])
    moved = states.copy()
    moved[0] += 5.0  # h0 is not compared under the mean read-out
    again = space.neighbours(moved, tiny_space.mix, word="bank", k=len(space.words), exclude={"bank"})
    assert [w for w, _ in again] == [w for w, _ in found]


def test_search_weights_follow_the_mix(tiny_model):
    from ctxembed.engine.space_search import search_weights, states_name

    mean, at0, at2 = (
        open_engine(model=m).mix for m in (tiny_model.name, f"{tiny_model.name}@0", f"{tiny_model.name}@2")
    )
    assert search_weights(mean).tolist() == [0.0, 0.5, 0.5] and states_name(search_weights(mean)) == "h1..h2"
    assert search_weights(at0).tolist() == [1.0, 0.0, 0.0] and states_name(search_weights(at0)) == "h0"
    assert search_weights(at2).tolist() == [0.0, 0.0, 1.0] and states_name(search_weights(at2)) == "h2"
    mixed = open_engine(model=tiny_model.name, mix="0.5,0.1,0.3").mix
    assert search_weights(mixed) == pytest.approx([0.0, 0.25, 0.75])
    assert states_name(search_weights(mixed)) == "0.25·h1 + 0.75·h2"


def test_mix_chooses_a_trained_models_read_out(tiny_model):
    at = open_engine(model=tiny_model.name, mix="0,0,1")
    assert at.mix.weights.tolist() == [0.0, 0.0, 1.0]
    [result] = at.run([at.prepare("we sat on the river bank")], weights=False)
    np.testing.assert_array_equal(result.contextual, result.top)
    with pytest.raises(SettingError, match="reads one hidden state"):
        open_engine(model=f"{tiny_model.name}@1", mix="0,0,1")


def test_the_check_set_is_apart_from_the_set_it_checks():
    """data/ambiguous-check.tsv confirms a change chosen on data/ambiguous.tsv: other words, each with two
    senses of two sentences that hold the word (scripts/measure_sense_neighbours.py --set)."""
    import sys

    sys.path.insert(0, str(sp.Path(__file__).resolve().parent.parent / "scripts"))
    from measure_sense_neighbours import DATA, read_set

    chosen, check = read_set(DATA), read_set(DATA.with_name("ambiguous-check.tsv"))
    assert len(check) >= 12 and not chosen.keys() & check.keys()
    for word, senses in check.items():
        assert len(senses) == 2 and all(len(sentences) == 2 for sentences in senses.values())
        assert all(re.search(rf"\b{word}\b", sentence.lower()) for s in senses.values() for sentence in s)


def test_models_space_says_what_the_build_cost(tiny_space):
    """`ctxembed models space`: the space's size on disk, its build time and the building process's peak
    memory, as recorded by the build (space.json)."""
    doc = sp.space_document(tiny_space.model, on_note=lambda _: None)
    record = json.loads((sp.Path(doc["folder"]) / "space.json").read_text())
    assert doc["build_peak_mb"] == record["build_peak_mb"] > 10  # a Python process with NumPy holds more
    assert doc["build_seconds"] == record["build_seconds"] >= 0 and doc["bytes"] > 0
    assert doc["words"] == len(sp.open_space(tiny_space).words) and doc["lines"] == len(LINES)


def test_template_vectors_run_in_chunks_give_each_words_own_run(tiny_space, monkeypatch):
    """Rare words' template sentences run CHUNK_LINES at a time (bounded memory), each word's hidden states
    those of its own sentence run alone."""
    words = ["river", "bank", "money", "the", "stream"]
    monkeypatch.setattr(sp, "CHUNK_LINES", 2)
    chunked = sp.template_states(tiny_space, words)  # (K, 5, D)
    alone = np.concatenate([sp.template_states(tiny_space, [w]) for w in words], axis=1)  # (K, 5, D)
    assert chunked.shape[1] == len(words)
    np.testing.assert_array_equal(chunked, alone)


def test_models_space_prints_one_line_through_its_view(tiny_space):
    from tests.cli_helpers import succeeds

    doc = sp.space_document(tiny_space.model, on_note=lambda _: None)  # built before: the command says no note
    out = succeeds("models", "space", tiny_space.model, env={"COLUMNS": "40"}).stdout
    assert out.count("\n") == 1 and out.startswith(f"{tiny_space.model}: {doc['words']:,} words")
    assert f"peak memory {doc['build_peak_mb']:,} MB)" in out and doc["folder"] in out


def test_models_space_names_its_argument_for_an_unknown_model():
    """`models space` takes the model as its argument NAME: an unknown one is named so, not by --model (which
    the command has not), in one line and exit 2; attend names --model as ever."""
    from ctxembed.vectors.derived import names
    from tests.cli_helpers import fails

    known = f"(known: {', '.join(names())})"  # glove, minilm, and tiny when another test registered it
    assert known.startswith("(known: glove, minilm")
    assert fails(2, "models", "space", "nope") == f"ctxembed: error: NAME 'nope': no such model {known}"
    assert fails(2, "attend", "we sat", "--model", "nope") == f"ctxembed: error: --model 'nope': no such model {known}"
