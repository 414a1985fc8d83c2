"""Per-capability builds as data (issue 51): which build a GPU takes, the listing in metadata.json read defensively,
and the lock's record of them (schema 4, written only when a lock holds them)."""

from __future__ import annotations

import hashlib
import json

import pytest

from kernelpin.errors import KernelpinError, NoVariantError
from kernelpin.format import capabilities, lockfile
from kernelpin.format.lockfile import LockedCapabilityBuild, LockedFile, LockedKernel, LockedVariant, choose_build
from kernelpin.format.metadata import MetadataError, parse_metadata
from kernelpin.format.variant import Environment
from testkit.fake_kernel import capability_release_files

BUILDS = {"sm_75": ("7.5",), "sm_80": ("8.0",), "sm_90a": ("9.0a",), "sm_100": ("10.0",), "sm_120": ("12.0+PTX",)}


@pytest.mark.parametrize(
    ("gpu", "name", "how"),
    [
        ((8, 0), "sm_80", "exact"),
        ((8, 9), "sm_80", "compatible"),  # 8.0 SASS runs on 8.9
        ((9, 0), "sm_90a", "exact"),  # arch-specific, on its own capability
        ((10, 3), "sm_100", "compatible"),
        ((12, 1), "sm_120", "compatible"),  # its SASS, before its PTX
        ((13, 0), "sm_120", "ptx"),  # newer than anything compiled: the PTX build
        ((7, 0), None, "compiled for 7.5;8.0;9.0a;10.0;12.0+PTX"),  # older than everything
        ((11, 0), None, "compiled for 7.5;8.0;9.0a;10.0;12.0+PTX"),  # 10.0 SASS is not for 11.x, PTX is 12.0
    ],
)
def test_choose(gpu, name, how):
    assert capabilities.choose(BUILDS, gpu) == capabilities.Choice(name, how)


def test_an_arch_specific_build_runs_on_its_capability_only():
    assert capabilities.choose({"sm_90a": ("9.0a",)}, (9, 1)).name is None


@pytest.mark.parametrize(
    ("listing", "problem"),
    [
        ([], "must be an object"),
        ({"sm_80/../x": {"archs": ["8.0"], "files": {"a": "x"}}}, "is not a capability build name"),
        ({"sm_80": {"archs": ["9.0"], "files": {"a.py": "x"}}}, "must list the capability it was built for"),
        ({"sm_80": {"archs": "8.0", "files": {"a.py": "x"}}}, "must list the capability it was built for"),
        ({"sm_80": {"archs": ["8.0"], "files": {}}}, "needs files"),
        ({"sm_80": {"archs": ["8.0"], "files": {"../escape.so": "x"}}}, "escape"),
        ({"sm_80": {"archs": ["8.0"], "files": {"a.py": "not base64"}}}, "is not a sha256 in base64"),
    ],
)
def test_a_hostile_listing_is_refused_naming_the_problem(listing, problem):
    tree = capability_release_files("1.0.0", "torch213-cxx11-cu130-x86_64-linux")
    document = json.loads(tree["build/torch213-cxx11-cu130-x86_64-linux/metadata.json"])
    document[capabilities.KEY] = listing
    with pytest.raises((MetadataError, KernelpinError), match="escape|" + problem.replace("(", r"\(")) as error:
        parse_metadata(json.dumps(document), "where")
    assert "Traceback" not in str(error.value)


def test_the_listing_is_read_into_hex_digests():
    tree = capability_release_files("1.0.0", "torch213-cxx11-cu130-x86_64-linux", ("8.0", "9.0+PTX"))
    metadata = parse_metadata(tree["build/torch213-cxx11-cu130-x86_64-linux/metadata.json"], "x")
    assert {name: archs for name, (archs, _) in metadata.capability_builds.items()} == {
        "sm_80": ("8.0",),
        "sm_90": ("9.0+PTX",),
    }
    _, files = metadata.capability_builds["sm_90"]
    prefix = "capabilities/torch213-cxx11-cu130-x86_64-linux/sm_90/"
    assert files == {p[len(prefix) :]: hashlib.sha256(d).hexdigest() for p, d in tree.items() if p.startswith(prefix)}


def _kernel(builds: tuple[LockedCapabilityBuild, ...]) -> LockedKernel:
    fat = LockedVariant(
        "torch213-cxx11-cu130-x86_64-linux",
        (LockedFile("metadata.json", 10, "a" * 64), LockedFile("x.so", 100, "b" * 64)),
        "cuda",
        ("8.0", "9.0+PTX"),
        capability_builds=builds,
    )
    return LockedKernel("acme/k", "kernel", "^1", "c" * 40, "refs/tags/v1.0.0", "1.0.0", (fat,))


BUILT = (
    LockedCapabilityBuild("sm_80", ("8.0",), (LockedFile("x.so", 10, "d" * 64),)),
    LockedCapabilityBuild("sm_90", ("9.0+PTX",), (LockedFile("x.so", 12, "e" * 64),)),
)


def test_the_lock_round_trips_its_builds_and_needs_schema_4_only_with_them():
    kernel = _kernel(BUILT)
    text = lockfile.render(lockfile.Lock((kernel,)))
    assert "\nversion = 4\n" in text and "[[kernel.variant.capability-build]]" in text
    assert lockfile.parse(text, "x").kernels == (kernel,)
    assert "\nversion = 3\n" in lockfile.render(lockfile.Lock((_kernel(()),)))
    with pytest.raises(KernelpinError, match="capability-build sm_80: files .* lists a path twice|lists a path twice"):
        lockfile.parse(
            text.replace(
                '{path = "x.so", size = 12',
                '{path = "x.so", size = 10, sha256 = "' + "d" * 64 + '"},\n    {path = "x.so", size = 12',
            ),
            "x",
        )


def test_choose_build_narrows_the_variant_or_says_why_not():
    kernel = _kernel(BUILT)
    name = "torch213-cxx11-cu130-x86_64-linux"
    gpu = Environment(torch=(2, 13), cuda=(13, 0), gpu_capability=(8, 6))
    narrowed, choice = choose_build(kernel, name, gpu)
    variant = narrowed.variant(name)
    assert (choice.build, choice.how) == ("sm_80", "compatible")
    assert variant.directory == f"capabilities/{name}/sm_80" and variant.files == BUILT[0].files
    assert variant.signature == kernel.variant(name).signature
    unknown = Environment(torch=(2, 13), cuda=(13, 0))
    assert choose_build(kernel, name, unknown) == (
        kernel,
        lockfile.BuildChoice(name, None, "this machine's GPU capability is not known"),
    )
    old = Environment(torch=(2, 13), cuda=(13, 0), gpu_capability=(7, 0))
    with pytest.raises(NoVariantError) as refused:
        choose_build(kernel, name, old)
    assert str(refused.value).count("\n") == 0
    assert "compute capability 7.0) is not a compiled target" in str(refused.value) and "8.0;9.0+PTX" in str(
        refused.value
    )
    assert choose_build(kernel, name, old, check_arch=False)[1].build is None
