"""tools/builder/op.py: the CUDA build's private staged sources, the CUDA compile, and which CUDA a build serves."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tools.builder.config import ROOT, TOOLKIT_ARCHS, BuildConfig
from tools.builder.op import (
    build_cuda_version,
    check_torch_cuda_libs,
    gencode_flags,
    nvcc_version_output,
    staged_sources,
    toolkit_cuda_version,
    toolkit_nvcc,
    torch_cuda_problem,
)

FILES = {
    "csrc/cpu.cpp": b"int cpu;\n",
    "csrc/shared.h": b"#pragma once\n",
    "csrc/kernel.cu": b"// v1\n",
    "csrc/kernel.cuh": b"// v1\n",
    "torch-ext/binding.cpp": b"int binding;\n",
}


def _checkout(root: Path, cuda_header: bytes) -> BuildConfig:
    for path, data in {**FILES, "csrc/kernel.cuh": cuda_header}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    return BuildConfig.from_dict(
        {
            "general": {"name": "k", "version": "0.1.0", "license": "MIT", "homepage": "h", "repository": "r"},
            "cuda": {"capabilities": {"13.0": ["9.0"]}},
            "torch": {"src": ["torch-ext/binding.cpp"]},
            "kernel": {
                "k_cpu": {"backend": "cpu", "src": ["csrc/cpu.cpp", "csrc/shared.h"]},
                "k": {"backend": "cuda", "src": ["csrc/kernel.cu", "csrc/kernel.cuh", "csrc/shared.h"]},
            },
        },
        root,
    )


def test_cpu_builds_compile_from_the_checkout_and_leave_nothing_behind(tmp_path):
    """g++'s prefix maps cover a CPU build: it stages nothing (failed before: every build left a copy in the
    shared /tmp/img2gray-sources, whatever TMPDIR said)."""
    config = _checkout(tmp_path / "a", b"// v1\n")
    with staged_sources(config, "key", cuda=False, stage_parent=tmp_path / "stage") as sources:
        assert sources == config
    assert not (tmp_path / "stage").exists()


def test_cuda_build_stages_exactly_its_sources_privately_and_removes_them(tmp_path):
    """Failed before: the copy stayed behind after the build, readable and reused by every later build."""
    stage_parent = tmp_path / "stage"
    stage_parent.mkdir()
    with staged_sources(_checkout(tmp_path / "b", b"// v2\n"), "key", cuda=True, stage_parent=stage_parent) as cuda:
        assert cuda.root == stage_parent / "k-sources-key"
        assert stat.S_IMODE(cuda.root.stat().st_mode) == 0o700 and cuda.root.stat().st_uid == os.getuid()
        assert sorted(p.relative_to(cuda.root).as_posix() for p in cuda.root.rglob("*") if p.is_file()) == sorted(FILES)
        assert (cuda.root / "csrc/kernel.cuh").read_bytes() == b"// v2\n"
    assert list(stage_parent.iterdir()) == []


def test_a_planted_stage_is_refused_and_never_read(tmp_path):
    """Another user (or a symlink) at the stage path first: the build stops and names it. Failed before: a
    directory others could write was used once its bytes matched, leaving them the moment before compilation."""
    stage_parent = tmp_path / "stage"
    planted = stage_parent / "k-sources-key"
    planted.mkdir(parents=True)
    planted.chmod(0o777)
    config = _checkout(tmp_path / "a", b"// v1\n")
    with (
        pytest.raises(SystemExit, match=r"k-sources-key is not private to this build .*mode 777"),
        staged_sources(config, "key", cuda=True, stage_parent=stage_parent),
    ):
        pass
    planted.rmdir()
    planted.symlink_to(tmp_path / "a")
    with (
        pytest.raises(SystemExit, match=r"k-sources-key is not a directory"),
        staged_sources(config, "key", cuda=True, stage_parent=stage_parent),
    ):
        pass
    assert (tmp_path / "a" / "csrc" / "kernel.cu").read_bytes() == b"// v1\n"  # nothing written through it


def test_a_second_build_of_the_same_sources_waits_for_the_first(tmp_path):
    """Two CUDA builds of one commit (two checkouts) share the fixed stage path: the second takes it only after
    the first has compiled and removed it, and finds its own files."""
    stage_parent = tmp_path / "stage"
    stage_parent.mkdir()
    first, second = _checkout(tmp_path / "a", b"// v1\n"), _checkout(tmp_path / "b", b"// v1\n")
    order = []
    with staged_sources(first, "key", cuda=True, stage_parent=stage_parent) as staged:
        waiting = threading.Thread(target=lambda: order.append(_staged_files(second, stage_parent)))
        waiting.start()
        waiting.join(timeout=1)
        assert waiting.is_alive()  # blocked on the lock while the first build compiles
        order.append("first done")
        leftover = staged.root / "stale.o"
        leftover.write_bytes(b"")
    waiting.join()
    assert order[0] == "first done" and "stale.o" not in order[1] and "csrc/kernel.cu" in order[1]


def _staged_files(config: BuildConfig, stage_parent: Path) -> list[str]:
    with staged_sources(config, "key", cuda=True, stage_parent=stage_parent) as staged:
        return sorted(p.relative_to(staged.root).as_posix() for p in staged.root.rglob("*") if p.is_file())


@pytest.mark.heavy(cpu_seconds=31)
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_cuda_source_compiles_for_every_capability_of_the_release(tmp_path):
    """`tools.builder.op --nvcc-check` with build.toml's capabilities: no CUDA torch needed, so CUDA code is compiled for
    every release target on any machine with nvcc (CI), not only where a GPU build runs."""
    env = {name: value for name, value in os.environ.items() if name != "TORCH_CUDA_ARCH_LIST"}
    done = subprocess.run(
        [sys.executable, "-m", "tools.builder.op", "--nvcc-check", "--build-dir", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # The host object plus one device ELF image (SASS) per capability of this toolkit's list; "+PTX" adds text,
    # not an ELF image.
    archs = BuildConfig.load().capabilities_for(toolkit_cuda_version(nvcc_version_output()))
    assert (tmp_path / "img2gray.cu.o").read_bytes().count(b"\x7fELF") == 1 + len(archs)


needs_nvcc = pytest.mark.skipif(
    shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(), reason="needs nvcc"
)


@needs_nvcc
def test_the_local_toolkits_architectures_are_those_the_table_says():
    """TOOLKIT_ARCHS decides which capabilities build.toml may list for a toolkit: its row for the toolkit here is
    what that nvcc compiles (`--list-gpu-code`), no more, no less."""
    release = toolkit_cuda_version(nvcc_version_output())
    listed = subprocess.run([str(toolkit_nvcc()), "--list-gpu-code"], capture_output=True, text=True, check=True).stdout
    compiled = {f"{int(code[3:-1])}.{code[-1]}" for code in listed.split() if code.startswith("sm_")}
    assert release in TOOLKIT_ARCHS
    assert compiled == TOOLKIT_ARCHS[release]


@needs_nvcc
def test_every_capability_list_for_the_local_toolkit_compiles_with_it(tmp_path):
    """build.toml's list for this toolkit, as -gencode flags, on a one-line kernel: every entry (and its PTX) is
    accepted by this nvcc (cheap beside the operator's compile, which the heavy test above does)."""
    release = toolkit_cuda_version(nvcc_version_output())
    archs = BuildConfig.load().capabilities_for(release)
    (tmp_path / "k.cu").write_text("__global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }\n")
    done = subprocess.run(
        [str(toolkit_nvcc()), "-c", "k.cu", "-o", "k.o", *gencode_flags(list(archs))],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "k.o").read_bytes().count(b"\x7fELF") == 1 + len(archs)


NVCC_12_9 = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Tue_May_27_02:21:03_PDT_2025
Cuda compilation tools, release 12.9, V12.9.86
Build cuda_12.9.r12.9/compiler.36037853_0
"""


def test_the_toolkit_release_is_read_from_nvcc_version():
    assert toolkit_cuda_version(NVCC_12_9) == "12.9"
    assert toolkit_cuda_version(NVCC_12_9.replace("12.9", "13.0").replace("V13.0.86", "V13.0.88")) == "13.0"
    with pytest.raises(SystemExit, match="no CUDA release in the output of nvcc --version"):
        toolkit_cuda_version("bash: nvcc: command not found\n")


@pytest.mark.parametrize("torch_cuda", [None, "13.0", "12.9"])
def test_a_stable_cuda_build_serves_the_cuda_of_its_toolkit_whatever_torch_has(torch_cuda):
    """Failed before: the variant was named after torch.version.cuda, so a 12.9 toolkit with a cu130 (or CPU) torch
    made a cu130 (or no CUDA) variant."""
    assert build_cuda_version("stable", torch_cuda, NVCC_12_9) == "12.9"


def test_an_exact_cuda_build_serves_the_cuda_of_its_torch():
    assert build_cuda_version("exact", "13.0", NVCC_12_9) == "13.0"


def test_only_the_exact_build_needs_a_cuda_torch(tmp_path):
    """Failed before: any CUDA build refused a CPU torch, though the stable one needs only libtorch_cuda.so to link."""
    assert torch_cuda_problem("stable", "2.13.0+cpu", None, tmp_path) is None
    assert torch_cuda_problem("stable", "2.13.0+cu130", "13.0", None) is None
    assert torch_cuda_problem("exact", "2.13.0+cu130", "13.0", None) is None
    assert "--torch-cuda-libs DIR" in torch_cuda_problem("stable", "2.13.0+cpu", None, None)
    assert "needs a CUDA-enabled torch (found 2.13.0+cpu)" in torch_cuda_problem("exact", "2.13.0+cpu", None, tmp_path)


def test_torch_cuda_libs_must_hold_the_cuda_libraries_and_serve_a_stable_build(tmp_path):
    (tmp_path / "libtorch_cuda.so").write_bytes(b"")
    with pytest.raises(SystemExit, match="lacks libc10_cuda.so: name the torch/lib directory of a CUDA torch"):
        check_torch_cuda_libs(tmp_path, "stable")
    (tmp_path / "libc10_cuda.so").write_bytes(b"")
    assert check_torch_cuda_libs(tmp_path, "stable") == tmp_path.resolve()
    with pytest.raises(SystemExit, match="--torch-cuda-libs is for --abi stable"):
        check_torch_cuda_libs(tmp_path, "exact")


def test_a_stable_cuda_build_on_a_cpu_torch_names_the_missing_library(tmp_path):
    """The one-line error of `--abi stable --cuda on` on a CPU torch names the fix (failed before: it asked for a
    CUDA-enabled torch)."""
    pytest.importorskip("torch")
    import torch

    if torch.version.cuda is not None or shutil.which("nvcc") is None:
        pytest.skip("needs a CPU torch and nvcc")
    done = subprocess.run(
        [sys.executable, "-m", "tools.builder.op", "--abi", "stable", "--cuda", "on", "--out", str(tmp_path / "out")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"build_op: --cuda on with --abi stable needs libtorch_cuda.so, which torch {torch.__version__} lacks: "
        "name a CUDA torch's lib directory with --torch-cuda-libs DIR"
    )
    assert not (tmp_path / "out").exists()
