"""`./dev hub` (python -m testkit.local_hub) as a newcomer meets it: a taken port said in words, before any build;
nothing left behind in the temporary directory when it stops."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testkit.hub import HubServer, free_port

ROOT = Path(__file__).resolve().parents[1]


def test_a_taken_port_is_one_line_before_any_build(tmp_path: Path) -> None:
    # Failed before: it built and released first, then printed "error: ['…/olah-cli', '-c'] exited with 1 …".
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "testkit.local_hub", "--port", str(port)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "TMPDIR": str(tmp_path)},
        )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (
        f"error: port {port} on 127.0.0.1 is taken (another `./dev hub`?); stop that, or give "
        "another port with --port N\n"
    )
    assert time.monotonic() - started < 30 and not list(tmp_path.iterdir())  # nothing built, nothing made


def test_a_server_that_dies_at_its_start_is_named_not_its_argument_list(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(RuntimeError) as error:
            HubServer(tmp_path).start(taken.getsockname()[1])
    message = str(error.value)
    assert message.startswith("the test Hub's front server exited at its start (status ") and "[" not in message
    assert message.endswith(f"its log: {tmp_path / 'front.log'}")


def test_stopping_removes_its_temporary_directory(tmp_path: Path, checkout_build: Path) -> None:
    # Failed before: every stop left /tmp/kernelpin-local-hub-*/ (git repositories, olah caches, logs) behind.
    temp = tmp_path / "tmp"
    temp.mkdir()
    server = subprocess.Popen(
        [sys.executable, "-m", "testkit.local_hub", "--port", str(free_port()), "--variant", str(checkout_build)],
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "TMPDIR": str(temp)},
    )
    try:
        lines = [server.stdout.readline() for _ in range(3)]
        assert any("export HF_ENDPOINT=" in line for line in lines), [*lines, server.stderr.read()]
        assert [path.name[: len("kernelpin-local-hub-")] for path in temp.iterdir()] == ["kernelpin-local-hub-"]
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)
    assert server.returncode == 0 and not list(temp.iterdir())
