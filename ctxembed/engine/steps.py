"""The named steps of ``--explain``: what each step of one layer is called, and what the view draws under it.

The engine traces a layer (:meth:`ContextEngine.layer_trace`) in its family's words (what the input
is, where q, k and v come from, which sub-layer follows attention); :func:`named_steps` turns the
explain document's numbers and those words into a list of steps, each a heading and what to draw
under it, by the name of an array of the document:

    {"label": "6. weights, softmax: exp(s_ij) / sum_j exp(s_ij)", "lines": [],
     "draw": {"matrix": "weights", "digits": 3, "mask": "scores"}}

The view (:func:`ctxembed.views.render.render_explain`) draws them in order and decides nothing. A
family whose block differs (a pre-LayerNorm decoder) names its steps through its trace, with no
change to the view. Kinds of ``draw``: ``vectors`` (an array of the document, rows labelled by
``rows``), ``each`` (several such arrays under their own names), ``matrix`` (a (T, T) array; its
cells masked where ``mask``'s are not finite), ``terms`` (each context as its weighted sum) and
``neuron`` (the neuron view).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _line(text: str, *, style: str | None = "", fold: bool = False) -> dict[str, Any]:
    """A line under a heading: ``style`` None prints it as plain text, else as text of that style."""
    return {"text": text, "style": style, "fold": fold}


def _step(label: str | None, *lines: dict, draw: dict | None = None, fold: bool = False) -> dict[str, Any]:
    return {"label": label, "fold": fold, "lines": list(lines), "draw": draw}


def named_steps(e: dict, after_attention: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Every step of an explain document ``e`` (:func:`ctxembed.report.explain_steps`), named, in order.
    ``after_attention``: the family's words for the sub-layer after attention's residual and norm
    (a BERT's feed-forward), empty when the layer ends with attention."""
    tokens, head, layer = e["tokens"], e["head"], e["layer"]
    pieces = e.get("level") == "pieces"
    dims = np.shape(e["inputs"])[1]
    units = "pieces" if pieces else "tokens"
    lines = []
    if e.get("inputs_about"):
        lines.append(_line(f"   ({e['inputs_about']})", fold=True))
    if e["shared_projection"]:
        lines.append(
            _line("   (static vectors after the shared projection (x - mean)(I - U Uᵀ): all-but-the-top)", style=None)
        )
    if e["positions"]:
        lines.append(_line("   (sinusoidal position encodings added)", style=None))
    title = f"step by step: layer {layer}, head {head}" + (", over word pieces" if pieces else "")
    steps = [
        {"rule": title, "notes": list(e.get("notes") or ())},
        _step(
            f"1. inputs x ({len(tokens)} {units} x {dims} dimensions{{shown}})",
            *lines,
            draw={"vectors": "inputs", "rows": "sources", "legend": True},
        ),
        _projections(e, head),
        _step("3. raw scores q_i . k_j", draw={"matrix": "raw_scores", "range": "all"}),
    ]
    if e.get("neuron"):
        steps.append(_step(None, draw={"neuron": "neuron"}))
    if e["divisor"] != 1.0:
        steps.append(
            _step(f"4. scaled scores: divided by {e['divisor']:.4g}", draw={"matrix": "scaled_scores", "range": "all"})
        )
    else:
        steps.append(_step("4. no scaling (--no-scale): scaled scores = raw scores"))
    steps += [_scores(e, tokens), _weights(e)]
    steps.append(_step("7. context_i = sum_j weight_ij * v_j", draw={"terms": "context"}))
    steps += _output(e, layer, pieces, after_attention)
    return steps


def _projections(e: dict, head: int) -> dict:
    d_k = np.shape(e["queries"])[1]
    if not e["projected"]:
        part = "" if e["heads"] == 1 else f" (head {head}: its slice of {d_k} dimensions)"
        return _step(f"2. queries, keys, values: q = k = v = x (no parameters){part}")
    lines = []
    if e.get("projections"):
        lines.append(_line(f"   ({e['projections']})"))
    if e.get("biases"):
        lines.append(_line(f"   q = x W_q + b_q, k = x W_k + b_k, v = x W_v + b_v (head {head}: its slice)"))
    return _step(
        f"2. queries, keys, values: projected to d_k = {d_k}", *lines, draw={"each": ["queries", "keys", "values"]}
    )


def _scores(e: dict, tokens: list[str]) -> dict:
    """Step 5: the key bias and the masks, when there are any."""
    masked = ~np.isfinite(np.array(e["scores"], dtype=np.float64))  # (T, T) masked keys are NaN
    what = []
    if e["key_bias"] is not None:
        bias = ", ".join(f"{t} {b:.2f}" for t, b in zip(tokens, e["key_bias"], strict=True))
        what.append(f"key bias log(a / (a + p(w))) added to each column ({bias})")
    masks = [
        name
        for name, on in (
            ("self", e["exclude_self"]),
            ("twins", e.get("exclude_twins")),
            ("future (causal)", e["causal"] and e["causal_mode"] == "before"),
        )
        if on
    ]
    if masked.any() or masks:
        what.append(f"· masked keys ({', '.join(masks) or 'none'})")
    if not what:
        return _step("5. no key bias and no mask: the scores above go to the normaliser")
    return _step(
        "5. scores after the key bias and the mask: " + "; ".join(what),
        draw={"matrix": "scores", "range": "finite", "mask": "scores"},
    )


def _weights(e: dict) -> dict:
    how = (
        "softmax: exp(s_ij) / sum_j exp(s_ij)"
        if e["normalization"] == "softmax"
        else "sum: max(s_ij, 0) / sum_j max(s_ij, 0)"
    )
    if e["causal"] and e["causal_mode"] == "after":
        how += ", then future keys zeroed and rows renormalised (causal after)"
    return _step(f"6. weights, {how}", draw={"matrix": "weights", "digits": 3, "mask": "scores"})


def _output(e: dict, layer: int, pieces: bool, after_attention: tuple[str, ...]) -> list[dict]:
    """Steps 8 and on: the heads merged, the residual and norm, a sub-layer after them, the layer mix."""
    parts = []
    if e["heads"] > 1:
        parts.append(f"the {e['heads']} heads' contexts side by side")
    if e["output_projection"]:
        parts.append("times W_out" + (" plus b_out" if e.get("biases") else ""))
    if e["residual"]:
        parts.append(f"plus {e['residual_scale']:.3g}·x")
    if e["layer_norm"]:
        parts.append("then layer norm")
    which = "the contextual vectors" if e["last_layer"] else f"the input of layer {layer + 1}"
    mix = e.get("mix")
    if mix is not None:
        which = "the last layer's output h" + str(len(mix["weights"]) - 1)
    steps, number = [], 8
    if e.get("attended") is not None and after_attention:  # a sub-layer follows attention (BERT's feed-forward)
        steps.append(_step(f"8. a = {', '.join(parts)}: the feed-forward's input", draw={"vectors": "attended"}))
        parts, number = list(after_attention), 9
    steps.append(_step(f"{number}. output = {', '.join(parts) or 'the context'}: {which}", draw={"vectors": "output"}))
    if mix is not None:
        last = len(mix["weights"]) - 1  # h0 is the input, h{n} the output of layer n-1
        outputs = "h1 the output of layer 0" if last == 1 else f"h1 ... h{last} the outputs of layers 0 ... {last - 1}"
        per_word = ", each word's h_l the mean of its pieces" if pieces else ""
        label = (
            f"{number + 1}. layer mix: contextual = {mix['formula']}, where h0 is the attention input (step 1 "
            f"of layer 0) and {outputs}{per_word}"
        )
        steps.append(_step(label, draw={"vectors": "mix.contextual", "rows": "mix.tokens"}, fold=True))
    return steps
