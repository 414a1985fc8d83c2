"""The ABI gate (kernelpin.abi_gate, HF's kernel-abi-check): shared libraries must meet manylinux_2_28 and abi3.

Real libraries, compiled here in a second: a C++ function that copies a std::shared_ptr, which is where
libstdc++ reads glibc's `__libc_single_threaded` (GLIBC_2.32) when the glibc headers have
<sys/single_threaded.h>. Compiled as it is, the gate refuses it, in stage and in publish; compiled with the
build's glibc floor (csrc/glibc_floor.h, what tools/build_op.py pre-includes), it passes.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelpin.abi_gate import AbiError, gate
from testkit.fake_kernel import write_variant
from testkit.releasing import ROOT, run

pytest.importorskip("kernel_abi_check")

CPU = "torch213-cxx11-cpu-x86_64-linux"
SOURCE = """
#include <memory>
std::shared_ptr<int> keep(const std::shared_ptr<int>& p) { std::shared_ptr<int> copy = p; return copy; }
"""
HAS_SINGLE_THREADED_H = Path("/usr/include/x86_64-linux-gnu/sys/single_threaded.h").exists() or Path(
    "/usr/include/sys/single_threaded.h").exists()


def compile_library(directory: Path, *flags: str) -> Path:
    compiler = shutil.which("g++") or pytest.skip("no g++")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "keep.cpp").write_text(SOURCE)
    library = directory / "_keep.abi3.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-O2", *flags, str(directory / "keep.cpp"), "-o", str(library)],
                   check=True)
    (directory / "keep.cpp").unlink()
    return library


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    if not HAS_SINGLE_THREADED_H:
        pytest.skip("this machine's glibc headers predate 2.32: its builds never reference __libc_single_threaded")
    root = tmp_path_factory.mktemp("libs")
    return {
        "plain": compile_library(root / "plain").read_bytes(),
        "floor": compile_library(root / "floor", "-include", str(ROOT / "csrc" / "glibc_floor.h")).read_bytes(),
    }


def variant_with(tmp_path: Path, library: bytes, version: str = "1.0.0") -> Path:
    return write_variant(tmp_path / f"variant-{version}", version, CPU, extra={"_keep.abi3.so": library})


def test_gate_refuses_glibc_2_32_and_says_what_to_do(libraries, tmp_path):
    directory = variant_with(tmp_path, libraries["plain"])
    with pytest.raises(AbiError) as refused:
        gate([directory])
    message = str(refused.value)
    assert "_keep.abi3.so: __libc_single_threaded needs GLIBC_2.32: libstdc++ reads it when compiled against glibc" in message
    assert "--glibc-floor 2.28" in message and "manylinux_2_28" in message


def test_the_glibc_floor_header_makes_the_same_code_pass(libraries, tmp_path):
    assert gate([variant_with(tmp_path, libraries["floor"])]) == 1


def test_stage_and_publish_run_the_gate(libraries, tmp_path):
    bad = variant_with(tmp_path, libraries["plain"])
    done = run([sys.executable, "-m", "tools.release", "stage", str(bad), "--repo", "acme/gray",
                "--out", str(tmp_path / "r")], cwd=ROOT, check=False)
    assert done.returncode == 1 and "build/torch213-cxx11-cpu-x86_64-linux/_keep.abi3.so: __libc_single_threaded" in done.stderr
    assert not (tmp_path / "r").exists()

    good = variant_with(tmp_path, libraries["floor"], "1.0.1")
    run([sys.executable, "-m", "tools.release", "stage", str(good), "--repo", "acme/gray",
         "--out", str(tmp_path / "r")], cwd=ROOT)
    # The library is replaced after staging (its digest updated to match): publish's own gate refuses it.
    staged = tmp_path / "r" / "build" / CPU
    shutil.rmtree(staged)
    shutil.copytree(bad, staged)
    done = run([sys.executable, "-m", "kernelpin", "publish", str(tmp_path / "r"), "--repo", "acme/gray", "--dry-run"],
               cwd=ROOT, check=False)
    assert done.returncode == 1 and "__libc_single_threaded needs GLIBC_2.32" in done.stderr


def test_gate_command_line(libraries, tmp_path):
    good, bad = variant_with(tmp_path, libraries["floor"]), variant_with(tmp_path, libraries["plain"], "2.0.0")
    passed = run([sys.executable, "-m", "kernelpin.abi_gate", str(good)], cwd=ROOT)
    assert "ABI gate passed: 1 shared library meets manylinux_2_28" in passed.stdout
    refused = run([sys.executable, "-m", "kernelpin.abi_gate", str(good), str(bad)], cwd=ROOT, check=False)
    assert refused.returncode == 1 and "1 ABI violation(s)" in refused.stderr


def test_ci_gate_over_a_conda_channel_and_variant_dirs(builds, libraries, tmp_path):
    """`python -m tools.abi_gate output` (the CI workflow's ABI gate step): the conda package of the offline
    build passes; a variant with a glibc 2.32 library next to it is refused by name."""
    channel = builds["0.1.0"]
    assert any(channel.rglob("*.conda"))
    passed = run([sys.executable, "-m", "tools.abi_gate", str(channel)], cwd=ROOT)
    assert "ABI gate passed: 1 shared library meets manylinux_2_28 and abi3" in passed.stdout
    bad = variant_with(tmp_path, libraries["plain"])
    refused = run([sys.executable, "-m", "tools.abi_gate", str(channel), str(bad)], cwd=ROOT, check=False)
    assert refused.returncode == 1 and f"{bad}: _keep.abi3.so: __libc_single_threaded needs GLIBC_2.32" in refused.stderr
