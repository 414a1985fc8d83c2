"""Session fixtures: two real builds of the operator (v0.1.0, v0.2.0) and a fake prerelease (v0.2.1-rc.1: it only
has to be skipped, so it needs no compiler), staged and released into a kernel repository of the test Hub."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.fake_kernel import write_variant
from testkit.hub import HubServer
from testkit.releasing import (
    BUILT_VERSIONS,
    REPO_ID,
    ROOT,
    VERSIONS,
    Released,
    build_command,
    release_into_mirror,
    source_tree,
    stage,
)
from tools.build_config import BuildConfig


@pytest.fixture(scope="session")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """version -> build. The checkout's own version comes from the conda package (the bits `pixi add`
    installs); v0.2.0 is a build_op build of a copy of the sources with the version bumped; both compile at
    once (one job each). The prerelease is a fake kernel: it only has to be skipped."""
    root = tmp_path_factory.mktemp("builds")
    own_version = BuildConfig.load().version
    env = {**os.environ, "MAX_JOBS": "1"}
    jobs: dict[str, tuple[subprocess.Popen, Path, Path]] = {}
    for version in BUILT_VERSIONS:
        log = root / f"build-{version}.log"
        if version == own_version:
            out = root / "conda-channel"
            command = [sys.executable, "-m", "tools.conda.build", "--offline", "--variant", "cpu", "--output-dir", str(out)]
            sources = ROOT
        else:
            sources = ROOT if version == own_version else source_tree(version, root / f"sources-{version}")
            out = root / version / "img2gray"
            command = build_command(out, root / "objects")
        with open(log, "w") as stream:
            jobs[version] = (subprocess.Popen(command, cwd=sources, stdout=stream, stderr=subprocess.STDOUT, env=env),
                             out, log)
    failed = [f"{version}: exit {process.wait()}, see {log}:\n{log.read_text()[-3000:]}"
              for version, (process, _, log) in jobs.items() if process.wait() != 0]
    if failed:
        raise RuntimeError("builds failed:\n" + "\n".join(failed))
    prerelease = VERSIONS[-1]
    return {**{version: out for version, (_, out, _) in jobs.items()},
            prerelease: write_variant(root / prerelease / "img2gray", prerelease, "torch213-cxx11-cpu-x86_64-linux")}


@pytest.fixture(scope="session")
def released(builds: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Released]:
    """v0.1.0, v0.2.0 and v0.2.1-rc.1 released in order into the kernel repository acme/img2gray of a running
    test Hub, as `kernelpin publish` releases them (tags, and branch v0 at v0.2.0)."""
    root = tmp_path_factory.mktemp("hub")
    hub = HubServer(root, trusted_publishers=("acme",))  # `kernels lock` checks the publisher
    repo = hub.repo(REPO_ID, "kernel")
    staged, commits = {}, {}
    for version in VERSIONS:
        staged[version] = stage([builds[version]], root / "staged" / version, REPO_ID)
        commits[version] = release_into_mirror(repo, staged[version], f"v{version}")
    with hub:
        yield Released(hub, repo, builds, staged, commits)
