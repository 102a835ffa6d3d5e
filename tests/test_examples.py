"""Every example a person is shown runs: each ``Example:`` of every ``--help``, and every command line
in the code blocks of README.md and docs/*.md, exits 0.

A trailing ``# fails: exit N`` marks an example that fails on purpose (it must exit N); ``# needs: WHAT``
one that needs what a test may not use (data under /work/shared, the network): it is listed as
skipped with that reason. ctxembed itself runs in this process (CliRunner); what comes before it in
a pipeline (echo, printf, zcat) and after it (jq, cat) runs in bash. The files an example names
(sentences.txt, corpus.txt, WiC_dataset/, ...) are small stand-ins made in a sandbox directory,
in which every example of one file runs in order (a later example may use what an earlier wrote).
"""

from __future__ import annotations

import gzip
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer

from ctxembed.cli import app
from tests.cli_helpers import invoke
from tests.conftest import REPO

FIXTURES = REPO / "tests" / "fixtures"
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# An example marked with exactly this needs the installed model, nothing more: it runs whenever the model
# is installed (the conftest fixture `minilm_folder` points CTXEMBED_MODELS at it), and is skipped otherwise.
MODEL_NEEDED = "ctxembed models install minilm"
MARKER = re.compile(r"\s+#\s*(fails: exit (?P<code>\d+)|needs: (?P<needs>.+?))\s*$")


@dataclass(frozen=True)
class Example:
    where: str  # file:line, or "ctxembed CMD --help"
    command: str  # shell text, one line, without its marker
    exit_code: int = 0
    needs: str | None = None


def _split_marker(where: str, line: str) -> Example:
    found = MARKER.search(line)
    command = line[: found.start()] if found else line
    command = _strip_comment(command).strip()
    if found and found["code"]:
        return Example(where, command, exit_code=int(found["code"]))
    return Example(where, command, needs=found["needs"] if found else None)


def _strip_comment(line: str) -> str:
    """``line`` without a trailing shell comment (a ``#`` outside quotes, after a space)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


_COMMAND = re.compile(r"^(\$ )?(\w+=\S+ )*ctxembed |\| ctxembed ")


def document_examples(path: Path) -> list[Example]:
    """Command lines of ``path``'s fenced code blocks that run ctxembed (``$ `` prompts dropped,
    ``\\`` continuations joined); output lines of a transcript are not commands."""
    examples, inside, pending, start = [], False, "", 0
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.startswith("```"):
            inside = not inside
            continue
        if not inside:
            continue
        text = line.strip()
        if pending:
            text, pending = pending + " " + text, ""
        elif _COMMAND.search(text):
            start = number
        else:
            continue
        if text.endswith("\\"):
            pending = text[:-1].rstrip()
            continue
        examples.append(_split_marker(f"{path.relative_to(REPO)}:{start}", text.removeprefix("$ ")))
    return examples


def help_examples() -> list[Example]:
    """The ``Example:`` epilog of every command (``   |   `` separates several)."""
    examples = []

    def walk(command, path):
        epilog = getattr(command, "epilog", None) or ""
        if epilog.startswith("Example"):
            for text in epilog.split(":", 1)[1].split("   |   "):
                examples.append(_split_marker(f"ctxembed {' '.join(path)} --help", text.strip()))
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return examples


def _brown_lines(count: int, words: tuple[str, ...] = ()) -> list[str]:
    lines = []
    with gzip.open(REPO / "data" / "brown.txt.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            if not words or any(f" {w} " in f" {line.lower()} " for w in words):
                lines.append(line.rstrip("\n"))
                if len(lines) == count:
                    break
    return lines


def make_sandbox(directory: Path) -> Path:
    """The files examples name, small: text from the shipped Brown sample, the WiC fixture, tiny vectors."""
    corpus = "\n".join(_brown_lines(30, ("bank", "banks")) + _brown_lines(30, ("interest",))) + "\n"
    brown = "\n".join(_brown_lines(150)) + "\n"
    (directory / "sentences.txt").write_text(
        "we sat on the river bank\nI paid the money into the bank\nthe sentence has no such word\n"
    )
    (directory / "corpus.txt").write_text(corpus)
    (directory / "news.txt.gz").write_bytes(gzip.compress(corpus.encode()))
    (directory / "long.txt").write_text(
        "the old fisherman slowly walked along the muddy river bank near the village while his two sons "
        "carried the heavy nets and the baskets of fish down to the small wooden boat\n"
    )
    (directory / "brown.txt").write_text(brown)
    (directory / "lr.txt").write_text(brown)
    (directory / "data").mkdir()
    (directory / "data" / "brown.txt.gz").write_bytes(gzip.compress(brown.encode()))
    for shipped in ("wsi-senses.tsv", "twins.tsv", "twins-mixed.tsv"):
        shutil.copy(REPO / "data" / shipped, directory / "data")
    pseudo = (REPO / "data" / "wsi-pseudowords.tsv").read_text(encoding="utf-8").splitlines()
    (directory / "data" / "wsi-pseudowords.tsv").write_text("\n".join(pseudo[:1] + pseudo[1::12]) + "\n")
    shutil.copytree(FIXTURES / "wic", directory / "WiC_dataset")
    rows = ["bank 0.1 0.2 0.3 0.4", "river -0.2 0.1 0.5 0.0", "money 0.3 -0.1 0.2 0.6", "the 0.0 0.1 0.0 0.1"]
    (directory / "glove.6B.300d.txt").write_text("\n".join(rows) + "\n")
    (directory / "wiki-news-300d-1M.vec").write_text(f"{len(rows)} 4\n" + "\n".join(rows) + "\n")
    return directory


def _pipeline(command: str) -> list[str]:
    """``command`` cut at its top-level ``|`` (not inside quotes or ``$(...)``)."""
    parts, current, quote, depth = [], "", None, 0
    for i, char in enumerate(command):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif command.startswith("$(", i):
            depth += 1
        elif char == ")" and depth:
            depth -= 1
        elif char == "|" and not depth:
            parts.append(current.strip())
            current = ""
            continue
        current += char
    return [*parts, current.strip()]


def _bash(script: str, cwd: Path, stdin: bytes | None = None) -> bytes:
    done = subprocess.run(["bash", "-c", script], cwd=cwd, input=stdin, capture_output=True, timeout=60)
    assert done.returncode == 0, (script, done.stderr.decode())
    return done.stdout


def run_example(example: Example, sandbox: Path, monkeypatch) -> None:
    parts = _pipeline(example.command)
    at = next(i for i, part in enumerate(parts) if re.match(r"^(\w+=\S+ )*ctxembed ", part))
    stdin = _bash(" | ".join(parts[:at]), sandbox) if at else None
    segment, redirect = parts[at], None
    found = re.search(r"\s>\s*(\S+)$", segment)
    if found:
        segment, redirect = segment[: found.start()], found[1]
    env_words = re.match(r"^((?:\w+=\S+ )*)ctxembed ", segment)
    env = dict(word.split("=", 1) for word in shlex.split(env_words[1]))
    # bash expands the words (quotes, $(cat long.txt)) exactly as a shell would, then prints them
    words = _bash(f"args() {{ printf '%s\\0' \"$@\"; }}; args {segment[env_words.end() :]}", sandbox)
    argv = words.decode().split("\0")[:-1]
    monkeypatch.chdir(sandbox)
    result = invoke(*argv, input=stdin, env={"NO_COLOR": "1", **env})
    assert result.exit_code == example.exit_code, (example, result.stdout[-2000:], result.stderr[-2000:])
    if redirect:
        (sandbox / redirect).write_text(result.stdout)
    if at + 1 < len(parts) and example.exit_code == 0:
        _bash(" | ".join(parts[at + 1 :]), sandbox, result.stdout.encode())


def _cases():
    for example in help_examples():
        yield pytest.param(example, "help", id=example.where + ": " + example.command[:60])
    for path in DOCUMENTS:
        for example in document_examples(path):
            yield pytest.param(example, path.name, id=example.where + ": " + example.command[:60])


@pytest.fixture(scope="module")
def sandboxes(tmp_path_factory):
    made = {}

    def sandbox(name: str) -> Path:
        if name not in made:
            made[name] = make_sandbox(tmp_path_factory.mktemp(f"examples-{name}"))
        return made[name]

    return sandbox


@pytest.mark.parametrize(("example", "group"), list(_cases()))
def test_example_runs(example: Example, group: str, sandboxes, monkeypatch, request):
    if example.needs == MODEL_NEEDED:
        request.getfixturevalue("minilm_folder")  # runs when installed; fails under CTXEMBED_REQUIRE_MODELS=1
    elif example.needs:
        pytest.skip(f"{example.where} needs {example.needs}")
    run_example(example, sandboxes(group), monkeypatch)


def test_every_help_and_document_has_examples_found():
    """The collector sees the examples (a broken pattern would make the test above vacuous)."""
    found = {e.where.split(":")[0] for e in help_examples()} | {
        e.where.split(":")[0] for p in DOCUMENTS for e in document_examples(p)
    }
    assert {"README.md", "docs/views.md", "docs/senses.md", "docs/training.md"} <= found
    assert {"ctxembed attend --help", "ctxembed before-after --help", "ctxembed eval wic --help"} <= found


def test_markers_are_read():
    failing = _split_marker("x", "ctxembed attend '' # fails: exit 1")
    assert failing == Example("x", "ctxembed attend ''", exit_code=1)
    assert _split_marker("x", "ctxembed eval wic /data/WiC  # needs: the WiC data").needs == "the WiC data"
    assert _pipeline("echo 'a | b' | ctxembed attend \"$(cat x | head)\" | jq .") == [
        "echo 'a | b'",
        'ctxembed attend "$(cat x | head)"',
        "jq .",
    ]


def test_model_examples_are_recognised():
    """The documented --model minilm commands carry exactly the marker that runs them when the model is
    installed (a reworded marker would quietly skip them again)."""
    needing = [e.where for p in DOCUMENTS for e in document_examples(p) if e.needs == MODEL_NEEDED]
    assert len(needing) >= 8, needing
    assert any(w.startswith("README.md") for w in needing) and any(w.startswith("docs/models.md") for w in needing)
