"""The examples of docs/kernelpin.md's "Without a lock" section run as written (each block marked
`<!-- example: NAME -->`), against a test Hub with this checkout's img2gray released on it (as `./dev hub` serves
it, with its small layers kernel for the kernelize example: the module `./dev hub` runs); README's one-liner is one
of them."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from testkit.hub import free_port
from testkit.releasing import hub_env
from tests.markdown import code_blocks

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = {
    block.comment.removeprefix("example: "): block
    for block in code_blocks(ROOT / "docs" / "kernelpin.md")
    if (block.comment or "").startswith("example: ")
}


@dataclass(frozen=True)
class LocalHub:
    endpoint: str
    root: Path


@pytest.fixture(scope="module")
def docs_hub(tmp_path_factory: pytest.TempPathFactory, checkout_build: Path) -> Iterator[LocalHub]:
    """The local Hub of the docs, as `./dev hub` serves it (`python -m testkit.local_hub`, with this test run's
    build): acme/img2gray and acme/gray-layers."""
    root = tmp_path_factory.mktemp("docs-hub") / "hub"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "testkit.local_hub",
            "--port",
            str(free_port()),
            "--root",
            str(root),
            "--variant",
            str(checkout_build),
        ],
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        lines = [server.stdout.readline() for _ in range(3)]
        [endpoint] = [line.split("=", 1)[1].strip() for line in lines if "export HF_ENDPOINT=" in line] or [None]
        assert endpoint, [*lines, server.stderr.read()]
        yield LocalHub(endpoint, root)
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)


def run_example(name: str, hub: LocalHub, cwd: Path) -> subprocess.CompletedProcess[str]:
    block = EXAMPLES[name]
    # kernels 0.17.2 with HF_HUB_DISABLE_TELEMETRY=1 sends a header httpx rejects (ANCHORS §8).
    env = hub_env(hub.endpoint, cwd / "hf", KERNELPIN_STATE_DIR=str(cwd / "state"), HF_HUB_DISABLE_TELEMETRY="0")
    command = (
        [sys.executable, "-c", block.text]
        if block.language == "python"
        else ["bash", "-euo", "pipefail", "-c", block.text]
    )
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    done = subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env, timeout=300)
    assert done.returncode == 0, f"{block.where}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def test_the_section_has_the_examples_this_test_runs():
    assert set(EXAMPLES) == {"one-liner", "inspect", "local-kernels", "kernelize"}


def test_one_liner(docs_hub, tmp_path):
    done = run_example("one-liner", docs_hub, tmp_path)
    assert done.stdout.strip() == "torch.Size([1, 4, 4])"
    assert "to pin it, run `kernelpin add acme/img2gray@0`" in done.stderr


def test_inspect(docs_hub, tmp_path):
    lines = run_example("inspect", docs_hub, tmp_path).stdout.splitlines()
    assert lines[0] == "True" and lines[1].endswith(" fits")  # the build get_kernel takes leads
    assert lines[-1].startswith("[('acme/img2gray', ")


def test_local_kernels(docs_hub, tmp_path, checkout_build):
    shutil.copytree(checkout_build, tmp_path / "build" / "dev" / "img2gray")
    done = run_example("local-kernels", docs_hub, tmp_path)
    assert done.stdout.strip() == "torch.Size([1, 2, 2])"
    assert (
        f"LOCAL_KERNELS overrides acme/img2gray: loading the local build {tmp_path}/build/dev/img2gray" in done.stderr
    )
    assert not (tmp_path / "hf" / "hub").exists()  # the Hub was not asked


def test_kernelize(docs_hub, tmp_path):
    assert run_example("kernelize", docs_hub, tmp_path).stdout.strip() == "tensor([0.5000, 0.5000])"


def test_the_readme_one_liner_is_the_docs_one():
    readme = [block for block in code_blocks(ROOT / "README.md") if "kernelpin.get_kernel(" in block.text]
    assert readme and all(block.text in EXAMPLES["one-liner"].text for block in readme)
