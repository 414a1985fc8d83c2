"""Issue 28 (4): one hostile Hub cannot poison HF_HOME for every endpoint. huggingface_hub's build_hf_headers
fetches `<endpoint>/api/agent-harnesses` and keeps the answer in HF_HOME for a day, and puts a harness id
from it into every User-Agent; kernelpin's own requests carry headers kernelpin builds, so that file is
never read for them, the registry is never fetched, and the token is checked before it is sent."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from huggingface_hub import constants
from huggingface_hub.utils import _detect_agent

from kernelpin.hub.request_headers import request_headers
from testkit.fake_kernel import CPU_213, publish
from tests.kernelpin.faulty_hub import HostileHub, Lies
from tests.kernelpin.hub.test_hub_answers import fresh_load, locked, one_line_error  # noqa: F401 (a fixture)


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
def test_a_poisoned_harness_registry_in_hf_home_reaches_no_request(
    released, locked, cli, agent_detection, monkeypatch, harness
):
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


@pytest.fixture
def no_token(tmp_path, monkeypatch):
    """No token anywhere huggingface_hub's get_token looks: returns the token file's path (not made)."""
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE", "HF_OIDC_ID_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "hf-home" / "token"
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(path))
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_IMPLICIT_TOKEN", False)
    return path


@pytest.mark.parametrize("variable", ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"])
def test_a_token_in_the_environment_is_sent(no_token, monkeypatch, variable):
    monkeypatch.setenv(variable, " hf_from_environment\n")
    assert request_headers()["authorization"] == "Bearer hf_from_environment"


def test_the_saved_token_is_sent_wherever_hf_token_path_puts_it(no_token):
    assert "authorization" not in request_headers()
    no_token.parent.mkdir()
    no_token.write_text("hf_saved\n")
    assert request_headers()["authorization"] == "Bearer hf_saved"
    no_token.write_text("")  # an empty file is no token, as for huggingface_hub
    assert "authorization" not in request_headers()


def test_a_token_file_that_cannot_be_read_fails_as_in_huggingface_hub(no_token):
    no_token.mkdir(parents=True)  # a directory where the token file should be
    with pytest.raises(IsADirectoryError):
        request_headers()


def test_an_oidc_exchange_asked_for_is_attempted_not_skipped(no_token, monkeypatch):
    # HF_OIDC_RESOURCE asks get_token for a CI token exchange; without an id token it raises rather than
    # silently sending no token, and so does kernelpin.
    from huggingface_hub.errors import OIDCError

    monkeypatch.setenv("HF_OIDC_RESOURCE", "acme/kernel")
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("ACTIONS_ID_TOKEN_REQUEST_URL", raising=False)
    with pytest.raises(OIDCError, match="HF_OIDC_RESOURCE is set"):
        request_headers()


def test_a_saved_token_reaches_the_hub(no_token, released, hub, locked, cli, monkeypatch):
    no_token.parent.mkdir()
    no_token.write_text("hf_saved_for_the_hub")
    server = HostileHub(hub.endpoint, Lies())
    with server as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        status, _, err = cli("lock", "--upgrade")
    assert status == 0, err
    assert server.requests > 1 and server.authorizations == ["Bearer hf_saved_for_the_hub"] * server.requests


def test_without_a_token_source_huggingface_hubs_token_module_is_not_imported(tmp_path):
    # It imports a YAML parser and a file-lock library (about 35 ms of a cold get_kernel); failed before:
    # every request's headers called get_token.
    environ = {
        key: value
        for key, value in os.environ.items()
        if key not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE", "HF_TOKEN_PATH")
    }
    environ["HF_HOME"] = str(tmp_path / "hf-home")
    check = (
        "import sys; from kernelpin.hub.request_headers import request_headers; headers = request_headers(); "
        "assert 'authorization' not in headers, headers; "
        "assert 'huggingface_hub.utils._auth' not in sys.modules, 'get_token was imported'; "
        "(tmp := __import__('pathlib').Path(sys.argv[1])).parent.mkdir(); tmp.write_text('hf_x'); "
        "assert request_headers()['authorization'] == 'Bearer hf_x'"
    )
    done = subprocess.run(
        [sys.executable, "-c", check, str(tmp_path / "hf-home" / "token")],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def _stored_tokens(no_token, monkeypatch, text: str | None) -> None:
    """The stored_tokens file beside the token file (huggingface_hub's INI of every saved token), or none."""
    path = no_token.parent / "stored_tokens"
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(path))
    no_token.parent.mkdir(exist_ok=True)
    if text is not None:
        path.write_text(text)


FAR = "9999999999"  # an OAuth token's expires_at far ahead: get_token returns it without refreshing


@pytest.mark.parametrize(
    ("environment", "saved", "stored"),
    [
        ({"HF_TOKEN": "hf_env"}, "hf_saved", None),
        ({"HF_TOKEN": "  \n", "HUGGING_FACE_HUB_TOKEN": "hf_old_name"}, "hf_saved", None),  # blank HF_TOKEN wins `or`
        ({"HUGGING_FACE_HUB_TOKEN": "hf_old_name"}, None, None),
        ({}, "hf_saved\r\n", None),
        ({}, "hf_saved", "[main]\nhf_token = hf_saved\n"),
        ({}, "hf_saved", f"[main]\nhf_token = hf_saved\nrefresh_token = r\nexpires_at = {FAR}\n"),  # get_token's
        ({}, "hf_saved", f"[other]\nhf_token = hf_other\nrefresh_token = r\nexpires_at = {FAR}\n"),
        ({}, "hf_saved", "not an ini file ["),  # get_token logs it and returns the saved token
        ({}, "   ", None),
        ({}, None, None),
    ],
)
def test_the_implicit_token_is_get_tokens_answer(no_token, monkeypatch, environment, saved, stored):
    """kernelpin reads HF_TOKEN and a plain saved token itself (importing get_token costs huggingface_hub's HTTP
    stack and a full garbage collection after torch): the answer is huggingface_hub's own in every case."""
    from huggingface_hub import get_token

    from kernelpin.hub.request_headers import implicit_token

    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    _stored_tokens(no_token, monkeypatch, stored)
    if saved is not None:
        no_token.write_text(saved)
    assert implicit_token() == get_token()


@pytest.mark.parametrize("source", ["HF_TOKEN", "saved"])
def test_the_usual_tokens_are_read_without_huggingface_hubs_http_stack(tmp_path, source):
    """A cold get_kernel with a token (most users have one) imports no httpx2 and no get_token: the issue-53 paths
    stay off huggingface_hub's HTTP stack. Failed before: every token went through get_token."""
    environ = {
        key: value
        for key, value in os.environ.items()
        if key not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE", "HF_TOKEN_PATH")
    }
    environ["HF_HOME"] = str(tmp_path / "hf-home")
    (tmp_path / "hf-home").mkdir()
    if source == "HF_TOKEN":
        environ["HF_TOKEN"] = "hf_x"
    else:
        (tmp_path / "hf-home" / "token").write_text("hf_x\n")
        (tmp_path / "hf-home" / "stored_tokens").write_text("[main]\nhf_token = hf_x\n")
    check = (
        "import sys; from kernelpin.hub.request_headers import request_headers; "
        "assert request_headers()['authorization'] == 'Bearer hf_x'; "
        "loaded = [m for m in ('huggingface_hub.utils._auth', 'httpx2', 'httpcore2') if m in sys.modules]; "
        "assert not loaded, loaded"
    )
    done = subprocess.run([sys.executable, "-c", check], env=environ, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_source_reads_the_token_once_for_all_its_requests(released, hf_env, monkeypatch):
    """Issue 53: the headers (the token file read, huggingface_hub's settings imported) were made again for every
    request, four times in a cold load of four files; a source now makes them on its first request."""
    from kernelpin.hub import request_headers as module
    from kernelpin.hub.source import HubSource

    made = []
    real = module.request_headers
    monkeypatch.setattr(module, "request_headers", lambda: made.append(1) or real())
    monkeypatch.setenv("HF_TOKEN", "hf_" + "b" * 34)
    repo_id, _ = released
    source = HubSource.from_env()
    commit = source.refs(repo_id, "kernel").branches["main"]
    files = [file for file in source.tree(repo_id, "kernel", commit) if file.path.startswith("build/")][:3]
    for file in files:
        assert len(source.read(repo_id, "kernel", commit, file.path, file.size)) == file.size
    assert len(files) == 3 and made == [1]
