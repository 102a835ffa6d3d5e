"""Evaluation: WiC reading and threshold tuning, rank correlation, SCWS and word pairs, the senses suite.

Numbers are re-computed here independently (store vectors, numpy, scipy) and compared."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ctxembed.errors import DataError, UsageError
from ctxembed.evaluation.evaluate import (
    LADDER,
    Occurrence,
    best_threshold,
    default_senses_path,
    evaluate_scws,
    evaluate_senses,
    evaluate_wic,
    evaluate_word_pairs,
    is_scws,
    named_settings,
    read_scws,
    read_senses,
    read_wic,
    spearman,
    target_vectors,
)
from ctxembed.vectors.sources import open_vectors
from tests.conftest import FIXTURES

WIC = FIXTURES / "wic"


@pytest.fixture(scope="module")
def store():
    return open_vectors(None)


def test_read_wic_finds_splits_train_first():
    splits = read_wic(WIC)
    assert [s.name for s in splits] == ["train", "dev"]
    train = splits[0]
    assert len(train.pairs) == 12 and train.gold.tolist()[:3] == [True, False, True]
    first, second = train.pairs[0]
    assert first.words[first.index] == "bank" and second.words[second.index] == "bank"
    planted = train.pairs[2][0]
    assert planted.words[planted.index] == "planted" and planted.lemma == "plant"


@pytest.mark.parametrize(
    "data, gold, message",
    [
        ("bank\tN\t0-0\tonly four fields", None, "expected 5 tab-separated fields"),
        ("bank\tN\tx-0\tbank a\tbank b", None, "bad index pair"),
        ("bank\tN\t5-0\tbank a\tbank b", None, "outside the sentences"),
        ("bank\tN\t0-0\tbank a\tbank b", "T\nF\n", "2 labels for 1 pairs"),
        ("bank\tN\t0-0\tbank a\tbank b", "Y\n", "expected T or F"),
    ],
)
def test_read_wic_rejects_malformed_files(tmp_path, data, gold, message):
    (tmp_path / "train.data.txt").write_text(data + "\n")
    if gold is not None:
        (tmp_path / "train.gold.txt").write_text(gold)
    with pytest.raises(DataError, match=message):
        read_wic(tmp_path)


def test_read_wic_needs_a_directory_with_data(tmp_path):
    with pytest.raises(DataError, match="no SPLIT.data.txt"):
        read_wic(tmp_path)
    with pytest.raises(DataError, match="not a directory"):
        read_wic(tmp_path / "missing")


def test_best_threshold_by_hand():
    scores = np.array([0.1, 0.4, 0.6, 0.9])
    gold = np.array([False, False, True, True])
    assert best_threshold(scores, gold) == pytest.approx(0.5)
    # one mistake is unavoidable here; the best run of thresholds is [0.2 .. 0.5] -> its middle
    scores = np.array([0.1, 0.2, 0.3, 0.7])
    gold = np.array([False, True, False, True])
    t = best_threshold(scores, gold)
    assert np.mean((scores >= t) == gold) == 0.75


def test_fast_threshold_search_equals_brute_force():
    rng = np.random.default_rng(0)
    scores = np.round(rng.normal(size=3000), 2)  # many ties
    gold = rng.random(3000) < 1 / (1 + np.exp(-2 * scores))
    t = best_threshold(scores, gold)
    candidates = np.unique(scores)
    brute = max(np.mean((scores >= c) == gold) for c in np.concatenate([candidates, [candidates[-1] + 1]]))
    assert np.mean((scores >= t) == gold) == pytest.approx(brute)


def test_static_wic_matches_an_independent_computation(store):
    splits = read_wic(WIC)
    result = evaluate_wic(store, splits, None, "train")

    def cosines(split):
        out = []
        for a, b in split.pairs:
            va = store.vector(a.words[a.index].lower() if a.words[a.index].lower() in store else a.lemma)
            vb = store.vector(b.words[b.index].lower() if b.words[b.index].lower() in store else b.lemma)
            va, vb = va.astype(np.float64), vb.astype(np.float64)
            out.append(float(va @ vb / np.linalg.norm(va) / np.linalg.norm(vb)))
        return np.round(np.array(out), 10)

    train_cos = cosines(splits[0])
    threshold = best_threshold(train_cos, splits[0].gold)
    assert result["threshold"] == pytest.approx(threshold, abs=1e-6)
    for split in splits:
        expected = np.mean((cosines(split) >= threshold) == split.gold)
        assert result["splits"][split.name]["accuracy"] == pytest.approx(expected)
        assert result["splits"][split.name]["n"] == len(split.pairs)


def test_default_beats_static_on_the_wic_fixture(store):
    splits = read_wic(WIC)
    static = evaluate_wic(store, splits, None, "train")["splits"]["train"]["accuracy"]
    default = evaluate_wic(store, splits, named_settings("default"), "train")["splits"]["train"]["accuracy"]
    assert default > static


def test_tuning_on_a_split_without_labels_is_a_usage_error(tmp_path, store):
    (tmp_path / "train.data.txt").write_text("bank\tN\t0-0\tbank a\tbank b\n")
    with pytest.raises(UsageError, match="cannot tune on 'train'"):
        evaluate_wic(store, read_wic(tmp_path), None, "train")


def test_oov_target_falls_back_to_lemma_and_counts_coverage(store):
    occurrences = [
        Occurrence(["the", "zzqplants", "grew"], 1, "plant"),  # OOV token, lemma known
        Occurrence(["the", "zzqx", "grew"], 1, "zzqy"),  # neither known
        Occurrence(["the", "plants", "grew"], 1, "plant"),
    ]
    vectors, found, coverage = target_vectors(store, None, occurrences)
    assert found.tolist() == [True, False, True]
    assert coverage == {"targets": 3, "target_oov": 2, "lemma_fallback": 1, "no_vector": 1}
    assert np.array_equal(vectors[0], store.vector("plant"))
    assert np.array_equal(vectors[2], store.vector("plants"))
    assert not vectors[1].any()


def test_spearman_agrees_with_scipy_including_ties():
    rng = np.random.default_rng(1)
    a = rng.integers(0, 5, 50).astype(float)
    b = a + rng.normal(size=50)
    assert spearman(a, b) == pytest.approx(stats.spearmanr(a, b).statistic)
    assert spearman(np.arange(5.0), np.arange(5.0)[::-1]) == pytest.approx(-1.0)


def test_scws_reading_and_spearman(store):
    path = FIXTURES / "scws_tiny.txt"
    assert is_scws(path)
    items = read_scws(path)
    assert len(items) == 8
    first, second, rating = items[0]
    assert first.words[first.index] == "bank" and second.words[second.index] == "money"
    assert rating == pytest.approx(7.7)
    static = evaluate_scws(store, items, None)
    default = evaluate_scws(store, items, named_settings("default"))
    assert static["covered"] == 8
    # static: cos of the two words' own vectors, whatever the context
    cos = [
        float(
            store.vector(a.words[a.index].lower())
            @ store.vector(b.words[b.index].lower())
            / np.linalg.norm(store.vector(a.words[a.index].lower()))
            / np.linalg.norm(store.vector(b.words[b.index].lower()))
        )
        for a, b, _ in items
    ]
    assert static["spearman"] == pytest.approx(stats.spearmanr(cos, [r for *_, r in items]).statistic)
    assert default["spearman"] > static["spearman"]


def test_scws_without_marker_is_a_data_error(tmp_path):
    bad = tmp_path / "scws.txt"
    bad.write_text("1\tbank\tn\tmoney\tn\tno marker here\tthe <b> money </b> is\t5.0\t5\n")
    with pytest.raises(DataError, match="no <b> ... </b>"):
        read_scws(bad)


def test_word_pairs_match_numpy_pearson(store):
    path = FIXTURES / "wordpairs_tiny.tsv"
    assert not is_scws(path)
    result = evaluate_word_pairs(store, path)
    pairs = [line.split("\t") for line in path.read_text().splitlines() if line and not line.startswith("#")]
    cos = [
        float(store.vector(a) @ store.vector(b) / np.linalg.norm(store.vector(a)) / np.linalg.norm(store.vector(b)))
        for a, b, _ in pairs
    ]
    gold = [float(score) for *_, score in pairs]
    assert result["pearson"] == pytest.approx(np.corrcoef(cos, gold)[0, 1], abs=1e-5)
    assert result["spearman"] == pytest.approx(stats.spearmanr(cos, gold).statistic, abs=1e-5)
    assert result["oov_percent"] == 0.0


def test_senses_suite_default_wins(store):
    rows = read_senses(default_senses_path())
    assert len(rows) == 144 and len({r.word for r in rows}) == 24
    static = evaluate_senses(store, rows, None)
    textbook = evaluate_senses(store, rows, named_settings("textbook"))
    default = evaluate_senses(store, rows, named_settings("default"))
    assert static["separated"] == 0.0  # one static vector per word: every pair has cosine 1
    assert default["separated"] >= 2 * textbook["separated"] > 0
    assert default["mean_margin"] > 5 * textbook["mean_margin"]
    for word in default["per_word"]:
        assert word["separated"] == (word["min_same"] > word["max_cross"])


def test_twin_suite_scores_the_named_occurrence_and_the_twin_mask_helps(store, tmp_path):
    from ctxembed.presets import build_settings
    from tests.conftest import REPO

    rows = read_senses(REPO / "data" / "twins.tsv")
    assert len(rows) >= 60 and all(r.word.endswith("#2") for r in rows)
    kept = evaluate_senses(store, rows, build_settings("default", exclude_twins=False))
    masked = evaluate_senses(store, rows, build_settings("default", exclude_twins=True))
    assert {w["word"] for w in masked["per_word"]} == {r.word[:-2] for r in rows}
    assert masked["mean_margin"] > kept["mean_margin"] + 0.05
    third = tmp_path / "third.tsv"
    third.write_text("word\tsense\tsentence\nbank#3\triver\tthe bank by the river bank\n", encoding="utf-8")
    with pytest.raises(DataError, match="bank#3"):
        evaluate_senses(store, read_senses(third), None)


def test_ladder_names_resolve():
    assert named_settings("static") is None
    assert named_settings("default").preset == "default"
    assert named_settings("textbook+abtt").abtt == 3
    assert set(LADDER) >= {"static", "textbook", "default"}
    with pytest.raises(UsageError):
        named_settings("nope")
    with pytest.raises(UsageError):
        named_settings("custom")
