"""kernelpin's own requests to a Hub (refs, file listings, an organization's overview, file bodies), sent with the
standard library's http.client and held to the limits huggingface_hub's client is held to on kernelpin's behalf
(kernelpin.hub.client):

- every wait (the connection, each write, each read of the status line, the headers and the body) lasts at most
  KERNELPIN_HTTP_TIMEOUT seconds and never past the command's deadline (kernelpin.hub.limits); an expired wait
  is HubTimeout, or LimitExceeded once the deadline has passed. Reads wait in slices of READ_WAIT_SLICE, between
  which Python handles pending signals (Ctrl-C);
- every body is held to a size: a file's as locked or listed (exactly), else KERNELPIN_MAX_RESPONSE_BYTES (API
  answers, error pages, redirects); answers are asked for uncompressed and a compressed one is refused, its size
  being known only once expanded;
- "too many requests" (429, or 503 with a Retry-After) is asked again as kernelpin.hub.throttle says;
- redirects are followed as huggingface_hub's client follows them (the Hub sends file bodies from its CDN): at
  most MAX_REDIRECTS, and the token goes to no other origin (the same host upgraded to https excepted);
- an error answer is HubHTTPError, read and worded as huggingface_hub reads it (kernelpin.hub.http_errors); a
  refused, reset or cut-off connection is HubUnreachable.
Proxies from the environment are not used, as huggingface_hub's client with kernelpin's transport uses none.

Why not huggingface_hub's client: importing it imports ~110 modules (httpx2, httpcore2, h11, anyio). After
`import torch` that crosses the threshold of a full garbage collection, which walks torch's ~165k objects (~100 ms)
in a load that asks the Hub one question; http.client and ssl are among torch's own imports.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import itertools
import os
import re
import socket
import ssl
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import SplitResult, quote, urljoin, urlsplit

from kernelpin.errors import KernelpinError
from kernelpin.hub.limits import HTTP_TIMEOUT, Budget, LimitExceeded, too_long
from kernelpin.hub.throttle import wait_before_retry
from kernelpin.records import record

READ_BYTES = 1 << 20  # the most a connection reads at once
# The longest one wait for a read lasts before Python runs again: a signal (Ctrl-C) that arrives after the
# interpreter last looked and before the socket's wait began wakes nothing, and would otherwise be seen only when
# the read ends, at its timeout (KERNELPIN_HTTP_TIMEOUT, 30 s by default) or the command's deadline.
READ_WAIT_SLICE = 0.25
MAX_REDIRECTS = 20  # as huggingface_hub's client (httpx's default)
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_DEFAULT_PORTS = {"http": 80, "https": 443}
# Control characters, which no status line or header value may hold (RFC 9110; h11, under huggingface_hub's client,
# refused such an answer too): refused before any of it reaches a message.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f]")
_UNSENDABLE = re.compile("[^\x21-\x7e]")  # in a request target: percent-encoded (UTF-8), as httpx encodes them


class HubTimeout(KernelpinError):
    """A request got no answer within the timeout."""


class HubUnreachable(KernelpinError):
    """The connection to a Hub failed or broke off: refused, reset, closed before the answer ended, or an answer
    that is no HTTP."""


def no_answer(url: str, waited: float, phase: str) -> HubTimeout:
    """The error for a wait of `waited` seconds that ran out in `phase` (ConnectTimeout, ReadTimeout, ...)."""
    return HubTimeout(
        f"no answer from {url} within {waited:g} s ({phase}); the server is down "
        f"or overloaded: retry later, or set {HTTP_TIMEOUT}=SECONDS to wait longer"
    )


@record
class Answer:
    """A successful answer's status and headers; its body went to the request's sink."""

    status: int
    headers: http.client.HTTPMessage


class _Waits:
    """How long one request's waits may last: `timeout` each, none past the deadline of `budget`."""

    def __init__(self, timeout: float, budget: Budget) -> None:
        self.timeout, self.budget = timeout, budget
        self.first = min(timeout, budget.remaining())  # what a timeout's message says was waited

    def left(self, wait: float, phase: str) -> float:
        self.budget.stop_if_interrupted(phase)  # at every slice of a read: within READ_WAIT_SLICE of the interrupt
        remaining = self.budget.remaining()
        if remaining <= 0:
            raise _TimedOut(phase)
        return min(wait, remaining)


class _TimedOut(TimeoutError):
    """A wait ran out, in `phase` (named as httpx names it, as the messages did)."""

    def __init__(self, phase: str) -> None:
        super().__init__(phase)
        self.phase = phase


class _TimedSocket:
    """A connected socket (plain or TLS) whose every wait is held to its connection's current `_Waits`. What
    http.client asks of a socket: sendall, makefile (one reader per answer) and close; the socket itself is
    closed once it is closed and its last reader is (http.client closes a connection that will close while its
    answer is still being read)."""

    def __init__(self, sock: socket.socket, connection: _Connection | _TLSConnection) -> None:
        self.sock, self.connection = sock, connection
        self.readers = 0
        self.closed = False

    def sendall(self, data: bytes) -> None:
        self.sock.settimeout(self.connection.waits.left(self.connection.waits.timeout, "WriteTimeout"))
        try:
            self.sock.sendall(data)
        except TimeoutError:
            raise _TimedOut("WriteTimeout") from None

    def makefile(self, mode: str) -> io.BufferedReader:
        self.readers += 1
        return io.BufferedReader(_TimedReader(self), READ_BYTES)

    def released(self) -> None:
        self.readers -= 1
        if self.closed and self.readers <= 0:
            self.sock.close()

    def close(self) -> None:
        self.closed = True
        if self.readers <= 0:
            self.sock.close()


class _TimedReader(io.RawIOBase):
    """Reads of a _TimedSocket, each waiting at most the timeout and never past the deadline, in slices: a slice
    that runs out has consumed nothing, so the read goes on where it was."""

    def __init__(self, timed: _TimedSocket) -> None:
        self.timed = timed

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        sock, waits = self.timed.sock, self.timed.connection.waits
        ends = time.monotonic() + waits.timeout
        while True:
            left = ends - time.monotonic()
            if left <= 0:
                raise _TimedOut("ReadTimeout")
            wait = waits.left(left, "ReadTimeout")
            last = wait <= READ_WAIT_SLICE
            sock.settimeout(wait if last else READ_WAIT_SLICE)
            try:
                return sock.recv_into(buffer)
            except TimeoutError:
                if last:
                    raise _TimedOut("ReadTimeout") from None

    def close(self) -> None:
        if not self.closed:
            self.timed.released()
        super().close()


def _connect_within(connection: _Connection | _TLSConnection, connect: Callable[[], None]) -> None:
    """Connect (and for https, shake hands) within the connection's waits, then hold its socket to them."""
    connection.timeout = connection.waits.left(connection.waits.timeout, "ConnectTimeout")
    try:
        connect()
    except TimeoutError:
        raise _TimedOut("ConnectTimeout") from None
    connection.opened(connection.sock)
    connection.sock = _TimedSocket(connection.sock, connection)


class _Connection(http.client.HTTPConnection):
    waits: _Waits
    opened: Callable[[socket.socket], object]  # told of each socket it opens

    def connect(self) -> None:
        _connect_within(self, super().connect)


class _TLSConnection(http.client.HTTPSConnection):
    waits: _Waits
    opened: Callable[[socket.socket], object]

    def connect(self) -> None:
        _connect_within(self, super().connect)


def tls_context(environ: Mapping[str, str]) -> ssl.SSLContext:
    """The certificates an https Hub is checked against, as huggingface_hub's client chooses them: SSL_CERT_FILE
    or SSL_CERT_DIR where set, the system's store on Windows and macOS (truststore, httpx's dependency), else
    OpenSSL's default paths."""
    if cafile := environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=cafile)
    if capath := environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=capath)
    if sys.platform in ("win32", "darwin"):
        import truststore

        return truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return ssl.create_default_context()


class Wire:
    """One command's connections to Hubs, kept open between its requests (per scheme, host and port) and closed
    when the Wire goes. Thread-safe: downloads run in parallel, each request on a connection of its own."""

    def __init__(self, http_timeout: float) -> None:
        self.http_timeout = http_timeout
        self._idle: dict[tuple[str, str, int], list[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()
        self._tls: ssl.SSLContext | None = None
        # Every socket it opened, closed when the Wire goes (those still open: the kept ones); socket.close itself,
        # not a function of kernelpin's, runs then, wherever the last reference to the Wire was dropped.
        self._sockets = contextlib.ExitStack()
        weakref.finalize(self, self._sockets.close)

    def get(
        self,
        url: str,
        headers: Mapping[str, str],
        budget: Budget,
        sink: Callable[[bytes], None],
        expected: int | None = None,
    ) -> Answer:
        """GET `url`, redirects followed, its body handed to `sink` chunk by chunk: `expected` bytes at most (a
        file's size; None: an API answer, KERNELPIN_MAX_RESPONSE_BYTES). The caller checks a file's size and
        content. Raises HubHTTPError for an error answer."""
        sending = {name.lower(): value for name, value in headers.items()}
        sending["accept-encoding"] = "identity"
        sending["x-amzn-trace-id"] = str(uuid.uuid4())  # huggingface_hub's request id, for the Hub's operators
        for _ in range(MAX_REDIRECTS + 1):
            answer = self._hop(url, sending, budget, sink, expected)
            if isinstance(answer, Answer):
                return answer
            if not _same_origin(url, answer) and not _https_upgrade(url, answer):
                sending.pop("authorization", None)  # the token is for the Hub, not for whoever it sends us to
            url = answer
        raise HubUnreachable(f"more than {MAX_REDIRECTS} redirects, the last to {url[:200]}")

    def _hop(
        self, url: str, headers: dict[str, str], budget: Budget, sink: Callable[[bytes], None], expected: int | None
    ) -> Answer | str:
        """One request (asked again while the server throttles): its Answer, or the URL it redirects to."""
        parts = urlsplit(url)
        if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
            raise HubUnreachable(f"{url[:200]} is no http or https URL")
        named = url.split("?", 1)[0]  # errors name no query (a cursor, a signed CDN address)
        target = _UNSENDABLE.sub(
            lambda found: quote(found[0]), (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        )
        for attempt in itertools.count():
            budget.check(f"requesting {named}")
            waits = _Waits(self.http_timeout, budget)
            connection, response = self._send(parts, target, headers, waits, named)
            try:
                wait = wait_before_retry(
                    response.status, response.getheader("Retry-After"), attempt, budget.remaining(), time.time(), named
                )
            except BaseException:
                connection.close()
                raise
            if wait is None:
                break
            connection.close()  # its answer unread, it can carry no other request
            budget.pause(wait, f"requesting {named}")
        try:
            answer = self._receive(url, named, response, waits, sink, expected)
        except BaseException:
            connection.close()
            raise
        response.close()
        if response.will_close:
            connection.close()
        else:
            with self._lock:
                self._idle.setdefault(_origin(parts), []).append(connection)
        return answer

    def _send(
        self, parts: SplitResult, target: str, headers: dict[str, str], waits: _Waits, named: str
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """The request sent and its answer's status and headers read, on a kept connection where there is one
        (once more on a new one, where the server had closed the kept one meanwhile)."""
        for kept in (True, False):
            connection, reused = self._connection(parts, waits, kept)
            try:
                connection.request("GET", target, headers=headers)
                return connection, connection.getresponse()
            except _TimedOut as error:
                connection.close()
                raise _timed_out(error, named, waits, "requesting") from None
            except (OSError, http.client.HTTPException) as error:
                connection.close()
                if reused and isinstance(error, ConnectionError):
                    continue
                raise HubUnreachable(str(error) or type(error).__name__) from None
            except BaseException:
                connection.close()
                raise
        raise AssertionError("unreachable: a new connection either answers or raises")

    def _connection(self, parts: SplitResult, waits: _Waits, kept: bool) -> tuple[_Connection | _TLSConnection, bool]:
        origin = _origin(parts)
        if kept:
            with self._lock:
                idle = self._idle.get(origin)
                connection = idle.pop() if idle else None
            if isinstance(connection, (_Connection, _TLSConnection)):
                connection.waits = waits
                return connection, True
        scheme, host, port = origin
        made = _TLSConnection(host, port, context=self._tls_context()) if scheme == "https" else _Connection(host, port)
        made.waits = waits
        made.opened = self._opened
        return made, False

    def _opened(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.callback(sock.close)

    def _tls_context(self) -> ssl.SSLContext:
        """Made on the first https request: loading the certificates takes tens of ms, which a plain-HTTP Hub (a
        mirror, the test Hub) never needs."""
        with self._lock:
            if self._tls is None:
                self._tls = tls_context(os.environ)
            return self._tls

    def _receive(
        self,
        url: str,
        named: str,
        response: http.client.HTTPResponse,
        waits: _Waits,
        sink: Callable[[bytes], None],
        expected: int | None,
    ) -> Answer | str:
        if _CONTROL.search(response.reason) or any(_CONTROL.search(value) for value in response.headers.values()):
            raise HubUnreachable(
                f"{named}: the answer's status line or headers hold control characters, which HTTP allows in "
                "neither; the server is broken or hostile"
            )
        encoding = (response.getheader("Content-Encoding") or "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise LimitExceeded(
                f"{named}: the server compressed its answer ({encoding[:20]}) though kernelpin asked for none; "
                "its size cannot be bounded before it is expanded. The server is broken or hostile"
            )
        most = waits.budget.limits.max_response_bytes
        location = response.getheader("Location")
        if response.status in _REDIRECTS and location is not None:
            _read(response, named, waits, most, None, lambda chunk: None)
            return urljoin(url, location.strip())
        if 200 <= response.status < 300:
            _read(response, named, waits, most if expected is None else expected, expected, sink)
            return Answer(response.status, response.headers)
        from kernelpin.hub.http_errors import refusal  # error answers only: a load that succeeds reads none

        page = bytearray()  # an error page: another document than the file, held to the API answers' limit
        _read(response, named, waits, most, None, page.extend)
        raise refusal(response.status, response.reason, url, response.headers, bytes(page))


def _read(
    response: http.client.HTTPResponse,
    named: str,
    waits: _Waits,
    limit: int,
    expected: int | None,
    sink: Callable[[bytes], None],
) -> None:
    """An answer's body to `sink`, at most `limit` bytes (refused before reading where its length says more: a
    server that would then hang up would look like a network failure)."""
    declared = (response.getheader("Content-Length") or "").strip()
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise too_long(named, limit, expected, announced=int(declared))
    received = 0
    while True:
        try:
            chunk = response.read1(READ_BYTES)
        except _TimedOut as error:
            raise _timed_out(error, named, waits, "receiving") from None
        except (OSError, http.client.HTTPException) as error:
            raise HubUnreachable(
                f"the connection broke off during the answer ({error or type(error).__name__})"
            ) from None
        if not chunk:
            break
        received += len(chunk)
        if received > limit:
            raise too_long(named, limit, expected)
        sink(chunk)
    if response.length:  # what its Content-Length announced and never came
        raise HubUnreachable(
            f"peer closed connection without sending complete message body (received {received} bytes, "
            f"expected {received + response.length})"
        )


def _timed_out(error: _TimedOut, named: str, waits: _Waits, doing: str) -> KernelpinError:
    if waits.budget.expired():
        return waits.budget.exceeded(f"{doing} {named}")
    return no_answer(named, waits.first, error.phase)


def _origin(parts: SplitResult) -> tuple[str, str, int]:
    try:
        port = parts.port
    except ValueError:
        raise HubUnreachable(f"{parts.geturl()[:200]}: the port is not a number in [0, 65535]") from None
    return parts.scheme, parts.hostname or "", port or _DEFAULT_PORTS.get(parts.scheme, 0)


def _same_origin(url: str, other: str) -> bool:
    return _origin(urlsplit(url)) == _origin(urlsplit(other))


def _https_upgrade(url: str, other: str) -> bool:
    """`other` is `url`'s host on https at the default port, where `url` was plain HTTP at the default port."""
    before, after = _origin(urlsplit(url)), _origin(urlsplit(other))
    return before == ("http", after[1], 80) and after == ("https", before[1], 443)
