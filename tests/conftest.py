"""The session builds shared by several test folders, each made once per test run (testkit/build_once.py):

- the operator built from this checkout (tools/builder/op.py), loaded by the op tests and compared with a second
  checkout's build by the reproducibility tests;
- one real offline conda build (stand-in channel + the CPU variant of recipe/, built and tested), used by the
  conda tests and the release tests (which release the checkout's own version from it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from testkit.build_once import build_once
from testkit.interop_skips import SkipPolicy
from testkit.schedule import heavy_first

if TYPE_CHECKING:
    from tests.conda.support import OfflineBuild

ROOT = Path(__file__).resolve().parents[1]

# CPU seconds (2-core CI machine) of the session builds, paid by the first test that asks for one.
SESSION_BUILD_SECONDS = {
    "checkout_build": 22,
    "exact_build": 22,
    "offline_build": 27,
    "builds": 22,
    "stable_build": 8,
    "offline_stable_build": 20,
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "heavy(cpu_seconds): a test that builds for tens of seconds; it is run first (testkit/schedule.py)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    cost: dict[pytest.Item, float] = {}
    for item in items:
        if marker := item.get_closest_marker("heavy"):
            cost[item] = marker.kwargs["cpu_seconds"]
    for fixture, seconds in SESSION_BUILD_SECONDS.items():
        if first := next((item for item in items if fixture in getattr(item, "fixturenames", ())), None):
            cost[first] = cost.get(first, 0) + seconds
    # Under pytest-xdist every worker collects and orders alike; `workerinput` says how many there are.
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    items[:] = heavy_first(items, cost, workers)


SKIPS = SkipPolicy.read()


def _fail_unlisted_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    if report.skipped and isinstance(report.longrepr, tuple):
        problem = SKIPS.problem(report.nodeid, str(report.longrepr[2]).removeprefix("Skipped: "))
        if problem is not None:
            report.outcome, report.longrepr = "failed", problem


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    outcome = yield
    _fail_unlisted_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> object:
    outcome = yield
    _fail_unlisted_skip(outcome.get_result())


# Which build of the operator the session's `checkout_build` is: "exact" (libtorch's C++ ABI, the default) or
# "stable" (torch's stable C ABI; tests/test_stable_abi.py runs tests/op again with it).
OP_ABI = os.environ.get("IMG2GRAY_OP_ABI", "exact")


def op_build(tmp_path_factory: pytest.TempPathFactory, abi: str) -> Path:
    """The variant directory of `python -m tools.builder.op --abi ABI --out DIR` run in this checkout, once per run."""

    def build(root: Path) -> None:
        # A separate process: the build loads the library it compiles, and a process may register a
        # torch.ops namespace only once.
        subprocess.run(
            [sys.executable, "-m", "tools.builder.op", "--abi", abi, "--out", str(root / "img2gray")],
            cwd=ROOT,
            check=True,
        )

    return build_once(tmp_path_factory, f"checkout-build-{abi}", build) / "img2gray"


@pytest.fixture(scope="session")
def checkout_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The build every consumer uses (CUDA too where torch has CUDA and nvcc is found), of `--abi $IMG2GRAY_OP_ABI`."""
    if prebuilt := os.environ.get(
        "IMG2GRAY_OP_BUILD"
    ):  # a variant directory built elsewhere (tools/maintainer/stable_abi_matrix.py)
        return Path(prebuilt)
    return op_build(tmp_path_factory, OP_ABI)


@pytest.fixture(scope="session")
def exact_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return op_build(tmp_path_factory, "exact")


@pytest.fixture(scope="session")
def stable_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return op_build(tmp_path_factory, "stable")


def offline_conda_build(tmp_path_factory: pytest.TempPathFactory, abi: str) -> OfflineBuild:
    """The CPU package of `abi` (exact: the installed torch's minor; stable: every torch from the stable floor on)
    built offline from recipe/ into a channel of its own, once per run."""
    # Imported here: the conda tooling needs py-rattler, which the op tests (run alone on a GPU machine) do not.
    from tests.conda.support import OfflineBuild
    from tools.conda.build import build_offline
    from tools.conda.standins import detect_machine

    machine = detect_machine()

    def build(root: Path) -> None:
        packages = build_offline(root / "output", which="cpu", standins_dir=root / "standins", machine=machine, abi=abi)
        assert len(packages) == 1, packages

    root = build_once(tmp_path_factory, "offline-conda-build" + ("" if abi == "exact" else f"-{abi}"), build)
    channel_dir = root / "output"
    [package] = (channel_dir / "linux-64").glob("*.conda")
    # The stand-in channel the build resolved against stays in place and serves consumer installs.
    return OfflineBuild(machine, channel_dir, (root / "standins").resolve().as_uri(), package)


@pytest.fixture(scope="session")
def offline_build(tmp_path_factory: pytest.TempPathFactory) -> OfflineBuild:
    return offline_conda_build(tmp_path_factory, "exact")


@pytest.fixture(scope="session")
def offline_stable_build(tmp_path_factory: pytest.TempPathFactory) -> OfflineBuild:
    return offline_conda_build(tmp_path_factory, "stable")
