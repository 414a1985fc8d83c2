"""The kernel-repository face of the test Hub: a thin HTTP front that rewrites the Hub's kernel paths onto
olah, which serves model, dataset and space repositories only.

    python testkit/hub_front.py --port P --models http://127.0.0.1:M --kernels http://127.0.0.1:K \
        [--trusted-publisher ORG ...] [--latency SECONDS]

- `/api/kernels/<repo>/...` -> `/api/models/<repo>/...` and `/kernels/<repo>/...` -> `/<repo>/...` of the
  olah that serves the kernel repositories (its mirror holds them as `models/<org>/<name>`);
- every other path goes unchanged to the olah that serves model (and dataset) repositories;
- a revision given as a full ref name (`refs/heads/v0`, as the Hub accepts it) is passed on as its short
  name, the only form olah resolves;
- `/api/organizations/<org>/overview` answers the organization settings the test Hub was started with
  (`trustedKernelPublisher`), which olah does not know; nothing about repositories is made up here;
- with `--latency`, every answer starts that many seconds late (a sleep in the request's own thread, so
  requests sent at once overlap as on a real network);
- `/_testkit/in-flight` answers how many requests (and file downloads, `/resolve/` paths) the front has
  answered at once at most since it was last asked, for tests that check a client's parallelism by counting
  instead of timing;
- with `--cache DIR` (benchmarks), a GET or HEAD of a file at a commit (`/resolve/<40 hex digits>/...`, no
  Range) that olah answered 200 is answered again from DIR: the same status line, headers and bytes, the body
  by sendfile. Such a path always has the same answer, and the Hub serves it from a CDN: olah reads each file
  whole out of git and sends it in 4 KiB pieces (some 5 ms of CPU per small file, 40 ms per MB), which on the
  cores a benchmark's client shares would be the client's bound, not the Hub's.

Bodies are streamed, `Content-Length` is kept (also on HEAD replies, where huggingface_hub reads a file's
size from it) and redirects keep pointing at the front, on the repository type that was asked for. Standard
library only: it runs as its own process next to olah.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import http.client
import json
import os
import re
import socketserver
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}
_ORG_OVERVIEW = re.compile(r"^/api/organizations/(?P<org>[A-Za-z0-9][A-Za-z0-9._-]*)/overview/?$")
_CHUNK = 1 << 16
IN_FLIGHT = "/_testkit/in-flight"


_FULL_REF = re.compile(r"/refs(?:%2F|/)(?:heads|tags)(?:%2F|/)", re.IGNORECASE)
_PINNED = re.compile(r"/resolve/[0-9a-f]{40}/")  # a file at a commit: its answer never changes


def route(path: str) -> tuple[str, str]:
    """("kernel" | "model", upstream path) for a request path (query string included)."""
    # The Hub takes full ref names as revisions (`kernels versions` asks for tree/refs%2Fheads%2Fv0);
    # olah resolves short names only.
    path = _FULL_REF.sub("/", path, count=1)
    if path.startswith("/api/kernels/"):
        return "kernel", "/api/models/" + path[len("/api/kernels/") :]
    if path.startswith("/kernels/"):
        return "kernel", path[len("/kernels") :]
    return "model", path


def _keep_answer(keep: str, partial: str, method: str, known_length: str | None, answer: list) -> None:
    """Keep an answer olah gave whole, at `keep` (its body first, from `partial` for a GET; then its status line and
    headers, which say the body is there); a body shorter than its Content-Length is dropped. http.client raises on
    a chunked body cut short."""
    if method == "GET":
        if known_length is not None and os.path.getsize(partial) != int(known_length):
            os.unlink(partial)
            return
        os.replace(partial, f"{keep}.body")
    with open(partial, "w") as stream:
        json.dump(answer, stream)
    os.replace(partial, f"{keep}.json")


def rewrite_location(location: str, kind: str, front: str) -> str:
    """A redirect from olah, made to point at the front and, for kernel requests, at the kernel paths."""
    parts = urlsplit(location)
    path = location if not parts.scheme else location[len(f"{parts.scheme}://{parts.netloc}") :]
    if kind == "kernel" and path.startswith("/"):
        path = "/api/kernels/" + path[len("/api/models/") :] if path.startswith("/api/models/") else "/kernels" + path
    return front + path if parts.scheme else path


class Front(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's default backlog is 5: a client opening more connections at once (an answer without a length
    # closes its connection) had a SYN dropped and waited a second for its retry, which no real Hub makes it do.
    request_queue_size = 128

    def __init__(
        self, port: int, upstreams: dict[str, str], trusted: set[str], latency: float = 0.0, cache: str | None = None
    ) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.upstreams = {kind: urlsplit(url) for kind, url in upstreams.items()}
        self.trusted = trusted
        self.latency = latency
        self.cache = cache
        self.public = f"http://127.0.0.1:{port}"
        self.counting = threading.Lock()
        self.in_flight = {"requests": 0, "files": 0}  # being answered now
        self.most_in_flight = {"requests": 0, "files": 0}  # at once, at most, since /_testkit/in-flight was asked

    def count(self, path: str, change: int) -> None:
        kinds = ("requests", "files") if "/resolve/" in path else ("requests",)
        with self.counting:
            for kind in kinds:
                self.in_flight[kind] += change
                self.most_in_flight[kind] = max(self.most_in_flight[kind], self.in_flight[kind])


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # An answer is written in several sends (headers, then the body): with Nagle's algorithm on, a kept-alive
    # connection's second send waits for the client's delayed ACK, about 40 ms per answer, which a real Hub does not
    # make its clients wait. It cost `kernels` (many requests per connection) more than kernelpin in the benchmarks.
    disable_nagle_algorithm = True
    server: Front

    def log_message(self, format: str, *args: object) -> None:  # one line per request, on stderr (the log file)
        sys.stderr.write(f"front: {self.command} {self.path} -> {format % args}\n")

    def do_GET(self) -> None:
        self._answer()

    def do_HEAD(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def do_PUT(self) -> None:
        self._answer()

    def do_DELETE(self) -> None:
        self._answer()

    def _answer(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == IN_FLIGHT and self.command == "GET":
            with self.server.counting:  # and counting starts again from what is in flight now
                most, self.server.most_in_flight = self.server.most_in_flight, dict(self.server.in_flight)
            return self._json(most)
        self.server.count(path, +1)
        try:
            time.sleep(self.server.latency)
            organization = _ORG_OVERVIEW.match(path)
            if organization and self.command == "GET":
                return self._organization(organization["org"])
            kept = self._kept()
            if kept is None:
                return self._forward()
            if not self._replay(kept):
                self._forward(keep=kept)
        finally:
            self.server.count(path, -1)

    def _kept(self) -> str | None:
        """Where the answer to this request is kept (without the extension), for a pinned GET or HEAD when the
        front keeps answers; else None."""
        if (
            self.server.cache is None
            or self.command not in ("GET", "HEAD")
            or "Range" in self.headers
            or not _PINNED.search(self.path)
        ):
            return None
        return os.path.join(self.server.cache, hashlib.sha256(f"{self.command} {self.path}".encode()).hexdigest())

    def _replay(self, kept: str) -> bool:
        """Answer from what was kept (False: nothing kept yet)."""
        with contextlib.ExitStack() as opened:
            try:
                with open(kept + ".json") as stream:
                    status, reason, headers = json.load(stream)
                body = opened.enter_context(open(kept + ".body", "rb")) if self.command == "GET" else None
            except FileNotFoundError:
                return False
            self.log_request(status)
            self.send_response_only(status, reason)
            for name, value in headers:
                self.send_header(name, value)
            self.close_connection = ["Connection", "close"] in headers  # the body's end was the connection's
            self.end_headers()
            if body is not None:
                offset, size = 0, os.fstat(body.fileno()).st_size
                while offset < size:
                    offset += os.sendfile(self.connection.fileno(), body.fileno(), offset, size - offset)
        return True

    def _forward(self, keep: str | None = None) -> None:
        kind, path = route(self.path)
        upstream = self.server.upstreams[kind]
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {
            name: value
            for name, value in self.headers.items()
            if name.lower() not in _HOP_BY_HOP and name.lower() != "host"
        }
        headers["Host"] = upstream.netloc
        assert upstream.hostname is not None  # the upstreams are http URLs
        connection = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=120)
        partial = f"{keep}.{threading.get_ident()}.partial"  # where an answer being kept is written first
        try:
            connection.request(self.command, path, body=body, headers=headers)
            reply = connection.getresponse()
            self.log_request(reply.status)  # send_response_only does not log: every forwarded request gets its line
            self.send_response_only(reply.status, reply.reason)
            known_length = reply.getheader("Content-Length")
            sent = []
            for name, value in reply.getheaders():
                if name.lower() in _HOP_BY_HOP:
                    continue
                forwarded = rewrite_location(value, kind, self.server.public) if name.lower() == "location" else value
                self.send_header(name, forwarded)
                sent.append((name, forwarded))
            if known_length is None and self.command != "HEAD":
                self.send_header("Connection", "close")  # the body ends when the connection does
                sent.append(("Connection", "close"))
                self.close_connection = True
            self.end_headers()
            kept_as = keep if reply.status == 200 else None
            with contextlib.ExitStack() as opened:
                copy = opened.enter_context(open(partial, "wb")) if kept_as and self.command == "GET" else None
                if self.command != "HEAD":
                    while chunk := reply.read(_CHUNK):
                        self.wfile.write(chunk)
                        if copy is not None:
                            copy.write(chunk)
            if kept_as is not None:
                _keep_answer(kept_as, partial, self.command, known_length, [reply.status, reply.reason, sent])
        except (ConnectionError, OSError) as error:
            self.log_message("upstream %s failed: %s", upstream.netloc, error)
            self.close_connection = True
            if keep is not None:
                with contextlib.suppress(OSError):  # a body cut off midway is not kept
                    os.unlink(partial)
        finally:
            connection.close()

    def _organization(self, org: str) -> None:
        self._json(
            {
                "name": org,
                "fullname": org,
                "avatarUrl": "",
                "isVerified": False,
                "isFollowing": False,
                "numUsers": 0,
                "numModels": 0,
                "numSpaces": 0,
                "numDatasets": 0,
                "numFollowers": 0,
                "numPapers": 0,
                "trustedKernelPublisher": org in self.server.trusted,
            }
        )

    def _json(self, document: dict) -> None:
        body = json.dumps(document).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--models", required=True, help="olah serving model/dataset/space repositories")
    parser.add_argument("--kernels", required=True, help="olah serving the kernel repositories (as models)")
    parser.add_argument("--trusted-publisher", action="append", default=[], metavar="ORG")
    parser.add_argument(
        "--latency",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="delay every answer by this much (a network's round trip)",
    )
    parser.add_argument("--cache", metavar="DIR", help="answer files at a commit again from DIR, as a CDN does")
    args = parser.parse_args(argv)
    socketserver.TCPServer.allow_reuse_address = True
    if args.cache:
        os.makedirs(args.cache, exist_ok=True)
    with Front(
        args.port, {"model": args.models, "kernel": args.kernels}, set(args.trusted_publisher), args.latency, args.cache
    ) as front:
        front.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
