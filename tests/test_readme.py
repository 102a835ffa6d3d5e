"""README.md stays a newcomer's page: short, starting with the two commands, and about the tool, not
about how the project is made (detail belongs in docs/)."""

from __future__ import annotations

import re

from tests.conftest import REPO

README = REPO / "README.md"
LIMIT = 15_360  # bytes

# Words about the project's own process, which mean nothing to a person who meets the tool.
PROCESS = re.compile(
    r"\bissue\s*#?\d+|#\d{2,}\b|\bwave\b|\bsession\b|\bclosing note|\bnewcomer|\bthe lead\b|\bsprint\b",
    re.IGNORECASE,
)


def test_readme_is_short():
    size = len(README.read_bytes())
    assert size < LIMIT, f"README.md is {size:,} bytes, the limit is {LIMIT:,}: move detail into docs/"


def test_readme_starts_with_make_run_and_make_test():
    lines = README.read_text(encoding="utf-8").splitlines()
    block = lines[lines.index("```sh") + 1 : lines.index("```")]
    assert [line.split()[:2] for line in block] == [["make", "run"], ["make", "test"]]
    assert lines.index("```sh") < 5


def test_readme_says_nothing_of_the_process():
    text = README.read_text(encoding="utf-8")
    found = [m.group(0) for m in PROCESS.finditer(text)]
    assert not found, found


def test_the_process_pattern_catches_what_it_should():
    for phrase in ("fixed in issue 44", "the third wave", "this session", "see the closing note", "#123"):
        assert PROCESS.search(phrase), phrase
    for phrase in ("make test", "bank#2", "the river bank", "# needs: the WiC data"):
        assert not PROCESS.search(phrase), phrase


def test_docs_give_the_pipe_width_the_code_uses():
    from ctxembed.output import PIPE_WIDTH

    views = (REPO / "docs" / "views.md").read_text(encoding="utf-8")
    assert f"else {PIPE_WIDTH} columns" in views and "160 columns" not in views
    assert f"else {PIPE_WIDTH} columns" in README.read_text(encoding="utf-8")
