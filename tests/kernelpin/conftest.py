"""Fixtures: one olah server per session, kernel repositories published into it, isolated caches per test."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kernelpin.cli import main
from tests.hubserver import HubServer, MirrorRepo

CPU_213 = "torch213-cxx11-cpu-x86_64-linux"
VARIANTS = (
    CPU_213,
    "torch213-cxx11-cu128-x86_64-linux",
    "torch213-cxx11-cu130-x86_64-linux",
    "torch212-cxx11-cpu-x86_64-linux",
    "torch212-cxx11-cu129-x86_64-linux",
)
ARCHS = ("8.0", "9.0", "12.0+PTX")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def kernel_files(
    version: str, variants: tuple[str, ...] = VARIANTS, metadata: bool = True, extra: dict[str, bytes] | None = None
) -> dict[str, bytes]:
    """A release of a small pure-Python kernel: build/<variant>/{__init__,_impl}.py (+ metadata.json)."""
    files: dict[str, bytes] = {"README.md": f"# test kernel {version}\n".encode()}
    for variant in variants:
        own = {
            "__init__.py": b"from ._impl import VARIANT, gray\n" + f'VERSION = "{version}"\n'.encode(),
            "_impl.py": (
                f'VARIANT = "{variant}"\n\n\n'
                "def gray(pixels):\n"
                "    return [(299 * r + 587 * g + 114 * b) // 1000 for r, g, b in pixels]\n"
            ).encode(),
            **(extra or {}),
        }
        if metadata:
            cuda = "-cu" in variant
            backend = {"type": "cuda", "version": "13.0", "archs": list(ARCHS)} if cuda else {"type": "cpu"}
            document = {
                "id": "_img2gray_test", "name": "img2gray", "version": version, "variant": variant,
                "backend": backend,
                "digest": {"algorithm": "sha256", "files": {path: sha256(data) for path, data in own.items()}},
            }
            own["metadata.json"] = json.dumps(document, indent=2, sort_keys=True).encode()
        files.update({f"build/{variant}/{path}": data for path, data in own.items()})
    return files


def publish(repo: MirrorRepo, version: str, tag: str | None = None, annotated: bool = False, **kwargs) -> str:
    repo.write(kernel_files(version, **kwargs), clear=True)
    commit = repo.commit(f"release {version}")
    repo.tag(tag or f"v{version}", annotated=annotated)
    return commit


@pytest.fixture(scope="session")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubServer]:
    with HubServer(tmp_path_factory.mktemp("hub")) as server:
        yield server


_names = itertools.count()


@pytest.fixture
def new_repo(hub: HubServer) -> Callable[..., tuple[str, MirrorRepo]]:
    """A fresh, empty repository with a unique name: (repo_id, repo)."""

    def make(prefix: str = "kernel", repo_type: str = "model") -> tuple[str, MirrorRepo]:
        repo_id = f"acme/{prefix}-{next(_names)}"
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
    for name in ("HF_HUB_OFFLINE", "HF_TOKEN", "KERNELPIN_TORCH", "KERNELPIN_CUDA", "KERNELPIN_GPU_CAPABILITY",
                 "KERNELPIN_TARGET"):
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
