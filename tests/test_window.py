"""--window N: the commands that read one word's vector crop its sentence to the N tokens either side of
it (engine.sentence.crop, window_span), the same way in compare, neighbors, senses, batch --word, eval,
the API and the server; documents say the window when one was applied."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ctxembed.engine import crop, window_span
from tests.cli_helpers import fails, invoke, json_lines, run_json

LONG = "the bank by the river was steep and the bank in town was closed on sunday afternoon"
RIVER = "far away in the hills we sat on the grassy river bank and watched the slow water go by"
MONEY = "she paid money into the bank today"


def test_window_span_is_the_tokens_at_most_n_from_the_word():
    assert window_span(10, 5, 2) == (3, 8)
    assert window_span(10, 0, 3) == (0, 4)  # cut at the sentence's ends
    assert window_span(10, 9, 3) == (6, 10)
    assert window_span(10, 5, 0) == (0, 10) and window_span(10, 5, None) == (0, 10)  # no window: all


def test_crop_keeps_the_text_between_the_tokens_and_respells_the_word():
    assert crop(LONG, "bank", 2) == ("the bank by the", "bank")
    assert crop(LONG, "bank#2", 2) == ("and the bank in town", "bank")  # the first bank was cut off
    assert crop(LONG, "bank#2", 6) == ("the river was steep and the bank in town was closed on sunday", "bank")
    assert crop(LONG, "bank#2", 8) == (LONG[4:], "bank#2")  # both banks kept: still the second
    assert crop(LONG, "#9", 1) == ("the bank in", "#1")  # a position: its place in the cropped text
    assert crop("we sat, by the river's bank.", "bank", 2) == ("river's bank.", "bank")  # as written
    assert crop(LONG, "bank", 0) == (LONG, "bank") and crop(LONG, "bank", 100) == (LONG, "bank")
    assert crop(LONG, "shore", 2) == (LONG, "shore")  # no such word: the command says so as without a window


def test_neighbors_read_the_cropped_sentence_and_say_the_window():
    whole = run_json("neighbors", RIVER, "--word", "bank", "--json")
    assert "window" not in whole["settings"] and "window" not in whole["settings_summary"]
    doc = run_json("neighbors", RIVER, "--word", "bank", "--window", "2", "--json")
    assert doc["settings"]["window"] == 2 and doc["settings_summary"].endswith(" | window ±2 tokens")
    cropped = run_json("neighbors", "grassy river bank and watched", "--word", "bank", "--json")
    assert doc["contextual"] == cropped["contextual"] and doc["contextual"] != whole["contextual"]


def test_compare_crops_each_sentence_around_its_own_occurrence():
    compared = run_json("compare", RIVER, MONEY, "--word", "bank", "--window", "2", "--json")
    assert compared["sentences"] == ["grassy river bank and watched", "into the bank today"]
    assert compared["settings"]["window"] == 2 and compared["word"] == "bank"
    by_hand = run_json("compare", *compared["sentences"], "--word", "bank", "--json")
    assert compared["contextual_similarity"] == by_hand["contextual_similarity"]
    whole = run_json("compare", RIVER, MONEY, "--word", "bank", "--json")
    assert compared["contextual_similarity"] != whole["contextual_similarity"]


def test_compare_names_an_occurrence_in_each_cropped_sentence(tiny_model):
    compared = run_json("compare", LONG, MONEY + " and the bank", "--word", "bank#2", "--window", "4",
                        "--model", tiny_model.name, "--json")  # fmt: skip
    assert compared["sentences"] == ["was steep and the bank in town was closed", "bank today and the bank"]
    [entry] = compared["words"]
    assert [o["occurrence"] for o in entry["occurrences"]] == [1, 2]  # bank, then bank#2 in the crops
    assert entry["positions"] == [4, 4]


@pytest.mark.parametrize("value", ["-1", "abc", "99999", "1.5"])
def test_a_bad_window_is_one_line_and_exit_2(value):
    line = fails(2, "neighbors", LONG, "--word", "bank", f"--window={value}")
    assert "--window" in line


@pytest.mark.parametrize(
    "args",
    [
        ("attend", LONG, "--window", "3"),
        ("compare", LONG, MONEY, "--window", "3"),  # every shared word: no one word to crop around
        ("batch", "-", "--window", "3"),
    ],
)
def test_a_window_without_a_word_to_crop_around_is_refused(args):
    line = fails(2, *args, input=LONG + "\n")
    assert line.startswith("ctxembed: error: --window 3 needs ")


def test_the_api_takes_the_window_and_names_it_as_a_setting():
    import ctxembed
    from ctxembed.errors import SettingError

    explorer = ctxembed.Explorer(window=2)
    doc = explorer.neighbors(LONG, "bank#2").to_dict()
    assert doc["settings"]["window"] == 2
    with pytest.raises(SettingError, match=r"^window 2 needs a command that reads one word"):
        explorer.attend(LONG)
    with pytest.raises(SettingError, match=r"^window 2 needs a word to crop around \(word\)"):
        explorer.compare([LONG, MONEY])  # every shared word: no one word to crop around
    assert explorer.check_window(None, "attend", window=0) == 0  # no window asked: nothing to refuse
    with pytest.raises(SettingError, match=r"^window must be an integer in \[0, 4096\], not -1"):
        ctxembed.Explorer(window=-1)


def test_batch_crops_each_line_around_its_word_alike_in_every_path(tmp_path):
    import ctxembed

    lines = [LONG, "no such word here", '{"id": 7, "text": "one two three four five six bank seven eight nine"}']
    out = invoke("batch", "-", "--word", "bank#2", "--window", "2", "--no-weights", input="\n".join(lines) + "\n")
    assert out.exit_code == 0, out.stderr
    records = json_lines(out.stdout)
    assert records[0]["text"] == "and the bank in town" and records[0]["word"]["word"] == "bank#2"
    assert records[0]["word"]["position"] == 2 and records[1]["word"] is None and records[2]["word"] is None
    by_hand = json_lines(invoke("batch", "-", "--word", "bank", "--no-weights", input="and the bank in town\n").stdout)
    assert records[0]["word"]["contextual"] == by_hand[0]["word"]["contextual"]
    encoded = b"".join(ctxembed.embed_lines(lines, word="bank#2", window=2, weights=False, encoded=True))
    assert encoded.decode() == out.stdout  # embed_lines (and Dask, through it) writes batch's bytes
    from ctxembed.batch.embed import word_arrays

    arrays = word_arrays(lines, "bank", window=1)  # the columnar path (npz, parquet, projector)
    assert arrays["text"].tolist() == ["the bank by", "six bank seven"] and arrays["position"].tolist() == [1, 1]


def test_batch_of_a_trained_model_crops_as_the_columns_path_does(tiny_model):
    lines = [LONG, "one two three four five six bank seven eight nine"]
    glove = json_lines(invoke("batch", "-", "--word", "bank#2", "--window", "2", input="\n".join(lines) + "\n").stdout)
    tiny = invoke(
        "batch", "-", "--word", "bank#2", "--window", "2", "--model", tiny_model.name, input="\n".join(lines) + "\n"
    )
    assert tiny.exit_code == 0, tiny.stderr
    trained = json_lines(tiny.stdout)
    assert [r["text"] for r in trained] == [r["text"] for r in glove] == ["and the bank in town", lines[1]]
    assert [r["word"] and r["word"]["position"] for r in trained] == [2, None]


def test_eval_crops_each_target_and_records_the_window_per_configuration(tmp_path):
    path = tmp_path / "scws.txt"
    long_river = "far away in the hills we sat on the grassy river <b> bank </b> and watched the slow water go by"
    money = "she paid all the money she had saved that year into the <b> bank </b> today before noon"
    shore = "long after the storm the waves broke on the sandy <b> shore </b> at dusk and then at dawn"
    rows = [("bank", "bank", long_river, money, "2"), ("bank", "shore", long_river, shore, "7")]
    rows.append(("bank", "shore", money, shore, "1"))
    path.write_text("".join(f"{n}\t{a}\tn\t{b}\tn\t{c1}\t{c2}\t{r}\n" for n, (a, b, c1, c2, r) in enumerate(rows)))
    whole = run_json("eval", "pairs", path, "-c", "default", "--json")
    doc = run_json("eval", "pairs", path, "-c", "default", "-c", "static", "--window", "2", "--json")
    rows_by_name = {row["name"]: row for row in doc["configs"]}
    assert rows_by_name["default"]["settings"]["window"] == 2 and rows_by_name["static"]["settings"] is None
    assert "window" not in whole["configs"][0]["settings"]
    from ctxembed.evaluation.evaluate import Occurrence, read_scws, target_vectors, windowed
    from ctxembed.presets import build_settings
    from ctxembed.vectors.sources import open_vectors

    first = read_scws(path)[0][0]
    [cropped] = windowed([first], 2)
    assert (cropped.words, cropped.index) == (["grassy", "river", "bank", "and", "watched"], 2)
    store, settings = open_vectors(None), build_settings("default")
    by_window, _, _ = target_vectors(store, settings, [first], window=2)
    by_hand, _, _ = target_vectors(store, settings, [Occurrence(cropped.words, 2, "bank")], window=0)
    np.testing.assert_array_equal(by_window, by_hand)


def test_senses_reads_each_occurrence_in_its_own_window(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(LONG + "\nwe sat on the river bank\nshe paid money into the bank\n")
    points = {}
    for window in ("0", "2"):
        doc = run_json("senses", "bank", str(corpus), "--window", window, "-k", "2", "--json")
        assert doc["settings"].get("window") == (None if window == "0" else 2)
        [word] = doc["words"]
        first, second = (o for o in word["occurrences"] if o["line"] == 1)  # LONG's two banks
        points[window] = [(first["x"], first["y"]), (second["x"], second["y"])]
    assert points["0"][0] == points["0"][1]  # the whole line: its twins share one vector under GloVe
    assert points["2"][0] != points["2"][1]  # each in its own window: two contexts


def test_the_server_takes_a_window_where_the_command_does(tiny_model):
    from ctxembed.errors import CtxembedError
    from ctxembed.serve.endpoints import Explorers, answer

    explorers = Explorers()
    doc = answer("neighbors", {"sentence": RIVER, "word": "bank", "window": 2}, explorers)
    assert doc["settings"]["window"] == 2
    # a trained model takes no settings on the page, but a window per request: it crops the sentences
    body = {"sentences": [RIVER, MONEY], "word": "bank", "model": tiny_model.name, "window": 2}
    doc = answer("compare", body, explorers)
    assert doc["settings"]["window"] == 2 and doc["sentences"] == [
        "grassy river bank and watched",
        "into the bank today",
    ]
    with pytest.raises(CtxembedError, match="unknown key 'window' for /api/attend"):
        answer("attend", {"sentence": LONG, "window": 2}, explorers)
    with pytest.raises(CtxembedError, match=r"window must be an integer in \[0, 4096\], not -1"):
        answer("neighbors", {"sentence": RIVER, "word": "bank", "window": -1}, explorers)


def test_one_call_of_the_api_may_read_its_own_window():
    import ctxembed

    explorer = ctxembed.Explorer(window=2)
    assert explorer.neighbors(RIVER, "bank").to_dict()["settings"]["window"] == 2
    whole = explorer.neighbors(RIVER, "bank", window=0).to_dict()
    assert "window" not in whole["settings"]
    assert whole["contextual"] == ctxembed.Explorer().neighbors(RIVER, "bank").to_dict()["contextual"]
    compared = explorer.compare([RIVER, MONEY], "bank", window=1).to_dict()
    assert compared["sentences"] == ["river bank and", "the bank today"]


def test_default_documents_carry_no_window():
    doc = run_json("compare", RIVER, MONEY, "--word", "bank", "--json")
    assert "window" not in json.dumps(doc["settings"])


def test_minilm_reads_ten_tokens_either_side_by_default(minilm_folder):
    from ctxembed.vectors.catalogue import MODELS

    assert MODELS["minilm"].window == 10 and MODELS["glove"].window == 0  # chosen on dev data: docs/models.md
    long = f"{RIVER} while the herons stood in the reeds and the boats went slowly down to the sea"
    default = run_json("compare", long, MONEY, "--word", "bank", "--model", "minilm", "--json")
    assert default["settings"]["window"] == 10 and default["settings_summary"].endswith(" | window ±10 tokens")
    assert default["sentences"][0] == long[4 : long.index(" stood")]  # "away" ... "herons": 10 tokens each side
    whole = run_json("compare", long, MONEY, "--word", "bank", "--model", "minilm", "--window", "0", "--json")
    assert "window" not in whole["settings"] and whole["sentences"][0] == long
    assert default["contextual_similarity"] != whole["contextual_similarity"]


def test_a_batch_file_says_the_window_its_lines_were_cropped_to(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "out.parquet"
    done = invoke("batch", "-", "--word", "bank", "--window", "2", "--format", "parquet", "-o", out, input=RIVER + "\n")
    assert done.exit_code == 0, done.stderr
    recorded = json.loads(pq.read_metadata(out).metadata[b"ctxembed"])
    assert recorded["settings"]["window"] == 2
    assert pq.read_table(out).column("text").to_pylist() == ["grassy river bank and watched"]


def test_the_eval_tables_say_the_window_each_configuration_read_in():
    from tests.conftest import FIXTURES

    windowed = invoke("eval", "pairs", FIXTURES / "scws_tiny.txt", "-c", "default", "-c", "static", "--window", "2")
    assert windowed.exit_code == 0 and "targets read in a window (--window): default ±2 tokens\n" in windowed.stdout
    whole = invoke("eval", "pairs", FIXTURES / "scws_tiny.txt", "-c", "default")
    assert whole.exit_code == 0 and "targets read in a window" not in whole.stdout
