"""The command-option table (ctxembed/options.py) is the one declaration of --top, -k, --layer, --word ...:
the commands' options, serve's endpoint keys and the API's defaults agree with it, and no command
declares a flag of the table a second time."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import shutil
from pathlib import Path

import orjson
import pytest
import typer.main

import ctxembed
from ctxembed.api import AttendResult, Explorer, side_by_side
from ctxembed.batch.driver import run_batch
from ctxembed.batch.embed import embed_columns, word_arrays
from ctxembed.cli import app
from ctxembed.declarations import ReadOptions, declarations
from ctxembed.engine.registry import DEFAULT_MODEL
from ctxembed.errors import SettingError
from ctxembed.options import OPTIONS, REQUIRED
from ctxembed.output import dumps
from ctxembed.presets import SENSE_OPTIONS, SETTINGS, TRAIN_OPTIONS, flag
from ctxembed.serve.endpoints import ENDPOINTS, Explorers, answer, registry, split_body
from tests.cli_helpers import fails, invoke
from tests.conftest import REPO

CLI = REPO / "ctxembed" / "cli"
TABLE_FLAGS = {f for spec in OPTIONS.values() for f in spec.all_flags}
# the settings' flags are declared once too (declarations.py, presets.py), with their negatives
SETTING_SPECS = [
    *SETTINGS.values(),
    *declarations(ReadOptions).values(),
    *TRAIN_OPTIONS.values(),
    *SENSE_OPTIONS.values(),
]
SETTING_FLAGS = {spec.option for spec in SETTING_SPECS} | {spec.off_flag for spec in SETTING_SPECS if spec.off_flag}
DECLARED_FLAGS = TABLE_FLAGS | SETTING_FLAGS


def commands() -> list[tuple[str, object]]:
    """(command as typed, its click command) of every command of the CLI."""
    found = []

    def walk(command, path: tuple[str, ...]) -> None:
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(sub, (*path, name))
        else:
            found.append((" ".join(path), command))

    walk(typer.main.get_command(app), ())
    return found


COMMANDS = commands()


def literal_flags(folder: Path) -> list[str]:
    """``file:line flag`` of every declared flag (of the table, or a setting's) written out again in a
    typer.Option/Argument of ``folder``."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("typer.Option", "typer.Argument"):
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        found += [f"{path.name}:{node.lineno} {f}" for f in arg.value.split("/") if f in DECLARED_FLAGS]
    return found


# ------------------------------------------------------------------------------ declared once
def test_no_command_writes_a_declared_flag_itself():
    """Not --top (the table's) nor --weights (a setting's): each is declared once and generated."""
    assert literal_flags(CLI) == []


def test_a_second_declaration_of_top_is_found(tmp_path):
    """The scan above can fail: a copy of the CLI with `--top` written out again is caught."""
    copy = tmp_path / "cli"
    shutil.copytree(CLI, copy)
    train = copy / "train.py"
    text = train.read_text(encoding="utf-8")
    planted = 'top: Annotated[int, typer.Option("--top", min=1, help="Tokens per token.")] = 2,'
    text = text.replace("    top: int = OPTION,", "    " + planted, 1)
    assert planted in text
    train.write_text(text, encoding="utf-8")
    assert [entry.split()[-1] for entry in literal_flags(copy)] == ["--top"]


@pytest.mark.parametrize(("typed", "command"), COMMANDS, ids=[typed for typed, _ in COMMANDS])
def test_each_command_takes_the_tables_options_as_declared(typed, command):
    """Flags, default and required of every option a command takes from the table are the table's (with
    the command's own values), and no other parameter of the command spells a flag of the table."""
    name = command.callback.__name__
    taken = getattr(command.callback, "table_options", {})
    by_name = {param.name: param for param in command.params}
    for key in taken:
        spec = OPTIONS[key].of(name)
        param = by_name[key]
        assert set(param.opts) | set(param.secondary_opts) == set(spec.own_flags or [key]), (typed, key)
        assert param.required == spec.required, (typed, key)
        if not spec.required:
            default = param.default.value if hasattr(param.default, "value") else param.default
            assert default == spec.default or (default in ((), []) and spec.default is None), (typed, key)
    for param in command.params:
        if param.name in taken:
            continue
        # senses' and eval wsi's -k is a clustering setting (settings.SENSE_OPTIONS), not the table's -k
        others = set(param.opts) & TABLE_FLAGS - (
            {"-k"} if param.name == "k" and name in ("senses", "eval_wsi") else set()
        )
        assert not others, f"{typed}: {param.name} declares {others}, flags of ctxembed.options.OPTIONS"


@pytest.mark.parametrize(("typed", "command"), COMMANDS, ids=[typed for typed, _ in COMMANDS])
def test_no_command_declares_a_flag_twice(typed, command):
    spelled = [f for param in command.params for f in (*param.opts, *param.secondary_opts) if f.startswith("-")]
    assert len(spelled) == len(set(spelled)), typed


def test_the_shared_options_are_in_the_table_and_taken_by_their_commands():
    taken = {}
    for typed, command in COMMANDS:
        for key in getattr(command.callback, "table_options", {}):
            taken.setdefault(key, []).append(typed)
    assert {"attend", "before-after"} <= set(taken["top"]) and {"attend", "before-after"} <= set(taken["layer"])
    assert {"attend", "compare", "neighbors", "batch", "side-by-side"} <= set(taken["word"])
    assert set(taken) == set(OPTIONS)  # every entry is used by a command


# ------------------------------------------------------------------------------ the API
def _api_functions():
    yield "explorer", Explorer.__init__
    for name, member in inspect.getmembers(Explorer, inspect.isfunction):
        if not name.startswith("_"):
            yield name, member
    yield "before_after", ctxembed.before_after
    yield "side_by_side", side_by_side
    yield "train", ctxembed.train_weights
    yield "embed_lines", ctxembed.embed_lines
    yield "embed_chunks", ctxembed.embed_chunks
    yield "embed_columns", embed_columns
    yield "word_arrays", word_arrays
    yield "batch", run_batch
    yield "vectors_info", ctxembed.vectors_info
    yield "vectors_convert", ctxembed.convert_vectors


@pytest.mark.parametrize(("name", "function"), list(_api_functions()), ids=[n for n, _ in _api_functions()])
def test_the_apis_defaults_are_the_tables(name, function):
    """Every keyword of the API named as an option of the table defaults to the table's value (with
    the command's own, for before_after and compare)."""
    for param in inspect.signature(function).parameters.values():
        if param.name in OPTIONS and param.default is not inspect.Parameter.empty:
            expected = OPTIONS[param.name].of(name).default
            assert param.default == (None if expected is REQUIRED else expected), (name, param.name)


# Keywords that are always a command option where the library takes them (a `k` or `layer` may be another
# thing's: a store's most_similar(k), a senses' k); in the layers the commands call, never a literal default
ALWAYS_OPTIONS = ("top", "among", "chunk", "workers", "with_vectors", "include_context", "attention")
COMMAND_LAYERS = ["api.py", "report.py", "batch", "train", "serve"]


def literal_defaults(paths: list[Path]) -> list[str]:
    """``file:line name=value`` of every literal default given to a keyword of :data:`ALWAYS_OPTIONS`
    (a function's parameter or a dataclass field) in ``paths``."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            pairs = []
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                positional = node.args.posonlyargs + node.args.args
                defaulted = positional[len(positional) - len(node.args.defaults) :]
                pairs += zip(defaulted, node.args.defaults, strict=True)
                keywords = zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True)
                pairs += [(arg, d) for arg, d in keywords if d is not None]
                pairs = [(arg.arg, d) for arg, d in pairs]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                pairs = [(node.target.id, node.value)]
            found += [
                f"{path.name}:{d.lineno} {name}={d.value!r}"
                for name, d in pairs
                if name in ALWAYS_OPTIONS and isinstance(d, ast.Constant)
            ]
    return found


def test_the_library_takes_the_options_defaults_from_the_table():
    package = REPO / "ctxembed"
    paths = [package / name for name in COMMAND_LAYERS if name.endswith(".py")]
    paths += [p for name in COMMAND_LAYERS if not name.endswith(".py") for p in sorted((package / name).rglob("*.py"))]
    assert len(paths) > 10 and literal_defaults(paths) == []


def test_a_literal_default_is_found(tmp_path):
    """The scan above can fail: `top: int = 3` written in a signature or a dataclass is caught."""
    planted = tmp_path / "planted.py"
    planted.write_text("def attend(text, *, top: int = 3):\n    pass\n\n\nclass R:\n    with_vectors: bool = False\n")
    assert literal_defaults([planted]) == ["planted.py:1 top=3", "planted.py:6 with_vectors=False"]


def test_the_default_model_is_the_registrys():
    assert OPTIONS["model"].default == DEFAULT_MODEL


def test_the_results_defaults_are_the_tables():
    fields = {f.name: f.default for f in dataclasses.fields(AttendResult)}
    assert (fields["top"], fields["with_vectors"]) == (OPTIONS["top"].default, OPTIONS["with_vectors"].default)


def test_the_api_checks_with_the_tables_limits_and_words():
    explorer = Explorer("notes-toy", "notes")
    for bad in (0, 1001, True, 2.5):
        with pytest.raises(SettingError) as raised:
            explorer.neighbors("apple is the phone", "apple", bad)
        assert raised.value.message == f"k must be an integer in [1, 1000], not {bad!r}"
    with pytest.raises(SettingError, match=r"^among must be an integer >= 0, not -1$"):
        explorer.neighbors("apple is the phone", "apple", among=-1)
    with pytest.raises(SettingError, match=r"^top must be an integer in \[1, 50\], not 0$"):
        ctxembed.before_after("the bank", top=0, vectors="notes-toy")


# ------------------------------------------------------------------------------ serve
ENDPOINT_COMMANDS = {"attend": "attend", "explain": "attend", "compare": "compare", "side-by-side": "side_by_side"}


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
def test_serves_keys_are_the_tables(endpoint):
    command = ENDPOINT_COMMANDS.get(endpoint, endpoint)
    for name, spec in ENDPOINTS[endpoint].items():
        assert spec == OPTIONS[name].of(command), (endpoint, name)
    body = {"sentence": "the bank", "sentences": ["the bank", "a bank"], "word": "bank"}
    own, _ = split_body(endpoint, {k: v for k, v in body.items() if k in ENDPOINTS[endpoint]})
    for name, value in own.items():
        if name not in body:  # left out: the table's default, as the command line's
            assert value == OPTIONS[name].of(command).default, (endpoint, name)


@pytest.mark.parametrize(
    ("endpoint", "body", "args"),
    [
        ("attend", {"sentence": "the bank", "top": 0}, ["attend", "the bank", "--top", "0"]),
        ("attend", {"sentence": "the bank", "top": 51}, ["attend", "the bank", "--top", "51"]),
        ("explain", {"sentence": "the bank", "layer": -1}, ["attend", "the bank", "--explain", "--layer", "-1"]),
        ("explain", {"sentence": "the bank", "head": -2}, ["attend", "the bank", "--explain", "--head", "-2"]),
        (
            "neighbors",
            {"sentence": "the bank", "word": "bank", "k": 1001},
            ["neighbors", "the bank", "--word", "bank", "-k", "1001"],
        ),
    ],
)
def test_serve_and_the_command_line_refuse_alike(endpoint, body, args):
    """One limit, one message: the page's error line is the command line's."""
    with pytest.raises(SettingError) as raised:
        split_body(endpoint, body)
    assert fails(2, *args) == f"ctxembed: error: {raised.value.render(flag)}"


def test_serves_default_top_is_the_commands(isolated_env):
    explorers = Explorers("notes-toy")
    doc = answer("attend", {"sentence": "apple is the phone the apple", "preset": "notes"}, explorers)
    cli = invoke("attend", "apple is the phone the apple", "--vectors", "notes-toy", "--preset", "notes", "--json")
    assert orjson.loads(dumps(doc)) == orjson.loads(cli.stdout)
    assert {len(row) for row in doc["top_attended"][0]} == {OPTIONS["top"].default}
    keys = registry(explorers)["endpoints"]["attend"]["top"]
    assert (keys["minimum"], keys["maximum"], keys["default"], keys["flag"]) == (1, 50, 3, "--top")


# ------------------------------------------------------------------------------ help and docs
def help_text(*command: str) -> str:
    return " ".join(invoke(*command, "--help").stdout.split())  # unwrapped


@pytest.mark.parametrize(("typed", "command"), COMMANDS, ids=[typed for typed, _ in COMMANDS])
def test_every_commands_help_shows_its_table_options(typed, command):
    shown = help_text(*typed.split())
    for key in getattr(command.callback, "table_options", {}):
        spec = OPTIONS[key].of(command.callback.__name__)
        assert (key.upper() if spec.argument else spec.option) in shown, (typed, key)
        assert " ".join(spec.help.split()[:6]) in shown, (typed, key)


def test_help_shows_the_tables_limits_and_each_commands_default():
    assert "--top <int> Most-attended tokens listed per token. [1<=x<=50] [default: 3]" in help_text("attend")
    assert "--top <int> Most-attended tokens listed per token. [1<=x<=50] [default: 2]" in help_text("before-after")
    shown = help_text("neighbors")
    assert "-k, --k <int> How many neighbours. [1<=x<=1000] [default: 10]" in shown
    assert "(bank#2: its second occurrence; #N: the token at position N). [required]" in shown


def test_the_docs_table_says_what_the_table_says():
    """test_settings.py regenerates docs/options.md whole, this table included (after changing
    ctxembed/options.py: .venv/bin/python scripts/settings_docs.py); here, its rows name every option."""
    text = (REPO / "docs" / "options.md").read_text(encoding="utf-8")
    table = text.split("<!-- command options:", 1)[1].split("<!-- end of the command options -->")[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert len(rows) == len(OPTIONS)
    for spec in OPTIONS.values():
        assert any(spec.help.replace("|", "\\|") in row for row in rows), spec.name
    assert (
        "| `--top INT` | Most-attended tokens listed per token. | 1<=x<=50 | `3` | attend, before-after (`2`)" in text
    )
