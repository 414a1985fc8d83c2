"""The CLI's habits, as uv/cargo/pixi users expect them: --version, global options before or after the
command, -q, --offline, --json on add/remove, documented exit codes."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

import pytest

from kernelpin.cli import COMMANDS, main
from kernelpin.store import lockfiles
from testkit.fake_kernel import CPU_213, write_variant
from tests.kernelpin.helpers import AS_NOBODY, fresh_interpreter, require_nobody

SILENT = "http://127.0.0.1:9"  # discard port: nothing answers


def usage_error(*args: str) -> int:
    with pytest.raises(SystemExit) as exit_:
        main(list(args))
    return exit_.value.code


def test_version(capsys):
    assert usage_error("--version") == 0
    assert capsys.readouterr().out == f"kernelpin {version('kernelpin')}\n"


@pytest.mark.parametrize("where", ["before", "after"])
def test_global_options_before_or_after_the_command(img2gray, project, cli, tmp_path, monkeypatch, where):
    root = project('"acme/img2gray" = "^0.1"\n')
    monkeypatch.chdir(tmp_path)  # away from the project: --project must find it

    def run(command: list[str], *options: str) -> tuple[int, str, str]:
        # Before: the command's own copy of an option it is not given must not reset the global one.
        return cli(*options, *command) if where == "before" else cli(*command, *options)

    assert run(["lock"], "--project", str(root))[0] == 0
    status, _, err = run(["versions", "acme/img2gray"], "--project", str(root), "-v")
    assert status == 0 and "ignored tags (not versions): latest, nightly-2026-01-01" in err
    status, _, err = run(["versions", "acme/img2gray"], "--project", str(root))
    assert status == 0 and "ignored tags" not in err


def test_quiet_prints_only_errors_and_json(img2gray, project, cli):
    root = project('"acme/img2gray" = "^0.1"\n')
    status, out, err = cli("lock", "-q")  # warnings stay: the release is unsigned
    assert (
        (status, out) == (0, "") and err.startswith("warning: acme/img2gray 0.1.1: unsigned (") and err.count("\n") == 1
    )
    assert cli("-q", "sync", "--torch", "2.13") == (0, "", "")
    status, out, _ = cli("-q", "lock", "--json")
    assert status == 0 and json.loads(out)["kernels"][0]["version"] == "0.1.1"
    # A stale lock under -q: no chatter, but the failure still says why.
    project('"acme/img2gray" = "^0.2"\n')
    status, out, err = cli("lock", "--check", "-q")
    assert (status, out) == (1, "") and "does not satisfy ^0.2" in err
    # `sync` re-locks on the way: the "Locked:" progress line is chatter too.
    status, out, err = cli("sync", "-q", "--torch", "2.13")
    assert (
        (status, out) == (0, "") and err.startswith("warning: acme/img2gray 0.2.0: unsigned (") and err.count("\n") == 1
    )
    assert lockfiles.read(root / "kernelpin.lock").kernels[0].version == "0.2.0"
    assert usage_error("-q", "lock", "-v") == 2


@pytest.mark.parametrize("offline", [["--offline"], ["env"]], ids=["--offline", "HF_HUB_OFFLINE=1"])
def test_offline(img2gray, project, cli, monkeypatch, tmp_path, offline):
    project('"acme/img2gray" = "^0.1"\n')
    assert cli("sync", "--torch", "2.13")[0] == 0
    monkeypatch.setenv("HF_ENDPOINT", SILENT)  # would hang or fail if anything went online
    if offline == ["env"]:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        offline = []
    assert cli("sync", "--frozen", "--torch", "2.13", *offline)[0] == 0
    assert cli(*offline, "sync", "--torch", "2.13")[0] == 0  # the lock is fresh: nothing to resolve
    status, _, err = cli("sync", "--frozen", "--torch", "2.12", "--cuda", "12.9", *offline)
    assert status == 1 and "torch212-cxx11-cu129-x86_64-linux/_impl.py at" in err  # __init__.py: a cached blob
    assert "offline mode is on (--offline or HF_HUB_OFFLINE=1)" in err
    project('"acme/img2gray" = "^0.2"\n')
    status, _, err = cli("lock", *offline)
    assert status == 1 and "resolving acme/img2gray needs the Hub, but offline mode is on" in err
    # Publishing needs the Hub too: refused before any upload is attempted.
    release = tmp_path / "release"
    write_variant(release / "build" / CPU_213, "1.0.0", CPU_213)
    status, _, err = cli("publish", str(release), "--repo", "acme/new", *offline)
    assert status == 1 and "needs the Hub, but offline mode is on" in err


def test_add_and_remove_json(img2gray, new_repo, project, cli):
    root = project('"acme/img2gray" = "^0.1"\n')
    assert cli("lock")[0] == 0
    status, out, _ = cli("add", "acme/img2gray@^0.2", "--json")
    assert status == 0
    added = json.loads(out)
    assert added["added"] == [
        {
            "repo": "acme/img2gray",
            "requirement": "^0.2",
            "kernels_lock_reads": False,
            "note": "`kernels lock` will not read this entry (it takes only an integer major, "
            "the branch v<N>); kernelpin resolves it against version tags",
        }
    ]
    assert added["dry_run"] is False
    assert added["pyproject"] == str(root / "pyproject.toml")
    assert added["changes"] == ["~ acme/img2gray: 0.1.1 -> 0.2.0"]
    assert [(k["repo"], k["version"]) for k in added["kernels"]] == [("acme/img2gray", "0.2.0")]
    status, out, _ = cli("remove", "acme/img2gray", "--json")
    assert status == 0
    assert json.loads(out) == {
        "removed": ["acme/img2gray"],
        "pyproject": str(root / "pyproject.toml"),
        "changes": ["- acme/img2gray 0.2.0"],
        "kernels": [],
    }


def test_exit_codes_are_documented_and_kept(img2gray, project, cli, capsys):
    project('"acme/img2gray" = "^0.1"\n')
    assert usage_error("--help") == 0
    help_text = capsys.readouterr().out
    assert "exit status:" in help_text and "130  interrupted" in help_text
    assert usage_error("lock", "--no-such-option") == 2
    assert usage_error("no-such-command") == 2
    assert usage_error("sync", "--locked", "--frozen") == 2
    assert cli("verify")[0] == 1  # a failure the message explains: no lock yet
    assert cli("lock")[0] == 0


def test_sync_help_compares_locked_and_frozen_with_uv_and_cargo(capsys):
    assert usage_error("sync", "--help") == 0
    text = capsys.readouterr().out
    assert "uv:" in text and "cargo:" in text and "implies --offline" in text


@pytest.mark.parametrize("command", ["versions", "lock", "sync"])
def test_interrupt_exits_130_and_says_what_is_kept(tmp_path, command):
    """Ctrl-C while the Hub does not answer (a server that accepts and never replies).

    The signal goes out once kernelpin's own request has arrived: not merely some connection (huggingface_hub's
    own registry fetch comes first) nor a request of another test's client that reached this port after its
    server had freed it (the repository name is this run's own). The HTTP deadline is far beyond the test's, so
    only the interrupt can end the command in time; a hang is reported with the child's signal state and stacks.
    lock and sync failed before: their resolution pool waited for its other requests (the publisher's trusted
    mark, asked beside the refs) up to that deadline."""
    repo_id = f"acme/interrupt-{secrets.token_hex(6)}"
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(60)
        (tmp_path / "pyproject.toml").write_text(
            f'[project]\nname = "app"\nversion = "1"\n\n[tool.kernels.dependencies]\n"{repo_id}" = 1\n'
        )
        env = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "KERNELPIN_"))}
        env.update(
            HF_ENDPOINT=f"http://127.0.0.1:{server.getsockname()[1]}",
            HF_HOME=str(tmp_path / "hf"),
            PYTHONPATH=str(Path(__file__).resolve().parents[3]),
            KERNELPIN_HTTP_TIMEOUT="600",
            PYTHONFAULTHANDLER="1",
        )
        # Started as a terminal starts a command, with Python's own SIGINT handler: a test run that is itself a
        # background job of a script (`./dev test &`) ignores SIGINT, and a child would inherit that.
        in_foreground = (
            "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
            "runpy.run_module('kernelpin', run_name='__main__', alter_sys=True)"
        )
        process = subprocess.Popen(
            [sys.executable, "-c", in_foreground, *([command, repo_id] if command == "versions" else [command])],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        connections = []
        try:
            while True:  # until kernelpin's request for the repository's refs has arrived: it now waits for an answer
                connection, _ = server.accept()
                connections.append(connection)
                connection.settimeout(60)
                if repo_id.encode() in connection.recv(65536):
                    break
            process.send_signal(signal.SIGINT)
            try:
                _, err = process.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                status = Path(f"/proc/{process.pid}/status").read_text()
                process.send_signal(signal.SIGABRT)  # faulthandler prints every thread's stack
                _, err = process.communicate(timeout=30)
                pytest.fail(f"kernelpin ignored SIGINT for 60 s\n{status}\n{err}")
        finally:
            process.kill()
            for connection in connections:
                connection.close()
    assert process.returncode == 130, err
    assert "interrupted; files already verified are kept, re-run to finish" in err


def test_a_path_kernelpin_cannot_write_is_an_error_not_a_traceback(img2gray, project, hub, tmp_path):
    """A read-only checkout (kernelpin.lock cannot be written) and a read-only shared Hub cache (sync installs
    there): each names the path and the cause, exit 1."""
    require_nobody()
    shared = Path(tempfile.mkdtemp(prefix="kernelpin-readonly-"))
    try:
        app, cache, home = shared / "app", shared / "cache", shared / "home"
        for folder in (app, cache, home):
            folder.mkdir()
        (app / "pyproject.toml").write_text(
            '[project]\nname = "app"\nversion = "1"\n\n[tool.kernels.dependencies]\n"acme/img2gray" = "^0.1"\n'
        )
        subprocess.run(["chmod", "-R", "a+rX,a-w", str(shared)], check=True)
        subprocess.run(["chmod", "a+w", str(home)], check=True)

        writable_app = home / "app"
        writable_app.mkdir()
        shutil.copy(app / "pyproject.toml", writable_app)

        def as_nobody(cache_dir: Path, project: Path, command: list[str]) -> subprocess.CompletedProcess[str]:
            env = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "KERNELPIN_"))}
            env.update(
                HF_ENDPOINT=hub.endpoint,
                HF_HUB_CACHE=str(cache_dir),
                HF_HOME=str(home),
                HOME=str(home),
                PYTHONPATH=str(Path(__file__).resolve().parents[3]),
            )
            return subprocess.run(
                [*AS_NOBODY, sys.executable, "-m", "kernelpin", *command],
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )

        subprocess.run(["chmod", "-R", "a+w", str(writable_app)], check=True)
        for cache_dir, project_dir, command, unwritable in (
            (home / "cache", app, ["lock"], app),
            (cache, writable_app, ["sync", "--torch", "2.13"], cache),
        ):
            done = as_nobody(cache_dir, project_dir, command)
            assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
            assert (
                "error:" in done.stderr
                and "permission denied" in done.stderr.lower()
                and str(unwritable) in done.stderr
            )
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(shared)], check=True)
        shutil.rmtree(shared)


def test_publish_with_a_version_that_is_not_one_is_an_error_not_a_traceback(cli, tmp_path):
    write_variant(tmp_path / "release" / "build" / CPU_213, "1.0.0", CPU_213)
    status, _, err = cli("publish", str(tmp_path / "release"), "--repo", "acme/x", "--version", "banana", "--dry-run")
    assert status == 1 and "--version banana" in err and "invalid version 'banana'" in err


def _command_modules_loaded(argv: list[str]) -> set[str]:
    """The modules of kernelpin.cli's commands that `kernelpin ARGV` imports (in a fresh interpreter)."""
    code = f"from kernelpin.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass"
    modules = fresh_interpreter(code)[1]
    return {name for name in modules if name in {command.module for command in COMMANDS.values()}}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_command_imports_its_own_module_only(name):
    """Issue 53 (start-up time): each command's options and rendering are imported when that command parses."""
    assert _command_modules_loaded([name, "--help"]) == {COMMANDS[name].module}


@pytest.mark.parametrize("argv", [["--help"], ["-V"], []])
def test_kernelpin_alone_imports_no_command(argv):
    assert _command_modules_loaded(argv) == set()
