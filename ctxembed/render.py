"""Rich rendering of results for people. Computes nothing: it only lays out what it is given."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def render_info(console: Console, info: dict) -> None:
    table = Table(title=f"vectors: {info['source']}", show_header=False, title_justify="left")
    table.add_column("field", style="bold")
    table.add_column("value")
    for field in (
        "name",
        "path",
        "kind",
        "format",
        "words",
        "dim",
        "dtype",
        "lowercase",
        "subwords",
        "cache",
        "cache_state",
    ):
        value = info.get(field)
        if field == "words" and isinstance(value, int):
            value = f"{value:,}"
        table.add_row(field.replace("_", " "), "-" if value is None else str(value))
    console.print(table)
