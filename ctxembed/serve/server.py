"""The HTTP server of ``ctxembed serve``: the standard library's ``ThreadingHTTPServer``, one thread a
connection, no dependency. Routes (docs/serve.md):

- ``GET /``: the page; ``GET /live.js``, ``/live.css``, ``/view.js``, ``/view.css``: its files, from
  the package (a fixed list: no path of a request ever reaches the file system);
- ``GET /api/settings``: the settings' declarations the page builds its controls from;
- ``POST /api/attend|explain|compare|neighbors`` (a JSON body) and ``GET`` with query parameters: the
  ``--json`` document (:mod:`ctxembed.serve.endpoints`);
- ``POST /api/draw?as=svg|terminal``: a posted document drawn by ctxembed's renderers.

Safety: requests whose Host header is not this server (DNS rebinding) get 403, so do cross-origin
posts; bodies are bounded; an error is a status and ``{"error": "one line"}``; a request that raises
is logged to stderr as one line and answered 500, and the server keeps serving.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import sys
import webbrowser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

from ctxembed.errors import CtxembedError, DataError, UsageError
from ctxembed.output import dumps, say
from ctxembed.serve.endpoints import ENDPOINTS, MAX_BODY, Explorers, answer, drawing, from_query, registry
from ctxembed.settings import flag

# path -> (package, file, content type): everything the page loads
ASSETS = {
    "/": ("ctxembed.serve", "live.html", "text/html; charset=utf-8"),
    "/live.js": ("ctxembed.serve", "live.js", "text/javascript; charset=utf-8"),
    "/live.css": ("ctxembed.serve", "live.css", "text/css; charset=utf-8"),
    "/view.js": ("ctxembed.views", "view.js", "text/javascript; charset=utf-8"),
    "/view.css": ("ctxembed.views", "view.css", "text/css; charset=utf-8"),
}
# The page loads only its own files; styles may be set inline (the view colours its cells so).
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name) is this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class LiveServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer holding the explorers and the Host names it answers to."""

    daemon_threads = True  # Ctrl-C does not wait for open connections
    request_queue_size = 128  # connections waiting to be accepted (socketserver's 5 resets a burst of 20)
    block_on_close = False

    def __init__(self, host: str, port: int, explorers: Explorers):
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.explorers = explorers
        super().__init__((host.strip("[]"), port), Handler)
        self.host = host
        self.port = self.server_address[1]  # the chosen one when port was 0
        shown = f"[{host.strip('[]')}]" if ":" in host else host
        self.url = f"http://{shown}:{self.port}/"
        names = {shown.lower(), "localhost"}
        if is_loopback(host):
            names |= {"127.0.0.1", "[::1]"}
        else:
            names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
        self.names = names

    def handle_error(self, request, client_address) -> None:
        """A request that failed outside the handler's own answers (socketserver prints a traceback
        here). A client that went away (a closed tab resets its connection; a broken pipe; a silent
        one timed out) is no news: nothing is said. Anything else is one line on stderr."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            return
        say(f"ctxembed serve: a request from {client_address[0]} failed ({type(exc).__name__}: {exc})")

    def host_allowed(self, header: str | None) -> bool:
        """The Host header names this server: one of its names (any IP literal when it listens beyond
        loopback: a literal address involves no DNS) with its port."""
        if not header:
            return False
        name, _, port = header.strip().lower().rpartition(":")
        if not name or "]" in port:  # no port given ("example.com" or "[::1]")
            name, port = header.strip().lower(), "80"
        if port != str(self.port):
            return False
        if name in self.names:
            return True
        if is_loopback(self.host):
            return False
        try:
            ipaddress.ip_address(name.strip("[]"))
            return True
        except ValueError:
            return False


class Handler(BaseHTTPRequestHandler):
    server: LiveServer
    server_version = "ctxembed"
    sys_version = ""
    protocol_version = "HTTP/1.1"  # keep-alive: the page sends a request per keystroke pause
    timeout = 30  # seconds a connection may stay silent: a stalled client does not hold a thread forever

    def setup(self) -> None:
        # Headers and body are two writes: without TCP_NODELAY, Nagle's algorithm holds the body until the
        # client's delayed ACK of the headers, 40 ms later on Linux (measured: 44 ms a request, not 1 ms).
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().setup()

    # -------------------------------------------------------------------------- routing
    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_HEAD(self) -> None:
        self._send(405, _error("use GET or POST"), close=True)

    def _handle(self, method: str) -> None:
        try:
            status, body, kind = self._route(method)
        except _HttpError as exc:
            status, body, kind = exc.status, _error(exc.message), "application/json"
            if exc.close:
                self.close_connection = True
        except CtxembedError as exc:
            status = 400 if isinstance(exc, UsageError) else 422
            body, kind = _error(exc.render(flag)), "application/json"
        except MemoryError:
            status, body, kind = 507, _error("out of memory (try fewer tokens, heads or layers)"), "application/json"
        except Exception as exc:  # a bug: one line in the log and in the answer; the server goes on
            line = f"internal error: {type(exc).__name__}: {exc}"
            say(f"ctxembed serve: {self.command} {self.path[:200]}: {line}")
            status, body, kind = 500, _error(line), "application/json"
        self._send(status, body, kind)
        if status >= 400 and status != 500:
            reason = orjson.loads(body)["error"] if kind == "application/json" else ""
            say(f"ctxembed serve: {method} {self.path[:200]} -> {status} {reason[:200]}")

    def _route(self, method: str) -> tuple[int, bytes, str]:
        if not self.server.host_allowed(self.headers.get("Host")):
            raise _HttpError(403, f"Host {self.headers.get('Host')!r} is not this server ({self.server.url})", True)
        origin = self.headers.get("Origin")
        if origin is not None and origin.rstrip("/") != "null" and not self._same_origin(origin):
            raise _HttpError(403, f"requests from {origin!r} are not accepted (only from {self.server.url})")
        url = urlsplit(self.path)
        path = url.path
        if path in ASSETS:
            if method != "GET":
                raise _HttpError(405, f"{path}: use GET")
            package, name, kind = ASSETS[path]
            return 200, resources.files(package).joinpath("web", name).read_bytes(), kind
        if path == "/api/settings":
            return 200, dumps(registry(self.server.explorers)).encode(), "application/json"
        endpoint = path.removeprefix("/api/")
        if path.startswith("/api/") and (endpoint in ENDPOINTS or endpoint == "draw"):
            if method == "POST":
                body = self._json_body()
            elif endpoint == "draw":
                raise _HttpError(405, "/api/draw: POST a document")
            else:
                body = from_query(endpoint, parse_qs(url.query, keep_blank_values=True))
            if endpoint == "draw":
                query = parse_qs(url.query)
                kind = query.get("as", ["svg"])[0]
                width = _int(query.get("width", ["100"])[0], "width")
                text = drawing(body, kind, width)
                return 200, text.encode(), "image/svg+xml" if kind == "svg" else "text/html; charset=utf-8"
            return 200, dumps(answer(endpoint, body, self.server.explorers)).encode(), "application/json"
        raise _HttpError(404, f"no such page: {path[:100]}")

    def _same_origin(self, origin: str) -> bool:
        parts = urlsplit(origin)
        return parts.scheme == "http" and self.server.host_allowed(parts.netloc)

    def _json_body(self) -> Any:
        if self.headers.get("Transfer-Encoding"):
            raise _HttpError(411, "send the body with a Content-Length, not chunked", True)
        length = self.headers.get("Content-Length")
        if length is None:
            raise _HttpError(411, "a POST needs a Content-Length", True)
        try:
            size = int(length)
        except ValueError:
            raise _HttpError(400, f"Content-Length {length[:40]!r} is not a number", True) from None
        if size < 0:
            raise _HttpError(400, f"Content-Length {size} is negative", True)
        if size > MAX_BODY:  # not read: the connection closes
            raise _HttpError(413, f"request body of {size:,} bytes is larger than {MAX_BODY:,} bytes", True)
        data = self.rfile.read(size)
        if len(data) < size:
            raise _HttpError(400, f"request body ended after {len(data):,} of {size:,} bytes", True)
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise UsageError(f"the request body is not JSON: {exc}") from None

    def _send(self, status: int, body: bytes, kind: str = "application/json", *, close: bool = False) -> None:
        if close:
            self.close_connection = True
        try:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            for name, value in SECURITY_HEADERS.items():
                self.send_header(name, value)
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
        except OSError as exc:  # the page went away mid-answer: nothing to tell it
            if exc.errno not in (errno.EPIPE, errno.ECONNRESET):
                raise
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        """Answers are not logged one by one (the page asks at every pause in typing); errors are, in _handle."""

    def log_error(self, format: str, *args: Any) -> None:
        if not format.startswith("Request timed out"):  # an idle keep-alive connection: normal
            say("ctxembed serve: " + (format % args))


class _HttpError(Exception):
    def __init__(self, status: int, message: str, close: bool = False):
        super().__init__(message)
        self.status, self.message, self.close = status, message, close


def _error(message: str) -> bytes:
    return orjson.dumps({"error": message.splitlines()[0] if message else "error"})


def _int(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"{name} must be an integer, not {text[:40]!r}") from None


def make_server(explorers: Explorers, host: str = "127.0.0.1", port: int = 8765) -> LiveServer:
    """A server bound to ``host:port`` (port 0: any free port), not yet serving; DataError when the
    address cannot be used."""
    try:
        return LiveServer(host, port, explorers)
    except OverflowError:
        raise UsageError(f"--port {port} is not a port (0 to 65535)") from None
    except socket.gaierror as exc:
        raise DataError(f"--host {host}: {exc.strerror}") from None
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise DataError(f"{host}:{port} is in use (another ctxembed serve?): choose another --port") from None
        if exc.errno == errno.EACCES:
            raise DataError(f"{host}:{port}: permission denied (ports below 1024 need root): use --port 8765") from None
        raise DataError(f"--host {host} --port {port}: {exc.strerror or exc}") from None


def serve(
    vectors: str | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    limit: int | None = None,
    trust: bool = False,
    open_browser: bool = False,
) -> None:
    """Serve the live page until interrupted (KeyboardInterrupt reaches the caller). The URL and
    warnings go to stderr; nothing is written to stdout."""
    explorers = Explorers(vectors, limit=limit, trust=trust)
    server = make_server(explorers, host, port)
    try:
        say(f"ctxembed serve: {server.url}  ({explorers.default.vectors['name']}; Ctrl-C stops)")
        if not is_loopback(host):
            say(
                f"WARNING: ctxembed serve listens on {host}, beyond this machine: anyone who can reach "
                f"port {server.port} can use it. Bind to 127.0.0.1 (the default) unless you mean it."
            )
        if open_browser:
            _open(server.url)
        sys.stderr.flush()
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()


def _open(url: str) -> None:
    """Open ``url`` in the default browser when there is one; say so when there is none."""
    try:
        opened = webbrowser.open(url)
    except Exception:  # a broken browser setting must not stop the server
        opened = False
    if not opened:
        say(f"ctxembed serve: no browser to open here; open {url} yourself")
