"""Variant choice: pure functions over variant names, compute capabilities and an Environment."""

from __future__ import annotations

import pytest

from kernelpin.variant import Environment, Variant, arch_covers, select

ARCHS = ("8.0", "9.0", "12.0+PTX")
LOCKED = {
    "torch213-cxx11-cpu-x86_64-linux": None,
    "torch213-cxx11-cu128-x86_64-linux": ARCHS,
    "torch213-cxx11-cu130-x86_64-linux": ARCHS,
    "torch213-cxx11-cu131-x86_64-linux": ARCHS,
    "torch212-cxx11-cu129-x86_64-linux": ARCHS,
    "torch213-cxx11-cu130-aarch64-linux": ARCHS,
}


def env(torch=(2, 13), cuda=None, capability=None, **kwargs) -> Environment:
    return Environment(torch=torch, cuda=cuda, gpu_capability=capability, **kwargs)


@pytest.mark.parametrize(
    ("environment", "chosen"),
    [
        (env(), "torch213-cxx11-cpu-x86_64-linux"),
        (env(cuda=(13, 0)), "torch213-cxx11-cu130-x86_64-linux"),
        (env(cuda=(13, 2)), "torch213-cxx11-cu131-x86_64-linux"),  # highest minor <= the system's
        (env(cuda=(12, 9)), "torch213-cxx11-cu128-x86_64-linux"),  # minor fallback within major 12
        (env(torch=(2, 12), cuda=(12, 9)), "torch212-cxx11-cu129-x86_64-linux"),
        (env(cuda=(13, 0), arch="aarch64"), "torch213-cxx11-cu130-aarch64-linux"),
        (env(cuda=(11, 8)), "torch213-cxx11-cpu-x86_64-linux"),  # no CUDA 11 build: CPU fallback
    ],
)
def test_select(environment, chosen):
    assert select(LOCKED, environment).chosen == chosen


def test_rejections_give_one_reason_per_variant():
    selection = select({k: v for k, v in LOCKED.items() if "cpu" not in k}, env(cuda=(13, 0), capability=(7, 5)))
    assert selection.chosen is None
    assert selection.rejected == {
        "torch213-cxx11-cu128-x86_64-linux": "CUDA 12.8 has another major version than the system's 13.0",
        "torch213-cxx11-cu130-x86_64-linux": "compute capabilities 8.0;9.0;12.0+PTX do not cover this GPU's 7.5",
        "torch213-cxx11-cu131-x86_64-linux": "CUDA 13.1 > system 13.0",
        "torch212-cxx11-cu129-x86_64-linux": "torch 2.12 != 2.13",
        "torch213-cxx11-cu130-aarch64-linux": "built for aarch64, this is x86_64",
    }
    assert "torch213-cxx11-cu131-x86_64-linux: CUDA 13.1 > system 13.0" in selection.explain()


def test_cpu_environment_rejects_cuda_builds_and_unknown_names():
    selection = select({"torch213-cxx11-cu130-x86_64-linux": None, "weird": None}, env())
    assert selection.chosen is None
    assert selection.rejected["torch213-cxx11-cu130-x86_64-linux"] == "CUDA 13.0 build, this environment has no CUDA"
    assert selection.rejected["weird"] == "not a variant name this loader knows"


@pytest.mark.parametrize(
    ("arch", "device", "covers"),
    [
        ("8.0", (8, 6), True), ("8.6", (8, 0), False), ("8.0", (9, 0), False),
        ("12.0+PTX", (12, 1), True), ("12.0+PTX", (13, 0), True), ("12.0+PTX", (9, 0), False),
        ("9.0a", (9, 0), True), ("9.0a", (9, 1), False),
    ],
)
def test_arch_covers(arch, device, covers):
    assert arch_covers(arch, device) is covers


def test_capabilities_are_checked_only_when_known():
    variants = {"torch213-cxx11-cu130-x86_64-linux": None}
    assert select(variants, env(cuda=(13, 0), capability=(7, 5))).chosen == "torch213-cxx11-cu130-x86_64-linux"


def test_abi_tag_is_optional():
    assert Variant.parse("torch213-cu130-x86_64-linux").cxx11_abi is None
    assert Variant.parse("torch213-cu130-x86_64-linux").name == "torch213-cu130-x86_64-linux"
    assert select({"torch213-cxx98-cpu-x86_64-linux": None}, env()).rejected == {
        "torch213-cxx98-cpu-x86_64-linux": "C++ ABI differs from this torch's (cxx11)"
    }
    assert select({"torch213-cpu-x86_64-linux": None}, env()).chosen == "torch213-cpu-x86_64-linux"
