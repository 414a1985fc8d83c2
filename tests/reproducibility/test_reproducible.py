"""One commit, two checkout paths, the same bytes: the library and metadata.json (issue: 48 k bytes differed)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rattler.package_streaming import extract

from testkit.releasing import ROOT, build_command, run
from tests.conda.support import OfflineBuild
from tools.builder import repro_check
from tools.builder.config import BuildConfig, copy_build_inputs
from tools.builder.op import want_cuda


@pytest.fixture
def checkout_cpu_build(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """This checkout's CPU build: the session's `checkout_build` (the op tests' build) where that is a CPU build,
    else one made here."""
    if not want_cuda("auto"):
        return request.getfixturevalue("checkout_build")
    out = tmp_path / "checkout-cpu" / "img2gray"
    run(build_command(out, tmp_path / "checkout-cpu" / "obj", cuda="off"), cwd=ROOT)
    return out


def test_cpu_build_is_bit_identical_from_two_checkout_paths(
    checkout_cpu_build: Path, offline_build: OfflineBuild, tmp_path: Path
) -> None:
    """The checkout's own build and the library of the session's offline conda package: a second build of this
    commit, from rattler-build's copy of the sources in its work directory, against the torch of its build
    environment, with the conda toolchain (tests/conda/test_reproducible_package.py compares the package built from
    a third checkout path). The packaged library is what `pixi add` installs: the dev build gives the same bits."""
    first = repro_check.BuiltVariant.of(ROOT, checkout_cpu_build)
    extract(offline_build.package, tmp_path / "package")
    second = repro_check.BuiltVariant.of(offline_build.channel_dir, tmp_path / "package" / "site-packages" / "img2gray")

    assert first.library.name == second.library.name  # the build id ignores where the checkout is
    assert repro_check.leaked_paths(first.library, ROOT) == []
    assert repro_check.leaked_paths(second.library, offline_build.channel_dir) == []  # its work dir, its torch
    assert first.library.read_bytes() == second.library.read_bytes()
    # metadata.json differs in one field only: the compiler driver as invoked (`c++` here, the conda toolchain's
    # `g++`); its version must agree.
    first_metadata, second_metadata = (json.loads(built.metadata.read_text()) for built in (first, second))
    drivers = [metadata["provenance"].pop("compiler").split(" ", 1) for metadata in (first_metadata, second_metadata)]
    assert drivers[0][1] == drivers[1][1], drivers
    assert first_metadata == second_metadata


@pytest.mark.heavy(cpu_seconds=25)
@pytest.mark.skipif(shutil.which("nvcc") is None or shutil.which("objcopy") is None, reason="needs nvcc and objcopy")
def test_cuda_object_is_identical_from_two_checkout_paths(tmp_path: Path) -> None:
    """The device code too (no CUDA torch needed: tools.builder.op --nvcc-check, one architecture to keep it short).

    Local symbols are discarded before comparing, as the link does (-Wl,-x): nvcc names the host translation
    unit after a temp file carrying its process id."""
    config = BuildConfig.load()
    env = {**os.environ, "TORCH_CUDA_ARCH_LIST": "9.0"}
    jobs = []
    for name in repro_check.CHECKOUTS:
        checkout = copy_build_inputs(config, tmp_path / name)
        command = [sys.executable, "-m", "tools.builder.op", "--nvcc-check", "--build-dir", str(checkout / "obj")]
        jobs.append(
            (
                checkout,
                subprocess.Popen(command, cwd=checkout, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT),
            )
        )
    objects = []
    for checkout, job in jobs:
        output = job.communicate()[0].decode()
        assert job.returncode == 0, output[-3000:]
        stripped = checkout / "obj" / "stripped.o"
        subprocess.run(
            ["objcopy", "--discard-all", "--strip-debug", str(checkout / "obj" / "img2gray.cu.o"), str(stripped)],
            check=True,
        )
        objects.append(stripped.read_bytes())

    assert str(tmp_path).encode() not in objects[0]
    assert objects[0] == objects[1]
