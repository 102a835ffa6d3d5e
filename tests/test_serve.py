"""`ctxembed serve` over real HTTP on 127.0.0.1: its answers are the documents of --json, bad input gets
4xx with the command line's message, foreign Hosts and origins are refused, and it keeps serving."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from unittest import mock

import pytest

from ctxembed.serve.endpoints import MAX_BODY, Explorers
from ctxembed.serve.server import make_server
from tests.cli_helpers import SHARED_CACHE, fails, run_json, strict_json

TIMEOUT = 30  # seconds for one request: a hang fails the test instead of the suite


@pytest.fixture(scope="module")
def server():
    with mock.patch.dict(os.environ, {"CTXEMBED_CACHE_DIR": str(SHARED_CACHE)}):
        live = make_server(Explorers(), "127.0.0.1", 0)
        thread = threading.Thread(target=live.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        yield live
        live.shutdown()
        live.server_close()
        thread.join(TIMEOUT)


def request(server, method: str, path: str, body=None, *, headers=None, raw: bytes | None = None):
    """(status, parsed JSON or text) of one request on a fresh connection."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=TIMEOUT)
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    sent = {"Content-Type": "application/json", **(headers or {})}
    try:
        connection.request(method, path, body=data, headers=sent)
        response = connection.getresponse()
        text = response.read().decode()
        kind = response.getheader("Content-Type", "")
        return response.status, strict_json(text) if "json" in kind else text
    finally:
        connection.close()


def post(server, endpoint: str, body, **kwargs):
    return request(server, "POST", f"/api/{endpoint}", body, **kwargs)


def cli_error(*args, code: int) -> str:
    return fails(code, *args).removeprefix("ctxembed: error: ")


# ------------------------------------------------------------------------------ the documents of --json
def test_endpoints_module_examples():
    import doctest

    from ctxembed.serve import endpoints

    failures, tried = doctest.testmod(endpoints)
    assert tried >= 3 and failures == 0


def test_attend_is_the_cli_json_document(server):
    assert post(server, "attend", {"sentence": "Apple makes phones"}) == (
        200,
        run_json("attend", "Apple makes phones", "--json"),
    )
    expected = run_json("attend", "Apple makes phones", "--heads", "2", "--causal", "--top", "1", "--json")
    assert post(server, "attend", {"sentence": "Apple makes phones", "heads": 2, "causal": True, "top": 1}) == (
        200,
        expected,
    )
    status, doc = request(server, "GET", "/api/attend?sentence=Apple+makes+phones&heads=2&causal=true&top=1")
    assert status == 405 and "POST" in doc["error"]  # a GET computes nothing: an <img> of any page could send it


def test_explain_is_attend_explain_json(server):
    args = ["attend", "the river bank", "--preset", "textbook", "--heads", "2", "--layers", "2"]
    expected = run_json(*args, "--explain", "--layer", "0", "--head", "1", "--json")
    body = {"sentence": "the river bank", "preset": "textbook", "heads": 2, "layers": 2, "layer": 0, "head": 1}
    assert post(server, "explain", body) == (200, expected)
    assert expected["explain"]["layer"] == 0 and expected["explain"]["head"] == 1


def test_compare_and_neighbors_are_the_cli_json_documents(server):
    sentences = ["we sat on the river bank", "I deposited money in the bank"]
    expected = run_json("compare", *sentences, "--word", "bank", "--json")
    assert post(server, "compare", {"sentences": sentences, "word": "bank"}) == (200, expected)
    expected = run_json("neighbors", sentences[0], "--word", "bank", "-k", "5", "--preset", "notes", "--json")
    body = {"sentence": sentences[0], "word": "bank", "k": 5, "preset": "notes"}
    assert post(server, "neighbors", body) == (200, expected)


@pytest.mark.parametrize(
    "endpoint, body, sentences",
    [
        ("attend", {"sentence": "we sat on the river bank"}, 1),
        ("explain", {"sentence": "the river bank", "heads": 2}, 1),
        ("compare", {"sentences": ["the river bank", "money in the bank"], "word": "bank"}, 2),
        ("neighbors", {"sentence": "the river bank", "word": "bank", "k": 3}, 1),
    ],
)
def test_each_sentence_of_a_request_is_prepared_once(endpoint, body, sentences, monkeypatch):
    """The page's size check and the library call share one prepare (the check used to prepare again)."""
    from ctxembed.engine.glove import Engine
    from ctxembed.serve.endpoints import answer

    explorers = Explorers()
    answer(endpoint, body, explorers)  # opens and caches the explorer, so only the request is counted
    prepared = []
    original = Engine.prepare

    def counting(self, text, **kwargs):
        prepared.append(text)
        return original(self, text, **kwargs)

    monkeypatch.setattr(Engine, "prepare", counting)
    answer(endpoint, body, explorers)
    assert len(prepared) == sentences, prepared


def test_settings_describe_every_setting_the_page_may_send(server):
    from ctxembed.presets import SETTINGS

    status, registry = request(server, "GET", "/api/settings")
    assert status == 200
    declared = {s["name"]: s for s in registry["settings"]}
    assert set(declared) == set(SETTINGS) - {"weights_file"}  # a file is the command line's to name
    assert declared["heads"]["flag"] == "--heads" and declared["heads"]["maximum"] == 64
    assert declared["normalization"]["choices"] == ["softmax", "sum"]
    assert declared["exclude_self"]["off_flag"] == "--include-self"
    assert registry["presets"]["textbook"]["scale"] is True and registry["presets"]["notes"]["scale"] is False


# ------------------------------------------------------------------------------ bad input: 4xx, one line
def test_a_one_megabyte_sentence_gets_4xx_and_the_next_request_succeeds(server):
    status, answer = post(server, "attend", {"sentence": "the bank " * 111_112})  # 1,000,008 characters
    assert status == 400 and "characters, more than the page takes" in answer["error"]
    status, answer = post(server, "attend", {"sentence": "the bank " * 1000})  # within the page, over 512 tokens
    assert status == 422
    assert answer["error"] == cli_error("attend", "the bank " * 1000, code=1)
    assert post(server, "attend", {"sentence": "Apple makes phones"})[0] == 200


def test_a_body_over_the_limit_is_refused_unread(server):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=TIMEOUT)
    connection.putrequest("POST", "/api/attend")
    connection.putheader("Content-Type", "application/json")
    connection.putheader("Content-Length", str(100 * MAX_BODY))  # announced, never sent: answered at once
    connection.endheaders()
    response = connection.getresponse()
    assert response.status == 413 and f"{MAX_BODY:,} bytes" in json.loads(response.read())["error"]
    connection.close()
    assert post(server, "attend", {"sentence": "Apple makes phones"})[0] == 200


def test_errors_carry_the_command_lines_message(server):
    status, answer = post(server, "attend", {"sentence": "the bank", "heads": 0})
    assert (status, answer["error"]) == (400, cli_error("attend", "the bank", "--heads", "0", code=2))
    sentences = ["we sat on the river bank", "I paid the bill"]
    status, answer = post(server, "compare", {"sentences": sentences, "word": "bank"})
    assert (status, answer["error"]) == (422, cli_error("compare", *sentences, "--word", "bank", code=1))
    status, answer = post(server, "explain", {"sentence": "the bank", "layer": 3})
    assert (status, answer["error"]) == (400, cli_error("attend", "the bank", "--explain", "--layer", "3", code=2))


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"heads": 2}', "needs sentence"),
        (b'{"sentence": 3}', "sentence must be a string"),
        (b'{"sentence": "a", "colour": "red"}', "unknown key 'colour'"),
        (b'{"sentence": "a", "weights_file": "/etc/passwd"}', "cannot name files"),
        (b'{"sentence": "a", "mix": "/etc/passwd"}', "cannot name files"),
        (b'{"sentence": "a", "vectors": "/etc/passwd"}', "unknown key 'vectors'"),
        (b'{"sentence": "a", "max_tokens": 4096}', "more than the page allows"),
        (b'{"sentence": "a", "heads": true}', "--heads must be an integer"),
        (b"\xff\xfe", "not JSON"),
    ],
)
def test_bad_bodies_get_400_with_one_line(server, body, words):
    status, answer = post(server, "attend", None, raw=body)
    assert status == 400 and words in answer["error"] and "\n" not in answer["error"]


def test_compare_is_bounded_in_sentences(server):
    status, answer = post(server, "compare", {"sentences": ["the bank"] * 33})
    assert status == 400 and "more than the page's 32" in answer["error"]
    status, answer = post(server, "compare", {"sentences": ["the bank"]})
    assert (status, answer["error"]) == (400, cli_error("compare", "the bank", code=2))


# ------------------------------------------------------------------------------ safety
def test_a_foreign_host_or_origin_gets_403(server):
    body = {"sentence": "Apple makes phones"}
    assert post(server, "attend", body, headers={"Host": "evil.example"})[0] == 403
    assert post(server, "attend", body, headers={"Host": f"evil.example:{server.port}"})[0] == 403
    assert post(server, "attend", body, headers={"Host": "127.0.0.1:1"})[0] == 403
    assert request(server, "GET", "/", headers={"Host": "evil.example"})[0] == 403
    assert post(server, "attend", body, headers={"Origin": "http://evil.example"})[0] == 403
    assert post(server, "attend", body, headers={"Host": f"localhost:{server.port}"})[0] == 200
    assert post(server, "attend", body, headers={"Origin": f"http://127.0.0.1:{server.port}"})[0] == 200


def test_only_the_pages_own_files_are_served(server):
    status, page = request(server, "GET", "/")
    assert status == 200 and '<script src="/view.js">' in page and '<script src="/live.js">' in page
    status, script = request(server, "GET", "/view.js")
    assert status == 200 and "window.ctxembedView" in script
    for path in ("/../pyproject.toml", "/api/../../etc/passwd", "/ctxembed/api.py", "/web/live.js", "/%2e%2e/x"):
        assert request(server, "GET", path)[0] == 404, path
    assert request(server, "POST", "/", {})[0] == 405


def test_a_request_that_raises_is_500_and_the_server_keeps_serving(server, capfd):
    from ctxembed.serve import server as module

    real = module.answer

    def broken(endpoint, body, explorers):
        if body.get("sentence") == "boom":
            raise RuntimeError("a bug\nwith two lines")
        return real(endpoint, body, explorers)

    with mock.patch.object(module, "answer", broken):
        status, answer = post(server, "attend", {"sentence": "boom"})
        assert status == 500 and answer == {"error": "internal error: RuntimeError: a bug"}
        assert post(server, "attend", {"sentence": "Apple makes phones"})[0] == 200
    assert "internal error: RuntimeError: a bug" in capfd.readouterr().err


def test_concurrent_requests_all_get_their_own_document(server):
    sentences = [f"the bank by the river number {n}" for n in range(20)]
    bodies = [{"sentence": s, "heads": 1 + n % 2, "causal": n % 3 == 0} for n, s in enumerate(sentences)]
    expected = [post(server, "attend", body)[1] for body in bodies]  # one at a time
    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(lambda body: post(server, "attend", body), bodies * 3))
    assert answers == [(200, doc) for doc in expected * 3]


def test_draw_returns_the_saved_views_figure(server):
    from ctxembed.views.figures import build_figure
    from ctxembed.views.svg import figure_svg

    doc = run_json("compare", "we sat on the river bank", "I paid the bank", "--word", "bank", "--json")
    status, svg = request(server, "POST", "/api/draw?as=svg", doc)
    assert status == 200 and svg == figure_svg(build_figure(doc))
    status, html = request(server, "POST", "/api/draw?as=terminal", doc)
    assert status == 200 and "static" in html and "<pre" in html
    status, answer = request(server, "POST", "/api/draw?as=svg", {"schema": "ctxembed.compare/1"})
    assert status == 400 and "cannot draw" in answer["error"]


# ------------------------------------------------------------------------------ the command
def _start(*args, browser: str = "true") -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "CTXEMBED_CACHE_DIR": str(SHARED_CACHE), "BROWSER": browser}
    process = subprocess.Popen(
        [sys.executable, "-m", "ctxembed", "serve", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    line = process.stderr.readline()  # the URL, once listening
    return process, line


def test_serve_prints_its_url_on_stderr_and_stops_on_ctrl_c():
    process, line = _start()
    try:
        assert line.startswith("ctxembed serve: http://127.0.0.1:"), line
        port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
        body = json.dumps({"sentence": "Apple makes phones"})
        connection.request("POST", "/api/attend", body=body, headers={"Content-Type": "application/json"})
        assert connection.getresponse().status == 200
        connection.close()
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=TIMEOUT)
    finally:
        process.kill()
    assert process.returncode == 130 and stdout == ""
    assert stderr == "ctxembed: interrupted\n"


def test_a_client_that_resets_its_connection_leaves_stderr_quiet():
    # a browser tab closed mid-request resets the connection: the server says nothing (no traceback)
    process, line = _start()
    try:
        port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
        for partial in (
            b"GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n",
            b"GET /",
        ):
            client = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
            client.sendall(partial.replace(b"%d", str(port).encode()))
            if partial.endswith(b"\r\n\r\n"):
                assert client.recv(12) == b"HTTP/1.1 200"  # answered; the server now waits for the next request
            time.sleep(0.2)  # the server's thread is reading from the connection
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.close()  # linger 0: a reset, not a polite close
        time.sleep(0.5)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=TIMEOUT)
    finally:
        process.kill()
    assert stderr == "ctxembed: interrupted\n", stderr


def test_a_request_that_fails_otherwise_is_one_line_not_a_traceback(capsys):
    live = make_server(Explorers(), "127.0.0.1", 0)
    try:
        for problem in (ConnectionResetError(104, "reset"), BrokenPipeError(32, "pipe"), TimeoutError(), KeyError("x")):
            try:
                raise problem
            except Exception:  # as socketserver calls handle_error: inside the except
                live.handle_error(None, ("127.0.0.1", 5555))
    finally:
        live.server_close()
    err = capsys.readouterr().err
    assert err == "ctxembed serve: a request from 127.0.0.1 failed (KeyError: 'x')\n", err


def test_serve_beyond_loopback_warns_loudly():
    process, line = _start("--host", "0.0.0.0")
    try:
        warning = process.stderr.readline()
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=TIMEOUT)
    assert line.startswith("ctxembed serve: http://0.0.0.0:") and warning.startswith("WARNING: ")
    assert process.returncode == 143


def test_a_port_in_use_is_one_line():
    process, line = _start()
    try:
        port = line.split("http://127.0.0.1:")[1].split("/")[0]
        start = time.perf_counter()
        message = fails(1, "serve", "--port", port)
        assert f"127.0.0.1:{port} is in use" in message and time.perf_counter() - start < TIMEOUT
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=TIMEOUT)


def test_open_hands_the_url_to_the_default_browser(tmp_path):
    opened = tmp_path / "opened"
    browser = tmp_path / "browser"
    browser.write_text(f'#!/bin/sh\necho "$1" > {opened}\n')
    browser.chmod(0o755)
    process, line = _start("--open", browser=str(browser))
    try:
        url = line.split("ctxembed serve: ")[1].split()[0]
        end = time.monotonic() + TIMEOUT
        while not (opened.exists() and opened.read_text().strip()) and time.monotonic() < end:
            time.sleep(0.05)
        assert opened.read_text().strip() == url
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=TIMEOUT)
