"""Session fixtures: three real builds of the operator, staged and released into a repository served by olah."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.hub import HubServer
from testkit.releasing import (
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
    installs); the others are build_op builds of a copy of the sources with the version bumped. All build at
    once (one compile job each)."""
    root = tmp_path_factory.mktemp("builds")
    own_version = BuildConfig.load().version
    env = {**os.environ, "MAX_JOBS": "1"}
    jobs: dict[str, tuple[subprocess.Popen, Path, Path]] = {}
    for version in VERSIONS:
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
    return {version: out for version, (_, out, _) in jobs.items()}


@pytest.fixture(scope="session")
def released(builds: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Released]:
    """v0.1.0, v0.2.0 and v0.2.1-rc.1 released in order into acme/img2gray on a running olah."""
    root = tmp_path_factory.mktemp("hub")
    hub = HubServer(root)
    repo = hub.repo(REPO_ID)
    staged, commits = {}, {}
    for version in VERSIONS:
        staged[version] = stage([builds[version]], root / "staged" / version, REPO_ID)
        commits[version] = release_into_mirror(repo, staged[version], f"v{version}")
    with hub:
        yield Released(hub, repo, builds, staged, commits)
