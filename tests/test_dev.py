"""`./dev`, the entry point on a machine without pixi: each command it offers runs from a checkout as cloned."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tools.builder.config import BuildConfig

ROOT = Path(__file__).resolve().parents[1]


def _this_venv_is_devs() -> bool:
    # ./dev installs requirements/dev.txt into the venv it is given unless its stamp matches: run it only on the
    # venv it made (the one running these tests under `./dev test`), never on another environment.
    stamp = Path(sys.prefix, ".requirements.sha256")
    want = hashlib.sha256((ROOT / "requirements" / "dev.txt").read_bytes()).hexdigest()
    return stamp.is_file() and stamp.read_text().strip() == want


@pytest.mark.parametrize("argv", [[], ["-h"], ["--help"], ["help"]], ids=["bare", "-h", "--help", "help"])
def test_usage_lists_every_command(argv: list[str]) -> None:
    # Failed before: the script's comment lines, "#" and all, with exit status 2.
    done = subprocess.run([str(ROOT / "dev"), *argv], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: ./dev COMMAND")
    assert not any(line.lstrip().startswith("#") for line in done.stdout.splitlines()), done.stdout
    for command in ("demo", "test", "lint", "bench", "setup"):
        assert f"\n  {command} " in done.stdout
    assert "--quick" in done.stdout and "--threads" in done.stdout


def test_unknown_command_suggests_the_nearest() -> None:
    done = subprocess.run([str(ROOT / "dev"), "tests"], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr == "error: ./dev: unknown command 'tests' (did you mean 'test'?); run ./dev help\n"


@pytest.mark.parametrize("argv", [["missing.png"], ["--colour"]], ids=["missing-image", "unknown-option"])
def test_demo_rejects_bad_arguments_before_building(argv: list[str], tmp_path: Path) -> None:
    # Failed before: a raw traceback from PIL, after minutes of conda build. Now one line, and nothing is set up.
    env = {**os.environ, "IMG2GRAY_VENV": str(tmp_path / "venv")}
    done = subprocess.run([str(ROOT / "dev"), "demo", *argv], capture_output=True, text=True, env=env)
    assert done.returncode == 2
    assert done.stderr.startswith("error: ./dev demo: ") and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "venv").exists()


def _demo(checkout_build: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(checkout_build.parent)}
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo.py"), *argv], capture_output=True, text=True, env=env, cwd=ROOT
    )


def test_demo_prints_the_release_version(checkout_build: Path, tmp_path: Path) -> None:
    # Failed before: "img2gray 0 (...)", metadata.json's "version" (the major, in the kernels format).
    image = tmp_path / "square.png"
    from PIL import Image

    Image.new("RGB", (8, 6), (200, 100, 50)).save(image)
    version = BuildConfig.load().version
    done = _demo(checkout_build, str(image), "--device", "cpu")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"img2gray {version} (")
    assert Image.open(tmp_path / "square.gray.png").size == (8, 6)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["README.md"], "README.md: cannot read it as an image"),
        (["missing.png"], "missing.png: cannot read it as an image"),
        pytest.param(
            ["--device", "cuda"],
            "--device cuda: this torch",
            marks=pytest.mark.skipif(
                __import__("torch").cuda.is_available(), reason="the machine has a CUDA GPU: --device cuda works"
            ),
        ),
    ],
    ids=["not-an-image", "missing", "cuda-without-gpu"],
)
def test_demo_errors_are_one_line(argv: list[str], message: str, checkout_build: Path) -> None:
    done = _demo(checkout_build, *argv)
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: {message}") and done.stderr.count("\n") == 1, done.stderr


@pytest.mark.heavy(cpu_seconds=70)
@pytest.mark.skipif(not _this_venv_is_devs(), reason="runs ./dev only inside the venv ./dev created")
def test_second_demo_reuses_the_package() -> None:
    # Failed before: every `./dev demo IMAGE` rebuilt the conda package (about 100 s) to convert one image.
    env = {**os.environ, "IMG2GRAY_VENV": sys.prefix}
    env.pop("PYTHONPATH", None)
    first = subprocess.run([str(ROOT / "dev"), "demo"], capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-4000:]
    [package] = (ROOT / "output" / "linux-64").glob("img2gray-*_stableabi*.conda")  # the one pixi add takes
    built = package.stat().st_mtime_ns
    second = subprocess.run(
        [str(ROOT / "dev"), "demo", "examples/chelsea.png"], capture_output=True, text=True, env=env
    )
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-4000:]
    assert "are up to date" in second.stdout and "building the conda package" not in second.stdout
    assert package.stat().st_mtime_ns == built
    assert "max |img2gray - OpenCV cvtColor| = 0" in second.stdout


@pytest.mark.skipif(not _this_venv_is_devs(), reason="runs ./dev only inside the venv ./dev created")
def test_bench_builds_the_operator_it_measures() -> None:
    # Failed before on a fresh clone: "No module named 'img2gray'" (nothing had built or installed the operator).
    # A --quick run is no record: it must not overwrite the machine's committed one (it did, through a suite run).
    env = {**os.environ, "IMG2GRAY_VENV": sys.prefix}
    env.pop("PYTHONPATH", None)
    records = ROOT / "benchmarks" / "results"
    before = {path: path.stat().st_mtime_ns for path in records.rglob("*.json")}
    done = subprocess.run(
        [str(ROOT / "dev"), "bench", "--quick", "--threads", "1"], capture_output=True, text=True, env=env, cwd="/"
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert "img2gray" in done.stdout and "1080x1920x3 uint8 HWC" in done.stdout
    assert {path: path.stat().st_mtime_ns for path in records.rglob("*.json")} == before
    assert "record:" not in done.stdout


def test_pixi_bench_tasks_build_the_operator_first() -> None:
    workspace = tomllib.loads((ROOT / "pixi.toml").read_text())
    for flavour in ("cpu", "cuda"):
        task = workspace["feature"][flavour]["tasks"]["bench"]
        assert task.get("depends-on") == ["build-op"], flavour
        assert task.get("env", {}).get("PYTHONPATH") == "build/dev", flavour


def test_ci_run_says_what_it_does_before_each_long_step(tmp_path: Path) -> None:
    # Failed before: .ci/run printed nothing for its first 2-2.5 minutes (apt-get silenced, then ./dev test -q).
    root = tmp_path / "clone"
    (root / ".ci").mkdir(parents=True)
    (root / ".ci" / "run").write_bytes((ROOT / ".ci" / "run").read_bytes())
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name, line in (
        ("dev", 'echo "RAN ./dev $*"'),
        (".venv/bin/python", 'echo "RAN python $*"'),
        ("apt-get", 'echo "RAN apt-get $*" >&2'),
    ):  # .ci/run silences apt-get's stdout
        path = (stubs if name == "apt-get" else root) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"#!/bin/sh\n{line}\n")
        path.chmod(0o755)
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "HOME": str(tmp_path)}
    cross = all(shutil.which(tool, path="/usr/bin:/bin") for tool in ("aarch64-linux-gnu-g++", "qemu-aarch64-static"))
    done = subprocess.run(
        ["bash", str(root / ".ci" / "run")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout
    lines = done.stdout.splitlines()
    ran = [index for index, line in enumerate(lines) if line.startswith("RAN ")]
    assert [" ".join(lines[index].split()[1:3]) for index in ran] == (
        ["apt-get install"] if os.geteuid() == 0 and not cross else []
    ) + ["./dev lint", "./dev test", "python -m", "python -m"]
    for index in ran:  # each step is announced by the line (or lines) just before it
        assert any(line.startswith("==> .ci/run: ") for line in lines[max(0, index - 2) : index]), lines


def test_dev_announces_the_operator_build_and_the_test_run() -> None:
    script = (ROOT / "dev").read_text()
    for command in ("python -m tools.builder.op --out build/dev/img2gray", "python -m pytest -n auto"):
        before = script[: script.index(command)].rstrip().splitlines()[-1].strip()
        assert before.startswith('echo "==> '), (command, before)
