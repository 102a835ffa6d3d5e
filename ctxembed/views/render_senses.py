"""Lay out a ``ctxembed.senses/2`` document for people: per word, each sense with its label and a
keyword-in-context concordance of its most central examples. Reads the document only."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ctxembed.output import terminal_view
from ctxembed.views.layout import wrap_parts
from ctxembed.views.render import caption, labelled, window_note


def kwic(text: str, start: int, end: int, width: int) -> tuple[str, str, str]:
    """(left, keyword, right): the keyword with ``width`` characters of context on each side,
    whitespace runs folded, cut contexts marked with an ellipsis."""
    left = " ".join(text[:start].split())
    right = " ".join(text[end:].split())
    if text[:start][-1:].isspace():
        left += " "
    if text[end:][:1].isspace():
        right = " " + right
    if len(left) > width:
        left = "…" + left[len(left) - width + 1 :]
    if len(right) > width:
        right = right[: width - 1] + "…"
    return left, text[start:end], right


@terminal_view
def render_senses(console: Console, doc: dict) -> None:
    corpus = doc["corpus"]
    for line in wrap_parts("settings ", doc["settings_summary"].split(" | "), console.width or 100):
        console.print(Text(line, style="dim"), overflow="fold", crop=False)  # broken only between settings
    labelled(
        console,
        Text("corpus", style="dim"),
        Text(
            f"{corpus['name']}: {corpus['lines']:,} lines, {corpus['candidate_lines']:,} with a form of the words"
            + (f", {corpus['long_lines']:,} too long to read" if corpus["long_lines"] else ""),
            style="dim",
        ),
    )
    if clustered_on := doc["options"].get("clustered_on"):
        labelled(console, Text("clusters", style="dim"), Text(f"on {clustered_on}", style="dim"))
    if search := doc.get("label_search"):
        labelled(
            console,
            Text("labels", style="dim"),
            Text(
                f"the words nearest each sense's centroid, each labelling the sense it is nearest, in the model's "
                f"contextual space: {search['about']}",
                style="dim",
            ),
        )
    width = max(20, ((console.width or 100) - 12) // 2)
    for entry in doc["words"]:
        console.print()
        if not entry["k"]:
            console.print(Text(f"{entry['word']}: no usable occurrence", style="bold"))
            continue
        skipped = {k: v for k, v in entry["skipped"].items() if v}
        note = "".join(f", {v} {k.replace('_', ' ')}" for k, v in skipped.items())
        sampled = (
            f", {entry['occurrences_sampled']:,} sampled"
            if entry["occurrences_sampled"] < entry["occurrences_found"]
            else ""
        )
        quality = entry["quality"]["silhouette"]
        how = {
            "silhouette": "k by silhouette",
            "given": "k given",
            "fewer distinct contexts than k given": f"k given, but the occurrences have only {entry['k']} distinct "
            f"context{'s' if entry['k'] > 1 else ''}",
        }.get(entry["chosen_by"], entry["chosen_by"])
        title = Text(entry["word"], style="bold")
        title.append(
            f"  {entry['occurrences_found']:,} occurrences ({', '.join(entry['forms'])}){sampled}, "
            f"{entry['occurrences_used']:,} used{note}; {entry['k']} sense{'s' if entry['k'] > 1 else ''} "
            f"({how}" + (f", silhouette {quality:.2f})" if quality is not None else ")"),
            style="default",
        )
        labelled(console, title[: len(entry["word"]) + 2], title[len(entry["word"]) + 2 :], width=0)
        for sense in entry["senses"]:
            head = Text(f"  sense {sense['sense']}", style="bold cyan")
            head.append(f"  {sense['size']:,} ({sense['share']:.0%})  ", style="default")
            label = " ".join(item["word"] for item in sense["label"])
            labelled(
                console,
                head,
                Text(label or "(no label: the vectors are not in the vocabulary's space)", style="italic"),
                width=0,
            )
            for example in sense["examples"]:
                left, keyword, right = kwic(example["text"], example["start"], example["end"], width)
                line = Text(f"  {example['line']:>7}  ", style="dim")
                line.append(left.rjust(width))
                line.append(keyword, style="bold reverse")
                line.append(right)
                console.print(line, no_wrap=True, overflow="ellipsis", crop=True)


@terminal_view
def render_eval_wsi(console: Console, doc: dict) -> None:
    clustering = doc["clustering"]
    caption(
        console,
        f"word-sense induction on {doc['file']}: {doc['words']} words, {doc['occurrences']} occurrences "
        f"(k {clustering['k']}, own term {clustering['own_term']})",
    )
    table = Table()
    for column in ("configuration", "ARI", "V-measure", "pair accuracy", "mean k"):
        table.add_column(column, justify="left" if column == "configuration" else "right")
    for row in doc["configs"]:
        numbers = [_fixed(row[key], 3) for key in ("ari", "v_measure", "pair_accuracy")]
        table.add_row(row["name"], *numbers, _fixed(row["mean_k"], 2))
    console.print(table)
    if (note := window_note(doc)) is not None:
        console.print(note)


def _fixed(value: float, digits: int) -> str:
    """A number with ``digits`` decimals, never "-0.000" for a tiny negative."""
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text
