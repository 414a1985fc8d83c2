"""kernelpin.loading.kernels_internals, against the `kernels` installed here (CI runs this file with the newest
release, requirements/dev.txt, and the oldest supported, tools/ci/lowest_deps.py): every internal kernelpin
reaches is where the table says, and a missing, too old or rearranged `kernels` fails naming its version.
Failed before: kernelpin imported `kernels.deps` / `kernels.layer` directly, which kernels 0.19 moved, and then
said kernels was not installed."""

from __future__ import annotations

import pytest

from kernelpin.loading import kernels_internals
from kernelpin.loading.kernels_internals import NEWEST, OLDEST, KernelsPackageError

# What kernelpin (and its judge in tests/kernelpin/variant_judge.py) uses of each internal module.
USED = {
    "deps": ("use_kernel_deps",),
    "layer": ("LayerRepository", "LockedLayerRepository", "_get_kernel_layer", "_CACHED_LAYER"),
    "func": ("FuncRepository", "LockedFuncRepository", "_get_kernel_func"),
    "variants": ("parse_variant", "_resolve_variant_for_system", "resolve_variants"),
    "backends": ("CPU", "CUDA", "ROCm", "XPU", "CANN", "Metal", "Neuron", "TPU"),
    "archs": ("_check_arch_incompatibility",),
    "versions": ("resolve_kernel_version",),
    "cli": ("main",),
}
OPTIONAL = {"verify", "digest"}  # kernels.verify imports sigstore (an extra since 0.18); digest: 0.18+


def test_every_internal_is_where_the_table_says_for_the_installed_kernels():
    version = kernels_internals.installed_version("this test")
    assert kernels_internals._release(version) <= kernels_internals._release(NEWEST), (
        f"kernels {version} is newer than {NEWEST}, the newest kernelpin was checked against: check it (the "
        "interop and differential suites), then record it in kernelpin/loading/kernels_internals.py"
    )
    for internal in kernels_internals.LAYOUTS[0][1]:
        assert internal in USED or internal in OPTIONAL, internal
    for internal, names in USED.items():
        for name in names:
            assert kernels_internals.attribute(internal, name, "this test") is not None


def test_the_public_api_kernelpin_relies_on_is_public():
    import kernels

    assert {
        "get_kernel_dep",
        "LayerRepository",
        "LockedLayerRepository",
        "FuncRepository",
        "LockedFuncRepository",
        "kernelize",
        "use_kernel_mapping",
    } <= set(kernels.__all__)
    assert kernels_internals.module("layer", "this test").LayerRepository is kernels.LayerRepository


def test_the_dependencies_context_is_the_one_get_kernel_dep_reads():
    import kernels

    marker = object()
    with kernels_internals.kernel_deps({"acme/dep": marker}, "this test"):  # type: ignore[dict-item]
        assert kernels.get_kernel_dep("acme/dep") is marker
    with pytest.raises(RuntimeError):
        kernels.get_kernel_dep("acme/dep")


def test_not_installed_too_old_and_moved_name_the_version(monkeypatch):
    monkeypatch.setattr(kernels_internals, "installed_kernels_version", lambda: None)
    with pytest.raises(
        KernelsPackageError,
        match=rf"^X needs the `kernels` package, which is not installed: "
        rf"pip install 'kernels>={OLDEST}'$",
    ):
        kernels_internals.module("deps", "X")
    monkeypatch.setattr(kernels_internals, "installed_kernels_version", lambda: "0.16.9")
    with pytest.raises(
        KernelsPackageError, match=rf"X needs kernels {OLDEST} or later, but kernels 0.16.9 is installed"
    ):
        kernels_internals.module("deps", "X")
    monkeypatch.setattr(kernels_internals, "installed_kernels_version", lambda: "0.21.0")
    moved = (((0, 17), {"deps": "kernels._elsewhere.deps"}),)
    monkeypatch.setattr(kernels_internals, "LAYOUTS", moved)
    with pytest.raises(
        KernelsPackageError,
        match=r"X uses kernels._elsewhere.deps of kernels 0.21.0, which cannot be "
        rf"imported .*kernelpin knows kernels {OLDEST} to {NEWEST}",
    ):
        kernels_internals.module("deps", "X")
    monkeypatch.setattr(kernels_internals, "LAYOUTS", (((0, 17), {"deps": "kernels"}),))
    with pytest.raises(
        KernelsPackageError, match=r"X uses kernels.use_kernel_deps, which kernels 0.21.0 does not have"
    ):
        kernels_internals.attribute("deps", "use_kernel_deps", "X")


@pytest.mark.parametrize(
    ("version", "root"),
    [
        ("0.17.2", "kernels.deps"),
        ("0.18.3", "kernels.deps"),
        ("0.19.1", "kernels._internals.deps"),
        ("0.19.0.dev0", "kernels._internals.deps"),
        ("0.20.0", "kernels._internals.deps"),
    ],
)
def test_each_version_reads_its_own_layout(monkeypatch, version, root):
    monkeypatch.setattr(kernels_internals, "installed_kernels_version", lambda: version)
    monkeypatch.setattr(kernels_internals.importlib, "import_module", lambda name: name)
    assert kernels_internals.module("deps", "X") == root
