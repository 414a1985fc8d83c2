"""A CUDA build whose compute capabilities do not cover the GPU is refused with an error, never imported.

Loading such a build would kill the process at the first launch ("no kernel image is available"). The
release's metadata.json lists `backend.archs`; the lock records them; `sync` and `load` compare them with
the GPU's capability (simulated here: this machine has no GPU).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import kernelpin
from kernelpin.errors import NoVariantError
from kernelpin.format.variant import Environment
from kernelpin.loading import runtime
from kernelpin.store import lockfiles
from testkit.fake_kernel import write_variant
from testkit.hub import HubServer
from testkit.releasing import consumer_project, hub_env, release_into_mirror, stage
from testkit.releasing import kernelpin as kernelpin_cli

CUDA = "torch213-cxx11-cu130-x86_64-linux"
ARCHS = ["8.0", "8.6", "9.0"]  # SASS only: Hopper and Ampere, nothing for Blackwell (12.0)


@pytest.fixture(scope="module")
def cuda_only(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubServer]:
    root = tmp_path_factory.mktemp("hub")
    hub = HubServer(root, trusted_publishers=("acme",))  # kernelpin lock checks the publisher
    build = write_variant(root / "build", "1.0.0", CUDA, ARCHS)
    release_into_mirror(hub.repo("acme/cuda-only"), stage([build], root / "staged", "acme/cuda-only"), "v1.0.0")
    with hub:
        yield hub


@pytest.fixture
def app(cuda_only: HubServer, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    env = hub_env(cuda_only.endpoint, tmp_path / "hf")
    project = consumer_project(tmp_path / "app", "^1", "acme/cuda-only")
    kernelpin_cli(["lock"], project, env)
    return project, env


def test_lock_records_the_compute_capabilities(app):
    project, _ = app
    (variant,) = lockfiles.read(project / "kernelpin.lock").kernels[0].variants
    assert (variant.name, variant.backend, list(variant.archs)) == (CUDA, "cuda", ARCHS)


@pytest.mark.parametrize("capability", ["8.9", "9.0"])
def test_sync_installs_a_build_that_covers_the_gpu(app, capability):
    project, env = app
    gpu = {**env, "KERNELPIN_TORCH": "2.13", "KERNELPIN_CUDA": "13.0", "KERNELPIN_GPU_CAPABILITY": capability}
    (synced,) = json.loads(kernelpin_cli(["sync", "--json"], project, gpu).stdout)["synced"]
    assert synced["variant"] == CUDA


@pytest.mark.parametrize("capability", ["12.0", "7.5"])
def test_sync_refuses_a_build_that_does_not_cover_the_gpu(app, capability):
    project, env = app
    gpu = {**env, "KERNELPIN_TORCH": "2.13", "KERNELPIN_CUDA": "13.0", "KERNELPIN_GPU_CAPABILITY": capability}
    done = kernelpin_cli(["sync"], project, gpu, check=False)
    assert done.returncode == 1
    assert (
        f"acme/cuda-only 1.0.0: no build variant fits this environment (linux/x86_64, torch 2.13 (cxx11 ABI), "
        f"CUDA 13.0, GPU capability {capability}, Python {sys.version_info[0]}.{sys.version_info[1]})"
    ) in done.stderr
    assert f"{CUDA}: compute capabilities 8.0;8.6;9.0 do not cover this GPU's {capability}" in done.stderr
    snapshot = Path(env["HF_HUB_CACHE"]) / "models--acme--cuda-only" / "snapshots"
    # Refused before any download; lock read each metadata.json into memory, so the cache holds nothing.
    assert sorted(p.name for p in snapshot.rglob("*") if p.is_file()) == []


def test_load_refuses_before_importing(app, monkeypatch):
    """load() detects the environment from the running torch; a machine with a Blackwell GPU is simulated
    at that edge (this one has none)."""
    project, env = app
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    blackwell = Environment(torch=(2, 13), cuda=(13, 0), gpu_capability=(12, 0))
    monkeypatch.setattr(runtime, "_environment", lambda: blackwell)
    with pytest.raises(NoVariantError, match=r"compute capabilities 8\.0;8\.6;9\.0 do not cover this GPU's 12\.0"):
        kernelpin.load("acme/cuda-only", lock=project)
    assert not [name for name in sys.modules if name.startswith("_kernelpin_acme_cuda_only")]
