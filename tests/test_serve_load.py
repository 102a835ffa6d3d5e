"""`ctxembed serve` under load keeps answering (issue 45): bounded lanes refuse what they cannot take with
503, a JSON line and Retry-After; the page and its settings stay reachable while heavy work queues; a
heavy side by side holds no lock a light request needs; and after 200 simultaneous connections, mixed
GloVe and MiniLM, every endpoint answers at once. Loopback only, bounded in count and time: every
socket has a timeout, so a stuck server fails these tests instead of hanging the suite."""

from __future__ import annotations

import doctest
import json
import os
import socket
import threading
import time
from collections import Counter
from unittest import mock

import orjson
import pytest

from ctxembed.serve import endpoints, lanes
from ctxembed.serve import server as server_module
from ctxembed.serve.endpoints import Explorers
from ctxembed.serve.lanes import HEAVY, LIGHT, Busy, Lane
from ctxembed.serve.server import SECURITY_HEADERS, make_server
from tests.cli_helpers import SHARED_CACHE
from tests.test_serve_safety import raw_request, responses

WAIT = 30  # seconds any one socket waits: a stuck server fails the test, never hangs the suite
JSON = {"Content-Type": "application/json"}


@pytest.fixture
def live():
    """A fresh server on 127.0.0.1 (any free port) whose lanes start empty; stopped without waiting
    forever, so a server stuck by a reverted fix fails the test rather than hanging at teardown."""
    with mock.patch.dict(os.environ, {"CTXEMBED_CACHE_DIR": str(SHARED_CACHE)}):
        server = make_server(Explorers(), "127.0.0.1", 0)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        yield server
        stopper = threading.Thread(target=server.shutdown, daemon=True)
        stopper.start()
        stopper.join(5)
        server.server_close()


def exchange(server, method: str, path: str, body=None, *, wait: float = WAIT) -> tuple[int, dict, bytes, float]:
    """One request on a fresh connection: (status, headers, body, seconds); status 0 when the server
    closed the connection unanswered or did not answer within ``wait``."""
    data = b"" if body is None else json.dumps(body).encode()
    request = raw_request(server, method, path, data, JSON if body is not None else None)
    started = time.monotonic()
    received = b""
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=wait) as sock:
            sock.sendall(request)
            while chunk := sock.recv(65536):
                received += chunk
    except OSError:  # a reset, or the timeout
        pass
    seconds = time.monotonic() - started
    found = responses(received) if received.startswith(b"HTTP/1.") else []
    if not found:
        return 0, {}, b"", seconds
    status, headers, content = found[0]
    return status, headers, content, seconds


def check_busy(headers: dict, content: bytes) -> None:
    """A refusal: one line of JSON saying the server is busy, the security headers and Retry-After."""
    assert int(headers["retry-after"]) >= 1
    assert headers["content-type"] == "application/json"
    assert all(headers[name.lower()] == value for name, value in SECURITY_HEADERS.items())
    assert b"\n" not in content and orjson.loads(content)["error"].startswith("the server is busy")


@pytest.fixture
def held(monkeypatch):
    """Work that waits until the test releases it: every document computed while ``held.hold`` is set
    waits for ``held.release`` (at most WAIT s), so a lane stays full exactly as long as a test needs."""
    document = endpoints._document
    held = type("Held", (), {})()
    held.hold, held.release, held.started = threading.Event(), threading.Event(), threading.Semaphore(0)
    held.which = lambda explorer: True  # which work is held

    def waiting_document(endpoint, own, explorer):
        if held.hold.is_set() and held.which(explorer):
            held.started.release()
            held.release.wait(WAIT)
        return document(endpoint, own, explorer)

    monkeypatch.setattr(endpoints, "_document", waiting_document)
    yield held
    held.release.set()


HEAVY_ATTEND = {"sentence": "we sat on the river bank", "heads": 4, "layers": 5}  # 20 heads x layers: heavy


# ------------------------------------------------------------------------------ the lanes
def test_lanes_module_examples():
    failures, tried = doctest.testmod(lanes)
    assert tried >= 2 and failures == 0


def test_a_queued_request_waits_a_bounded_time_then_is_refused():
    lane = Lane("heavy", workers=1, waiting=1, wait=0.3, retry_after=5)
    with lane.slot():
        started = time.monotonic()
        with pytest.raises(Busy, match="waited 0.3 s") as refused:
            with lane.slot():
                pass
        assert 0.25 < time.monotonic() - started < 3 and refused.value.retry_after == 5
    with lane.slot():  # the worker is free again
        pass
    assert lane.counts() == {"workers": 1, "queue": 1, "running": 0, "waiting": 0, "served": 2, "refused": 1}


def test_a_full_heavy_lane_refuses_at_once_while_the_page_and_settings_answer(live, held):
    """70 heavy requests at once (the issue's 70 queued MiniLM requests, here GloVe with 20 heads x
    layers): one runs, 8 wait, the other 61 get 503 at once; the page and its settings answer meanwhile."""
    held.which = lambda explorer: explorer.settings.attention.layers == 5
    held.hold.set()
    answers: list = [None] * 70

    def heavy(number: int) -> None:
        answers[number] = exchange(live, "POST", "/api/attend", HEAVY_ATTEND)

    threads = [threading.Thread(target=heavy, args=(n,), daemon=True) for n in range(70)]
    for thread in threads:
        thread.start()
    assert held.started.acquire(timeout=WAIT)  # one is running (and waits)
    end = time.monotonic() + WAIT
    while sum(a is not None for a in answers) < 61 and time.monotonic() < end:
        time.sleep(0.05)
    refused = [a for a in answers if a is not None]
    assert len(refused) == 61 and all(a[0] == 503 and a[3] < 10 for a in refused)
    for _, headers, content, _ in refused:
        check_busy(headers, content)
    for path in ("/", "/live.js", "/api/settings"):
        status, _, content, seconds = exchange(live, "GET", path, wait=5)
        assert status == 200 and seconds < 1, (path, status, seconds)
    load = orjson.loads(content)["load"]
    assert load["heavy"]["running"] == 1 and load["heavy"]["waiting"] == 8 and load["heavy"]["refused"] == 61
    status, _, _, seconds = exchange(live, "POST", "/api/attend", {"sentence": "a light one"}, wait=5)
    assert status == 200 and seconds < 1  # the light lane is not the heavy one's queue
    held.hold.clear()
    held.release.set()
    for thread in threads:
        thread.join(WAIT)
    assert Counter(a[0] for a in answers) == {503: 61, 200: 9}


def test_past_every_connection_the_page_is_served_and_work_refused(live, held, monkeypatch):
    """All connections busy computing: a new one still gets the page and the settings (the overflow
    lane), and a computing request there is 503 with Retry-After, counted under load.connections."""
    monkeypatch.setattr(server_module, "MAX_CONNECTIONS", 3)
    held.hold.set()
    busy = [
        threading.Thread(target=exchange, args=(live, "POST", "/api/attend", {"sentence": f"bank {n}"}), daemon=True)
        for n in range(3)
    ]
    for thread in busy:
        thread.start()
    assert held.started.acquire(timeout=WAIT)
    end = time.monotonic() + WAIT
    while time.monotonic() < end and list(live.waiting.values()) != [None] * 3:
        time.sleep(0.02)  # each connection is being answered (the first computes, the others wait for its lock)
    assert list(live.waiting.values()) == [None] * 3
    for path in ("/", "/api/settings"):
        status, headers, content, seconds = exchange(live, "GET", path, wait=5)
        assert status == 200 and seconds < 1 and headers["connection"] == "close", (path, status)
    assert orjson.loads(content)["load"]["connections"]["open"] == 3
    status, headers, content, seconds = exchange(live, "POST", "/api/attend", {"sentence": "bank"}, wait=5)
    assert status == 503 and seconds < 1
    check_busy(headers, content)
    assert live.load()["connections"]["overflow"] == 1
    held.release.set()
    for thread in busy:
        thread.join(WAIT)
    assert exchange(live, "POST", "/api/attend", {"sentence": "bank"}, wait=5)[0] == 200


def test_a_light_request_waits_under_a_second_behind_a_heavy_side_by_side(live, monkeypatch):
    """A side by side holds the views' explorers while it runs (the issue's took 44.8 s); the page's light
    requests have explorers of their own, so none waits for it."""
    holding, release = threading.Event(), threading.Event()

    def slow_side_by_side(sentences, word, *, open_view, **kwargs):
        open_view("glove", "default")  # what the page's GloVe attend uses, held as the real one holds it
        holding.set()
        release.wait(WAIT)
        return type("Result", (), {"document": lambda self: {"schema": "test"}})()

    monkeypatch.setattr(endpoints, "side_by_side", slow_side_by_side)
    body = {"sentences": ["a bank"], "word": "bank"}
    heavy = threading.Thread(target=exchange, args=(live, "POST", "/api/side-by-side", body), daemon=True)
    heavy.start()
    try:
        assert holding.wait(WAIT)
        for endpoint, body in [
            ("attend", {"sentence": "we sat on the river bank"}),
            ("explain", {"sentence": "we sat on the river bank"}),
            ("compare", {"sentences": ["the river bank", "the bank loan"], "word": "bank"}),
        ]:
            status, _, _, seconds = exchange(live, "POST", f"/api/{endpoint}", body, wait=5)
            assert status == 200 and seconds < 1, (endpoint, status, seconds)
    finally:
        release.set()
        heavy.join(WAIT)


# ------------------------------------------------------------------------------ 200 at once
def compare_body(number: int) -> dict:
    sentences = [f"we sat on the river bank and watched the water go by {number} {n}" for n in range(12)]
    return {"model": "minilm", "sentences": sentences, "word": "bank"}


def test_200_simultaneous_requests_then_every_endpoint_answers_at_once(live, minilm_folder):
    """100 MiniLM compares and 100 GloVe attends at once (the issue's 100 left the server stuck for good):
    each is answered, 200 or 503 with Retry-After, within the lanes' bounds; then every endpoint answers."""
    answers: list = [None] * 200

    def one(number: int) -> None:
        if number < 100:  # heavy first: the MiniLM ones fill the heavy lane while the light ones arrive
            answers[number] = exchange(live, "POST", "/api/compare", compare_body(number))
        else:
            answers[number] = exchange(live, "POST", "/api/attend", {"sentence": f"the river bank {number}"})

    threads = [threading.Thread(target=one, args=(n,), daemon=True) for n in range(200)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT + 5)
    statuses = Counter(a[0] if a else None for a in answers)
    assert set(statuses) <= {200, 503} and statuses[200] >= 10, statuses
    for status, headers, content, _ in answers:
        if status == 503:
            check_busy(headers, content)
    assert time.monotonic() - started < WAIT
    every = [
        ("GET", "/", None),
        ("GET", "/view.js", None),
        ("GET", "/api/settings", None),
        ("POST", "/api/attend", {"sentence": "we sat on the river bank"}),
        ("POST", "/api/explain", {"sentence": "we sat on the river bank"}),
        ("POST", "/api/compare", {"sentences": ["the river bank", "the bank loan"], "word": "bank"}),
        ("POST", "/api/neighbors", {"sentence": "we sat on the river bank", "word": "bank"}),
        ("POST", "/api/attend", {"sentence": "we sat on the river bank", "model": "minilm"}),
        ("POST", "/api/side-by-side", {"sentences": ["the river bank"], "word": "bank"}),
        ("POST", "/api/draw?as=svg", "the attend document above"),
    ]
    attended = b""
    for method, path, body in every:
        if path == "/api/draw?as=svg":
            body = orjson.loads(attended)
        status, _, content, seconds = exchange(live, method, path, body, wait=10)
        assert status == 200 and seconds < 5, (path, status, seconds)
        if path == "/api/attend":
            attended = content
    load = live.load()
    assert load[LIGHT]["running"] == load[HEAVY]["running"] == 0 and load["connections"]["open"] <= 1
