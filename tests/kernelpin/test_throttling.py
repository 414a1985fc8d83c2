"""Issue 30, point 6: a Hub that answers "too many requests" (HTTP 429, kernels issue #640; 503 with a
Retry-After). kernelpin waits as it asks and asks again, a bounded number of times and never past the command's
deadline (KERNELPIN_DEADLINE), and says so in one line when it gives up. Against testkit.faulty_hub.HostileHub
in front of the suite's real Hub."""

from __future__ import annotations

import email.utils
import shutil
import time

import pytest

from kernelpin.limits import LimitExceeded
from kernelpin.throttle import MAX_RETRIES, retry_after_seconds, wait_before_retry
from testkit.faulty_hub import HostileHub, Lies
from tests.kernelpin.test_hostile_hub import fresh_load, locked, one_line_error, released  # noqa: F401 (fixtures)


def test_retry_after_is_read_in_seconds_or_as_an_http_date():
    now = 1_800_000_000.0
    assert retry_after_seconds("7", now) == 7.0
    assert retry_after_seconds(email.utils.formatdate(now + 30, usegmt=True), now) == pytest.approx(30, abs=1)
    assert retry_after_seconds(email.utils.formatdate(now - 30, usegmt=True), now) == 0.0  # in the past: now
    for unreadable in (None, "", "soon", "-5", "1e9", "Sun, 99 Foo 2026"):
        assert retry_after_seconds(unreadable, now) is None


def test_which_answers_are_retried_and_for_how_long():
    assert wait_before_retry(429, "3", 0, 60, 0, "u") == 3
    assert [wait_before_retry(429, None, attempt, 600, 0, "u") for attempt in range(3)] == [1, 2, 4]
    assert wait_before_retry(429, "3", MAX_RETRIES, 60, 0, "u") is None  # then the 429 is the error
    assert wait_before_retry(503, "3", 0, 60, 0, "u") == 3
    assert wait_before_retry(503, None, 0, 60, 0, "u") is None  # a plain failure: not retried
    assert wait_before_retry(404, "3", 0, 60, 0, "u") is None
    with pytest.raises(LimitExceeded, match=r"asks to wait 3600 s \(Retry-After\), more than the 60 s left .*"
                                            r"KERNELPIN_DEADLINE=SECONDS"):
        wait_before_retry(429, "3600", 0, 60, 0, "u")


def test_sync_and_load_wait_as_a_throttling_hub_asks_and_succeed(hub, released, locked, cli, monkeypatch):
    # Failed before: the first 429 was the command's error ("HTTP 429 ... retry later").
    repo_id, commit = released
    for command in ("sync", "load"):
        server = HostileHub(hub.endpoint, Lies(throttle=2, retry_after="1"))
        with server as endpoint:
            monkeypatch.setenv("HF_ENDPOINT", endpoint)
            if command == "sync":
                status, _, err = cli("sync", "--torch", "2.13")
                assert status == 0, err
            else:
                shutil.rmtree(locked.parent / "hf-cache")  # load downloads every file again
                assert fresh_load(repo_id, commit).VERSION == "1.0.0"
        assert len(server.throttled) == 2
        # Each retry came after the second the server asked for, not before.
        for answered in server.throttled:
            following = min(t for t in server.arrivals if t > answered)
            assert following - answered >= 0.95


def test_a_wait_past_the_deadline_fails_at_once_in_one_line(hub, locked, cli, monkeypatch):
    server = HostileHub(hub.endpoint, Lies(throttle=100, retry_after="3600"))
    with server as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        monkeypatch.setenv("KERNELPIN_DEADLINE", "30")
        started = time.monotonic()
        one_line_error(*cli("sync", "--torch", "2.13")[::2], "HTTP 429", "asks to wait 3600 s (Retry-After)",
                       "KERNELPIN_DEADLINE")
        assert time.monotonic() - started < 30  # it did not sit out the deadline either
    assert server.requests == 1


@pytest.mark.parametrize("status", [429, 503])
def test_a_hub_that_never_stops_throttling_is_asked_a_bounded_number_of_times(hub, locked, cli, monkeypatch, status):
    server = HostileHub(hub.endpoint, Lies(throttle=100, throttle_status=status, retry_after="0"))
    with server as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        one_line_error(*cli("sync", "--torch", "2.13")[::2], f"HTTP {status}")
    assert server.requests == 1 + MAX_RETRIES
