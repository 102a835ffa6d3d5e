"""Commands are thin: parse, one library call, show(). Read from the CLI's source, so a command that
grows its own JSON-or-table branch, or reaches past the API, fails here."""

from __future__ import annotations

import ast

from tests.conftest import REPO

CLI = REPO / "ctxembed" / "cli"


def _imported_names(path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
    return names


def test_only_show_prints_a_document():
    """JSON or table is decided in one place, cli.show(): no command module calls emit_json or draws
    with a renderer of its own."""
    for path in sorted(CLI.glob("*.py")):
        if path.name == "__init__.py":
            continue
        imported = _imported_names(path)
        assert "ctxembed.output.emit_json" not in imported, path.name
        assert not any(name.startswith("ctxembed.views.render") for name in imported), path.name


def test_the_eval_commands_go_through_the_api():
    """eval wic/senses/pairs/fit-mix/wsi call the Explorer's evaluate_* methods, as Python users do."""
    for name in ("eval.py", "senses.py"):
        assert "ctxembed.evaluation.run" not in _imported_names(CLI / name)
        assert not any(n.startswith("ctxembed.evaluation.run") for n in _imported_names(CLI / name))
