"""Senses under a trained model: occurrences cluster on what their contexts add (the word's type direction
taken out), and senses are labelled by their centroids' neighbours in the model's contextual space."""

from __future__ import annotations

import numpy as np

from ctxembed.core.similarity import unit_rows
from ctxembed.engine import open_engine
from ctxembed.engine import space as sp
from ctxembed.senses import induce
from ctxembed.senses.occurrences import Occurrence
from tests.test_space import LINES, tiny_space  # noqa: F401  (the tiny model with its space over LINES)

# ruff: noqa: F811  (tests take the imported fixture tiny_space by its name)


def bank_occurrences() -> list[Occurrence]:
    found = []
    for number, text in enumerate(LINES, start=1):
        at = text.find("bank")
        if at >= 0:
            found.append(Occurrence("bank", "bank", number, at, at + 4, text))
    return found


def test_a_trained_models_occurrences_cluster_on_the_word_less_its_type_and_the_sentence_around(tiny_model):
    engine = open_engine(model=tiny_model.name)
    found = induce.occurrence_vectors(engine, bank_occurrences())
    assert len(found.occurrences) == 4
    results = engine.run([engine.prepare(o.text) for o in found.occurrences], weights=False)
    pairs = [(r, r.index_of("bank")) for r in results]
    states = [np.stack([*r.layer_inputs, r.top])[:, row] for r, row in pairs]  # each occurrence's h0..hL (K, D)
    np.testing.assert_allclose(found.states, states, atol=1e-5)
    around = np.stack([np.delete(r.contextual, row, axis=0).mean(axis=0) for r, row in pairs])  # (4, d)
    own = found.vectors - found.vectors.mean(axis=0)  # (4, d) the word less its type direction
    expected = unit_rows(own) + unit_rows(around - around.mean(axis=0))
    np.testing.assert_allclose(found.clustered, expected, rtol=0, atol=1e-5)
    np.testing.assert_allclose(found.unit, unit_rows(expected), rtol=0, atol=1e-5)
    kept = induce.occurrence_vectors(engine, bank_occurrences(), drop_own=False)
    assert kept.clustered is None  # keeping the own term keeps the word's vector as it is
    np.testing.assert_allclose(kept.unit, unit_rows([r.contextual[row] for r, row in pairs]), atol=1e-6)


def test_the_glove_engine_clusters_its_context_part_as_it_is():
    engine = open_engine()
    found = induce.occurrence_vectors(engine, bank_occurrences())
    assert found.clustered is None
    np.testing.assert_allclose(found.unit, unit_rows(found.vectors), atol=1e-6)


def test_eval_wsi_clusters_a_trained_models_words_each_on_its_own(tiny_model):
    """eval wsi's vectors are what senses clusters: each word's from its own occurrences only."""
    from ctxembed.evaluation.evaluate import named_settings
    from ctxembed.senses.wsi import LabelledOccurrence, contextual_vectors

    items = [
        LabelledOccurrence(word, "x", text.split().index(word), text.split())
        for text in LINES
        for word in ("bank", "river")
        if word in text.split()
    ]
    store, settings = open_engine().store, named_settings(tiny_model.name)
    vectors, found = contextual_vectors(store, settings, items)
    assert found.all()
    banks = [n for n, item in enumerate(items) if item.word == "bank"]
    alone, _ = contextual_vectors(store, settings, [items[n] for n in banks])
    np.testing.assert_allclose(vectors[banks], alone, rtol=0, atol=1e-6)
    kept, _ = contextual_vectors(store, settings, [items[n] for n in banks], drop_own=False)
    engine = open_engine(model=tiny_model.name)
    found_banks = induce.occurrence_vectors(engine, bank_occurrences())
    np.testing.assert_allclose(alone, found_banks.clustered, rtol=0, atol=1e-5)  # as senses clusters them
    assert not np.allclose(alone, kept, atol=1e-3)


def test_labels_are_the_neighbours_of_each_senses_centroid_that_are_nearest_it(tiny_space):
    space = sp.open_space(tiny_space, on_note=lambda _: None)
    found = induce.occurrence_vectors(tiny_space, bank_occurrences())
    clustering = induce.Clustering(np.array([0, 0, 1, 1]), 2, "given", None)
    centres = induce.label_centres(found, clustering)  # (2, K, D) the senses' mean hidden states
    np.testing.assert_allclose(centres[0], found.states[:2].mean(axis=0), atol=1e-6)
    labels = induce.sense_labels(tiny_space, centres, k=3, exclude={"river"}, word="bank")
    banned = {"river", "bank"} | set(sp.word_forms("bank", space.words))
    pools = [dict(space.neighbours(c, tiny_space.mix, word=None, k=100, exclude=banned)) for c in centres]
    for own, listed in enumerate(labels):
        other = pools[1 - own]
        expected = [(w, s) for w, s in pools[own].items() if w.isalpha() and s >= other.get(w, -np.inf)]
        assert listed == expected[:3]
        assert all(s >= other.get(w, -np.inf) for w, s in listed)  # each label is nearest its own sense
    assert not set(dict(labels[0])) & set(dict(labels[1]))  # so no word labels both senses
    assert not {w for listed in labels for w, _ in listed} & space.templated_words  # words met in the corpus
    [alone] = induce.sense_labels(tiny_space, centres[:1], k=3, exclude=set(), word="bank")
    expected = space.neighbours(centres[0], tiny_space.mix, word=None, k=16, exclude=banned - {"river"})
    assert alone == [(w, s) for w, s in expected if w.isalpha()][:3]  # one sense: its centroid's neighbours


def test_minilm_labels_brown_senses_readably(minilm_folder):
    """The shipped corpus under the real model: plant's factories and its growing things get labels that
    say so; bank's largest sense is money, and another one's labels hold river words; bass (all but one
    of its Brown occurrences music) reads as music in every sense it is split into."""
    from ctxembed.senses.run import senses

    engine = open_engine(model="minilm")
    doc, problems = senses(engine, {}, ["plant", "bank", "bass"], examples=0, label_words=8)
    assert not problems
    plant, bank = ({w["word"] for w in s["label"]} for s in doc["words"][0]["senses"]), doc["words"][1]
    music = {"music", "musician", "musicians", "jazz", "violin", "piano", "guitar", "sax", "drum", "orchestra",
             "horn", "horns", "chord", "tune", "melody", "band", "blues", "singers", "sang", "ballads"}  # fmt: skip
    bass = [{w["word"] for w in s["label"]} for s in doc["words"][2]["senses"]]
    assert all(len(labels & music) >= 2 for labels in bass), bass
    plant = list(plant)
    assert any(labels & {"factory", "factories", "facility"} for labels in plant), plant
    assert any(labels & {"grow", "growing", "crops", "trees", "garden", "gardens"} for labels in plant), plant
    assert {w["word"] for w in bank["senses"][0]["label"]} & {"money", "financial", "finance", "account", "cash"}
    assert any({w["word"] for w in s["label"]} & {"river", "rivers", "shore", "stream"} for s in bank["senses"])


def test_a_trained_models_senses_document_says_what_was_clustered_and_where_labels_come_from(tiny_space, tmp_path):
    from ctxembed.senses.run import senses
    from tests.cli_helpers import run_json
    from tests.test_json_schema import assert_valid

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    sp.open_space(tiny_space, on_note=lambda _: None)  # built before: the command says nothing on stderr
    doc = run_json("senses", "bank", corpus, "-k", "2", "--model", tiny_space.model, "--json")
    assert doc["options"]["clustered_on"] == induce.CLUSTERED_ON
    assert doc["label_search"] == sp.open_space(tiny_space).describe_neighbours(tiny_space.mix)  # as neighbors says
    assert_valid(doc, "ctxembed.senses/2")
    kept, _ = senses(tiny_space, {}, ["bank"], corpus, k=2, drop_own=False)
    assert "clustered_on" not in kept["options"] and "label_search" in kept
    glove, _ = senses(open_engine(), {}, ["bank"], corpus, k=2)
    assert "clustered_on" not in glove["options"] and "label_search" not in glove  # its JSON as it was


def test_the_senses_view_says_what_was_clustered_and_where_labels_come_from(tiny_space, tmp_path):
    from rich.console import Console

    from ctxembed.senses.run import senses
    from ctxembed.views.render_senses import render_senses

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    doc, _ = senses(tiny_space, {}, ["bank"], corpus, k=2)
    console = Console(record=True, width=300, color_system=None)
    render_senses(console, doc)
    text = console.export_text()
    assert f"clusters on {induce.CLUSTERED_ON}" in text
    assert (
        "labels   the words nearest each sense's centroid, each labelling the sense it is nearest, in the model's "
        "contextual space: each word's mean hidden states" in text
    )
