"""One cost budget (ctxembed.budget.CostBudget), checked before anything is allocated, for the command line,
the Python API and the server alike (issue 33 F6): the reproductions that took gigabytes are refused at
once with the settings to lower, and what the budget admits runs."""

from __future__ import annotations

import resource
import time

import pytest

from ctxembed.api import Explorer
from ctxembed.budget import BUDGET, check_cost, check_drawn, projection_numbers
from ctxembed.errors import SettingError, UsageError
from ctxembed.serve.endpoints import answer
from tests import test_serve
from tests.cli_helpers import fails

server = test_serve.server  # the fixture: a real server on 127.0.0.1

LONG = " ".join(["we", "sat", "on", "the", "river", "bank"] * 86)[: 512 * 4]  # about 512 tokens


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_large_random_projections_are_refused_before_they_are_drawn():
    started = time.monotonic()
    message = fails(
        2, "attend", "the bank", "--projection", "random", "--d-out", "4096", "--heads", "3", "--layers", "2",
        "--mix", "off",
    )  # fmt: skip
    assert "projection numbers, more than the budget's" in message and "--d-out" in message
    assert time.monotonic() - started < 10  # was 32 s and 5.4 GB
    assert projection_numbers(100, 4096, 3, 2, False) > BUDGET.parameters


def test_the_page_cannot_ask_for_gigabytes_of_weights(server):
    before = peak_mb()
    started = time.monotonic()
    body = {"sentences": [LONG, LONG], "heads": 20, "layers": 48}
    status, reply = test_serve.post(server, "compare", body)
    assert status == 422 and "of attention weights" in reply["error"] and "--layers" in reply["error"]
    assert time.monotonic() - started < 5 and peak_mb() - before < 200  # was 10.4 s and 3.14 GB


def test_a_run_is_checked_as_a_whole_before_it_starts():
    explorer = Explorer(heads=4, layers=8, mix="off")
    with pytest.raises(SettingError, match="attention weights, more than the budget"):
        explorer.compare([LONG] * 10)  # each sentence alone fits; the ten do not
    assert explorer.compare(["the river bank", "the bank"]).document()["schema"].startswith("ctxembed.compare/")


def test_the_budget_counts_weights_work_and_layer_outputs():
    fits = {"heads": 1, "layers": 1, "head_size": 100, "width": 100, "parameters": 0, "kept_layers": 1}
    check_cost([512], **fits)
    with pytest.raises(SettingError, match="attention weights"):
        check_cost([5000], **fits)
    with pytest.raises(SettingError, match="multiply-adds"):
        check_cost([512], **{**fits, "parameters": BUDGET.work // 500})
    with pytest.raises(SettingError, match="layer output numbers"):
        check_cost([512] * 20, **{**fits, "width": 4096, "kept_layers": 4})
    with pytest.raises(SettingError, match="attention weights"):
        check_cost([512], **fits, copies=BUDGET.weights)


def test_the_step_by_step_view_is_bounded_for_the_page_and_the_command_line(server):
    check_drawn(80)
    with pytest.raises(UsageError, match="cells per matrix"):
        check_drawn(81)
    sentence = " ".join(["the", "river", "bank"] * 40)  # 120 tokens: a page's explain past 80 tokens
    status, reply = test_serve.request(server, "POST", "/api/explain?as=terminal&width=100", {"sentence": sentence})
    assert status == 400 and "cells per matrix" in reply["error"]  # not 413, and not a minute of drawing
    short = " ".join(["the", "river", "bank"] * 20)
    status, html = test_serve.request(server, "POST", "/api/explain?as=terminal&width=100", {"sentence": short})
    assert status == 200 and "step by step" in html
    assert "cells per matrix" in fails(2, "attend", sentence, "--explain")


def test_heavy_requests_do_not_hold_up_light_ones(server):
    import threading

    heavy = {"sentences": [LONG] * 8, "heads": 4, "layers": 2, "mix": "off"}
    done = threading.Event()
    thread = threading.Thread(target=lambda: (test_serve.post(server, "compare", heavy), done.set()))
    thread.start()
    time.sleep(0.05)
    started = time.monotonic()
    status, _ = test_serve.post(server, "attend", {"sentence": "we sat on the river bank"})
    light = time.monotonic() - started
    thread.join(60)
    assert status == 200 and light < 2.0  # the heavy lane's own queue; a shared machine gets slack


def test_the_server_and_the_api_answer_alike():
    from ctxembed.serve.endpoints import Explorers

    with pytest.raises(SettingError) as server_error:
        answer("attend", {"sentence": "the bank", "projection": "random", "d_out": 4096, "heads": 8}, Explorers())
    with pytest.raises(SettingError) as api_error:
        Explorer(projection="random", d_out=4096, heads=8)
    assert server_error.value.message == api_error.value.message
