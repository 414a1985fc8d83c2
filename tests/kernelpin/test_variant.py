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


# The names `kernels` 0.17 loads besides torch{MM}-...: stable-ABI builds and Python-only ("noarch") builds.
ECOSYSTEM = {
    "torch-stable-abi210-cu130-x86_64-linux": ARCHS,
    "torch-stable-abi212-cu130-x86_64-linux": ARCHS,
    "torch-stable-abi212-cpu-x86_64-linux": None,
    "torch213-cu130-x86_64-linux": ARCHS,
    "torch213-cxx11-cu130-x86_64-linux": ARCHS,
    "torch213-cxx11-cpu-x86_64-linux": None,
    "torch-cuda": None,
    "torch-cpu": None,
    "torch-universal": None,
    "torch-rocm": None,
    "torch213-cxx11-rocm71-x86_64-linux": None,
}


@pytest.mark.parametrize(
    "name",
    ["torch-stable-abi210-cu128-x86_64-linux", "torch-stable-abi29-cpu-aarch64-linux", "torch-cuda", "torch-universal",
     "torch213-cxx11-rocm71-x86_64-linux", "torch212-cpu-aarch64-darwin", "torch213-cxx11-xpu20253-x86_64-linux"],
)
def test_ecosystem_names_parse_and_round_trip(name):
    assert Variant.parse(name).name == name


@pytest.mark.parametrize(
    ("environment", "order"),
    [
        # CUDA machine: kernels' order (newest stable ABI first, then per-torch builds, untagged before tagged,
        # then Python-only CUDA builds), then torch-universal; CPU builds only as the last resort.
        (env(cuda=(13, 0)), ["torch-stable-abi212-cu130-x86_64-linux", "torch-stable-abi210-cu130-x86_64-linux",
                             "torch213-cu130-x86_64-linux", "torch213-cxx11-cu130-x86_64-linux", "torch-cuda",
                             "torch-universal", "torch-stable-abi212-cpu-x86_64-linux",
                             "torch213-cxx11-cpu-x86_64-linux", "torch-cpu"]),
        (env(), ["torch-stable-abi212-cpu-x86_64-linux", "torch213-cxx11-cpu-x86_64-linux", "torch-cpu",
                 "torch-universal"]),
    ],
    ids=["cuda", "cpu"],
)
def test_preference_order_follows_kernels(environment, order):
    remaining = dict(ECOSYSTEM)
    chosen = []
    while (pick := select(remaining, environment).chosen) is not None:
        chosen.append(pick)
        del remaining[pick]
    assert chosen == order


def test_ecosystem_rejections_name_the_difference():
    rejected = select(ECOSYSTEM, env(torch=(2, 11), cuda=(13, 0))).rejected
    assert rejected["torch-stable-abi212-cu130-x86_64-linux"] == "torch stable ABI 2.12 is newer than torch 2.11"
    assert rejected["torch-rocm"] == "Python-only build for backend rocm; kernelpin selects cpu and cuda builds only"
    assert rejected["torch213-cxx11-rocm71-x86_64-linux"] == "rocm71 build; kernelpin selects cpu and cuda builds only"
    assert select({"torch-cuda": None}, env()).rejected == {
        "torch-cuda": "Python-only CUDA build (torch-cuda), this environment has no CUDA"}


def test_a_cpu_build_is_never_picked_where_a_cuda_build_fits():
    for cpu in ("torch213-cxx11-cpu-x86_64-linux", "torch-cpu", "torch-stable-abi212-cpu-x86_64-linux"):
        for cuda in ("torch213-cxx11-cu130-x86_64-linux", "torch-cuda", "torch-stable-abi210-cu130-x86_64-linux"):
            assert select({cpu: None, cuda: ARCHS}, env(cuda=(13, 0), capability=(9, 0))).chosen == cuda


@pytest.mark.parametrize("cuda", [(13, 0), None], ids=["cuda", "cpu"])
def test_order_matches_kernels_own_resolver(cuda):
    """Measured against `kernels` 0.17.2 itself: the variants it accepts, in its order, are kernelpin's order
    (kernelpin then adds the CPU builds kernels refuses on a CUDA machine, as a last resort)."""
    variants = pytest.importorskip("kernels.variants")
    from kernels.backends import CPU, CUDA
    from packaging.version import Version as PyVersion

    backend = CUDA(version=PyVersion(f"{cuda[0]}.{cuda[1]}")) if cuda else CPU()
    accepted, _ = variants._resolve_variant_for_system(
        [variants.parse_variant(name) for name in ECOSYSTEM], backend, "x86_64", "linux", PyVersion("2.13"), True, None)
    theirs = [v.variant_str for v in accepted]
    remaining, ours = dict(ECOSYSTEM), []
    while (pick := select(remaining, env(cuda=cuda)).chosen) is not None:
        ours.append(pick)
        del remaining[pick]
    assert ours[: len(theirs)] == theirs
    assert all(Variant.parse(name).backend == "cpu" for name in ours[len(theirs):])
