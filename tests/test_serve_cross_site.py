"""A web page of another origin cannot make `ctxembed serve` compute (issue 33 F1, F2): Debian's headless
Chromium (Playwright) opens a page served from another port on 127.0.0.1 that tries an <img>, forms
(urlencoded, text/plain holding JSON, into a frame), iframes (one sandboxed, so its Origin is null) and
fetch (no-cors, and a JSON request that needs a preflight) against the computing endpoints. The
requests reach the server, and it computes nothing. Skipped as tests/test_browser.py is."""

from __future__ import annotations

import functools
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ctxembed.serve import server as server_module
from tests import test_browser, test_serve
from tests.test_serve_safety import computed  # noqa: F401 (a fixture: the computations started)

browser = test_browser.browser  # the fixtures: Debian's chromium, a server on 127.0.0.1
server = test_serve.server

ATTACK = """<!doctype html><meta charset="utf-8"><title>another site</title>
<img src="{api}/attend?sentence=bank">
<img src="{api}/neighbors?sentence=the+bank&word=bank">
<iframe name="sink"></iframe>
<iframe src="{api}/compare?sentences=a+bank&sentences=the+bank"></iframe>
<form id="plain" method="POST" action="{api}/attend" enctype="text/plain" target="sink">
  <input name='{{"sentence": "the bank", "x": "' value='"}}'></form>
<form id="encoded" method="POST" action="{api}/neighbors" target="sink">
  <input name="sentence" value="the bank"><input name="word" value="bank"></form>
<iframe sandbox="allow-scripts allow-forms" srcdoc='<script>
  fetch("{api}/attend", {{method: "POST", mode: "no-cors", body: JSON.stringify({{sentence: "the bank"}})}});
  fetch("{api}/attend", {{method: "POST", headers: {{"Content-Type": "application/json"}},
    body: JSON.stringify({{sentence: "the bank"}})}}).catch(function () {{}});
</script>
<form id="f" method="POST" action="{api}/explain" enctype="text/plain"><input name="a" value="b"></form>
<script>document.getElementById("f").submit();</script>'></iframe>
<script>
  document.getElementById("plain").submit();
  setTimeout(function () {{ document.getElementById("encoded").submit(); }}, 300);
  fetch("{api}/compare", {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}},
    body: JSON.stringify({{sentences: ["a bank", "the bank"]}})}});
  fetch("{api}/attend", {{method: "POST", headers: {{"Content-Type": "application/json"}},
    body: JSON.stringify({{sentence: "the bank"}})}}).catch(function () {{}});
  fetch("{api}/draw?as=svg", {{method: "POST", mode: "no-cors", body: "{{}}"}});
</script>
"""


@pytest.fixture
def other_site(tmp_path, server):
    """A second server on another port of 127.0.0.1, serving the page above."""
    (tmp_path / "index.html").write_text(ATTACK.format(api=f"http://127.0.0.1:{server.port}/api"))
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *args: None
    site = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=site.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{site.server_address[1]}/index.html"
    site.shutdown()
    site.server_close()
    thread.join(10)


def test_a_page_of_another_origin_makes_the_server_compute_nothing(
    browser,
    server,
    other_site,
    computed,  # noqa: F811 - the fixture, imported above
    monkeypatch,
):
    received = []  # the API paths the server was asked for
    route = server_module.Handler._route

    def recording(handler):
        received.append(handler.path.removeprefix("/api/").split("?")[0])
        return route(handler)

    monkeypatch.setattr(server_module.Handler, "_route", recording)
    page = browser.new_page()
    try:
        page.goto(other_site)
        end = time.monotonic() + 15
        while time.monotonic() < end and not set(received) >= ATTEMPTED:
            time.sleep(0.1)
        time.sleep(1.0)  # anything still coming is answered meanwhile
    finally:
        page.close()
    assert set(received) >= ATTEMPTED, received  # the attempts reached the server
    assert computed == []


ATTEMPTED = {"attend", "neighbors", "compare", "explain", "draw"}
