"""The HTTP client huggingface_hub uses on kernelpin's behalf: every request gets a deadline.

huggingface_hub's shared client has no timeout by default and retries timeouts with backoff, so a server
that accepts connections and never answers blocks a command for many minutes. kernelpin installs (through
huggingface_hub's documented `set_client_factory`) a client whose transport gives every request
connect/read/write timeouts of KERNELPIN_HTTP_TIMEOUT seconds and reports an expired one as HubTimeout,
which huggingface_hub does not retry: one silent server costs one timeout, and the error names it.

While a command's budget runs (kernelpin.hub.limits), every request made in its context is also held to the
command's deadline, from the connection to the last byte of the body: the network backend under httpcore
gives every connect, read and write at most the time left, so a server that drips its status line, its
headers or its body one byte at a time, or sends `100 Continue` without end, is cut off at the deadline, not
at the next timeout. Every body is held to a size as well: the size the request
declares (`expect_size`: a file's pinned or listed size) or KERNELPIN_MAX_RESPONSE_BYTES (API answers);
such requests ask for uncompressed answers and refuse compressed ones, whose size is known only once expanded.
A GET answered "too many requests" (429, or 503 with a Retry-After) within a budget is sent again after the
wait the server asks for, a bounded number of times and within the deadline (kernelpin.hub.throttle).
Requests made outside a budget (other code of the process using huggingface_hub) get the timeouts only.
Imported only when kernelpin talks to a Hub (it imports httpx2 and huggingface_hub).
"""

from __future__ import annotations

import itertools
import os
import platform
import re
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import httpcore2
import httpx2
from huggingface_hub.utils import _http as hf_http
from huggingface_hub.utils import set_client_factory

from kernelpin.errors import KernelpinError
from kernelpin.hub import limits
from kernelpin.hub.limits import MAX_RESPONSE_BYTES, LimitExceeded
from kernelpin.hub.throttle import wait_before_retry

READ_BYTES = 1 << 20  # the most a connection reads at once
# The longest one wait for a read lasts before Python runs again: a signal (Ctrl-C) that arrives after the
# interpreter last looked and before the socket's wait began wakes nothing, and would otherwise be seen only when
# the read ends, at its timeout (KERNELPIN_HTTP_TIMEOUT, 30 s by default) or the command's deadline.
READ_WAIT_SLICE = 0.25
EXPECT_SIZE = "kernelpin_expect_size"  # request extension: the body must be exactly this long (bytes)


def expect_size(size: int) -> dict[str, int]:
    """Request extensions for a body of a known size (a file whose size the lock or the listing gives)."""
    return {EXPECT_SIZE: size}


class HubTimeout(KernelpinError):
    """A request got no answer within the timeout."""


_HEADER_VALUE = re.compile(r"[\x21-\x7e]+")  # a token as the Hub issues it: printable ASCII, no space


def request_headers() -> dict[str, str]:
    """The headers of kernelpin's own requests, built here and not by huggingface_hub's build_hf_headers: its
    User-Agent carries an agent-harness id from `<endpoint>/api/agent-harnesses`, fetched while the headers
    are built and kept in HF_HOME for a day, so one hostile Hub's answer would go into every request to every
    Hub (or make each fail). This sends kernelpin's name and versions, and the token huggingface_hub would
    send (HF_TOKEN or the saved one, unless HF_HUB_DISABLE_IMPLICIT_TOKEN), refused when no header can carry it."""
    from huggingface_hub import __version__ as hub_version

    headers = {"user-agent": f"kernelpin; hf_hub/{hub_version}; python/{platform.python_version()}"}
    token = implicit_token()
    if token is not None:
        if not _HEADER_VALUE.fullmatch(token):
            raise KernelpinError(
                "the Hub token (HF_TOKEN, or the one `hf auth login` saved) holds spaces, control or non-ASCII "
                "characters, which no request header can carry; set HF_TOKEN to the token exactly as the Hub shows it"
            )
        headers["authorization"] = f"Bearer {token}"
    return headers


def implicit_token() -> str | None:
    """The token huggingface_hub sends unasked (its get_token), None under HF_HUB_DISABLE_IMPLICIT_TOKEN.
    get_token is called only where one of its sources can give a token (an OIDC exchange, HF_TOKEN or
    HUGGING_FACE_HUB_TOKEN, the token file, Google Colab's secrets): importing it imports a YAML parser and
    a file-lock library (for refreshing a saved OAuth token), about 35 ms of a cold get_kernel, spent for
    nothing where no token exists."""
    from huggingface_hub import constants
    from huggingface_hub.utils import is_google_colab

    if constants.HF_HUB_DISABLE_IMPLICIT_TOKEN:
        return None
    from_environment = any(os.environ.get(name) for name in ("HF_OIDC_RESOURCE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"))
    if not (from_environment or is_google_colab() or _exists(constants.HF_TOKEN_PATH)):
        return None
    from huggingface_hub import get_token

    return get_token()


def _exists(path: str) -> bool:
    """Whether there is something at `path` for get_token to read: anything but "no such file", which is the
    one failure get_token takes as "no token" (an unreadable file or a file on the way raises there too)."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return False
    except (OSError, ValueError):  # get_token's read fails as well, and says why
        pass
    return True


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
            # The expected size is the file's; an error page or a redirect is another document.
            limit = request.extensions.get(EXPECT_SIZE) if 200 <= response.status_code < 300 else None
            body = _BoundedBody(response, budget, url, limit, timeouts, self)
            declared = response.headers.get("Content-Length", "").strip()
            # Refused before reading: a body announced longer than allowed would only be cut off later, and a
            # server that then hangs up looks like a network failure. A HEAD's length is the file's, not a body.
            if request.method != "HEAD" and declared.isdigit() and int(declared) > body.limit:
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
        return HubTimeout(
            f"no answer from {url} within {waited:g} s ({type(error).__name__}); the server is down "
            "or overloaded: retry later, or set KERNELPIN_HTTP_TIMEOUT=SECONDS to wait longer"
        )

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
        expected: int | None,
        timeouts: dict[str, float],
        transport: _DeadlineTransport,
    ) -> None:
        assert isinstance(response.stream, httpx2.SyncByteStream)  # as an HTTPTransport answers
        self.inner, self.budget, self.url, self.expected = response.stream, budget, url, expected
        self.limit = budget.limits.max_response_bytes if expected is None else expected
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
        if self.expected is None:
            how = "is longer" if announced is None else f"announces {announced} bytes, more"
            return LimitExceeded(
                f"{self.url}: the answer {how} than {self.limit} bytes ({MAX_RESPONSE_BYTES}); the server "
                f"is broken or hostile. If the answer is genuine, set {MAX_RESPONSE_BYTES}=N to allow more"
            )
        how = "sends more" if announced is None else f"announces {announced} bytes, more"
        return LimitExceeded(
            f"{self.url}: the server {how} than the {self.expected} bytes the file has (as locked or "
            "listed); the download was stopped and nothing of it is kept. The server is broken or hostile"
        )

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
