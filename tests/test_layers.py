"""The folders are the layers: imports only go down, never in a circle, and only the CLI knows typer.

Read from the source with ``ast`` (nothing is imported), so the rules hold for function-level imports
too. ``if TYPE_CHECKING:`` blocks are annotations, not imports, and are left out."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "ctxembed"

# Each layer may import its own modules and those of the layers it lists (besides errors, declarations and budget).
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "declarations": set(),
    "budget": set(),
    "options": set(),  # the command-option table: declarations, as declarations.py's
    "output": set(),
    "progress": {"output"},  # a description on the terminal is printable() as every other text
    "core": set(),
    "views": {"output"},
    "vectors": {"core", "output", "progress"},
    "presets": {"core"},
    "engine": {"core", "vectors", "presets", "output", "progress"},
    "report": {"core", "vectors", "presets", "engine"},
    "batch": {"core", "vectors", "presets", "engine", "report", "output", "progress"},
    "senses": {"core", "vectors", "presets", "engine", "report", "output", "progress"},
    # eval wsi scores the senses job's clustering against labels
    "evaluation": {"core", "vectors", "presets", "engine", "report", "senses", "output", "progress"},
    # training a derived model reads labelled pairs with eval's one WiC reader
    "train": {"core", "vectors", "presets", "engine", "report", "evaluation", "output", "progress"},
    "api": {
        "core",
        "vectors",
        "presets",
        "engine",
        "report",
        "batch",
        "senses",
        "evaluation",
        "train",
        "views",
        "output",
        "progress",
    },
    # the live page's server composes the API's documents with the views' drawings, above both
    "serve": {"api", "core", "vectors", "presets", "engine", "report", "views", "output"},
}
ALWAYS = {"errors", "declarations", "budget", "options"}
TOP_LEVEL_MODULES = 16


def _layer(module: str) -> str:
    """ctxembed.vectors.store -> vectors; ctxembed.engine -> engine; ctxembed -> ctxembed."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(name: str, path: Path) -> list[tuple[str, bool]]:
    """(imported module, at module level) for every import of ``name``, TYPE_CHECKING blocks left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _type_checking(child):
                continue
            if isinstance(child, ast.Import):
                found.extend((alias.name, top) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                found.append((base, top))
                found.extend((f"{base}.{alias.name}", top) for alias in child.names)  # `from pkg import module`
            else:
                visit(child, top and not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef))

    visit(tree, True)
    modules = _modules()
    return [(module, top) for module, top in found if module in modules or not module.startswith("ctxembed")]


MODULES = _modules()


@pytest.mark.parametrize("name", [n for n in MODULES if _layer(n) not in {"ctxembed", "cli", "__main__"}])
def test_imports_go_down_the_layers(name):
    layer = _layer(name)
    allowed = ALLOWED[layer] | ALWAYS | {layer}
    upward = sorted(
        {m for m, _ in _imports(name, MODULES[name]) if m.startswith("ctxembed.") and _layer(m) not in allowed}
    )
    assert not upward, f"{name} (layer {layer}) imports {upward}; it may import {sorted(allowed)}"


@pytest.mark.parametrize("name", [n for n in MODULES if _layer(n) == "core"])
def test_the_core_does_no_io(name):
    source = MODULES[name].read_text(encoding="utf-8")
    imported = {m.split(".")[0] for m, _ in _imports(name, MODULES[name])}
    assert not imported & {"os", "io", "pathlib", "zipfile", "json", "sys", "shutil", "tempfile"}
    assert "open(" not in source.replace("np.", "")


def test_only_the_cli_imports_typer():
    users = sorted(n for n in MODULES if any(m.split(".")[0] == "typer" for m, _ in _imports(n, MODULES[n])))
    assert users and all(_layer(n) == "cli" for n in users), users


def test_no_import_circles():
    """Module-level and function-level imports alike: a circle is a circle even when it is lazy."""
    graph = {
        name: {m for m, _ in _imports(name, path) if m in MODULES and m != name and not name.startswith(m + ".")}
        for name, path in MODULES.items()
    }
    # a package's __init__ is not a dependency of its own modules' imports of siblings
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                raise AssertionError("import circle: " + " -> ".join([*stack[stack.index(nxt) :], nxt]))
            if nxt not in state:
                walk(nxt)
        stack.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            walk(name)


def test_the_package_top_level_stays_small():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= TOP_LEVEL_MODULES, top


LAYER_PACKAGES = [n for n in MODULES if n.count(".") == 1 and MODULES[n].name == "__init__.py" and _layer(n) != "cli"]


@pytest.mark.parametrize("name", LAYER_PACKAGES)
def test_layer_package_inits_stay_light(name):
    """Importing ctxembed.vectors.store must not drag in the rest of vectors/ (cold start). An import
    inside a function (engine/__init__.py's lazy names) runs only when its name is asked for."""
    found = _imports(name, MODULES[name])
    imported = [m for m, top in found if top and not m.startswith(("__future__", "typing"))]
    assert not imported, f"{name}/__init__.py imports {imported}; keep it a docstring"


def test_no_module_imports_another_modules_private_names():
    """A name starting with _ belongs to its module: a CLI command does not borrow another's helper,
    a job does not reach into a store's internals (``__version__`` and the like are public)."""
    borrowed = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ctxembed"):
                borrowed += [
                    f"{name} imports {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]
    assert not borrowed, borrowed


def test_no_class_reads_longer_than_300_lines():
    """A class longer than a few screens is several rooms in one (the engine once held batch's column
    machinery and the word lookup): split it by what its parts do."""
    long = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > 300:
                long.append(f"{name}.{node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert long == []
