"""Issue 53: get_kernel and has_kernel ask the Hub for the kernel's refs (the one request a warm call makes) before they
import the rest of their way, and take that answer when the resolution asks for it; nothing else changes. Before,
the request was sent after every import (about 15 ms of a warm call's 30 here), and waited for on its own."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import kernelpin
from kernelpin.errors import KernelpinError
from kernelpin.format.spec import requirement_from_arguments
from kernelpin.hub.source import HubSettings, HubSource
from tests.kernelpin.faulty_hub import SilentServer
from tests.kernelpin.front.test_get_kernel import (  # noqa: F401 (fixtures)
    forget_kernels,
    fresh_modules,
    line,
    state,
    unpinned_warnings_name_the_pin,
)
from tests.kernelpin.helpers import REPO_ROOT, fresh_interpreter

# What a warm call imports after its refs request is sent: the resolver, the store, the trust gate, the loader.
AFTER_THE_REQUEST = (
    "kernelpin.lockless",
    "kernelpin.resolve",
    "kernelpin.store.content",
    "kernelpin.trust.gate",
    "kernelpin.trust.policy",
    "kernelpin.loading.loader",
    "kernelpin.format.lockfile",
)

# Records, in a fresh interpreter, which thread sent each refs request and which kernelpin modules were loaded when
# the load asked for its refs (the request's start, in the thread that sends it).
_RECORDING = """\
import sys, threading
from kernelpin.hub import wire
sent = []
real = wire.Wire.get
def get(self, url, *args, **kwargs):
    if url.endswith("/refs"):
        sent.append(threading.current_thread().name)
    return real(self, url, *args, **kwargs)
wire.Wire.get = get
"""


def _modules_when_asked(code: str) -> tuple[str, list[str]]:
    """Run `code` in a fresh interpreter with HubSource.refs_ahead recording the kernelpin modules loaded when it is
    called (in the caller's thread: nothing else runs then): (what `code` printed, those modules)."""
    printed, _ = fresh_interpreter(
        _RECORDING
        + textwrap.dedent("""
        from kernelpin.hub.source import HubSource
        loaded = []
        ahead = HubSource.refs_ahead
        def recording(self, *args, **kwargs):
            loaded.extend(name for name in sys.modules if name.startswith("kernelpin"))
            return ahead(self, *args, **kwargs)
        HubSource.refs_ahead = recording
        """)
        + code
        + "\nprint('SENT', *sent)\nprint('LOADED', *loaded)"
    )
    lines = printed.splitlines()
    return "\n".join(lines[:-1]), lines[-1].split()[1:]


@pytest.mark.parametrize("call", ["get_kernel", "has_kernel"])
def test_the_refs_are_asked_for_before_the_rest_of_the_way_is_imported(line, state, call) -> None:
    # Failed before: the refs request was sent from the caller's thread once every module of the way was imported.
    repo_id = line[0]
    kernelpin.get_kernel(repo_id, version=1)  # warm: the call below asks the Hub one question
    printed, loaded = _modules_when_asked(f"import kernelpin\nprint(kernelpin.{call}({repo_id!r}, version=1))")
    assert printed.splitlines()[-1].split() == ["SENT", "kernelpin-refs-ahead"], printed
    assert loaded, "refs_ahead was not called"
    assert not set(AFTER_THE_REQUEST) & set(loaded), sorted(set(AFTER_THE_REQUEST) & set(loaded))


def test_the_answer_asked_ahead_is_the_one_the_resolution_takes(line, state, monkeypatch, fresh_modules) -> None:
    repo_id = line[0]
    kernelpin.get_kernel(repo_id, version=1)
    forget_kernels()
    asked: list[str] = []
    real = HubSource._list_refs
    monkeypatch.setattr(HubSource, "_list_refs", lambda self, *a: (asked.append(a[0]), real(self, *a))[1])
    assert kernelpin.get_kernel(repo_id, version=1).VERSION == "1.1.0"
    assert asked == [repo_id]  # asked once, ahead; not again when the resolution wanted it


def test_what_was_asked_ahead_fails_as_the_refs_would(hf_env) -> None:
    requirement = requirement_from_arguments("acme/no-such-kernel", 1, None)
    settings = HubSettings.from_env()

    def failure(source: HubSource) -> str:
        with pytest.raises(KernelpinError) as raised:
            source.refs(requirement.repo_id, requirement.repo_type, requirement.declared)
        return str(raised.value)

    ahead = failure(HubSource(settings, refs_ahead=requirement))
    assert ahead == failure(HubSource(settings))  # refs' own message
    assert "acme/no-such-kernel" in ahead


def test_offline_or_with_local_kernels_naming_the_kernel_nothing_is_asked_ahead(line, state, tmp_path, monkeypatch):
    repo_id = line[0]
    kernelpin.get_kernel(repo_id, version=1)
    requirement = requirement_from_arguments(repo_id, 1, None)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert HubSource.from_env(refs_ahead=requirement)._refs_on_their_way == {}
    monkeypatch.delenv("HF_HUB_OFFLINE")
    # LOCAL_KERNELS serves the kernel: the Hub is asked nothing (a build that is not there fails the call locally).
    monkeypatch.setenv("LOCAL_KERNELS", f"{repo_id}={tmp_path / 'nothing-here'}")
    printed, _ = fresh_interpreter(
        _RECORDING
        + textwrap.dedent(f"""
        import kernelpin
        try:
            kernelpin.get_kernel({repo_id!r}, version=1)
        except kernelpin.KernelpinError as error:
            print("REFUSED", error)
        print("SENT", *sent)
        """)
    )
    assert "REFUSED" in printed and "LOCAL_KERNELS" in printed, printed
    assert printed.splitlines()[-1] == "SENT", printed


def _run_against_a_silent_hub(code: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """`code` in a fresh interpreter (this checkout first on its path) whose Hub accepts connections and never
    answers, with a request timeout (300 s) far beyond what any test here waits: only the code under test ends it."""
    with SilentServer() as endpoint:
        environ = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
            "HF_ENDPOINT": endpoint,
            "HF_HOME": str(home / "hf"),
            "KERNELPIN_STATE_DIR": str(home / "state"),
            "KERNELPIN_HTTP_TIMEOUT": "300",
        }
        environ.pop("HF_HUB_OFFLINE", None)
        environ.pop("LOCAL_KERNELS", None)
        return subprocess.run(
            [sys.executable, "-c", code], cwd=cwd, env=environ, capture_output=True, text=True, timeout=120
        )


def test_a_call_refused_while_its_refs_are_on_their_way_says_why_at_once_and_exits(tmp_path) -> None:
    # A silent Hub (it never answers) and a publisher policy that cannot be read: the policy's error comes as soon
    # as it is read, not after the request's timeout, and the interpreter exits without waiting for the request.
    project = tmp_path / "app"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.kernelpin.trust]\nrequire-signatures = 'maybe'\n")
    code = textwrap.dedent("""
        import kernelpin
        try:
            kernelpin.get_kernel("acme/img2gray", version=1)
        except kernelpin.KernelpinError as error:
            print("REFUSED", error)
    """)
    start = time.monotonic()
    done = _run_against_a_silent_hub(code, project, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("REFUSED") and "require-signatures" in done.stdout, done.stdout
    assert time.monotonic() - start < 100  # far below the request's 300 s: nobody waited for it


def test_only_the_first_resolution_takes_the_source_it_was_given(line, state) -> None:
    # A kernel's dependencies and the kernel it moved to are resolved with sources of their own (and budgets).
    from kernelpin.front.hub import hub_resolvers
    from kernelpin.loading.runtime import environment_for
    from kernelpin.lockless import release_checker_here

    source = HubSource.from_env()
    _, hub = hub_resolvers(environment_for(None), True, False, release_checker_here(), source)
    assert hub.source is source and hub.settings is source.settings
    assert all(resolver.source is None for resolver in hub._dependencies() if hasattr(resolver, "source"))


def test_the_thread_that_asks_ahead_never_holds_up_the_exit() -> None:
    from kernelpin.hub.source import in_a_thread

    release = threading.Event()
    answer = in_a_thread("kernelpin-test-ahead", lambda: release.wait(10))
    (thread,) = [thread for thread in threading.enumerate() if thread.name == "kernelpin-test-ahead"]
    assert thread.daemon
    release.set()
    assert answer.result() is True


def test_a_token_that_cannot_be_read_fails_a_call_asking_ahead_as_the_request_would(hf_env, monkeypatch) -> None:
    # The headers are made before the thread starts: what their token source raises is worded as the refs
    # request's own failure (kernelpin.hub.source.translate_errors), not passed on as a traceback.
    from kernelpin.hub import request_headers

    def unreadable() -> dict[str, str]:
        raise PermissionError(13, "Permission denied", "/home/someone/.cache/huggingface/token")

    monkeypatch.setattr(request_headers, "request_headers", unreadable)
    requirement = requirement_from_arguments("acme/img2gray", 1, None)
    settings = HubSettings.from_env()
    with pytest.raises(KernelpinError) as ahead:
        HubSource(settings, refs_ahead=requirement)
    with pytest.raises(KernelpinError) as asked:
        HubSource(settings).refs(requirement.repo_id, requirement.repo_type, requirement.declared)
    assert str(ahead.value) == str(asked.value)
    assert "listing tags of acme/img2gray" in str(ahead.value)


def test_ctrl_c_while_get_kernel_waits_for_a_silent_hub_ends_it_at_once(tmp_path) -> None:
    # The caller waits for the answer asked ahead (Future.result) instead of reading the socket itself: Ctrl-C there
    # ends the call at once, with a Hub that would hold each request for its whole timeout. Failed before refs were
    # asked ahead too (found writing this test): the publisher check beside the refs request ran in an executor whose
    # `with` waited for its request after Ctrl-C, up to the timeout (300 s here).
    code = textwrap.dedent("""
        import os, signal, threading, time, kernelpin
        signal.signal(signal.SIGINT, signal.default_int_handler)  # whatever SIGINT disposition the test inherited
        threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
        start = time.monotonic()
        try:
            kernelpin.get_kernel("acme/img2gray", version=1)
        except KeyboardInterrupt:
            print("INTERRUPTED", round(time.monotonic() - start))
    """)
    done = _run_against_a_silent_hub(code, tmp_path, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "INTERRUPTED" and int(done.stdout.split()[1]) < 60, done.stdout
