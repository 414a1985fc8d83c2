"""Hubs that misbehave, for tests of timeouts, limits and error reports: one that accepts connections and
never answers, one that answers every request with a fixed HTTP status, and a hostile one that lies in
front of a real Hub. All listen on 127.0.0.1 in a thread and stop with their `with` block.

    with SilentServer() as endpoint: ...                 # e.g. http://127.0.0.1:41234
    with StatusServer(503) as endpoint: ...
    with HostileHub(hub.endpoint, refs={"tags": "v1"}) as endpoint: ...
"""

from __future__ import annotations

import gzip
import http.client
import json
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


class SilentServer:
    """Accepts TCP connections and never sends a byte (a hung server or a black-holing proxy)."""

    def __init__(self) -> None:
        self._socket = socket.socket()
        self._connections: list[socket.socket] = []
        self._closed = threading.Event()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            self._connections.append(connection)  # held open, never read or answered

    def __enter__(self) -> str:
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()
        return f"http://127.0.0.1:{self._socket.getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        self._closed.set()
        self._socket.close()
        for connection in self._connections:
            connection.close()


class StatusServer:
    """Answers every request with `status` (and `headers`), as a failing Hub or proxy would."""

    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        status_, headers_ = status, headers or {}

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                body = b"" if self.command == "HEAD" else f'{{"error": "status {status_}"}}'.encode()
                self.send_response(status_)
                for name, value in headers_.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_HEAD = do_POST = _answer

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True

    def __enter__(self) -> str:
        # Polled every 20 ms, not 500: stopping the server (the `with` block's end) waits for the next poll.
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


_REFS = re.compile(r"^/api/[a-z]+s/[^/]+/[^/]+/refs$")
_TREE = re.compile(r"^/api/[a-z]+s/[^/]+/[^/]+/tree/")
_FILE = re.compile(r"/resolve/")


@dataclass
class Lies:
    """What a HostileHub answers instead of its upstream (None: the upstream's answer).

    refs: the JSON of every refs listing (`/api/<type>s/<org>/<name>/refs`).
    tree: the JSON of every file-listing page.
    tree_forever: file listings are pages of one new file each, each page linking to the next, without end
        (on `next_page_host` when given, e.g. another server that would collect the client's token).
    file_status / file_headers: the status of file answers (`.../resolve/...`, GET and HEAD), and headers
        added to them (an `ETag`, an `X-Repo-Commit`); with a status, the body is a JSON error of ~250 bytes
        whose message is `error_message` when given.
    drip: "refs", "tree" or "file": that answer comes one byte every `drip_seconds`, without end.
    drip_head: "refs", "tree" or "file": that answer's status line and headers come one byte every
        `drip_seconds`, a header without end (each byte well within any read timeout).
    interim: "refs", "tree" or "file": that answer is `HTTP/1.1 100 Continue` every `drip_seconds`, without end.
    endless_file: file bodies never end (no Content-Length, bytes until the client hangs up).
    gzip_refs: refs listings come gzip-compressed (Content-Encoding: gzip), asked for or not.
    refs_announced: refs listings announce this Content-Length, send 100 KB and hang up.
    throttle / throttle_status / retry_after: the first `throttle` requests (of any kind) are answered
        `throttle_status` ("too many requests", 429 by default) with the header Retry-After: `retry_after`
        (none when None), as the Hub throttles a client that asks too fast.
    file_delay: file answers wait this many seconds before they start (a slow link: downloads overlap).
    tree_delay: file-listing answers wait this many seconds before they start.
    stall_path: the answer to a request whose path ends with this never starts (`endless_for` seconds at most).
    "Without end" is `endless_for` seconds at most, so that a client that fails to stop fails its test
    instead of hanging it.
    """

    refs: Any = None
    tree: Any = None
    tree_forever: bool = False
    next_page_host: str | None = None
    file_status: int | None = None
    file_headers: dict[str, str] = field(default_factory=dict)
    error_message: str | None = None
    drip: str | None = None
    drip_head: str | None = None
    interim: str | None = None
    drip_seconds: float = 0.2
    endless_file: bool = False
    endless_for: float = 60.0
    gzip_refs: bool = False
    refs_announced: int | None = None
    throttle: int = 0
    throttle_status: int = 429
    retry_after: str | None = None
    file_delay: float = 0.0
    tree_delay: float = 0.0
    stall_path: str | None = None


# A refs answer that never ends in time, each byte well within a read timeout: its headers dripped, endless
# `100 Continue` answers, its body dripped. Only a client's overall deadline stops them (test_wire, test_hubclient).
STALLS = {
    "headers": Lies(drip_head="refs", drip_seconds=0.02, endless_for=10),
    "100-continue": Lies(interim="refs", drip_seconds=0.02, endless_for=10),
    "body": Lies(drip="refs", drip_seconds=0.02, endless_for=10),
}


class HostileHub:
    """A Hub API in front of `upstream` (a real one, e.g. testkit.hub.HubServer's) that lies as `lies` says
    and forwards everything else. Endless answers end when the client hangs up or the server stops, so a
    test's `with` block bounds them. `requests` counts the requests it answered; `seen` lists each one's path
    and User-Agent, `authorizations` each one's Authorization header (if any); `arrivals` holds (time.monotonic(), path) of every request, `throttled` of each answered
    "too many requests"; `most_in_flight` is the most requests it was answering at once."""

    def __init__(self, upstream: str, lies: Lies) -> None:
        self.lies, self.upstream = lies, urlsplit(upstream)
        self.requests = 0
        self.seen: list[tuple[str, str]] = []
        self.authorizations: list[str] = []
        self.throttled: list[tuple[float, str]] = []
        self.arrivals: list[tuple[float, str]] = []
        self.most_in_flight = 0
        self._in_flight = 0
        self._count_lock = threading.Lock()
        self._stopped = threading.Event()
        self._tree_started = 0.0
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                with hub._count_lock:
                    hub.requests += 1
                    hub.seen.append((urlsplit(self.path).path, self.headers.get("User-Agent", "")))
                    if "Authorization" in self.headers:
                        hub.authorizations.append(self.headers["Authorization"])
                    hub.arrivals.append((time.monotonic(), self.path))
                    hub._in_flight += 1
                    hub.most_in_flight = max(hub.most_in_flight, hub._in_flight)
                    self.counted = True
                try:
                    hub._answer(self)
                except (ConnectionError, OSError):
                    pass  # the client hung up: what a bounded client does to an endless answer
                finally:
                    hub._answered(self)

            do_HEAD = do_GET

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> str:
        # Polled every 20 ms, not 500: stopping the server (the `with` block's end) waits for the next poll.
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        return self.endpoint

    def __exit__(self, *exc: object) -> None:
        self._stopped.set()
        self._server.shutdown()
        self._server.server_close()

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        lies, path = self.lies, urlsplit(handler.path).path
        with self._count_lock:
            throttled = len(self.throttled) < lies.throttle
            if throttled:
                self.throttled.append((time.monotonic(), handler.path))
        if throttled:
            wait = {} if lies.retry_after is None else {"Retry-After": lies.retry_after}
            error = json.dumps({"error": "Too many requests"}).encode()
            return self._send(handler, lies.throttle_status, error, {"Content-Type": "application/json", **wait})
        kind = "refs" if _REFS.match(path) else "tree" if _TREE.match(path) else "file" if _FILE.search(path) else None
        if kind is None:  # other requests (an organization's overview) are forwarded, never lied about
            status, headers, body = self._forward(handler)
            return self._send(handler, status, body, headers)
        if kind == lies.drip:
            return self._drip(handler)
        if kind == lies.drip_head:
            return self._raw_forever(handler, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Padding: ", b"x")
        if kind == lies.interim:
            return self._raw_forever(handler, b"", b"HTTP/1.1 100 Continue\r\n\r\n")
        if kind == "refs" and lies.refs_announced is not None:
            return self._send(
                handler, 200, b" " * 100_000, {"Content-Length": str(lies.refs_announced), "Connection": "close"}
            )
        if kind == "refs" and lies.refs is not None:
            body = lies.refs if isinstance(lies.refs, bytes) else json.dumps(lies.refs).encode()
            if lies.gzip_refs:
                return self._send(
                    handler, 200, gzip.compress(body), {"Content-Type": "application/json", "Content-Encoding": "gzip"}
                )
            return self._json(handler, lies.refs)
        if lies.stall_path is not None and path.endswith(lies.stall_path):
            self._stopped.wait(lies.endless_for)
            return None
        if kind == "tree" and lies.tree_delay:
            self._stopped.wait(lies.tree_delay)
        if kind == "tree" and lies.tree_forever:
            page = int(parse_qs(urlsplit(handler.path).query).get("cursor", ["0"])[0])
            self._tree_started = self._tree_started or time.monotonic()
            entry = {"type": "file", "path": f"build/x/file{page}.py", "size": 1, "oid": "0" * 40}
            more = time.monotonic() < self._tree_started + lies.endless_for
            host = f"http://{lies.next_page_host}" if lies.next_page_host else self.endpoint
            return self._json(handler, [entry], f"{host}{path}?cursor={page + 1}" if more else None)
        if kind == "tree" and lies.tree is not None:
            return self._json(handler, lies.tree)
        if kind == "file" and lies.file_delay:
            self._stopped.wait(lies.file_delay)
        if kind == "file" and lies.endless_file and handler.command == "GET":
            return self._endless(handler)
        if kind == "file" and lies.file_status is not None:
            # An error page longer than the small files it stands for, as the Hub's JSON errors are.
            message = lies.error_message or f"status {lies.file_status}"
            error = json.dumps({"error": message, "detail": "x" * 200}).encode()
            return self._send(
                handler, lies.file_status, error, {"Content-Type": "application/json", **lies.file_headers}
            )
        status, headers, body = self._forward(handler)
        extra = lies.file_headers if kind == "file" else {}
        self._send(handler, status, body, {**headers, **extra})

    def _forward(self, handler: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
        connection = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=30)
        try:
            connection.request(handler.command, handler.path, headers={"Accept-Encoding": "identity"})
            reply = connection.getresponse()
            body = reply.read()
            keep = {
                "content-type",
                "etag",
                "x-repo-commit",
                "x-error-code",
                "x-error-message",
                "link",
                "location",
                "x-linked-size",
                "x-linked-etag",
            }
            headers = {
                name: value.replace(f"{self.upstream.scheme}://{self.upstream.netloc}", self.endpoint)
                for name, value in reply.getheaders()
                if name.lower() in keep
            }
            if handler.command == "HEAD":
                headers["Content-Length"] = reply.getheader("Content-Length") or "0"
            return reply.status, headers, body
        finally:
            connection.close()

    def _answered(self, handler: BaseHTTPRequestHandler) -> None:
        """The request no longer counts as in flight (once). Called before its answer goes out: a client that has
        read the whole answer may send its next request before this thread runs again, which would read as two."""
        with self._count_lock:
            if getattr(handler, "counted", False):
                handler.counted = False
                self._in_flight -= 1

    def _send(self, handler: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str]) -> None:
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name, value)
        if not any(name.lower() == "content-length" for name in headers):
            handler.send_header("Content-Length", str(len(body)))
        self._answered(handler)
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(body)

    def _json(self, handler: BaseHTTPRequestHandler, value: Any, following: str | None = None) -> None:
        headers = {"Content-Type": "application/json"}
        if following:
            headers["Link"] = f'<{following}>; rel="next"'
        self._send(handler, 200, value if isinstance(value, bytes) else json.dumps(value).encode(), headers)

    def _drip(self, handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Connection", "close")  # no length: the body ends when the server hangs up
        handler.end_headers()
        ends = time.monotonic() + self.lies.endless_for
        while not self._stopped.wait(self.lies.drip_seconds) and time.monotonic() < ends:
            handler.wfile.write(b" ")
            handler.wfile.flush()

    def _raw_forever(self, handler: BaseHTTPRequestHandler, opening: bytes, repeated: bytes) -> None:
        """`opening`, then `repeated` every `drip_seconds`, as raw bytes: no status line of http.server's."""
        handler.close_connection = True
        handler.wfile.write(opening)
        ends = time.monotonic() + self.lies.endless_for
        while not self._stopped.wait(self.lies.drip_seconds) and time.monotonic() < ends:
            handler.wfile.write(repeated)
            handler.wfile.flush()

    def _endless(self, handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Connection", "close")
        handler.end_headers()
        chunk = b"\0" * (1 << 16)
        ends = time.monotonic() + self.lies.endless_for
        while not self._stopped.is_set() and time.monotonic() < ends:
            handler.wfile.write(chunk)
