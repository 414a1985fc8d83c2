"""Session fixtures: two real builds of the operator (v0.1.0, v0.2.0) and a fake prerelease (v0.2.1-rc.1: it only
has to be skipped, so it needs no compiler), staged and released into a kernel repository of the test Hub."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.build_once import build_once
from testkit.fake_kernel import write_variant
from testkit.hub import HubServer
from testkit.releasing import (
    BUILT_VERSIONS,
    REPO_ID,
    STATIC_LIBSTDCXX_DRIVER,
    VERSIONS,
    Released,
    build_command,
    release_into_mirror,
    source_tree,
    stage,
    write_static_libstdcxx_driver,
)
from tools.builder.config import BuildConfig


@pytest.fixture(scope="session")
def static_libstdcxx_driver(tmp_path_factory: pytest.TempPathFactory) -> Path | None:
    """A compiler driver like the H200 image's CXX, which adds -static-libstdc++ (testkit.releasing), one per
    test run; None where this machine has no g++ or no libstdc++.a."""
    driver = (
        build_once(tmp_path_factory, "static-libstdcxx-driver", write_static_libstdcxx_driver) / STATIC_LIBSTDCXX_DRIVER
    )
    return driver if driver.exists() else None


@pytest.fixture(scope="session")
def builds(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest, static_libstdcxx_driver: Path | None
) -> dict[str, Path]:
    """version -> build. The checkout's own version comes from the session's offline conda package (the bits
    `pixi add` installs; the conda tests use the same build); the others are build_op builds of a copy of the
    sources with the version bumped, compiled (one job each, once per test run) while the conda package
    builds. They are compiled and linked through the static-libstdc++ driver where there is one, as on the H200
    image (tests/release/test_abi_gate.py checks what that gives). The prerelease is a fake kernel: it only has
    to be skipped."""
    own_version = BuildConfig.load().version
    bumped = [version for version in BUILT_VERSIONS if version != own_version]

    def compile_bumped(root: Path) -> None:
        env = {
            **os.environ,
            "MAX_JOBS": "1",
            **({"CXX": str(static_libstdcxx_driver)} if static_libstdcxx_driver else {}),
        }
        jobs: dict[str, tuple[subprocess.Popen, Path]] = {}
        for version in bumped:
            log = root / f"build-{version}.log"
            with open(log, "w") as stream:
                jobs[version] = (
                    subprocess.Popen(
                        build_command(root / version / "img2gray", root / "objects"),
                        cwd=source_tree(version, root / f"sources-{version}"),
                        stdout=stream,
                        stderr=subprocess.STDOUT,
                        env=env,
                    ),
                    log,
                )
        request.getfixturevalue("offline_build")  # while those compile
        failed = [
            f"{version}: exit {process.wait()}, see {log}:\n{log.read_text()[-3000:]}"
            for version, (process, log) in jobs.items()
            if process.wait() != 0
        ]
        if failed:
            raise RuntimeError("builds failed:\n" + "\n".join(failed))

    root = build_once(tmp_path_factory, "release-builds", compile_bumped)
    prerelease = VERSIONS[-1]
    return {
        own_version: request.getfixturevalue("offline_build").channel_dir,
        **{version: root / version / "img2gray" for version in bumped},
        prerelease: write_variant(
            tmp_path_factory.mktemp("prerelease") / "img2gray", prerelease, "torch213-cxx11-cpu-x86_64-linux"
        ),
    }


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
