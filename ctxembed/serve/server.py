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

Load: at most :data:`MAX_CONNECTIONS` connections have a thread; computing requests run in bounded
lanes (:mod:`ctxembed.serve.lanes`). A connection past the limit, when none is idle, goes to the
overflow lane: a thread or two that answer it at once (the page's files and settings as usual, a
computing request 503 with ``Retry-After``), so a burst never leaves the server stuck and the page
always loads. Refusals are counted (``load`` in ``/api/settings``) and summed up in a line on stderr.
"""

from __future__ import annotations

import errno
import ipaddress
import queue
import socket
import sys
import threading
import time
import webbrowser
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

from ctxembed.errors import CtxembedError, DataError, UsageError
from ctxembed.output import dumps, say
from ctxembed.presets import flag
from ctxembed.serve.endpoints import ENDPOINTS, MAX_BODY, Explorers, answer, drawing, registry
from ctxembed.serve.lanes import LIGHT, Busy

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
MAX_CONNECTIONS = 64  # open connections; a new one past this closes the longest-idle one (or overflows)
OVERFLOW_THREADS = 2  # threads answering connections past MAX_CONNECTIONS when none is idle
OVERFLOW_QUEUE = 256  # such connections waiting for them; past this a connection is closed unanswered
OVERFLOW_TIMEOUT = 2.0  # seconds an overflowing client has to send its request and read the answer
OVERFLOW_RETRY = 1  # Retry-After (seconds) of a computing request refused for want of a connection
BUSY_LINE_EVERY = 5.0  # seconds between the lines on stderr that count refused requests
IDLE_TIMEOUT = 15.0  # seconds a connection may wait for its next request line
HEADER_TIMEOUT = 10.0  # seconds from the request line to the end of its headers and body (a trickle is cut)
WRITE_TIMEOUT = 30.0  # seconds a client may take to read an answer
MAX_LOG = 300  # characters of one log line
MAX_ERROR = 500  # characters of an error's message in its JSON answer


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name) is this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class LiveServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer holding the explorers and the Host names it answers to, and watching its
    connections: at most :data:`MAX_CONNECTIONS` (a new one closes the longest-waiting idle one), and
    each waiting on its client past its deadline is shut (idle, request-line and header timeouts)."""

    daemon_threads = True  # Ctrl-C does not wait for open connections
    request_queue_size = 128  # connections waiting to be accepted (socketserver's 5 resets a burst of 20)
    block_on_close = False

    def __init__(self, host: str, port: int, explorers: Explorers):
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.explorers = explorers
        # connection -> the monotonic time by which its client must have sent what we wait for;
        # None while the server works on its request
        self.waiting: dict[socket.socket, float | None] = {}
        self.waiting_lock = threading.Lock()
        self.overflow: queue.Queue = queue.Queue(OVERFLOW_QUEUE)  # connections past MAX_CONNECTIONS
        self.overflowing: dict[socket.socket, float] = {}  # those being answered -> their deadline
        self.refused = {"overflow": 0, "dropped": 0}  # computing requests answered 503; connections closed
        self.told = 0  # refusals already counted in a line on stderr
        self.closed = threading.Event()  # set by server_close: the watching threads end
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
        threading.Thread(target=self._reap, name="ctxembed-serve-timeouts", daemon=True).start()
        for number in range(OVERFLOW_THREADS):
            threading.Thread(target=self._overflow, name=f"ctxembed-serve-overflow-{number}", daemon=True).start()

    # ------------------------------------------------------------------ connections
    def process_request(self, request, client_address) -> None:
        """A thread for the connection; past MAX_CONNECTIONS the longest-idle one is closed for it, and
        when every one is being answered it goes to the overflow lane. Nothing here blocks, and no
        socket is shut while ``waiting_lock`` is held (shutdown_request takes it too)."""
        with self.waiting_lock:
            full = len(self.waiting) >= MAX_CONNECTIONS
            idle = [(deadline, c) for c, deadline in self.waiting.items() if deadline is not None] if full else []
            oldest = min(idle, key=lambda item: item[0])[1] if idle else None
            if oldest is not None:
                del self.waiting[oldest]  # no longer counted: its thread ends as soon as it wakes
            if not full or oldest is not None:
                self.waiting[request] = time.monotonic() + IDLE_TIMEOUT
        if oldest is not None:
            _shut(oldest)
        if full and oldest is None:  # every connection is being answered: this one waits for none of them
            try:
                self.overflow.put_nowait((request, client_address))
            except queue.Full:
                self.count_refused("dropped")
                super().shutdown_request(request)
            return
        super().process_request(request, client_address)

    def _overflow(self) -> None:
        """Answer connections past MAX_CONNECTIONS, one request each, within OVERFLOW_TIMEOUT: the page's
        files and settings as always (the page stays reachable), a computing request 503."""
        while (item := self.overflow.get()) is not None:
            request, client_address = item
            with self.waiting_lock:
                self.overflowing[request] = time.monotonic() + OVERFLOW_TIMEOUT
            try:
                OverflowHandler(request, client_address, self)
            except Exception:  # noqa: BLE001 - as socketserver does: one line, and the lane goes on
                self.handle_error(request, client_address)
            finally:
                with self.waiting_lock:
                    self.overflowing.pop(request, None)
                super().shutdown_request(request)

    def count_refused(self, what: str) -> None:
        with self.waiting_lock:
            self.refused[what] += 1

    def load(self) -> dict:
        """What the server holds now and has refused: connections, the overflow lane and each lane."""
        with self.waiting_lock:
            connections = {"open": len(self.waiting), "limit": MAX_CONNECTIONS, **self.refused}
        return {
            "connections": connections,
            **{name: lane.counts() for name, lane in self.explorers.lanes.items()},
        }

    def _tell_refusals(self) -> bool:
        """One line on stderr when requests were refused since the last one (the reaper asks every
        BUSY_LINE_EVERY s at most): a burst of 503s is counted, not logged request by request. Whether
        there was something to tell."""
        load = self.load()
        counts = {"light": load["light"]["refused"], "heavy": load["heavy"]["refused"], **load["connections"]}
        del counts["open"], counts["limit"]
        total = sum(counts.values())
        if total > self.told:
            shown = ", ".join(f"{n:,} {what}" for what, n in counts.items())
            _log(f"busy: {total - self.told:,} request(s) refused with 503 or closed ({shown} since the start)")
            self.told = total
            return True
        return False

    def wait_for_client(self, connection, seconds: float | None) -> None:
        """The client of ``connection`` has ``seconds`` to send what is next (None: the server is working)."""
        with self.waiting_lock:
            if connection in self.waiting:
                self.waiting[connection] = None if seconds is None else time.monotonic() + seconds

    def shutdown_request(self, request) -> None:
        with self.waiting_lock:
            self.waiting.pop(request, None)
        super().shutdown_request(request)

    def _reap(self) -> None:
        """Shut every connection whose client is late: a trickling or silent client holds no thread; and
        count refusals on stderr now and then."""
        told = time.monotonic() - BUSY_LINE_EVERY  # refusals after a quiet spell are told at once
        while not self.closed.wait(0.25):
            now = time.monotonic()
            with self.waiting_lock:
                late = [c for c, deadline in self.waiting.items() if deadline is not None and deadline < now]
                for connection in late:
                    del self.waiting[connection]
                late += [c for c, deadline in self.overflowing.items() if deadline < now]
            for connection in late:
                _shut(connection)
            if now - told >= BUSY_LINE_EVERY and self._tell_refusals():
                told = now

    def server_close(self) -> None:
        """Stop listening; the refusals not yet told are told, and the watching threads end."""
        super().server_close()
        if not self.closed.is_set():
            self.closed.set()
            self._tell_refusals()
            for _ in range(OVERFLOW_THREADS):
                try:
                    self.overflow.put_nowait(None)
                except queue.Full:  # its threads are busy: they end with the process (daemons)
                    break

    def handle_error(self, request, client_address) -> None:
        """A request that failed outside the handler's own answers (socketserver prints a traceback
        here). A client that went away (a closed tab resets its connection; a broken pipe; a silent
        one timed out) is no news: nothing is said. Anything else is one line on stderr."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError, ValueError)):  # ValueError: a shut socket's file
            return
        _log(f"a request from {client_address[0]} failed ({type(exc).__name__}: {exc})")

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


def _shut(connection: socket.socket) -> None:
    """Wake the thread reading ``connection``: its read ends, and the handler closes it."""
    try:
        connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class Handler(BaseHTTPRequestHandler):
    """Every answer, the standard library's own errors included, goes through :meth:`_send`: the
    security headers, one-line JSON for an error, no body for HEAD, and the connection closed when a
    body was not read (so its bytes are never taken for a next request)."""

    server: LiveServer
    server_version = "ctxembed"
    sys_version = ""
    protocol_version = "HTTP/1.1"  # keep-alive: the page sends a request per keystroke pause
    default_request_version = "HTTP/1.0"  # a malformed request line still gets a status line
    timeout = IDLE_TIMEOUT + 5  # the deadlines above end a wait first; this is the socket's own backstop

    def setup(self) -> None:
        # Headers and body are two writes: without TCP_NODELAY, Nagle's algorithm holds the body until the
        # client's delayed ACK of the headers, 40 ms later on Linux (measured: 44 ms a request, not 1 ms).
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().setup()

    def handle_one_request(self) -> None:
        self.body_read = False
        self.server.wait_for_client(self.connection, IDLE_TIMEOUT)
        super().handle_one_request()

    def parse_request(self) -> bool:
        self.server.wait_for_client(self.connection, HEADER_TIMEOUT)  # the rest: headers and body
        if not super().parse_request():
            return False
        if len(self.requestline.split()) != 3:  # HTTP/0.9 ("GET /"): no headers, no Host to check
            self.send_error(400, "an HTTP/1.x request line is needed (method, path, version)")
            return False
        return True

    # -------------------------------------------------------------------------- routing
    def do_GET(self) -> None:
        self._handle()

    do_POST = do_HEAD = do_PUT = do_DELETE = do_OPTIONS = do_PATCH = do_GET

    def _handle(self) -> None:
        try:
            status, body, kind = self._route()
        except _HttpError as exc:
            self.send_error(exc.status, exc.message, allow=exc.allow)
            return
        except Busy as exc:  # a full lane: counted, and said on stderr now and then (LiveServer._tell_refusals)
            self.send_error(503, str(exc), headers={"Retry-After": str(exc.retry_after)})
            return
        except CtxembedError as exc:
            self.send_error(400 if isinstance(exc, UsageError) else 422, exc.render(flag))
            return
        except MemoryError:
            self.send_error(507, "out of memory (try fewer tokens, heads or layers)")
            return
        except RecursionError:
            self.send_error(400, "the request is nested too deeply")
            return
        except Exception as exc:  # a bug: one line in the log and in the answer; the server goes on
            self.send_error(500, f"internal error: {type(exc).__name__}: {exc}")
            return
        self._send(status, body, kind)

    def _route(self) -> tuple[int, bytes, str]:
        method = self.command
        if not self.server.host_allowed(self.headers.get("Host")):
            raise _HttpError(403, f"Host {self.headers.get('Host')!r} is not this server ({self.server.url})")
        url = urlsplit(self.path)
        path = url.path
        endpoint = path.removeprefix("/api/")
        if path in ASSETS or path == "/api/settings":
            if method not in ("GET", "HEAD"):
                raise _HttpError(405, f"{path}: use GET", "GET, HEAD")
            if path == "/api/settings":
                return (
                    200,
                    dumps({**registry(self.server.explorers), "load": self.server.load()}).encode(),
                    ("application/json"),
                )
            package, name, kind = ASSETS[path]
            return 200, resources.files(package).joinpath("web", name).read_bytes(), kind
        if not (path.startswith("/api/") and (endpoint in ENDPOINTS or endpoint == "draw")):
            raise _HttpError(404, f"no such page: {path}")
        if method != "POST":
            raise _HttpError(405, f"{path} computes: POST a JSON body", "POST")
        origin = self.headers.get("Origin")
        if origin is not None and not self._same_origin(origin):
            raise _HttpError(403, f"requests from {origin!r} are not accepted (only from {self.server.url[:-1]})")
        kind = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            raise _HttpError(415, f"{path}: send Content-Type: application/json, not {kind!r}")
        body = self._json_body()
        self.refuse_work()
        query = parse_qs(url.query)
        shown_as = query.get("as", ["svg" if endpoint == "draw" else "json"])[0]
        width = _int(query.get("width", ["100"])[0], "width")
        if endpoint != "draw":
            document = answer(endpoint, body, self.server.explorers)
            if shown_as == "json":
                return 200, dumps(document).encode(), "application/json"
            body = document
        with self.server.explorers.lanes[LIGHT].slot():  # drawing is work too: bounded like the rest
            text = drawing(body, shown_as, width)
        return 200, text.encode(), "image/svg+xml" if shown_as == "svg" else "text/html; charset=utf-8"

    def refuse_work(self) -> None:
        """Nothing to refuse on a connection of its own (the overflow lane's handler refuses all work)."""

    def _same_origin(self, origin: str) -> bool:
        parts = urlsplit(origin)
        return parts.scheme == "http" and not parts.path.strip("/") and self.server.host_allowed(parts.netloc)

    def _json_body(self) -> Any:
        if self.headers.get("Transfer-Encoding"):
            raise _HttpError(411, "send the body with a Content-Length, not chunked")
        length = self.headers.get("Content-Length")
        if length is None:
            raise _HttpError(411, "a POST needs a Content-Length")
        if not length.strip().isdigit():
            raise _HttpError(400, f"Content-Length {length!r} is not a number")
        size = int(length)
        if size > MAX_BODY:  # not read: the connection closes
            raise _HttpError(413, f"request body of {size:,} bytes is larger than {MAX_BODY:,} bytes")
        data = self.rfile.read(size)
        self.body_read = True
        self.server.wait_for_client(self.connection, None)
        if len(data) < size:
            raise _HttpError(400, f"request body ended after {len(data):,} of {size:,} bytes")
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise UsageError(f"the request body is not JSON: {exc}") from None

    # -------------------------------------------------------------------------- answers
    def send_error(
        self, code: int, message: str | None = None, explain: str | None = None, *, allow=None, headers=None
    ) -> None:
        """Every error, this server's and the standard library's (400, 414, 431, 501, 505 ...): one line of
        JSON, logged as one bounded line (503s are counted instead: a burst is one line). The connection
        closes after it unless the request's body was read."""
        line = message.strip().splitlines()[0] if message and message.strip() else HTTPStatus(code).phrase
        request = (getattr(self, "requestline", "") or "")[:MAX_LOG]
        if code != 503:
            _log(f"{request} -> {code} {line}")
        if not self.body_read or code >= 500:
            self.close_connection = True
        headers = {**(headers or {}), **({"Allow": allow} if allow else {})}
        if code == 405 and not allow:
            headers["Allow"] = "GET, HEAD, POST"
        self._send(code, orjson.dumps({"error": line[:MAX_ERROR]}), headers=headers)

    def _send(self, status: int, body: bytes, kind: str = "application/json", *, headers=None) -> None:
        headers_in = getattr(self, "headers", None)
        announced = headers_in is not None and (
            headers_in.get("Content-Length", "0").strip() not in ("", "0") or headers_in.get("Transfer-Encoding")
        )
        if announced and not self.body_read:
            self.close_connection = True  # an unread body is never parsed as the next request
        self.server.wait_for_client(self.connection, WRITE_TIMEOUT)  # a client that does not read is shut
        try:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            for name, value in {**SECURITY_HEADERS, **(headers or {})}.items():
                self.send_header(name, value)
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            self.wfile.flush()
        except OSError as exc:  # the page went away mid-answer: nothing to tell it
            if exc.errno not in (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.EBADF, None):
                raise
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        """Answers are not logged one by one (the page asks at every pause in typing); errors are, in send_error."""

    def log_error(self, format: str, *args: Any) -> None:
        """The standard library's own notes (timeouts) say nothing the error line does not."""


class OverflowHandler(Handler):
    """A connection past MAX_CONNECTIONS, answered by the overflow lane: one request, within
    OVERFLOW_TIMEOUT, then closed; the page's files and settings are served, work is refused (503)."""

    timeout = OVERFLOW_TIMEOUT

    def handle(self) -> None:
        self.close_connection = True
        self.handle_one_request()

    def refuse_work(self) -> None:
        """Read (so the client sees the answer rather than a reset), then refused: 503, Retry-After."""
        self.server.count_refused("overflow")
        raise Busy(
            f"the server is busy: all {MAX_CONNECTIONS} connections are being answered; "
            f"try again in {OVERFLOW_RETRY} s",
            OVERFLOW_RETRY,
        )

    def _send(self, status: int, body: bytes, kind: str = "application/json", *, headers=None) -> None:
        self.close_connection = True
        super()._send(status, body, kind, headers=headers)


class _HttpError(Exception):
    def __init__(self, status: int, message: str, allow: str | None = None):
        super().__init__(message)
        self.status, self.message, self.allow = status, message, allow


def _log(message: str) -> None:
    """One line on stderr, escaped (:func:`say`) and at most MAX_LOG characters: a request's text cannot
    forge lines or flood the terminal."""
    text = message if len(message) <= MAX_LOG else message[: MAX_LOG - 3] + "..."
    say("ctxembed serve: " + text.replace("\n", "\\n").replace("\r", "\\r"))


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
        raise UsageError(f"{{port}} {port} is not a port (0 to 65535)", "port") from None
    except socket.gaierror as exc:
        raise DataError(f"{{host}} {host}: {exc.strerror}", "host") from None
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise DataError(
                f"{host}:{port} is in use (another ctxembed serve?): choose another {{port}}", "port"
            ) from None
        if exc.errno == errno.EACCES:
            raise DataError(
                f"{host}:{port}: permission denied (ports below 1024 need root): use {{port}} 8765", "port"
            ) from None
        raise DataError(f"{{host}} {host} {{port}} {port}: {exc.strerror or exc}", "host", "port") from None


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
