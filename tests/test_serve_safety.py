"""`ctxembed serve` is safe to leave running while browsing: raw sockets on 127.0.0.1 against a real server.

Computing endpoints take only a same-origin (or Origin-less) POST of JSON; every answer, the standard
library's own errors included, is one line of JSON with the security headers; a refused body is never
read as a second request; idle and trickling clients are cut; the cache folder does not grow from
requests; malformed values are 400, never 500. Each test fails without the fix it names (issue 33)."""

from __future__ import annotations

import json
import socket
import time

import orjson
import pytest

from ctxembed.budget import CostBudget
from ctxembed.serve import endpoints
from ctxembed.serve import server as server_module
from ctxembed.serve.endpoints import Explorers
from ctxembed.serve.server import MAX_LOG, SECURITY_HEADERS
from tests import test_serve

TIMEOUT = 20  # seconds any one socket waits: a hang fails the test, not the suite


server = test_serve.server  # the fixture: a real server on 127.0.0.1, any free port


@pytest.fixture
def computed(monkeypatch):
    """What the server computes (calls of endpoints.answer and of endpoints.drawing), by endpoint."""
    calls = []
    answer, drawing = server_module.answer, server_module.drawing

    def counting_answer(endpoint, body, explorers):
        calls.append(endpoint)
        return answer(endpoint, body, explorers)

    def counting_drawing(doc, kind, width=100):
        calls.append("draw")
        return drawing(doc, kind, width)

    monkeypatch.setattr(server_module, "answer", counting_answer)
    monkeypatch.setattr(server_module, "drawing", counting_drawing)
    return calls


def exchange(server, data: bytes, *, wait: float = TIMEOUT) -> bytes:
    """Send raw bytes, read until the server closes the connection (or ``wait`` passes)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=wait) as sock:
        sock.sendall(data)
        received = b""
        end = time.monotonic() + wait
        while time.monotonic() < end:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            received += chunk
        return received


def raw_request(server, method: str, path: str, body: bytes = b"", headers: dict | None = None, version="HTTP/1.1"):
    head = {"Host": f"127.0.0.1:{server.port}", "Connection": "close", **(headers or {})}
    if body or method == "POST":
        head.setdefault("Content-Length", str(len(body)))
    lines = [f"{method} {path} {version}", *(f"{k}: {v}" for k, v in head.items()), "", ""]
    return "\r\n".join(lines).encode("latin-1") + body


def responses(data: bytes) -> list[tuple[int, dict, bytes]]:
    """Every HTTP response in ``data``: (status, headers lower-cased, body)."""
    found = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        assert lines[0].startswith("HTTP/1."), lines[0]
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        size = int(headers.get("content-length", "0"))
        found.append((status, headers, rest[:size]))
        data = rest[size:]
    return found


def one_error(data: bytes, status: int) -> str:
    """The one response in ``data``: ``status``, the security headers, one line of JSON; its message."""
    [(got, headers, body)] = responses(data)
    assert got == status, (got, body)
    for name, value in SECURITY_HEADERS.items():
        assert headers[name.lower()] == value
    assert headers["content-type"] == "application/json"
    assert body.count(b"\n") == 0 and b"<" not in body
    return orjson.loads(body)["error"]


ATTEND = json.dumps({"sentence": "the river bank"}).encode()
JSON = {"Content-Type": "application/json"}


# ------------------------------------------------------------------------------ F1: cross-site requests
def test_a_get_of_a_computing_endpoint_computes_nothing(server, computed):
    for path in ("/api/attend?sentence=bank", "/api/compare?sentences=a&sentences=b", "/api/neighbors?sentence=a"):
        message = one_error(exchange(server, raw_request(server, "GET", path)), 405)
        assert "POST" in message
    assert computed == []


def test_foreign_and_null_origins_are_refused(server, computed):
    for origin in ("null", "http://evil.example", f"http://127.0.0.1:{server.port + 1}", "https://127.0.0.1"):
        data = exchange(server, raw_request(server, "POST", "/api/attend", ATTEND, {**JSON, "Origin": origin}))
        assert "not accepted" in one_error(data, 403)
    assert computed == []
    own = {**JSON, "Origin": f"http://127.0.0.1:{server.port}"}
    for headers in (own, JSON):  # the page itself, and curl or a script (no Origin)
        [(status, _, body)] = responses(exchange(server, raw_request(server, "POST", "/api/attend", ATTEND, headers)))
        assert status == 200 and orjson.loads(body)["schema"].startswith("ctxembed.attend/")
    assert computed == ["attend", "attend"]


def test_only_json_bodies_are_computed(server, computed):
    for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None):
        headers = {"Content-Type": kind} if kind else {}
        data = exchange(server, raw_request(server, "POST", "/api/attend", ATTEND, headers))
        assert "application/json" in one_error(data, 415)
    assert computed == []


# ------------------------------------------------------------------------------ F2: desync
@pytest.mark.parametrize(
    "method, path, headers",
    [
        ("POST", "/api/attend", {**JSON, "Origin": "http://evil.example"}),  # 403
        ("POST", "/nothing", JSON),  # 404
        ("GET", "/api/attend", JSON),  # 405
        ("PUT", "/api/attend", JSON),  # 405
        ("POST", "/api/attend", {"Content-Type": "text/plain"}),  # 415
    ],
)
def test_a_refused_body_is_never_read_as_a_second_request(server, computed, method, path, headers):
    smuggled = raw_request(server, "POST", "/api/attend", ATTEND, JSON)
    request = raw_request(server, method, path, smuggled, {**headers, "Connection": "keep-alive"})
    found = responses(exchange(server, request))
    assert len(found) == 1 and found[0][0] >= 400, found
    assert found[0][1]["connection"] == "close"
    assert computed == []


def test_keep_alive_goes_on_after_a_read_body(server):
    first = raw_request(server, "POST", "/api/attend", ATTEND, {**JSON, "Connection": "keep-alive"})
    found = responses(exchange(server, first + raw_request(server, "POST", "/api/attend", ATTEND, JSON)))
    assert [status for status, _, _ in found] == [200, 200]


# ------------------------------------------------------------------------------ F8: one error path
@pytest.mark.parametrize(
    "request_bytes, status",
    [
        (b"OPTIONS /api/attend HTTP/1.1\r\nHost: {host}\r\n\r\n", 405),
        (b"DELETE / HTTP/1.1\r\nHost: {host}\r\n\r\n", 405),
        (b"PUT /api/attend HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\n\r\n", 405),
        (b"BREW / HTTP/1.1\r\nHost: {host}\r\n\r\n", 501),
        (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: {host}\r\n\r\n", 414),
        (b"GET / HTTP/1.1\r\nHost: {host}\r\nX: " + b"a" * 70_000 + b"\r\n\r\n", 431),
        (b"GET / HTTP/1.1\r\nHost: {host}\r\n" + b"X: y\r\n" * 150 + b"\r\n", 431),
        (b"GET / HTTP/x\r\nHost: {host}\r\n\r\n", 400),
        (b"GET / HTTP/2.0\r\nHost: {host}\r\n\r\n", 505),
        (b"GET /\r\n\r\n", 400),  # HTTP/0.9: no headers, no Host to check
        (b"GET /nothing HTTP/1.1\r\nHost: {host}\r\n\r\n", 404),
        (b"GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n", 403),
        (b"POST /api/attend HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
         b"Content-Length: 99999999\r\n\r\n", 413),
    ],
)  # fmt: skip
def test_every_error_is_one_line_of_json_with_the_security_headers(server, request_bytes, status):
    data = exchange(server, request_bytes.replace(b"{host}", f"127.0.0.1:{server.port}".encode()))
    assert one_error(data, status)


def test_head_gets_the_headers_without_a_body(server):
    data = exchange(server, raw_request(server, "HEAD", "/"))
    assert data.endswith(b"\r\n\r\n")
    headers = {k.lower(): v for k, _, v in (line.partition(": ") for line in data.decode().split("\r\n")[1:] if line)}
    assert int(headers["content-length"]) > 0 and headers["x-content-type-options"] == "nosniff"
    assert data.startswith(b"HTTP/1.1 200")


def test_log_lines_are_bounded_and_escaped(server, capfd):
    path = "/%1b[31m" + "\x1b[2J" + "a" * 5000
    exchange(server, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nConnection: close\r\n\r\n".encode())
    lines = [line for line in capfd.readouterr().err.splitlines() if "ctxembed serve:" in line]
    assert lines and all(len(line) <= MAX_LOG + 40 for line in lines)
    assert all("\x1b" not in line for line in lines)


# ------------------------------------------------------------------------------ F9: connections
def test_idle_connections_do_not_starve_a_new_one(server):
    idle = [socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) for _ in range(1500)]
    try:
        started = time.monotonic()
        [(status, _, _)] = responses(exchange(server, raw_request(server, "POST", "/api/attend", ATTEND, JSON)))
        assert status == 200 and time.monotonic() - started < 5
        assert len(server.waiting) <= server_module.MAX_CONNECTIONS
    finally:
        for sock in idle:
            sock.close()


def test_a_trickling_client_is_cut(server, monkeypatch):
    monkeypatch.setattr(server_module, "HEADER_TIMEOUT", 1.0, raising=False)
    request = raw_request(server, "GET", "/")
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as sock:
        started = time.monotonic()
        closed = False
        for byte in request:
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                closed = True
                break
            time.sleep(0.1)  # ten bytes a second: each within any per-read timeout
            if time.monotonic() - started > 8:
                break
        if not closed:
            sock.settimeout(5)
            closed = sock.recv(100) == b""
    assert closed and time.monotonic() - started < 8


def test_a_silent_connection_is_closed_after_the_idle_timeout(server, monkeypatch):
    monkeypatch.setattr(server_module, "IDLE_TIMEOUT", 0.5, raising=False)
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT) as sock:
        started = time.monotonic()
        assert sock.recv(100) == b""
        assert time.monotonic() - started < 5


# ------------------------------------------------------------------------------ F5: never a 500
@pytest.mark.parametrize(
    "endpoint, body",
    [
        ("attend", {"sentence": "the bank", "preset": ["default"]}),
        ("attend", {"sentence": "the bank", "preset": {"a": 1}}),
        ("attend", {"sentence": "the bank", "heads": [[1]]}),
        ("attend", {"sentence": "the bank", "preset": "nonesuch"}),
        ("neighbors", {"sentence": "the river bank", "word": "#" + "7" * 5000}),
        ("compare", {"sentences": ["the bank", "a bank"], "word": "bank#" + "1" * 5000}),
    ],
)
def test_malformed_values_are_400_with_one_line(server, endpoint, body):
    data = exchange(server, raw_request(server, "POST", f"/api/{endpoint}", json.dumps(body).encode(), JSON))
    assert one_error(data, 400)


@pytest.mark.parametrize("kind", ["svg", "terminal"])
def test_a_drawn_document_with_a_non_string_neighbour_or_a_huge_weight_is_400(server, kind):
    _, neighbours = test_serve.post(server, "neighbors", {"sentence": "the river bank", "word": "bank"})
    neighbours["static"][0]["word"] = 5
    _, attention = test_serve.post(server, "attend", {"sentence": "the river bank"})
    attention["weights"][0][0][0][1] = 1e308
    for doc in (neighbours, attention):
        status, reply = test_serve.request(server, "POST", f"/api/draw?as={kind}", doc)
        assert status in (200, 400), (status, reply)  # drawn, or one line: never 500
        assert status == 200 or ("cannot draw" in reply["error"] and "\n" not in reply["error"])


def test_a_key_nested_1000_deep_is_400(server):
    for endpoint, key in (("attend", "heads"), ("draw", "weights")):
        nested = "[" * 1000 + "1" + "]" * 1000
        body = f'{{"sentence": "the bank", "{key}": {nested}}}'.encode()
        data = exchange(server, raw_request(server, "POST", f"/api/{endpoint}", body, JSON))
        assert one_error(data, 400)


# ------------------------------------------------------------------------------ F10: the cache folder
def test_requests_cannot_grow_the_cache_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXEMBED_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(endpoints, "BUDGET", CostBudget(server_cache_files=3))
    explorers = Explorers()
    for words in range(100, 110):
        endpoints.answer("attend", {"sentence": "the bank", "abtt_words": words}, explorers)
    assert len(list(tmp_path.glob("stats-*.npz"))) == 3
    assert len(explorers.written) == 3
