"""The HTTP client huggingface_hub uses on kernelpin's behalf: every request gets a deadline.

huggingface_hub's shared client has no timeout by default and retries timeouts with backoff, so a server
that accepts connections and never answers blocks a command for many minutes. kernelpin installs (through
huggingface_hub's documented `set_client_factory`) a client whose transport gives every request
connect/read/write timeouts of KERNELPIN_HTTP_TIMEOUT seconds and reports an expired one as HubTimeout,
which huggingface_hub does not retry: one silent server costs one timeout, and the error names it.
Imported only when kernelpin talks to a Hub (it imports httpx2 and huggingface_hub).
"""

from __future__ import annotations

import threading

import httpx2
from huggingface_hub.utils import _http as hf_http
from huggingface_hub.utils import set_client_factory

from kernelpin.errors import KernelpinError


class HubTimeout(KernelpinError):
    """A request got no answer within the timeout."""


def capped_timeouts(requested: dict[str, float | None], seconds: float) -> dict[str, float]:
    """httpx's per-request timeouts (connect, read, write, pool) with none longer than `seconds`: caps
    huggingface_hub's own long ones (60 s on its retried metadata request) and keeps its short ones (3 s on its
    once-a-day, best-effort fetch of the agent-harness registry, which a flat `seconds` stretched to 30 s:
    a silent Hub then cost two full timeouts per command instead of one)."""
    return {kind: seconds if requested.get(kind) is None else min(requested[kind], seconds)
            for kind in ("connect", "read", "write", "pool")}


class _DeadlineTransport(httpx2.BaseTransport):
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.inner = httpx2.HTTPTransport()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        timeouts = capped_timeouts(request.extensions.get("timeout", {}), self.seconds)
        request.extensions["timeout"] = timeouts
        try:
            return self.inner.handle_request(request)
        except httpx2.TimeoutException as error:
            url = request.url.copy_with(query=None)
            phase = {httpx2.ConnectTimeout: "connect", httpx2.ReadTimeout: "read", httpx2.WriteTimeout: "write",
                     httpx2.PoolTimeout: "pool"}.get(type(error))
            waited = timeouts[phase] if phase else max(timeouts.values())
            raise HubTimeout(
                f"no answer from {url} within {waited:g} s ({type(error).__name__}); the server is down "
                "or overloaded: retry later, or set KERNELPIN_HTTP_TIMEOUT=SECONDS to wait longer"
            ) from None

    def close(self) -> None:
        self.inner.close()


_installed: float | None = None
_lock = threading.Lock()


def use_timeout(seconds: float) -> None:
    """Make huggingface_hub's shared client time out after `seconds` (re-installed only on a change)."""
    global _installed
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
