"""Fixtures: one olah server per session, kernel repositories published into it, isolated caches per test."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kernelpin.cli import main
from testkit.fake_kernel import publish
from testkit.hub import HubServer, MirrorRepo
from testkit.sigstore_root import SigstoreRoot
from tests.kernelpin.helpers import TRUSTED_ORG


@pytest.fixture(scope="session")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubServer]:
    with HubServer(tmp_path_factory.mktemp("hub"), trusted_publishers=(TRUSTED_ORG, "acme")) as server:
        yield server


_names = itertools.count()


@pytest.fixture
def new_repo(hub: HubServer) -> Callable[..., tuple[str, MirrorRepo]]:
    """A fresh, empty repository with a unique name: (repo_id, repo)."""

    def make(prefix: str = "kernel", repo_type: str = "model", org: str = "acme") -> tuple[str, MirrorRepo]:
        repo_id = f"{org}/{prefix}-{next(_names)}"
        return repo_id, hub.repo(repo_id, repo_type)

    return make


@pytest.fixture(scope="session")
def img2gray(hub: HubServer) -> str:
    """acme/img2gray: 0.1.0 (lightweight tag), 0.1.1 (annotated), 0.2.0 (tag without v), 1.0.0-rc.1,
    non-version tags, and the major-version branch v0."""
    repo_id = "acme/img2gray"
    repo = hub.repo(repo_id)
    publish(repo, "0.1.0")
    publish(repo, "0.1.1", annotated=True)
    repo.tag("latest")
    publish(repo, "0.2.0", tag="0.2.0")
    repo.branch("v0")
    repo.tag("nightly-2026-01-01", annotated=True)
    publish(repo, "1.0.0-rc.1")
    return repo_id


@pytest.fixture
def hf_env(hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point huggingface_hub at the test server with a cache of this test's own; return the cache dir."""
    cache = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # this test's own hash receipts
    for name in (
        "HF_HUB_OFFLINE",
        "HF_TOKEN",
        "KERNELPIN_TORCH",
        "KERNELPIN_CUDA",
        "KERNELPIN_GPU_CAPABILITY",
        "KERNELPIN_TARGET",
    ):
        monkeypatch.delenv(name, raising=False)
    return cache


@pytest.fixture
def project(tmp_path: Path, hf_env: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Path]:
    """Write an application's pyproject.toml (the [tool.kernels.dependencies] body given) and cd into it."""
    root = tmp_path / "app"
    root.mkdir()
    monkeypatch.chdir(root)

    def make(dependencies: str) -> Path:
        (root / "pyproject.toml").write_text(
            '[project]\nname = "app"\nversion = "1.0"\n\n[tool.kernels.dependencies]\n' + dependencies
        )
        return root

    return make


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """Run `kernelpin ARGS` in-process: (exit status, stdout, stderr)."""

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        status = main(list(args))
        out, err = capsys.readouterr()
        return status, out, err

    return run


@pytest.fixture
def shared_parent(tmp_path: Path) -> Path:
    """A directory like /tmp (root's, mode 1777) holding an application directory of this user's."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("needs root to give files to another user")
    shared = tmp_path / "shared"
    (shared / "app").mkdir(parents=True)
    shared.chmod(0o1777)
    return shared


@pytest.fixture(scope="module")
def sigstore(tmp_path_factory: pytest.TempPathFactory) -> tuple[SigstoreRoot, Path]:
    """A Sigstore instance of the test kit's own (CA, log, timestamps) and its trusted_root.json, which the real
    verifier takes; one per test module, as each module had before."""
    root = SigstoreRoot()
    return root, root.write_trusted_root(tmp_path_factory.mktemp("sigstore") / "trusted_root.json")
