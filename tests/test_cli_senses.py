"""`ctxembed senses` and `ctxembed eval wsi` from the command line: results, offsets, bad input, exit codes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ctxembed.errors import DataError
from tests.cli_helpers import fails, invoke, run_json, strict_json, succeeds
from tests.conftest import FIXTURES, REPO

SUITE = [line.split("\t") for line in (REPO / "data" / "senses.tsv").read_text(encoding="utf-8").splitlines()[1:]]


@pytest.fixture
def corpus(tmp_path):
    """The polysemy suite's sentences, one per line, with a blank line and a line without any target."""
    path = tmp_path / "corpus.txt"
    path.write_text("nothing to see\n\n" + "".join(sentence + "\n" for _, _, sentence in SUITE), encoding="utf-8")
    return path


def senses_of(word: str) -> list[str]:
    return [sense for w, sense, _ in SUITE if w == word]


def test_two_senses_of_two_words_in_one_pass(corpus):
    doc = run_json("senses", "plant", "bank", corpus, "-k", "2", "--json")
    assert [w["word"] for w in doc["words"]] == ["plant", "bank"]
    for entry in doc["words"]:
        assert entry["occurrences_found"] == entry["occurrences_used"] == 6
        found = [o["sense"] for o in entry["occurrences"]]
        gold = senses_of(entry["word"])
        # the clusters are the suite's senses (up to naming)
        assert len(set(zip(found, gold, strict=True))) == 2, (found, gold)
        assert sorted(s["size"] for s in entry["senses"]) == [3, 3]


def test_offsets_and_lines_point_at_the_word_in_the_file(corpus):
    lines = corpus.read_text(encoding="utf-8").split("\n")
    doc = run_json("senses", "bat", corpus, "--json")
    entry = doc["words"][0]
    for occurrence in entry["occurrences"]:
        text = lines[occurrence["line"] - 1]
        assert text[occurrence["start"] : occurrence["end"]].lower() == occurrence["form"] == "bat"
    for sense in entry["senses"]:
        centralities = [e["centrality"] for e in sense["examples"]]
        assert centralities == sorted(centralities, reverse=True)
    assert doc["corpus"]["lines"] == len(SUITE) + 2 and doc["corpus"]["candidate_lines"] == 6


def test_table_shows_each_sense_with_a_label_and_a_concordance(corpus):
    out = succeeds("senses", "apple", corpus, "-k", "2", "--examples", "2").stdout
    assert out.count("sense 1") == 1 and out.count("sense 2") == 1
    assert "6 occurrences" in out
    concordance = [line for line in out.splitlines() if "apple" in line.lower() and line.strip()[:1].isdigit()]
    assert len(concordance) == 4  # two examples per sense, each prefixed by its line number


def test_a_narrow_terminal_wraps_labels_and_headers_under_their_own_text(corpus):
    """At 50 columns a long line wraps under its own first character (a sense's label under the label, the
    corpus line under its text), never at column 0, and no line ends in spaces."""
    out = succeeds("senses", "apple", "bank", corpus, "-k", "2", "--examples", "0", "--label-words", "8",
                   env={"COLUMNS": "50"}).stdout  # fmt: skip
    lines = out.splitlines()
    assert all(line == line.rstrip() for line in lines)
    for n, line in enumerate(lines):
        if line.startswith("  sense ") and n + 1 < len(lines) and lines[n + 1].startswith(" " * 8):
            label_at = line.index(")  ") + 3  # after "  sense 1  3 (50%)  "
            assert len(lines[n + 1]) - len(lines[n + 1].lstrip()) == label_at
            break
    else:
        raise AssertionError(f"no label wrapped at 50 columns:\n{out}")
    corpus_line = lines.index(next(line for line in lines if line.startswith("corpus")))
    assert lines[corpus_line + 1].startswith(" " * 9)  # under "corpus   "
    assert all(line.startswith(("corpus", "settings", " ", "apple", "bank", "")) for line in lines)


def test_stdin_and_the_corpus_option_and_forms(corpus):
    text = corpus.read_text(encoding="utf-8") + "the banks of the river\n"
    by_stdin = run_json("senses", "bank", "-", "--json", input=text)
    assert by_stdin["corpus"]["name"] == "stdin" and by_stdin["words"][0]["occurrences_found"] == 7
    exact = run_json("senses", "bank", "--corpus", corpus, "--forms", "bank", "--json")
    assert exact["words"][0]["forms"] == ["bank"]


def test_lines_over_max_tokens_are_skipped_and_counted(tmp_path, corpus):
    long_line = "the bank " + "word " * 40 + "\n"
    path = tmp_path / "long.txt"
    path.write_text(corpus.read_text(encoding="utf-8") + long_line, encoding="utf-8")
    doc = run_json("senses", "bank", path, "--max-tokens", "30", "--json")
    entry = doc["words"][0]
    assert entry["skipped"]["too_long"] == 1 and entry["occurrences_used"] == 6


def test_default_corpus_is_the_shipped_brown_sample():
    doc = run_json("senses", "plant", "--max-occurrences", "40", "--json")
    entry = doc["words"][0]
    assert doc["corpus"]["name"].startswith("brown.txt.gz") and doc["corpus"]["lines"] > 50_000
    assert entry["occurrences_found"] > 150 and entry["occurrences_sampled"] == 40


def test_save_writes_the_document_and_a_map_of_every_occurrence(tmp_path, corpus):
    import xml.etree.ElementTree as ElementTree

    out, picture = tmp_path / "senses.json", tmp_path / "senses.svg"
    result = invoke("senses", "bank", "plant", corpus, "-k", "2", "--save", out, "--save", picture)
    assert result.exit_code == 0 and out.exists()
    assert '"ctxembed.senses/2"' in out.read_text(encoding="utf-8")
    circles = [e for e in ElementTree.parse(picture).iter() if e.tag.endswith("circle")]
    assert len(circles) == 12  # 6 occurrences of each word, one dot each
    assert "2 senses, 6 occurrences" in picture.read_text(encoding="utf-8")


def test_save_with_an_unknown_suffix_fails_before_the_scan(corpus):
    assert ".svg" in fails(2, "senses", "bank", corpus, "--save", "map.txt")


@pytest.mark.parametrize("k", ["0", "1000", "many"])
def test_impossible_k_is_a_usage_error(corpus, k):
    assert "-k" in fails(2, "senses", "bank", corpus, "-k", k)


def test_a_word_that_does_not_occur(corpus):
    assert "does not occur" in fails(1, "senses", "zebra", corpus)


def test_a_missing_word_beside_a_present_one_still_shows_the_present_one(corpus):
    result = invoke("senses", "bank", "zebra", corpus, "--json")
    assert result.exit_code == 1
    assert '"bank"' in result.stdout and "zebra" in result.stderr


def test_fewer_occurrences_than_k(corpus):
    assert "fewer than k = 7" in fails(1, "senses", "bank", corpus, "-k", "7")


def test_empty_binary_and_missing_corpora(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n", encoding="utf-8")
    assert "empty" in fails(1, "senses", "bank", empty)
    binary = tmp_path / "data.bin"
    binary.write_bytes(bytes(range(256)) * 8)
    assert "binary" in fails(1, "senses", "bank", binary)
    assert "no such file" in fails(1, "senses", "bank", tmp_path / "missing.txt")


def test_eval_wsi_default_beats_both_baselines_on_the_project_suite():
    doc = run_json("eval", "wsi", REPO / "data" / "wsi-senses.tsv", "-c", "default", "--json")
    scores = {c["name"]: c for c in doc["configs"]}
    assert list(scores) == ["one-cluster", "bag-of-words", "default"]
    assert scores["one-cluster"]["ari"] == 0.0
    assert scores["default"]["ari"] > scores["bag-of-words"]["ari"] > 0
    assert all(len(c["words"]) == 24 for c in doc["configs"])


def test_eval_wsi_bad_files(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("word\tsense\tindex\tsentence\nbank\triver\t9\tthe bank\n", encoding="utf-8")
    assert "outside" in fails(1, "eval", "wsi", bad)
    bad.write_text("bank\triver\tthe bank\n", encoding="utf-8")
    assert "expected word" in fails(1, "eval", "wsi", bad)
    assert "no such file" in fails(1, "eval", "wsi", tmp_path / "none.tsv")


def test_eval_wsi_counts_a_token_that_is_not_the_word_and_scores_it(tmp_path):
    """The index is the user's: a token that is no known form of the word is scored, and counted in one
    note; a strict reader refuses it with its line."""
    from ctxembed.senses.wsi import read_wsi

    odd = tmp_path / "odd.tsv"
    good = "bank\triver\t5\twe sat on the river bank\nbank\tmoney\t3\tI paid into banks today\n"
    odd.write_text(good + "bank\triver\t4\twe sat on the river bank\n", encoding="utf-8")
    result = invoke("eval", "wsi", odd, "-c", "static", "--json")
    assert result.exit_code == 0 and strict_json(result.stdout)["occurrences"] == 3
    assert result.stderr == f"{odd}: 1 target differs from their word, e.g. line 3 'river' for 'bank' " \
        "(scored as the token at the index given)\n"  # fmt: skip
    with pytest.raises(DataError, match="line 3: the token at index 4 is 'river', not a known form of 'bank'"):
        read_wsi(odd, strict=True)


def test_eval_wsi_scores_every_line_of_a_lemmatised_file():
    """Real sense-annotated corpora give the lemma: 'become' for 'became', 'foot' for 'feet', 'good'
    for 'better'. The whole file was refused at its first irregular form."""
    path = FIXTURES / "wsi_lemmatised.tsv"
    result = invoke("eval", "wsi", path, "-c", "default", "--json")
    assert result.exit_code == 0, result.stderr
    doc = strict_json(result.stdout)
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith(("#", "word"))]
    assert doc["occurrences"] == len(lines) == 32 and doc["words"] == 10
    assert [config["covered"] for config in doc["configs"]] == [32, 32, 32]  # every target got a vector
    assert result.stderr == f"{path}: 25 targets differ from their word, e.g. line 4 'became' for 'become' " \
        "(scored as the token at the index given)\n"  # fmt: skip


def test_eval_senses_and_eval_wsi_skip_the_same_comments_and_header(tmp_path):
    rows = ["bank\triver\twe sat on the river bank", "bank\tmoney\tI paid into the bank",
            "bank\triver\tthe grassy bank of the stream", "bank\tmoney\tthe bank raised its rates"]  # fmt: skip
    senses = tmp_path / "senses.tsv"
    senses.write_text("# a comment\n\nword\tsense\tsentence\n" + "\n".join(rows) + "\n# the end\n", encoding="utf-8")
    assert run_json("eval", "senses", senses, "-c", "static", "--json")["configs"][0]["words"] == 1
    wsi = tmp_path / "wsi.tsv"
    lines = [f"{w}\t{s}\t{t.split().index('bank')}\t{t}" for w, s, t in (row.split("\t") for row in rows)]
    header = "# a comment\n\nword\tsense\tindex\tsentence\n"
    wsi.write_text(header + "\n".join(lines) + "\n# the end\n", encoding="utf-8")
    assert run_json("eval", "wsi", wsi, "-c", "static", "--json")["occurrences"] == 4
    senses.write_text("# a comment\nbank\triver\n", encoding="utf-8")  # line numbers count every line
    assert "line 2: expected word<TAB>sense<TAB>sentence" in fails(1, "eval", "senses", senses)


def test_eval_wsi_refuses_a_10_mb_line_quickly_in_little_memory(tmp_path):
    big = tmp_path / "big.tsv"
    with open(big, "w", encoding="utf-8") as fh:
        fh.write("bank\triver\t5\twe sat on the river bank\n")
        fh.write("bank\triver\t0\tbank " + "water " * 1_750_000 + "\n")  # 10.5 MB
    measure = (
        "import resource, subprocess, sys\n"
        "run = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "print(run.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, run.stderr.strip())\n"
    )
    command = [sys.executable, "-m", "ctxembed", "eval", "wsi", str(big), "-c", "static"]
    out = subprocess.run([sys.executable, "-c", measure, *command], capture_output=True, text=True, timeout=60)
    code, peak_kib, message = out.stdout.split(" ", 2)
    assert code == "1" and "line 2: longer than 65,536 bytes" in message, out.stdout
    assert int(peak_kib) < 200 * 1024  # the line is never kept whole


def test_plain_commands_never_import_scikit_learn():
    code = (
        "import sys; from ctxembed.cli import app\n"
        "try:\n    app(['neighbors', 'Apple makes phones', '--word', 'apple', '--json'])\n"
        "except SystemExit:\n    pass\n"
        "print('SKLEARN', 'sklearn' in sys.modules, file=sys.stderr)"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert "SKLEARN False" in out.stderr, out.stderr


def test_eval_wsi_table_lists_the_baselines_beside_the_configuration(tmp_path):
    rows = [line for line in (REPO / "data" / "wsi-senses.tsv").read_text(encoding="utf-8").splitlines()[1:13]]
    small = tmp_path / "two-words.tsv"
    small.write_text("# two words of the suite\n" + "\n".join(rows) + "\n", encoding="utf-8")
    out = succeeds("eval", "wsi", small, "-c", "default", env={"COLUMNS": "200"}).stdout  # the caption on one line
    names = [line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│")]
    assert names == ["one-cluster", "bag-of-words", "default"]
    assert "2 words, 12 occurrences" in out and "-0.000" not in out


def test_identical_lines_give_no_library_warning_and_say_why_fewer_senses_than_k(tmp_path):
    same = tmp_path / "same.txt"
    same.write_text("we sat on the river bank and watched the water\n" * 20)
    import warnings

    with warnings.catch_warnings(record=True) as caught:  # pytest would otherwise swallow them
        warnings.simplefilter("always")
        auto = invoke("senses", "bank", same)
        given = invoke("senses", "bank", same, "-k", "3", env={"COLUMNS": "160"})  # the note on one line
    assert [str(w.message) for w in caught] == []  # scikit-learn's ConvergenceWarning, 14 times before
    assert auto.exit_code == 0 and auto.stderr == "", auto.stderr
    assert given.exit_code == 0 and given.stderr == "", given.stderr
    assert "1 sense (k given, but the occurrences have only 1 distinct context)" in given.stdout
    doc = run_json("senses", "bank", same, "-k", "3", "--json")
    assert doc["words"][0]["k"] == 1 and doc["words"][0]["chosen_by"] == "fewer distinct contexts than k given"


@pytest.mark.parametrize("target", ["map.tsv", "map-folder"])
def test_save_tsv_writes_a_projector_pair_the_format_accepts(tmp_path, corpus, target):
    from tests.test_batch_columnar import check_projector_pair

    doc = run_json("senses", "bank", "plant", corpus, "-k", "2", "--json", "--save", tmp_path / target)
    if target.endswith(".tsv"):  # map.tsv: the vectors, and map-metadata.tsv beside it
        (tmp_path / "pair").mkdir()
        os.replace(tmp_path / "map.tsv", tmp_path / "pair" / "vectors.tsv")
        os.replace(tmp_path / "map-metadata.tsv", tmp_path / "pair" / "metadata.tsv")
        target = "pair"
    header = ["word", "sense", "label", "line", "form", "sentence"]
    rows = check_projector_pair(tmp_path / target, 12, 100, header)
    occurrences = [(e["word"], o) for e in doc["words"] for o in e["occurrences"]]
    assert [(w, str(o["sense"]), str(o["line"])) for w, o in occurrences] == [(r[0], r[1], r[3]) for r in rows]
    lines = corpus.read_text(encoding="utf-8").split("\n")
    assert all(r[5] == lines[int(r[3]) - 1] for r in rows)  # each point's sentence, from its line
    assert all(r[2] for r in rows)  # the sense's label words
