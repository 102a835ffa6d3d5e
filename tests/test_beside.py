"""before-after and side-by-side set their matrices side by side when the width holds them, and one
under the other when it does not."""

from __future__ import annotations

import pytest

from tests.cli_helpers import invoke, succeeds


def tops_per_line(stdout: str) -> int:
    """The most table tops (┏) on one line: how many tables stand side by side."""
    return max(line.count("┏") for line in stdout.splitlines())


@pytest.mark.parametrize(("columns", "beside"), [("80", 1), ("120", 2), ("200", 2)])
def test_before_after_sets_its_two_matrices_side_by_side_when_they_fit(columns, beside):
    stdout = succeeds(
        "before-after", "we sat on the river bank", "--layer", "0", "--color", "never", env={"COLUMNS": columns}
    ).stdout
    assert tops_per_line(stdout) == beside
    assert all(len(line) <= int(columns) for line in stdout.splitlines())


@pytest.mark.parametrize(("columns", "beside"), [("40", 1), ("120", 2)])
def test_side_by_side_sets_the_models_across_matrices_beside_each_other(columns, beside):
    stdout = invoke(  # a note on stderr names the models not installed
        "side-by-side", "we sat on the river bank", "I deposited money in the bank", "--word", "bank",
        "--color", "never", env={"COLUMNS": columns},
    ).stdout  # fmt: skip
    assert tops_per_line(stdout) == beside
