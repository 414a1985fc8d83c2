"""Issue 28 (4): one hostile Hub cannot poison HF_HOME for every endpoint. huggingface_hub's build_hf_headers
fetches `<endpoint>/api/agent-harnesses` and keeps the answer in HF_HOME for a day, and puts a harness id
from it into every User-Agent; kernelpin's own requests carry headers kernelpin builds, so that file is
never read for them, the registry is never fetched, and the token is checked before it is sent."""

from __future__ import annotations

import json

import pytest
from huggingface_hub import constants
from huggingface_hub.utils import _detect_agent

from kernelpin.hubclient import request_headers
from testkit.fake_kernel import CPU_213, publish
from tests.kernelpin.faulty_hub import HostileHub, Lies
from tests.kernelpin.test_hub_answers import fresh_load, locked, one_line_error  # noqa: F401 (a fixture)

@pytest.fixture(scope="module")
def released(hub) -> tuple[str, str]:
    """A kernel repository of this module's own, with one release."""
    repo_id = "acme/headers-target"
    return repo_id, publish(hub.repo(repo_id, "kernel"), "1.0.0", variants=(CPU_213,))



@pytest.fixture
def agent_detection(tmp_path, monkeypatch):
    """huggingface_hub's agent detection switched on (the suite's HF_HUB_DISABLE_TELEMETRY=1 switches it off),
    reading its registry from this test's HF_HOME; returns that file."""
    registry = tmp_path / "hf-home" / ".agent_harnesses.json"
    registry.parent.mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(constants, "AGENT_HARNESSES_PATH", str(registry))
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", False)
    monkeypatch.setattr(_detect_agent, "_registry", None)
    return registry


@pytest.mark.parametrize("harness", ["agent-\u00fc", "agent\r\nX-Injected: 1"])
def test_a_poisoned_harness_registry_in_hf_home_reaches_no_request(released, locked, cli, agent_detection,
                                                                   monkeypatch, harness):
    # Failed before: the non-ASCII id made every command a UnicodeEncodeError traceback, the CR/LF one made
    # each fail as "cannot reach" a server that never got a request.
    repo_id, commit = released
    agent_detection.write_text(json.dumps({"standardEnvVars": [], "harnesses": {harness: {"envVars": {"PATH": "*"}}}}))
    status, _, err = cli("lock", "--upgrade")
    assert status == 0, err
    status, _, err = cli("sync", "--torch", "2.13")
    assert status == 0, err
    assert fresh_load(repo_id, commit).VERSION == "1.0.0"


def test_kernelpin_never_asks_a_hub_for_its_harness_registry(hub, locked, cli, agent_detection, monkeypatch):
    fetched = []
    monkeypatch.setattr(_detect_agent, "_fetch_registry", lambda: fetched.append(1))
    server = HostileHub(hub.endpoint, Lies())
    with server as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        status, _, err = cli("lock", "--upgrade")
        assert status == 0, err
        status, _, err = cli("sync", "--torch", "2.13")
        assert status == 0, err
    assert fetched == [] and not agent_detection.exists()
    assert len(server.seen) > 2 and {agent.split(";")[0] for _, agent in server.seen} == {"kernelpin"}


@pytest.mark.parametrize("token", ["hf_abc\r\nX-Injected: 1", "hf_\u00e4bc", "hf abc"])
def test_a_token_no_header_can_carry_is_refused_by_name(locked, cli, monkeypatch, token):
    monkeypatch.setenv("HF_TOKEN", token)
    one_line_error(*cli("lock", "--upgrade")[::2], "the Hub token (HF_TOKEN")


def test_the_token_is_sent_as_huggingface_hub_would_send_it(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_" + "a" * 34)
    assert request_headers()["authorization"] == "Bearer hf_" + "a" * 34
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_IMPLICIT_TOKEN", True)
    assert "authorization" not in request_headers()
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_IMPLICIT_TOKEN", False)
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setenv("HF_HOME", "/nonexistent-hf-home")
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", "/nonexistent-hf-home/token")
    assert "authorization" not in request_headers()
