"""What a Hub may cost one command: time, bytes, listing entries. Each limit has a default, an environment
override, and an error that names the override.

A `Budget` is started per command (with the command's HubSource: one per CLI command, one per
`kernelpin.load` call) and made current in a context variable while kernelpin talks to the Hub, in whichever
thread, so every request made on kernelpin's behalf (its own and huggingface_hub's) is held to the same
deadline; requests made by other code of the process are not.
Imports nothing heavy: `kernelpin.loading.runtime` uses it on every application's load path.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import TypeVar

from kernelpin.errors import KernelpinError
from kernelpin.records import record

__untrusted_input__ = ("Limits.from_env",)  # parsers of input kernelpin does not control (kernelpin.errors)

HTTP_TIMEOUT = "KERNELPIN_HTTP_TIMEOUT"
DEADLINE = "KERNELPIN_DEADLINE"
MAX_LISTING = "KERNELPIN_MAX_LISTING"
MAX_RESPONSE_BYTES = "KERNELPIN_MAX_RESPONSE_BYTES"
DOWNLOADS = "KERNELPIN_DOWNLOADS"
READS = "KERNELPIN_READS"


class LimitExceeded(KernelpinError):
    """A server made a command exceed one of kernelpin's limits; the message names the limit's variable."""


class Interrupted(Exception):
    """A request stopped waiting because its command was interrupted (Budget.interrupt): raised in the threads still
    waiting when Ctrl-C came, whose errors nobody reports (the command ends with the KeyboardInterrupt), so not a
    KernelpinError, which the API exports for callers to catch."""


@record
class Limits:
    http_timeout: float = 30.0  # seconds without progress (connect, next bytes) before a request fails
    deadline: float = 600.0  # seconds one command may spend on the Hub in all, transfers included
    max_listing: int = 100_000  # entries of one refs or file listing (all pages together)
    max_response_bytes: int = 16 << 20  # one API answer (refs, a listing page); file bodies: their pinned size
    downloads: int = 8  # file downloads at once (of one variant, of several kernels), as huggingface_hub's default
    # Small files read into memory at once (the metadata.json files and signature bundles a lock reads, a few KB
    # each, ten per kernel): each waits a round trip, not for bandwidth, so more of them share the wait.
    reads: int = 32

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Limits:
        return cls(
            http_timeout=_read(environ, HTTP_TIMEOUT, cls.http_timeout, float, 3600, "a number of seconds"),
            deadline=_read(environ, DEADLINE, cls.deadline, float, 7 * 86400, "a number of seconds"),
            max_listing=_read(environ, MAX_LISTING, cls.max_listing, int, 10**9, "a whole number"),
            max_response_bytes=_read(
                environ, MAX_RESPONSE_BYTES, cls.max_response_bytes, int, 1 << 40, "a whole number of bytes"
            ),
            downloads=_read(environ, DOWNLOADS, cls.downloads, int, 64, "a whole number"),
            reads=_read(environ, READS, cls.reads, int, 64, "a whole number"),
        )


_Number = TypeVar("_Number", int, float)


def _read(
    environ: Mapping[str, str], name: str, default: _Number, kind: Callable[[str], _Number], high: float, what: str
) -> _Number:
    text = environ.get(name)
    if not text:
        return default
    try:
        value = kind(text)
    except ValueError:
        value = -1
    if not 0 < value <= high:
        raise KernelpinError(f"{name}={text[:20]!r} is not {what} in (0, {high:g}]")
    return value


class Budget:
    """The limits of one command, with its deadline counted from when the budget was started."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.ends = time.monotonic() + limits.deadline
        self._interruption = threading.Event()

    def interrupt(self) -> None:
        """Make every wait of this budget's requests end within a slice (kernelpin.hub.wire.READ_WAIT_SLICE), and
        a pause (a server's Retry-After) at once, raising Interrupted: a command interrupted (Ctrl-C) then does not
        wait for its other threads' requests, up to their timeout against a server that does not answer."""
        self._interruption.set()

    def stop_if_interrupted(self, what: str) -> None:
        if self._interruption.is_set():
            raise Interrupted(f"{what}: the command was interrupted")

    def pause(self, seconds: float, what: str) -> None:
        """Wait `seconds` (as a throttling server asks), unless the command is interrupted meanwhile."""
        self._interruption.wait(seconds)
        self.stop_if_interrupted(what)

    def remaining(self) -> float:
        return self.ends - time.monotonic()

    def expired(self) -> bool:
        return self.remaining() <= 0

    def exceeded(self, what: str) -> LimitExceeded:
        return LimitExceeded(
            f"{what}: stopped at the {self.limits.deadline:g} s deadline for one command ({DEADLINE}); the "
            f"server is too slow or is stalling: retry later, or set {DEADLINE}=SECONDS to allow more"
        )

    def check(self, what: str) -> None:
        self.stop_if_interrupted(what)
        if self.expired():
            raise self.exceeded(what)


def too_long(url: str, limit: int, expected: int | None, announced: int | None = None) -> LimitExceeded:
    """The error for an answer from `url` longer than allowed, seen while reading or `announced` in its headers:
    a file's body held to its `expected` size (as locked or listed), or an API answer (`expected` None) held to
    `limit` bytes (KERNELPIN_MAX_RESPONSE_BYTES)."""
    if expected is None:
        how = "is longer" if announced is None else f"announces {announced} bytes, more"
        return LimitExceeded(
            f"{url}: the answer {how} than {limit} bytes ({MAX_RESPONSE_BYTES}); the server "
            f"is broken or hostile. If the answer is genuine, set {MAX_RESPONSE_BYTES}=N to allow more"
        )
    how = "sends more" if announced is None else f"announces {announced} bytes, more"
    return LimitExceeded(
        f"{url}: the server {how} than the {expected} bytes the file has (as locked or "
        "listed); the download was stopped and nothing of it is kept. The server is broken or hostile"
    )


_current: ContextVar[Budget | None] = ContextVar("kernelpin_budget", default=None)


def current() -> Budget | None:
    return _current.get()


@contextlib.contextmanager
def running(budget: Budget) -> Iterator[Budget]:
    """Make `budget` the running command's, unless one is already running (then the outer one counts)."""
    outer = _current.get()
    if outer is not None:
        yield outer
        return
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)
