"""Lay out a ``ctxembed.train/1`` document in the terminal: what was trained, on what, and the loss curves
as sparklines. Reads the document only."""

from __future__ import annotations

import numpy as np
from rich.columns import Columns
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ctxembed.output import terminal_view
from ctxembed.views.figures import attention_masks, layer_weights
from ctxembed.views.render import caption, matrix_table, print_settings

SPARKS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float], width: int = 48) -> str:
    """One character per value (at most ``width``, evenly picked), low to high as ▁ to █."""
    values = [v for v in values if v is not None]
    if not values:
        return ""
    if len(values) > width:
        values = [values[round(i * (len(values) - 1) / (width - 1))] for i in range(width)]
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    return "".join(SPARKS[min(len(SPARKS) - 1, int((v - low) / span * len(SPARKS)))] for v in values)


def loss_rows(doc: dict) -> list[tuple[str, str, str]]:
    rows = []
    for name in ("train", "held_out"):
        curve = [entry["loss"] for entry in doc[name] if entry["loss"] is not None]
        if curve:
            change = curve[-1] / curve[0] - 1 if curve[0] else 0.0
            label = "held-out" if name == "held_out" else "train"
            rows.append((label, sparkline(curve), f"{curve[0]:.4f} → {curve[-1]:.4f} ({change:+.1%})"))
    return rows


@terminal_view
def render_train(console: Console, doc: dict) -> None:
    corpus, options = doc["corpus"], doc["options"]
    state = "interrupted" if doc["interrupted"] else "done"
    console.print(
        Text.assemble(("ctxembed train", "bold"), f": {state} after {doc['steps']:,} of {doc['total_steps']:,} steps")
    )
    print_settings(console, doc["settings_summary"], style="dim")
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    speed = doc["tokens_per_second"]
    cropped = corpus["cropped_sentences"] + corpus["cropped_lines"]
    facts.add_row(
        "corpus",
        f"{corpus['sentences']:,} sentences, {corpus['tokens']:,} tokens "
        f"({corpus['train_sentences']:,} train, {corpus['held_out_sentences']:,} held out)"
        + (f", {cropped:,} cropped" if cropped else ""),
    )
    facts.add_row("vectors", f"{doc['vectors']['name']} ({doc['vectors']['dim']} dimensions)")
    facts.add_row("learned", ", ".join(sorted({name.rsplit(".", 1)[-1] for name in doc["learned"]})) or "nothing")
    facts.add_row(
        "objective",
        f"{options['mask_rate']:.0%} of tokens masked, true word vs {options['negatives']} sampled words",
    )
    facts.add_row(
        "time",
        f"{doc['seconds']:.1f} s" + (f", {speed:,.0f} tokens/s while training" if speed else ""),
    )
    if doc.get("out"):
        facts.add_row("weights", doc["out"])
    elif doc["interrupted"]:
        facts.add_row("checkpoint", f"{doc['checkpoint']} (continue with --resume)")
    console.print(facts)
    caption(console, "loss (cross-entropy, nats)")
    curves = Table(show_edge=False)
    curves.add_column("")
    curves.add_column("curve")
    curves.add_column("first → last")
    for row in loss_rows(doc):
        curves.add_row(*row)
    console.print(curves)


def _attention_of(doc: dict, layer: int, head: int | None) -> np.ndarray:
    return layer_weights(np.asarray(doc["weights"], dtype=float), layer, head)  # (L, h, T, T) -> (T, T)


@terminal_view
def render_before_after(console: Console, doc: dict, *, layer: int | None = None, head: int | None = None) -> None:
    """The two attention matrices side by side, then each token's most-attended words before and after
    (``layer``: default the last; ``head``: default the mean of heads)."""
    before, after = doc["before"], doc["after"]
    if layer is None:
        layer = after["settings"]["attention"]["layers"] - 1
    labels = [before["tokens"][p]["text"] for p in [t["position"] for t in before["tokens"] if t["used"]]]
    losses = doc["losses"]
    console.print(Text.assemble(("weights", "bold"), f" {doc['weights_file']}"), highlight=False)
    # the settings are those the weights file records (a --weights file's own, whatever preset it started from)
    parts = [p for p in after["settings_summary"].split(" | ") if not p.startswith("preset ")]
    print_settings(console, " | ".join(["as the weights file records them", *parts]), style="dim")
    which = "mean of heads" if head is None else f"head {head}"
    held = ""
    if losses.get("held_out_initial") is not None and losses.get("held_out") is not None:
        held = f", held-out loss {losses['held_out_initial']:.3f} → {losses['held_out']:.3f}"
    seed = doc["init"]["seed"]
    masked = attention_masks(before, len(labels))  # the self mask: "·", not 0.00
    masked = masked if masked.any() else None
    matrices = [
        matrix_table(
            f"before training (initial weights, seed {seed}), layer {layer}, {which}",
            labels, labels, _attention_of(before, layer, head), masked=masked,
        ),
        matrix_table(
            f"after training ({doc['steps']:,} steps{held}), layer {layer}, {which}",
            labels, labels, _attention_of(after, layer, head), masked=masked,
        ),
    ]  # fmt: skip
    console.print(Columns(matrices, padding=(0, 4)))
    caption(console, "attends most to (last layer, mean of heads)")
    table = Table()
    table.add_column("token")
    table.add_column("before")
    table.add_column("after")
    for label, was, now in zip(labels, before["top_attended"], after["top_attended"], strict=True):
        table.add_row(label, _top_text(was), _top_text(now))
    console.print(table)
    learned = sorted({name.rsplit(".", 1)[-1] for name in doc["learned"]})
    console.print(f"learned by `ctxembed train`: {', '.join(learned)}", style="dim", highlight=False)


def _top_text(entries: list[dict]) -> str:
    return ", ".join(f"{entry['text']} {entry['weight']:.2f}" for entry in entries)


@terminal_view
def render_derived(console: Console, doc: dict) -> None:
    """``ctxembed train --model minilm PAIRS --name NAME``: the derived model written, or the checkpoint."""
    way = "fine-tuned" if doc["way"] == "fine-tune" else "a head over the frozen encoder"
    state = "interrupted" if doc["interrupted"] else "done"
    console.print(Text.assemble(("ctxembed train", "bold"), f": {state}: {doc['model']}, {doc['parent']} {way}"))
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    data = doc["data"]
    facts.add_row("data", f"{data['name']} ({data['pairs']:,} pairs, sha256 {data['sha256'][:16]}...)")
    for entry in doc["history"]:
        held = entry["held_out_accuracy"]
        facts.add_row(
            f"epoch {entry['epoch']}",
            f"train accuracy {entry['train_accuracy']:.3f}" + ("" if held is None else f", held-out {held:.3f}"),
        )
    figures = doc["figures"]
    if figures:
        held = figures["held_out_accuracy"]
        facts.add_row(
            "figures",
            f"train accuracy {figures['train_accuracy']:.3f}"
            + ("" if held is None else f", held-out accuracy {held:.3f} ({figures['held_out_pairs']:,} pairs)"),
        )
    facts.add_row("licence", f"{doc['licence']} (inherited from {doc['parent']})")
    if doc["path"]:
        facts.add_row("model", f"{doc['path']}: use it as --model {doc['model']}")
    elif doc["interrupted"]:
        facts.add_row("checkpoint", f"{doc['checkpoint']} (run the same command with --resume)")
    console.print(facts)


@terminal_view
def render_before_after_model(
    console: Console, doc: dict, *, layer: int | None = None, head: int | None = None, shown: int = 12
) -> None:
    """A derived model beside its parent: the heads that moved most, one layer's maps before and after, and
    the word's cosine across the sentences under each."""
    before, after = doc["before"], doc["after"]
    console.print(
        Text.assemble(("before-after", "bold"), f": {doc['parent']} (before) and {doc['model']} (after, {doc['way']} "
                      f"on {doc['data']['name']})"), highlight=False,
    )  # fmt: skip
    labels = [t["text"] for t in before["tokens"] if t["used"]]
    if not any(entry["change"] for entry in doc["heads"]):
        if doc["way"] == "freeze":  # the encoder's attention is its parent's
            said = (f"{doc['model']} runs {doc['parent']}'s encoder as it is; it learned only a read-out "
                    f"({after['settings'].get('readout', 'a layer mix')}) and a head over its cosines")  # fmt: skip
        else:  # fine-tuned, yet no attention weight changed (a run of one step: its warm-up starts at lr 0)
            said = f"fine-tuning left every attention map of {doc['parent']} as it was (train longer)"
        console.print(f"no head moved: {said}", highlight=False)
        _derived_cosines(console, doc)
        return
    moved = Table(title=f"the heads that moved most (of {len(doc['heads'])}): mean total variation of a word's row")
    for column in ("layer", "head", "change"):
        moved.add_column(column, justify="right")
    for entry in doc["heads"][:shown]:
        moved.add_row(str(entry["layer"]), str(entry["head"]), f"{entry['change']:.3f}")
    console.print(moved)
    if layer is None:
        top = doc["heads"][0]  # the head that moved most, unless a layer is asked for
        layer, head = top["layer"], top["head"] if head is None else head
    which = "mean of heads" if head is None else f"head {head}"
    matrices = [
        matrix_table(f"{doc['parent']}, layer {layer}, {which}", labels, labels, _attention_of(before, layer, head)),
        matrix_table(f"{doc['model']}, layer {layer}, {which}", labels, labels, _attention_of(after, layer, head)),
    ]
    console.print(Columns(matrices, padding=(0, 4)))
    _derived_cosines(console, doc)


def _derived_cosines(console: Console, doc: dict) -> None:
    """The word's cosine across the sentences under the parent and the derived model (with --with)."""
    cosines = doc["cosines"]
    if cosines is not None:
        table = Table(title=f"cosine of {doc['word']!r} across the sentences (read-out)")
        for column in ("pair", doc["parent"], doc["model"], "change"):
            table.add_column(column, justify="right")
        n = len(doc["sentences"])
        for i in range(n):
            for j in range(i + 1, n):
                was, now, change = (cosines[key][i][j] for key in ("before", "after", "change"))
                table.add_row(f"S{i + 1}-S{j + 1}", f"{was:.3f}", f"{now:.3f}", f"{change:+.3f}")
        console.print(table)
        for i, sentence in enumerate(doc["sentences"]):
            console.print(Text(f"S{i + 1}  {sentence}"), highlight=False)
    else:
        console.print("--word W --with SENTENCE: the word's cosine across sentences before and after", style="dim")
