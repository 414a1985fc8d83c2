"""Issue 28 (3): KERNELPIN_DEADLINE holds from the first byte: a server that drips its status line and
headers, or answers `100 Continue` without end, stops `lock`, `sync` and `load` at the deadline with one
line that names it, however short each wait between two bytes is."""

from __future__ import annotations

import pytest

from kernelpin.errors import KernelpinError
from testkit.fake_kernel import CPU_213, publish
from tests.kernelpin.faulty_hub import HostileHub, Lies
from tests.kernelpin.hub.test_hub_answers import fresh_load, locked, one_line_error  # noqa: F401 (a fixture)

DEADLINE = "stopped at the 0.3 s deadline for one command (KERNELPIN_DEADLINE)"


@pytest.fixture(scope="module")
def released(hub) -> tuple[str, str]:
    """A kernel repository of this module's own, with one release."""
    repo_id = "acme/deadline-target"
    return repo_id, publish(hub.repo(repo_id, "kernel"), "1.0.0", variants=(CPU_213,))


@pytest.mark.parametrize(
    ("lie", "answer"),
    [("drip_head", "refs"), ("drip_head", "tree"), ("drip_head", "file"), ("interim", "refs"), ("interim", "file")],
)
def test_a_server_that_stalls_before_its_body_is_cut_off_at_the_deadline(
    hub, released, locked, cli, monkeypatch, lie, answer
):
    # Failed before: each byte came well within KERNELPIN_HTTP_TIMEOUT, so the command waited until the server
    # gave up (`endless_for`), then called it unreachable.
    repo_id, commit = released
    with HostileHub(hub.endpoint, Lies(**{lie: answer}, drip_seconds=0.05, endless_for=20)) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        monkeypatch.setenv("KERNELPIN_DEADLINE", "0.3")
        if answer == "file":
            one_line_error(*cli("sync", "--torch", "2.13")[::2], DEADLINE)
            with pytest.raises(KernelpinError, match=r"\(KERNELPIN_DEADLINE\)"):
                fresh_load(repo_id, commit)
        else:
            one_line_error(*cli("lock", "--upgrade")[::2], DEADLINE, endpoint)
