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


class _DeadlineTransport(httpx2.BaseTransport):
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.inner = httpx2.HTTPTransport()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        # Also caps huggingface_hub's own per-call timeouts (e.g. 60 s on its retried metadata request).
        request.extensions["timeout"] = httpx2.Timeout(self.seconds).as_dict()
        try:
            return self.inner.handle_request(request)
        except httpx2.TimeoutException as error:
            url = request.url.copy_with(query=None)
            raise HubTimeout(
                f"no answer from {url} within {self.seconds:g} s ({type(error).__name__}); the server is down "
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
                transport=_DeadlineTransport(seconds),
                event_hooks={"request": [hf_http.hf_request_event_hook]},
                follow_redirects=True,
            )

        set_client_factory(factory)
        _installed = seconds
