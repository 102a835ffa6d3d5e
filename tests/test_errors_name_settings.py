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


def _command_options() -> list[tuple[str, str, list[str]]]:
    """(command, parameter name, its flags) of every option of every command."""
    import typer

    from ctxembed.cli import app

    found = []

    def walk(command, path: str) -> None:
        for param in command.params:
            if param.param_type_name == "option":
                found.append((path, param.name, [*param.opts, *param.secondary_opts]))
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}".strip())

    walk(typer.main.get_command(app), "")
    return found


def _named_in_errors() -> set[str]:
    """Every setting a library error lists by name (the arguments after its message)."""
    names = set()
    for path in sorted((REPO / "ctxembed").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ERRORS:
                names |= {a.value for a in node.args[1:] if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    return names


def test_each_commands_own_options_are_named_as_the_command_declares_them():
    """An option declared by its command alone (attend's --explain and --start, train's --resume, serve's
    --port), in no table, is named by the flag its command declares: presets.flag spells it as typer
    spells the parameter, with no second table of spellings to keep in step (it had 12, and named
    --start, --corpus or --max-display as bare words)."""
    from ctxembed.presets import flag

    spelled_otherwise = {"open_browser"}  # serve's --open: no error names it
    wrong = [
        f"{command}: {name} -> {flag(name)}, not one of {flags}"
        for command, name, flags in _command_options()
        if flag(name) not in flags and name not in spelled_otherwise
    ]
    assert wrong == []


def test_every_setting_an_error_names_is_a_flag_of_the_command_line():
    from ctxembed.presets import flag

    names = _named_in_errors()
    assert {"explain", "resume", "port", "output_format", "json_out", "max_tokens"} <= names
    flags = {f for _, _, spelled in _command_options() for f in spelled}
    assert sorted(f"{name} -> {flag(name)}" for name in names if flag(name) not in flags) == []
