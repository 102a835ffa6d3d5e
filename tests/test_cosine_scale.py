"""Cosine maps are coloured on a scale fitted to the cosines shown (a trained model's 0.83-0.95 are told
apart), which the title states; --cosine-scale absolute keeps -1 to 1."""

from __future__ import annotations

import re

import numpy as np

from ctxembed.views.figures import View, build_figure, cosine_range
from tests.cli_helpers import run_json, succeeds

BANKS = ["we sat on the river bank", "I deposited money in the bank", "she opened an account at the bank"]


def test_the_fitted_range_leaves_out_the_diagonal_and_falls_back_when_flat():
    values = np.array([[1.0, 0.9, 0.85], [0.9, 1.0, 0.95], [0.85, 0.95, 1.0]])
    assert cosine_range(values, symmetric=True) == (0.85, 0.95, False)
    assert cosine_range(values, symmetric=False) == (0.85, 1.0, False)
    assert cosine_range(values, symmetric=True, absolute=True) == (-1.0, 1.0, True)
    assert cosine_range(np.ones((3, 3)), symmetric=True) == (-1.0, 1.0, True)  # all alike: nothing to fit


def test_compare_states_its_fitted_scale_and_offers_the_absolute_one():
    fitted = succeeds("compare", "--word", "bank", *BANKS, "--color", "never").stdout
    found = re.search(r"contextual cosine: 'bank' \(colours (-?\d\.\d{3}) to (-?\d\.\d{3}), fitted\)", fitted)
    doc = run_json("compare", "--word", "bank", *BANKS, "--json")
    matrix = np.array(doc["contextual_similarity"])
    off = matrix[~np.eye(3, dtype=bool)]
    assert found and (float(found[1]), float(found[2])) == (round(off.min(), 3), round(off.max(), 3))
    assert "static cosine: 'bank' (colours -1 to 1)" in fitted  # GloVe's static cosines are all 1
    absolute = succeeds("compare", "--word", "bank", *BANKS, "--color", "never", "--cosine-scale", "absolute").stdout
    assert "contextual cosine: 'bank' (colours -1 to 1)" in absolute


def test_pictures_take_the_scale_too():
    doc = run_json("compare", "--word", "bank", *BANKS, "--json")
    fitted = build_figure(doc, View()).panels[1]
    absolute = build_figure(doc, View(cosine_scale="absolute")).panels[1]
    assert (fitted.low, fitted.diverging) != (-1.0, True) and fitted.high < 1.0
    assert (absolute.low, absolute.high, absolute.diverging) == (-1.0, 1.0, True)
