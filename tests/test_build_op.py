"""tools/build_op.py: staged sources (one content-addressed copy per build's own sources) and the CUDA compile."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools.build_config import ROOT, BuildConfig
from tools.build_op import stage_sources

FILES = {"csrc/cpu.cpp": b"int cpu;\n", "csrc/shared.h": b"#pragma once\n", "csrc/kernel.cu": b"// v1\n",
         "csrc/kernel.cuh": b"// v1\n", "torch-ext/binding.cpp": b"int binding;\n"}


def _checkout(root: Path, cuda_header: bytes) -> BuildConfig:
    for path, data in {**FILES, "csrc/kernel.cuh": cuda_header}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    return BuildConfig.from_dict({
        "general": {"name": "k", "version": "0.1.0", "license": "MIT", "homepage": "h", "repository": "r"},
        "cuda": {"capabilities": ["9.0"]}, "torch": {"src": ["torch-ext/binding.cpp"]},
        "kernel": {"k_cpu": {"backend": "cpu", "src": ["csrc/cpu.cpp", "csrc/shared.h"]},
                   "k": {"backend": "cuda", "src": ["csrc/kernel.cu", "csrc/kernel.cuh", "csrc/shared.h"]}},
    }, root)


def test_cpu_builds_of_checkouts_that_differ_in_a_cuda_file_share_a_stage(tmp_path):
    # A CPU build's key hashes the CPU sources only. Failed before: the CUDA files were staged under that key
    # too, so a second checkout whose CUDA header differed stopped with "holds other bytes for csrc/...cuh".
    stage_root = tmp_path / "stage"
    first = stage_sources(_checkout(tmp_path / "a", b"// v1\n"), "cpu-key", cuda=False, stage_root=stage_root)
    second = stage_sources(_checkout(tmp_path / "b", b"// v2\n"), "cpu-key", cuda=False, stage_root=stage_root)
    assert first.root == second.root == stage_root / "cpu-key"
    assert sorted(p.relative_to(first.root).as_posix() for p in first.root.rglob("*") if p.is_file()) == [
        "csrc/cpu.cpp", "csrc/shared.h", "torch-ext/binding.cpp"]
    cuda = stage_sources(_checkout(tmp_path / "b", b"// v2\n"), "cuda-key", cuda=True, stage_root=stage_root)
    assert (cuda.root / "csrc/kernel.cuh").read_bytes() == b"// v2\n"


@pytest.mark.heavy(cpu_seconds=31)
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_cuda_source_compiles_for_every_capability_of_the_release(tmp_path):
    """`build_op --nvcc-check` with build.toml's capabilities: no CUDA torch needed, so CUDA code is compiled for
    every release target on any machine with nvcc (CI), not only where a GPU build runs."""
    env = {name: value for name, value in os.environ.items() if name != "TORCH_CUDA_ARCH_LIST"}
    done = subprocess.run([sys.executable, "-m", "tools.build_op", "--nvcc-check", "--build-dir", str(tmp_path)],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # The host object plus one device ELF image (SASS) per capability; "+PTX" adds text, not an ELF image.
    assert (tmp_path / "img2gray.cu.o").read_bytes().count(b"\x7fELF") == 1 + len(BuildConfig.load().cuda_capabilities)
