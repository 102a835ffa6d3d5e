"""`ctxembed serve` under fuzzed requests, over raw sockets on 127.0.0.1: any JSON body and any header
values get one answer with a status below 500 (never a traceback), in one line of JSON with the security
headers; a request carrying a fuzzed body and a smuggled second request behind it gets exactly one
answer. Fast here (CTXEMBED_FUZZ_EXAMPLES, 25 by default); `make fuzz` runs many more."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from ctxembed.serve.server import SECURITY_HEADERS
from tests import test_serve
from tests.test_input_fuzz import FUZZ
from tests.test_serve_safety import ATTEND, JSON, exchange, raw_request, responses

server = test_serve.server  # the fixture: a real server on 127.0.0.1

ENDPOINTS = ["attend", "explain", "compare", "neighbors", "draw", "draw?as=terminal", "explain?as=terminal"]
KEYS = "sentence sentences word k top layer head preset heads layers mix abtt abtt_words projection d_out".split()
KEYS += "max_tokens oov temperature causal schema weights".split()
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=20)
    | st.sampled_from(["the river bank", "bank", "#3", "bank#2", "default", "notes", "random", "0.2,0.8"])
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)
bodies = st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), values, max_size=6)
header_text = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=60)


def one_answer(data: bytes) -> int:
    [(status, headers, body)] = responses(data)
    assert status < 500, body
    if status >= 400:
        for name, value in SECURITY_HEADERS.items():
            assert headers[name.lower()] == value
        assert body.count(b"\n") == 0 and "error" in json.loads(body)
    return status


@FUZZ
@given(endpoint=st.sampled_from(ENDPOINTS), body=bodies)
def test_any_json_body_gets_one_answer_below_500(server, endpoint, body):
    data = exchange(server, raw_request(server, "POST", f"/api/{endpoint}", json.dumps(body).encode(), JSON))
    one_answer(data)


@FUZZ
@given(
    method=st.sampled_from(["GET", "POST", "HEAD", "PUT", "OPTIONS", "DELETE", "PATCH"]),
    path=st.sampled_from(["/", "/api/attend", "/api/settings", "/api/draw", "/live.js", "/x"]),
    headers=st.dictionaries(
        st.sampled_from(["Origin", "Content-Type", "Host", "Content-Length", "Transfer-Encoding", "X-A", "Referer"]),
        header_text,
        max_size=4,
    ),
)
def test_any_headers_get_one_answer_below_500(server, method, path, headers):
    headers = {"Content-Type": "application/json", **headers}
    head = "\r\n".join(f"{k}: {v}" for k, v in headers.items())
    host = "" if "Host" in headers else f"Host: 127.0.0.1:{server.port}\r\n"
    request = f"{method} {path} HTTP/1.1\r\n{host}{head}\r\nConnection: close\r\n\r\n".encode() + ATTEND
    data = exchange(server, request, wait=10)
    if data:  # a Content-Length longer than what came: the server waits for the rest until cut
        assert data.startswith(b"HTTP/1.1 ")
        assert (int(data.split()[1]) if method == "HEAD" else one_answer(data)) < 500  # HEAD: no body to read


@FUZZ
@given(
    method=st.sampled_from(["GET", "POST", "PUT", "DELETE"]),
    path=st.sampled_from(["/", "/api/attend", "/nothing", "/api/settings"]),
    origin=st.sampled_from([None, "null", "http://evil.example"]),
    kind=st.sampled_from(["application/json", "text/plain", "application/x-www-form-urlencoded"]),
    padding=st.binary(max_size=40),
)
def test_a_refused_body_never_desyncs(server, method, path, origin, kind, padding):
    smuggled = raw_request(server, "POST", "/api/attend", ATTEND, JSON)
    headers = {"Content-Type": kind, "Connection": "keep-alive", **({"Origin": origin} if origin else {})}
    request = raw_request(server, method, path, padding + smuggled, headers)
    found = responses(exchange(server, request))
    assert len(found) == 1, [status for status, _, _ in found]
