"""A Hub that says "too many requests": how long to wait before asking again, within the command's deadline.

The Hub answers HTTP 429 when a client asks too fast (the first load of a big kernel, many parallel downloads:
kernels issue #640), and a server under maintenance may answer 503 with a Retry-After. kernelpin waits as the
answer says (Retry-After in seconds or as an HTTP date; without one, 1, 2, 4, ... s) and asks again, at most
MAX_RETRIES times per request, and never past the command's deadline: a wait that would end after it fails at
once with an error that says so. Pure: the transport (kernelpin.hub.client) does the waiting.
"""

from __future__ import annotations

import email.utils
import math

from kernelpin.hub.limits import DEADLINE, LimitExceeded

__untrusted_input__ = ("retry_after_seconds",)  # parsers of input kernelpin does not control (kernelpin.errors)

MAX_RETRIES = 5  # further answers of one request that say "wait" are passed on as errors
_FIRST_BACKOFF = 1.0  # seconds, doubled per retry, when the server names no wait


def retry_after_seconds(value: str | None, now: float) -> float | None:
    """The wait a Retry-After header asks for (delta-seconds or an HTTP date; `now` in epoch seconds), or None
    when there is none or it cannot be read (then kernelpin backs off on its own)."""
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():  # str.isdigit() is true for "²" too, which int() refuses
        return float(int(text[:12]))
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT
        return None
    return max(0.0, when.timestamp() - now)


def wait_before_retry(
    status: int, retry_after: str | None, attempt: int, remaining: float, now: float, url: str
) -> float | None:
    """Seconds to wait before sending a request again whose answer was `status` (attempt 0 is the first
    answer), or None to pass the answer on: not a "wait" answer (429, or 503 with a Retry-After), or retried
    MAX_RETRIES times already. A wait that would outlast the deadline (`remaining` seconds) raises."""
    asked = retry_after_seconds(retry_after, now)
    if status != 429 and not (status == 503 and asked is not None):
        return None
    if attempt >= MAX_RETRIES:
        return None
    wait = asked if asked is not None else _FIRST_BACKOFF * 2**attempt
    if not math.isfinite(wait) or wait >= remaining:
        how = f"asks to wait {wait:g} s (Retry-After)" if asked is not None else f"would need a wait of {wait:g} s"
        raise LimitExceeded(
            f"{url}: the server is throttling requests (HTTP {status}) and {how}, more than the "
            f"{max(remaining, 0):.0f} s left of this command's deadline ({DEADLINE}); retry later, or set "
            f"{DEADLINE}=SECONDS to wait longer"
        )
    return wait
