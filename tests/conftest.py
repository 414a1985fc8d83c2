"""One real offline conda build per test session (stand-in channel + the CPU variant of recipe/, built and tested),
shared by the conda tests and the release tests (which release the checkout's own version from it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.conda.support import OfflineBuild


@pytest.fixture(scope="session")
def offline_build(tmp_path_factory: pytest.TempPathFactory) -> OfflineBuild:
    # Imported here: the conda tooling needs py-rattler, which the op tests (run alone on a GPU machine) do not.
    from tests.conda.support import OfflineBuild
    from tools.conda.build import build_offline
    from tools.conda.standins import detect_machine

    machine = detect_machine()
    root = tmp_path_factory.mktemp("conda")
    standins_dir = root / "standins"
    channel_dir = root / "output"
    packages = build_offline(channel_dir, which="cpu", standins_dir=standins_dir, machine=machine)
    assert len(packages) == 1, packages
    # The stand-in channel the build resolved against stays in place and serves consumer installs.
    return OfflineBuild(machine, channel_dir, standins_dir.resolve().as_uri(), packages[0])


# Tests that share a session's heavy builds run on one pytest-xdist worker (`--dist loadgroup`), so that each
# build happens once: the offline conda package (conda and release tests), the op build (op tests).
_BUILD_GROUPS = {"conda": "conda-builds", "release": "conda-builds", "op": "op-build"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        group = _BUILD_GROUPS.get(item.path.parent.name)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
