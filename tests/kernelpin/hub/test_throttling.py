"""Issue 30, point 6: a Hub that answers "too many requests" (HTTP 429, kernels issue #640; 503 with a
Retry-After). kernelpin waits as it asks and asks again, a bounded number of times and never past the command's
deadline (KERNELPIN_DEADLINE), and says so in one line when it gives up. Against tests.kernelpin.faulty_hub.HostileHub
in front of the suite's real Hub."""

from __future__ import annotations

import email.utils
import os
import shutil
import time
from collections import Counter

import pytest

from kernelpin.hub.limits import LimitExceeded
from kernelpin.hub.throttle import MAX_RETRIES, retry_after_seconds, wait_before_retry
from testkit.fake_kernel import CPU_213, publish
from tests.kernelpin.faulty_hub import HostileHub, Lies
from tests.kernelpin.hub.test_hub_answers import fresh_load, locked, one_line_error  # noqa: F401 (locked: a fixture)


@pytest.fixture(scope="module")
def released(hub) -> tuple[str, str]:
    """A kernel repository with one release of three files and a 200 KB library."""
    repo_id = "acme/throttled"
    commit = publish(hub.repo(repo_id, "kernel"), "1.0.0", variants=(CPU_213,), extra={"_big.so": os.urandom(200_000)})
    return repo_id, commit


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
    with pytest.raises(
        LimitExceeded,
        match=r"asks to wait 3600 s \(Retry-After\), more than the 60 s left .*"
        r"KERNELPIN_DEADLINE=SECONDS",
    ):
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
        for answered, path in server.throttled:
            again = min(t for t, asked in server.arrivals if asked == path and t > answered)
            assert again - answered >= 0.95


def test_a_wait_past_the_deadline_fails_at_once_in_one_line(hub, locked, cli, monkeypatch):
    server = HostileHub(hub.endpoint, Lies(throttle=100, retry_after="3600"))
    with server as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        monkeypatch.setenv("KERNELPIN_DEADLINE", "30")
        started = time.monotonic()
        one_line_error(
            *cli("sync", "--torch", "2.13")[::2], "HTTP 429", "asks to wait 3600 s (Retry-After)", "KERNELPIN_DEADLINE"
        )
        assert time.monotonic() - started < 30  # it did not sit out the deadline either
    paths = [path for _, path in server.arrivals]
    assert len(paths) == len(set(paths))  # no request was sent again


@pytest.mark.parametrize("status", [429, 503])
def test_a_hub_that_never_stops_throttling_is_asked_a_bounded_number_of_times(hub, locked, cli, monkeypatch, status):
    server = HostileHub(hub.endpoint, Lies(throttle=100, throttle_status=status, retry_after="0"))
    with server as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        one_line_error(*cli("sync", "--torch", "2.13")[::2], f"HTTP {status}")
    asked = Counter(path for _, path in server.arrivals)
    assert max(asked.values()) == 1 + MAX_RETRIES and set(asked.values()) <= {1 + MAX_RETRIES}


# --- parallel downloads -------------------------------------------------------------------------------


def test_a_variants_files_and_several_kernels_download_in_parallel(hub, released, new_repo, project, cli, monkeypatch):
    # Failed before: one file after another (most_in_flight was 1), kernel after kernel.
    other, repo = new_repo("parallel", "kernel")
    publish(repo, "1.0.0", variants=(CPU_213,))
    project(f'"{released[0]}" = "^1"\n"{other}" = "^1"\n')
    assert cli("lock")[0] == 0
    server = HostileHub(hub.endpoint, Lies(file_delay=0.5))
    with server as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        status, _, err = cli("sync", "--torch", "2.13")
        assert status == 0, err
    assert server.most_in_flight >= 4  # 4 + 3 files in all
    assert cli("verify")[0] == 0


def test_parallel_downloads_are_bounded_and_held_to_the_deadline(hub, released, locked, cli, monkeypatch, tmp_path):
    server = HostileHub(hub.endpoint, Lies(file_delay=0.2))
    with server as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        monkeypatch.setenv("KERNELPIN_DOWNLOADS", "1")
        assert cli("sync", "--torch", "2.13")[0] == 0
    assert server.most_in_flight == 1
    shutil.rmtree(tmp_path / "hf-cache")
    with HostileHub(hub.endpoint, Lies(file_delay=3)) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        monkeypatch.setenv("KERNELPIN_DOWNLOADS", "8")
        monkeypatch.setenv("KERNELPIN_DEADLINE", "1")
        one_line_error(*cli("sync", "--torch", "2.13")[::2], "stopped at the 1 s deadline for one command")
    assert not list((tmp_path / "hf-cache").rglob("*.so"))
