"""The shipped default store: GloVe's whole vocabulary (estimated rows marked) and int8 subwords for the rest."""

from __future__ import annotations

import numpy as np
import pytest

from ctxembed.presets import Settings
from ctxembed.vectors.sources import DEFAULT_STORE_NAME
from ctxembed.vectors.store import VectorStore
from tests.conftest import REPO

STORE = REPO / "data" / DEFAULT_STORE_NAME


@pytest.fixture(scope="module")
def store():
    return VectorStore.open(STORE)


@pytest.mark.parametrize("word", ["a", "i", "'s", "n't", "500", "1960", "café", "u.s.", "the", "bank"])
def test_everyday_tokens_have_rows(store, word):
    assert store.find(word) is not None


def test_rows_are_in_glove_frequency_order(store):
    assert store.words[:10] == ["the", ",", ".", "of", "to", "and", "in", "a", '"', "'s"]
    assert len(store) == 400_000


def test_words_the_100d_package_lacks_are_marked_estimated(store):
    estimated = ("a", "i", "'s", "1960", "café")  # a single letter, a clitic, a number, an accent
    assert [store.row_source(store.find(w)) for w in estimated] == ["estimated"] * len(estimated)
    assert [store.row_source(store.find(w)) for w in ("the", "bank", "cafe")] == ["vocabulary"] * 3
    assert int(store.row_sources.sum()) == store.meta["estimated_rows"] == 58_521  # code 1: estimated


def test_other_words_get_int8_subword_vectors(store):
    assert store.subwords is not None and store.subwords.ngrams.dtype == np.int8
    assert "xqzzvbankish" not in store and store.can_embed("xqzzvbankish")
    assert np.isfinite(store.vector("xqzzvbankish")).all()


def test_the_abtt_section_matches_the_default_setting(store):
    assert int(store.section("abtt")["words"]) == Settings().abtt_words
