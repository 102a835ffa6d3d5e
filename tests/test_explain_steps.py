"""--explain's steps are named by the engine in its family's words and handed to the view, which only
draws them: a step's label in the document is what the terminal prints, and a family's words for the
sub-layer after attention reach the output step without any change to the view."""

from __future__ import annotations

import io
from dataclasses import replace

from rich.console import Console

from ctxembed.views.render import render_explain

RIVER = "we sat on the river bank"


def drawn(explained: dict) -> str:
    console = Console(file=io.StringIO(), width=120, highlight=False, markup=False, color_system=None)
    render_explain(console, explained)
    return console.file.getvalue()


def test_the_view_draws_the_labels_it_is_handed_and_names_nothing_itself():
    import ctxembed

    explained = ctxembed.Explorer().explain(RIVER).document()["explain"]
    labels = [step.get("label") for step in explained["steps"]]
    assert "7. context_i = sum_j weight_ij * v_j" in labels
    weights = next(step for step in explained["steps"] if (step.get("draw") or {}).get("matrix") == "weights")
    assert weights["label"].startswith("6. weights, softmax")
    weights["label"] = "6. the normalised scores, as this family calls them"
    shown = drawn(explained)
    assert "6. the normalised scores, as this family calls them" in shown and "6. weights" not in shown
    explained["steps"] = [step for step in explained["steps"] if step.get("label") != labels[-1]]
    assert labels[-1].split(":")[0] not in drawn(explained)  # a step the engine leaves out is not drawn


def test_a_familys_words_for_the_sub_layer_after_attention_name_the_output_step(tiny_model, monkeypatch):
    import ctxembed
    from ctxembed.engine import families

    bert = families.FAMILIES["bert"]
    doc = ctxembed.Explorer(model=tiny_model.name).explain(RIVER).document()["explain"]
    assert "9. output = feed-forward GELU(a W_1 + b_1) W_2 + b_2, plus a, then layer norm" in drawn(doc)
    words = replace(bert.steps, feed_forward=("a W_1, GELU, W_2 over LayerNorm(a)", "plus a"))
    monkeypatch.setitem(families.FAMILIES, "bert", replace(bert, steps=words))
    doc = ctxembed.Explorer(model=tiny_model.name).explain(RIVER).document()["explain"]
    shown = drawn(doc)
    assert "9. output = a W_1, GELU, W_2 over LayerNorm(a), plus a:" in shown and "GELU(a W_1" not in shown
