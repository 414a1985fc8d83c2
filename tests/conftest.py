"""One real offline conda build per test run (stand-in channel + the CPU variant of recipe/, built and tested),
shared by the conda tests and the release tests (which release the checkout's own version from it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conda.support import OfflineBuild
from testkit.build_once import build_once
from tools.conda.build import build_offline
from tools.conda.standins import detect_machine


@pytest.fixture(scope="session")
def offline_build(tmp_path_factory: pytest.TempPathFactory) -> OfflineBuild:
    machine = detect_machine()

    def build(root: Path) -> None:
        packages = build_offline(root / "output", which="cpu", standins_dir=root / "standins", machine=machine)
        assert len(packages) == 1, packages

    root = build_once(tmp_path_factory, "offline-conda-build", build)
    channel_dir = root / "output"
    [package] = (channel_dir / "linux-64").glob("*.conda")
    # The stand-in channel the build resolved against stays in place and serves consumer installs.
    return OfflineBuild(machine, channel_dir, (root / "standins").resolve().as_uri(), package)
