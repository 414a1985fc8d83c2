"""Two offline conda builds of one commit from two checkout paths install the same bytes.

The package archives themselves differ: rattler-build records the build time (info/index.json `timestamp`)
and its build directories (info/recipe/rendered_recipe.yaml, info/about.json channels). What the package
installs (and info/paths.json, which lists each file's sha256) must not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rattler.package_streaming import extract

from tests.conda.support import OfflineBuild
from tools.builder.config import BuildConfig, copy_build_inputs
from tools.builder.repro_check import this_commit_env

RECIPE_SIDE = ("recipe", "tools", "LICENSE")  # what the offline build needs besides the build inputs


def _payload(package: Path, into: Path) -> dict[str, bytes]:
    extract(package, into)
    files = {p.relative_to(into).as_posix(): p.read_bytes() for p in into.rglob("*") if p.is_file()}
    return {name: data for name, data in files.items() if not name.startswith("info/") or name == "info/paths.json"}


@pytest.mark.heavy(cpu_seconds=27)
def test_second_checkout_builds_a_package_with_identical_contents(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    config = BuildConfig.load()
    checkout = copy_build_inputs(config, tmp_path / "another" / "checkout")
    for name in RECIPE_SIDE:
        source = config.root / name
        if source.is_dir():
            shutil.copytree(
                source,
                checkout / name,
                dirs_exist_ok=True,
                ignore=shutil.ignore_patterns("__pycache__", "node_modules"),
            )
        else:
            shutil.copyfile(source, checkout / name)
    channel = tmp_path / "channel"

    # A package cache of its own, as on another machine: the build evicts the cached extraction of the package it
    # rebuilds (tools/conda/build.py), which tests on another pytest-xdist worker may be installing at that moment.
    # The commit and its time as a clone of it records them (the copy has no .git); it used to pass only where the
    # session's own build had left IMG2GRAY_SOURCE_COMMIT in this process's environment.
    env = {**os.environ, **this_commit_env(), "RATTLER_CACHE_DIR": str(tmp_path / "rattler-cache")}
    # The exact package, as the session's offline_build (the stable one is the same recipe with torch_abi=stable).
    subprocess.run(
        [
            sys.executable,
            "-m",
            "tools.conda.build",
            "--offline",
            "--variant",
            "cpu",
            "--abi",
            "exact",
            "--output-dir",
            str(channel),
        ],
        cwd=checkout,
        check=True,
        capture_output=True,
        env=env,
    )
    [package] = (channel / "linux-64").glob("*.conda")
    # Asked for only now: the session's build may still be running on another worker while this one built.
    offline_build: OfflineBuild = request.getfixturevalue("offline_build")

    assert package.name == offline_build.package.name
    first = _payload(offline_build.package, tmp_path / "first")
    second = _payload(package, tmp_path / "second")
    assert any(name.endswith(".abi3.so") for name in first)
    assert first == second
