"""`./dev`, the entry point on a machine without pixi: each command it offers runs from a checkout as cloned."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _this_venv_is_devs() -> bool:
    # ./dev installs requirements/dev.txt into the venv it is given unless its stamp matches: run it only on the
    # venv it made (the one running these tests under `./dev test`), never on another environment.
    stamp = Path(sys.prefix, ".requirements.sha256")
    want = hashlib.sha256((ROOT / "requirements" / "dev.txt").read_bytes()).hexdigest()
    return stamp.is_file() and stamp.read_text().strip() == want


def test_usage_lists_every_command() -> None:
    done = subprocess.run([str(ROOT / "dev")], capture_output=True, text=True)
    assert done.returncode == 2
    for command in ("demo", "test", "bench"):
        assert f"./dev {command}" in done.stdout


@pytest.mark.skipif(not _this_venv_is_devs(), reason="runs ./dev only inside the venv ./dev created")
def test_bench_builds_the_operator_it_measures() -> None:
    # Failed before on a fresh clone: "No module named 'img2gray'" (nothing had built or installed the operator).
    env = {**os.environ, "IMG2GRAY_VENV": sys.prefix}
    env.pop("PYTHONPATH", None)
    done = subprocess.run([str(ROOT / "dev"), "bench", "--quick", "--threads", "1"], capture_output=True, text=True,
                          env=env, cwd="/")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert "img2gray" in done.stdout and "1080x1920x3 uint8 HWC" in done.stdout


def test_pixi_bench_tasks_build_the_operator_first() -> None:
    workspace = tomllib.loads((ROOT / "pixi.toml").read_text())
    for flavour in ("cpu", "cuda"):
        task = workspace["feature"][flavour]["tasks"]["bench"]
        assert task.get("depends-on") == ["build-op"], flavour
        assert task.get("env", {}).get("PYTHONPATH") == "build/dev", flavour
