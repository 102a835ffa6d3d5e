"""Library errors name settings, never command-line flags: a message writes ``{name}`` and lists the
setting, and the CLI (or the page) shows the flag. Read from the source, so a new error that spells
a flag outside ctxembed/cli fails here."""

from __future__ import annotations

import ast
import re

from ctxembed.cli.options import error_message
from ctxembed.errors import UsageError
from tests.conftest import REPO

ERRORS = {"CtxembedError", "DataError", "UsageError", "SettingError"}
FLAG = re.compile(r"(?<![\w-])--[a-z]")


def _message_text(call: ast.Call) -> str:
    """The literal parts of an error's message (the first argument, a string or an f-string)."""
    first = call.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    if isinstance(first, ast.JoinedStr):
        return "".join(v.value for v in first.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return ""


def test_no_library_error_spells_a_flag():
    found = []
    for path in sorted((REPO / "ctxembed").rglob("*.py")):
        if "cli" in path.relative_to(REPO / "ctxembed").parts:
            continue  # the command line speaks in flags
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ERRORS and node.args:
                if FLAG.search(_message_text(node)):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert found == []


def test_the_command_line_shows_a_settings_flag():
    error = UsageError("a step-by-step view this big: use a shorter sentence, or {json}", "json")
    assert error.message.endswith("or json")
    assert error_message(error).endswith("or --json")
