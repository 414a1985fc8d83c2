"""One commit, two checkout paths, the same bytes: the library and metadata.json (issue: 48 k bytes differed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools import repro_check
from tools.build_config import BuildConfig, copy_build_inputs


def test_cpu_build_is_bit_identical_from_two_checkout_paths(tmp_path: Path) -> None:
    first, second = repro_check.build_twice(tmp_path, cuda="off")

    assert first.checkout != second.checkout and len(str(first.checkout)) != len(str(second.checkout))
    assert first.library.name == second.library.name  # the build id ignores where the checkout is
    assert repro_check.leaked_paths(first.library, tmp_path) == []
    assert first.hashes == second.hashes


@pytest.mark.skipif(shutil.which("nvcc") is None or shutil.which("objcopy") is None, reason="needs nvcc and objcopy")
def test_cuda_object_is_identical_from_two_checkout_paths(tmp_path: Path) -> None:
    """The device code too (no CUDA torch needed: build_op --nvcc-check, one architecture to keep it short).

    Local symbols are discarded before comparing, as the link does (-Wl,-x): nvcc names the host translation
    unit after a temp file carrying its process id."""
    config = BuildConfig.load()
    env = {**os.environ, "TORCH_CUDA_ARCH_LIST": "9.0"}
    jobs = []
    for name in repro_check.CHECKOUTS:
        checkout = copy_build_inputs(config, tmp_path / name)
        command = [sys.executable, "-m", "tools.build_op", "--nvcc-check", "--build-dir", str(checkout / "obj")]
        jobs.append((checkout, subprocess.Popen(command, cwd=checkout, env=env, stdout=subprocess.PIPE,
                                                stderr=subprocess.STDOUT)))
    objects = []
    for checkout, job in jobs:
        output = job.communicate()[0].decode()
        assert job.returncode == 0, output[-3000:]
        stripped = checkout / "obj" / "stripped.o"
        subprocess.run(["objcopy", "--discard-all", "--strip-debug", str(checkout / "obj" / "img2gray.cu.o"),
                        str(stripped)], check=True)
        objects.append(stripped.read_bytes())

    assert str(tmp_path).encode() not in objects[0]
    assert objects[0] == objects[1]
