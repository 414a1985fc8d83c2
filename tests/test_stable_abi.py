"""The stable-ABI build (tools/builder/op.py --abi stable): the whole op suite passes against it, and its library
keeps the ABI gate's stable-ABI rule (no libtorch C++ symbol, no shim newer than torch 2.11).

The same library under torch 2.11, 2.12, 2.13 and 2.14: tools/maintainer/stable_abi_matrix.py (too many GB of wheels for CI;
its record is benchmarks/results/cpu/stable-abi-matrix.json)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelpin.publisher.abi_gate import gate, undefined_symbols

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.heavy(cpu_seconds=60)
def test_the_op_suite_passes_with_the_stable_abi_build(stable_build):
    env = {**os.environ, "IMG2GRAY_OP_BUILD": str(stable_build), "IMG2GRAY_OP_ABI": "stable"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", "tests/op"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout.splitlines()[-1], result.stdout[-500:]


def test_the_stable_abi_build_keeps_the_stable_abi(stable_build):
    pytest.importorskip("kernel_abi_check")
    metadata = json.loads((stable_build / "metadata.json").read_text())
    assert metadata["variant"].startswith("torch-stable-abi211-") and metadata["torch-stable-abi"] == "2.11"
    assert gate([stable_build]) == 1  # manylinux_2_28, abi3 and the stable-ABI rule
    [library] = stable_build.glob("*.so")
    imported = undefined_symbols(library)
    assert any(name.startswith("aoti_torch_") for name in imported)  # the rule had shims to check


def test_a_release_carries_the_stable_variant_and_loaders_prefer_it(checkout_build, stable_build, tmp_path):
    """Staged beside the exact build, the stable variant is released as its own build/<variant>/; a loader on
    torch 2.13 (what kernels 0.17.2 does too) takes it over the exact torch213 build, and one on torch 2.14 (no
    exact build for it) still finds a variant."""
    from kernelpin.format.variant import Environment, select
    from tools.release.stage import stage

    release = stage([checkout_build, stable_build], tmp_path / "release", "acme/img2gray")
    stable = json.loads((stable_build / "metadata.json").read_text())["variant"]
    exact = json.loads((checkout_build / "metadata.json").read_text())["variant"]
    assert set(release.variants) == {stable, exact}
    assert (release.root / "build" / stable / "metadata.json").is_file()
    offered = dict.fromkeys(release.variants)
    assert select(offered, Environment(torch=(2, 13), cuda=None)).chosen == stable
    assert select(offered, Environment(torch=(2, 14), cuda=None)).chosen == stable
    assert select(offered, Environment(torch=(2, 10), cuda=None)).chosen is None
