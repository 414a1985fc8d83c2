"""The HTTP client huggingface_hub uses on kernelpin's behalf (publishing, through HfApi): every request gets a
deadline. kernelpin's own requests (refs, file listings, file bodies) go over kernelpin.hub.wire instead, which holds
them to the same limits with the standard library alone.

huggingface_hub's shared client has no timeout by default and retries timeouts with backoff, so a server
that accepts connections and never answers blocks a command for many minutes. kernelpin installs (through
huggingface_hub's documented `set_client_factory`) a client whose transport gives every request
connect/read/write timeouts of KERNELPIN_HTTP_TIMEOUT seconds and reports an expired one as HubTimeout,
which huggingface_hub does not retry: one silent server costs one timeout, and the error names it.

While a command's budget runs (kernelpin.hub.limits), every request made in its context is also held to the
command's deadline, from the connection to the last byte of the body: the network backend under httpcore
gives every connect, read and write at most the time left, so a server that drips its status line, its
headers or its body one byte at a time, or sends `100 Continue` without end, is cut off at the deadline, not
at the next timeout. Every body is held to a size as well, KERNELPIN_MAX_RESPONSE_BYTES;
such requests ask for uncompressed answers and refuse compressed ones, whose size is known only once expanded.
A GET answered "too many requests" (429, or 503 with a Retry-After) within a budget is sent again after the
wait the server asks for, a bounded number of times and within the deadline (kernelpin.hub.throttle).
Requests made outside a budget (other code of the process using huggingface_hub) get the timeouts only.
Imported only where kernelpin uses huggingface_hub's HfApi (publishing): it imports httpx2 and huggingface_hub.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import httpcore2
import httpx2
from huggingface_hub.utils import _http as hf_http
from huggingface_hub.utils import set_client_factory

from kernelpin.hub import limits
from kernelpin.hub.limits import LimitExceeded, too_long
from kernelpin.hub.throttle import wait_before_retry
from kernelpin.hub.wire import READ_BYTES, READ_WAIT_SLICE, HubTimeout, no_answer


def capped_timeouts(requested: dict[str, float | None], seconds: float) -> dict[str, float]:
    """httpx's per-request timeouts (connect, read, write, pool) with none longer than `seconds`: caps
    huggingface_hub's own long ones (60 s on its retried metadata request) and keeps its short ones (3 s on its
    once-a-day, best-effort fetch of the agent-harness registry, which a flat `seconds` stretched to 30 s:
    a silent Hub then cost two full timeouts per command instead of one)."""
    return {
        kind: seconds if (asked := requested.get(kind)) is None else min(asked, seconds)
        for kind in ("connect", "read", "write", "pool")
    }


def _time_left(timeout: float | None, expired: type[httpcore2.TimeoutException]) -> float | None:
    """`timeout`, cut to what is left of the running command's deadline (`expired` when nothing is)."""
    budget = limits.current()
    if budget is None:
        return timeout
    remaining = budget.remaining()
    if remaining <= 0:
        raise expired("the command's deadline has passed")
    return remaining if timeout is None else min(timeout, remaining)


class _DeadlineStream(httpcore2.NetworkStream):
    """A connection whose every read and write waits no longer than the running command's deadline allows."""

    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self.inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        # Up to READ_BYTES at once where httpcore asks for 64 KiB: a big file then costs a sixteenth of the
        # trips through httpcore, h11 and httpx (about 1.2 ms of CPU per MB of 3 with hashing and writing, on a
        # fast server). What a read takes beyond a response stays in h11's buffer for the next one (and for a
        # tunnel, is handed to it as leading data), as with any read.
        # The wait is made in slices of READ_WAIT_SLICE, between which pending signals are handled; a slice that
        # times out has consumed nothing, so the read goes on where it was.
        ends = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if ends is None else ends - time.monotonic()
            if left is not None and left <= 0:
                raise httpcore2.ReadTimeout("timed out")
            wait = _time_left(left, httpcore2.ReadTimeout)
            last = wait is not None and wait <= READ_WAIT_SLICE
            try:
                return self.inner.read(max(max_bytes, READ_BYTES), wait if last else READ_WAIT_SLICE)
            except httpcore2.ReadTimeout:
                if last:
                    raise

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.inner.write(buffer, _time_left(timeout, httpcore2.WriteTimeout))

    def close(self) -> None:
        self.inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore2.NetworkStream:
        return _DeadlineStream(
            self.inner.start_tls(ssl_context, server_hostname, _time_left(timeout, httpcore2.ConnectTimeout))
        )

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)


class _DeadlineBackend(httpcore2.NetworkBackend):
    """httpcore's network I/O, every connection a _DeadlineStream: the deadline holds for the status line and
    headers (and interim answers) too, which httpcore reads with per-read timeouts only."""

    def __init__(self, inner: httpcore2.NetworkBackend) -> None:
        self.inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        return _DeadlineStream(
            self.inner.connect_tcp(
                host, port, _time_left(timeout, httpcore2.ConnectTimeout), local_address, socket_options
            )
        )

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.NetworkStream:
        return _DeadlineStream(
            self.inner.connect_unix_socket(path, _time_left(timeout, httpcore2.ConnectTimeout), socket_options)
        )

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


class _DeadlineTransport(httpx2.BaseTransport):
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._by_scheme: dict[str, httpx2.HTTPTransport] = {}
        self._making = threading.Lock()

    def inner(self, scheme: str) -> httpx2.HTTPTransport:
        """httpx's transport for `scheme`'s requests, made on first use: the one for https loads the CA bundle
        (tens of ms, in every process), which a plain-HTTP Hub (a mirror, the test Hub) never needs. Plain HTTP
        gets a TLS context that verifies against no CA at all: nothing it could reach through TLS is trusted."""
        key = "http" if scheme == "http" else "https"
        with self._making:
            if key not in self._by_scheme:
                import ssl

                transport = (
                    httpx2.HTTPTransport()
                    if key == "https"
                    else httpx2.HTTPTransport(verify=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))
                )
                # httpx2's transport takes no network backend; the httpcore2 pool it wraps does (`network_backend`).
                pool = transport._pool
                pool._network_backend = _DeadlineBackend(pool._network_backend)
                self._by_scheme[key] = transport
            return self._by_scheme[key]

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        requested = request.extensions.get("timeout", {})
        url = request.url.copy_with(query=None)
        budget = limits.current()
        for attempt in itertools.count():
            timeouts = capped_timeouts(requested, self.seconds)
            if budget is not None:
                budget.check(f"requesting {url}")
                remaining = budget.remaining()
                timeouts = {kind: min(value, remaining) for kind, value in timeouts.items()}
                # A compressed answer's size is known only once it is expanded (a few KB can expand to GBs).
                request.headers["Accept-Encoding"] = "identity"
            request.extensions["timeout"] = timeouts
            try:
                response = self.inner(request.url.scheme).handle_request(request)
            except httpx2.TimeoutException as error:
                if budget is not None and budget.expired():
                    raise budget.exceeded(f"requesting {url}") from None
                raise self._timeout(error, url, timeouts) from None
            # "Too many requests": wait as the server asks, within the deadline (kernelpin.hub.throttle).
            if budget is None or request.method not in ("GET", "HEAD"):
                break
            wait = wait_before_retry(
                response.status_code,
                response.headers.get("Retry-After"),
                attempt,
                budget.remaining(),
                time.time(),
                str(url),
            )
            if wait is None:
                break
            response.close()
            time.sleep(wait)
        if budget is not None:
            encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
            if encoding not in ("", "identity"):
                response.close()
                raise LimitExceeded(
                    f"{url}: the server compressed its answer ({encoding[:20]}) though kernelpin asked for none; "
                    "its size cannot be bounded before it is expanded. The server is broken or hostile"
                )
            body = _BoundedBody(response, budget, url, timeouts, self)
            declared = response.headers.get("Content-Length", "").strip()
            # Refused before reading: a body announced longer than allowed would only be cut off later, and a
            # server that then hangs up looks like a network failure. A HEAD's length is the file's, not a body.
            if request.method != "HEAD" and declared.isascii() and declared.isdigit() and int(declared) > body.limit:
                response.close()
                raise body.too_long(announced=int(declared))
            response.stream = body
        return response

    def _timeout(self, error: httpx2.TimeoutException, url: httpx2.URL, timeouts: dict[str, float]) -> HubTimeout:
        phase = {
            httpx2.ConnectTimeout: "connect",
            httpx2.ReadTimeout: "read",
            httpx2.WriteTimeout: "write",
            httpx2.PoolTimeout: "pool",
        }.get(type(error))
        waited = timeouts[phase] if phase else max(timeouts.values())
        return no_answer(str(url), waited, type(error).__name__)

    def close(self) -> None:
        with self._making:
            for transport in self._by_scheme.values():
                transport.close()


class _BoundedBody(httpx2.SyncByteStream):
    """A response body held to a size, its reads to the command's deadline (by the _DeadlineBackend below)."""

    def __init__(
        self,
        response: httpx2.Response,
        budget: limits.Budget,
        url: httpx2.URL,
        timeouts: dict[str, float],
        transport: _DeadlineTransport,
    ) -> None:
        assert isinstance(response.stream, httpx2.SyncByteStream)  # as an HTTPTransport answers
        self.inner, self.budget, self.url = response.stream, budget, url
        self.limit = budget.limits.max_response_bytes
        self.timeouts, self.transport = timeouts, transport

    def __iter__(self) -> Iterator[bytes]:
        received = 0
        try:
            for chunk in self.inner:
                received += len(chunk)
                if received > self.limit:
                    raise self.too_long()
                yield chunk
        except httpx2.TimeoutException as error:
            if self.budget.expired():
                raise self.budget.exceeded(f"receiving {self.url}") from None
            raise self.transport._timeout(error, self.url, self.timeouts) from None

    def too_long(self, announced: int | None = None) -> LimitExceeded:
        """The error for an answer longer than allowed, seen while reading or `announced` in its headers."""
        return too_long(str(self.url), self.limit, None, announced)

    def close(self) -> None:
        self.inner.close()


_installed: float | None = None
_lock = threading.Lock()


def use_timeout(seconds: float) -> None:
    """Make huggingface_hub's shared client time out after `seconds` (re-installed only on a change)."""
    global _installed  # noqa: PLW0603  # what this put in huggingface_hub's client factory, process-wide as that is
    with _lock:
        if _installed == seconds:
            return

        def factory() -> httpx2.Client:
            return httpx2.Client(
                timeout=seconds,  # for requests that ask for none (httpx would give them 5 s); the transport caps the rest
                transport=_DeadlineTransport(seconds),
                event_hooks={"request": [hf_http.hf_request_event_hook]},
                follow_redirects=True,
            )

        set_client_factory(factory)
        _installed = seconds
