"""What a subword model's word maps hide ([CLS], [SEP]) is shown: the share per row in the focus and
per-token tables and in the JSON (``hidden``), and drawn with ``--specials show``; and the per-token
table follows the layer, head and reading of the matrix above it."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from ctxembed.core.pieces import hidden_share, word_attention
from tests.cli_helpers import fails, run_json, succeeds, table

RIVER = "we sat on the river bank"


def _softmax_rows(rng, shape):
    scores = rng.normal(size=shape)
    weights = np.exp(scores)
    return weights / weights.sum(axis=-1, keepdims=True)


def test_hidden_share_is_what_renormalising_leaves_out():
    rng = np.random.default_rng(0)
    owner = np.array([-1, 0, 1, 1, 2, -1])  # [CLS] we deposit ##ed it [SEP]
    weights = _softmax_rows(rng, (2, 3, 6, 6))  # (L, h, P, P)
    share = hidden_share(weights, owner, 3)  # (L, h, W, S)
    words = word_attention(weights, owner, 3)  # (L, h, W, W) not renormalised
    assert share.shape == (2, 3, 3, 2)
    np.testing.assert_allclose(words.sum(-1) + share.sum(-1), 1.0, rtol=1e-6)
    # the word of two pieces averages its pieces' shares to [CLS]
    np.testing.assert_allclose(share[..., 1, 0], weights[..., [2, 3], 0].mean(-1), rtol=1e-6)


def test_glove_documents_have_no_hidden_block_and_refuse_specials_show():
    assert "hidden" not in run_json("attend", RIVER, "--json")
    line = fails(2, "attend", RIVER, "--specials", "show")
    assert "--specials show" in line and "[CLS]" in line


@pytest.mark.parametrize("extra", [["--all-heads"], ["--all-layers"], ["--attention", "rollout"]])
def test_specials_show_refuses_views_of_many_maps(extra):
    line = fails(2, "attend", RIVER, "--specials", "show", *extra)
    assert line == (
        "ctxembed: error: --specials show draws one map of the weights: drop --all-heads, --all-layers and "
        "--attention rollout|value-norm"
    )


def test_the_api_refuses_specials_as_the_command_line_does(tiny_model):
    """The checks are the library's (report.check_specials): an API user drawing a result gets them too,
    naming keywords where the command line names flags."""
    from rich.console import Console

    import ctxembed
    from ctxembed.errors import UsageError

    console = Console(file=io.StringIO(), width=120)
    glove = ctxembed.Explorer().attend(RIVER)
    with pytest.raises(
        UsageError, match=r"^specials show: model glove has no \[CLS\] or \[SEP\]: every unit is a word$"
    ):
        glove.render(console, specials="show")
    with pytest.raises(UsageError, match=r"^specials must be one of hide, show, not 'all'$"):
        glove.render(console, specials="all")
    tiny = ctxembed.Explorer(model=tiny_model.name)
    many = "^specials show draws one map of the weights: drop all_heads, all_layers and attention rollout|value-norm$"
    with pytest.raises(UsageError, match=re.escape(many[1:-1])):
        tiny.attend(RIVER).render(console, specials="show", all_heads=True)
    with pytest.raises(UsageError, match=re.escape(many[1:-1])):
        tiny.attend(RIVER, attention="rollout").render(console, specials="show")
    tiny.attend(RIVER).render(console, specials="show", layer=1, head=0)  # a model with [CLS] and [SEP]: drawn
    assert "[CLS] [SEP]" in console.file.getvalue()


# ------------------------------------------------------------------------------ the per-token table follows the view


def _listed(stdout: str) -> dict[str, list[tuple[str, float]]]:
    _, rows = table(stdout, "per token")
    return {row[1]: [(w, float(x)) for w, x in re.findall(r"(\S+) (\d\.\d\d)", row[2])] for row in rows}


@pytest.mark.parametrize(("layer", "head"), [(0, 1), (1, 0), (1, None)])
def test_the_per_token_table_follows_layer_and_head(layer, head):
    options = ["--layers", "2", "--heads", "2", "--layer", str(layer)] + ([] if head is None else ["--head", str(head)])
    doc = run_json("attend", "the old fisherman walked along the river bank", *options, "--json")
    stdout = succeeds("attend", "the old fisherman walked along the river bank", *options, "--color", "never").stdout
    weights = np.array(doc["weights"])[layer]  # (h, T, T)
    shown = weights.mean(axis=0) if head is None else weights[head]
    title = f"per token (layer {layer}, " + ("mean of 2 heads)" if head is None else f"head {head})")
    assert title in stdout
    listed = _listed(stdout)
    fisherman = 2  # its row: the third word
    expected = [(j, shown[fisherman, j]) for j in np.argsort(-shown[fisherman], kind="stable")[:3]]
    labels = ["the", "old", "fisherman", "walked", "along", "the#2", "river", "bank"]
    assert listed["fisherman"] == [(labels[j], pytest.approx(v, abs=0.006)) for j, v in expected]


def test_the_default_per_token_table_is_the_documents_top_attended():
    doc = run_json("attend", RIVER, "--json")
    listed = _listed(succeeds("attend", RIVER, "--color", "never").stdout)
    for label, tops in zip(["we", "sat", "on", "the", "river", "bank"], doc["top_attended"], strict=True):
        assert [w for w, _ in listed[label]] == [t["text"] for t in tops]


def test_a_pair_is_never_split_over_lines_at_80_columns():
    long = "the old fisherman slowly walked along the muddy river bank near the village at dawn"
    stdout = succeeds("attend", long, "--color", "never", env={"COLUMNS": "80"}).stdout
    _, rows = table(stdout, "per token")
    for row in rows:
        cell = row[2]
        assert not re.match(r"^\d\.\d\d", cell), cell  # a weight alone on a line: its word was on the line above
        assert not re.search(r"[a-z]$", cell), cell  # a word whose weight went to the next line


# ------------------------------------------------------------------------------ the real model


def test_the_json_holds_each_words_share_to_cls_and_sep(minilm_folder):
    doc = run_json("attend", RIVER, "--model", "minilm", "--json")
    hidden = doc["hidden"]
    assert hidden["units"] == ["[CLS]", "[SEP]"]
    share = np.array(hidden["share"])
    assert share.shape == (6, 12, 6, 2)
    assert share[2, 7, 5, 0] == pytest.approx(0.947, abs=0.002)  # bank, layer 2, head 7: nearly all to [CLS]
    assert np.all(share >= 0) and np.all(share.sum(-1) <= 1 + 1e-6)


def test_the_focus_and_per_token_tables_show_the_hidden_share(minilm_folder):
    args = ["attend", RIVER, "--model", "minilm", "--layer", "2", "--head", "7", "--color", "never"]
    focus = succeeds(*args, "--word", "bank").stdout
    _, rows = table(focus, "attention of 'bank'")
    assert rows[-1][1] == "[CLS]+[SEP]" and rows[-1][2].startswith("0.951")
    header, rows = table(succeeds(*args).stdout, "per token")
    assert header[3] == "[CLS]+[SEP]"
    assert [row[3] for row in rows][-1] == "0.95"


def test_specials_show_draws_cls_and_sep_with_rows_as_the_model_gave_them(minilm_folder):
    args = ["attend", RIVER, "--model", "minilm", "--layer", "2", "--head", "7", "--color", "never"]
    stdout = succeeds(*args, "--specials", "show").stdout
    header = next(line for line in stdout.splitlines() if line.rstrip().endswith("[CLS] [SEP]"))
    assert header.split()[:6] == ["we", "sat", "on", "the", "river", "bank"]
    bank = next(line for line in stdout.splitlines() if line.startswith("bank "))
    cells = [float(x) for x in re.findall(r"\d\.\d\d", bank)]
    assert cells[6] == pytest.approx(0.95, abs=0.006) and sum(cells) == pytest.approx(1.0, abs=0.04)
    _, rows = table(succeeds(*args, "--specials", "show", "--word", "bank").stdout, "attention of 'bank'")
    assert [row[1] for row in rows[-2:]] == ["[CLS]", "[SEP]"] and rows[-2][2].startswith("0.947")


def test_a_split_word_shows_its_pieces(minilm_folder):
    doc = run_json("attend", "the overdraft fee at the bank", "--model", "minilm", "--json")
    assert doc["tokens"][1]["pieces"] == ["over", "##dra", "##ft"]
    assert all("pieces" not in t for i, t in enumerate(doc["tokens"]) if i != 1)  # whole words carry none
    out = succeeds("attend", "the overdraft fee at the bank", "--model", "minilm", "--color", "never").stdout
    assert "pieces   overdraft = over ##dra ##ft" in out


def test_glove_tokens_have_no_pieces():
    assert all("pieces" not in t for t in run_json("attend", RIVER, "--json")["tokens"])
