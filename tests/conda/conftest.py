"""One real offline build per test session: stand-in channel + the CPU variant of recipe/, built and tested."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# tools/ holds scripts, not a package: their modules import each other as siblings.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

from conda_build import build_offline  # noqa: E402
from conda_standins import detect_machine  # noqa: E402
from tests.conda.conda_test_support import OfflineBuild  # noqa: E402


@pytest.fixture(scope="session")
def offline_build(tmp_path_factory: pytest.TempPathFactory) -> OfflineBuild:
    machine = detect_machine()
    root = tmp_path_factory.mktemp("conda")
    standins_dir = root / "standins"
    channel_dir = root / "output"
    packages = build_offline(channel_dir, which="cpu", standins_dir=standins_dir, machine=machine)
    assert len(packages) == 1, packages
    # The stand-in channel the build resolved against stays in place and serves consumer installs.
    return OfflineBuild(machine, channel_dir, standins_dir.resolve().as_uri(), packages[0])
