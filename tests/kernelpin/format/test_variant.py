"""Variant choice: pure functions over variant names, GPU archs and an Environment.

The choice is `kernels` 0.19.1's (test_variant_vs_kernels.py compares the two over a grid); these tests pin
the rules one by one, including the edge cases a mutation of the rules would otherwise leave alive.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kernelpin.format.variant import (
    CPU,
    MLX,
    NOARCH,
    SDK,
    STABLE_ABI,
    TORCH,
    TVM_FFI,
    Backend,
    Environment,
    Variant,
    cuda,
    cuda_arch_covers,
    select,
)

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
        (env(cuda=(11, 8)), None),  # no CUDA 11 build: like kernels, no CPU build on a CUDA machine
        (env(backend=CPU), "torch213-cxx11-cpu-x86_64-linux"),  # unless asked for (kernels' backend="cpu")
    ],
)
def test_select(environment, chosen):
    assert select(LOCKED, environment).chosen == chosen


def test_a_cpu_build_is_offered_not_taken_on_a_cuda_machine():
    selection = select(LOCKED, env(cuda=(11, 8)))
    assert selection.rejected["torch213-cxx11-cpu-x86_64-linux"] == "CPU build, this machine's backend is CUDA 11.8"
    assert "kernelpin sync --backend cpu" in selection.explain()
    assert 'backend="cpu"' in selection.hint and "torch213-cxx11-cpu-x86_64-linux" in selection.hint
    assert select({"torch213-cxx11-cu128-x86_64-linux": None}, env(cuda=(11, 8))).hint == ""


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
    assert selection.rejected["torch213-cxx11-cu130-x86_64-linux"] == "CUDA 13.0 build, this machine's backend is CPU"
    assert selection.rejected["weird"] == "not a variant name kernelpin (or kernels) knows"


@pytest.mark.parametrize("first", ["weird", "torch213-cxx11-cpu-x86_64-linux"])
def test_an_unparseable_name_does_not_stop_the_scan(first):
    names = [first, *({"weird", "torch213-cxx11-cpu-x86_64-linux", "torch-cpu-"} - {first})]
    assert select(dict.fromkeys(names), env()).chosen == "torch213-cxx11-cpu-x86_64-linux"


@pytest.mark.parametrize(
    ("arch", "device", "covers"),
    [
        ("8.0", (8, 6), True),
        ("8.6", (8, 0), False),
        ("8.0", (9, 0), False),
        ("8.0", (8, 0), True),
        ("12.0+PTX", (12, 0), True),
        ("12.0+PTX", (12, 1), True),
        ("12.0+PTX", (13, 0), True),
        ("12.0+PTX", (9, 0), False),
        ("9.0a", (9, 0), True),
        ("9.0a", (9, 1), False),
        # arch- and family-specific builds don't run on later generations, +PTX or not (kernels.archs)
        ("9.0a+PTX", (9, 0), True),
        ("9.0a+PTX", (10, 0), False),
        ("9.0a+PTX", (9, 1), False),
        ("10.0f", (10, 3), True),
        ("10.0f", (11, 0), False),
        ("10.3f", (10, 0), False),
        ("10.0f+PTX", (10, 1), True),
        ("10.0f+PTX", (11, 0), False),
        ("gfx942", (9, 0), None),
        ("sm_90", (9, 0), None),
        ("9.0x", (9, 0), None),
    ],
)
def test_cuda_arch_covers(arch, device, covers):
    assert cuda_arch_covers(arch, device) is covers


@pytest.mark.parametrize(
    ("archs", "capability", "fits"),
    [
        (None, (7, 5), True),  # unknown archs: not checked
        ((), (7, 5), True),
        (("sm_100", "compute_100"), (7, 5), True),  # none readable: assumed compatible, as kernels does
        (("sm_100", "8.0"), (7, 5), False),  # one readable and not covering: refused
        (("sm_100", "8.0"), (8, 6), True),
        (("12.0+PTX",), (12, 0), True),  # +PTX covers exactly its own capability
    ],
)
def test_cuda_archs_are_checked_only_when_readable(archs, capability, fits):
    chosen = select({"torch213-cxx11-cu130-x86_64-linux": archs}, env(cuda=(13, 0), capability=capability)).chosen
    assert (chosen is not None) is fits


def test_rocm_archs_are_gfx_names_compared_with_the_gpu():
    rocm = Environment(torch=(2, 13), backend=Backend("rocm", (7, 1)), gpu_arch="gfx942:sramecc+:xnack-")
    names = {"torch213-cxx11-rocm71-x86_64-linux": ("gfx90a", "gfx942"), "torch213-cxx11-cpu-x86_64-linux": None}
    assert select(names, rocm).chosen == "torch213-cxx11-rocm71-x86_64-linux"
    other_gpu = select(names, Environment(torch=(2, 13), backend=Backend("rocm", (7, 1)), gpu_arch="gfx1100"))
    assert other_gpu.chosen is None
    assert other_gpu.rejected["torch213-cxx11-rocm71-x86_64-linux"] == (
        "ROCm archs gfx90a;gfx942 do not include this GPU's gfx1100"
    )
    assert select(names, Environment(torch=(2, 13), backend=Backend("rocm", (7, 0)))).chosen is None  # exact version


def test_the_preferred_build_missing_the_gpu_is_refused_not_passed_over():
    """kernels checks the archs of the variant it chose and raises; it does not try the next one."""
    names = {"torch-stable-abi210-cu130-x86_64-linux": ("9.0",), "torch213-cxx11-cu130-x86_64-linux": ("12.0",)}
    selection = select(names, env(cuda=(13, 0), capability=(12, 0)))
    assert selection.chosen is None
    assert selection.rejected["torch213-cxx11-cu130-x86_64-linux"].startswith(
        "fits, but torch-stable-abi210-cu130-x86_64-linux comes first"
    )


def test_abi_tag_is_optional():
    assert Variant.parse("torch213-cu130-x86_64-linux").cxx11_abi is None
    assert Variant.parse("torch213-cu130-x86_64-linux").name == "torch213-cu130-x86_64-linux"
    assert select({"torch213-cxx98-cpu-x86_64-linux": None}, env()).rejected == {
        "torch213-cxx98-cpu-x86_64-linux": "C++ ABI differs from this torch's (cxx11)"
    }
    assert select({"torch213-cxx98-cpu-x86_64-linux": None}, env(cxx11_abi=False)).chosen is not None
    assert select({"torch213-cpu-x86_64-linux": None}, env()).chosen == "torch213-cpu-x86_64-linux"
    # kernels reads the ABI on Linux only: a tagged build never fits elsewhere, an untagged one does
    mac = env(os="darwin", arch="aarch64", cxx11_abi=None)
    assert select({"torch213-cxx11-cpu-aarch64-darwin": None, "torch213-cpu-aarch64-darwin": None}, mac).chosen == (
        "torch213-cpu-aarch64-darwin"
    )


@pytest.mark.parametrize(
    ("name", "framework", "version", "backend"),
    [
        ("torch-stable-abi210-cu128-x86_64-linux", STABLE_ABI, (2, 10), cuda(12, 8)),
        ("torch-stable-abi29-cpu-aarch64-linux", STABLE_ABI, (2, 9), CPU),
        ("torch-stable-abi210-rocm71-x86_64-linux", STABLE_ABI, (2, 10), Backend("rocm", (7, 1))),
        ("torch-stable-abi210-xpu20253-x86_64-linux", STABLE_ABI, (2, 10), Backend("xpu", (2025, 3))),
        ("torch-stable-abi210-metal-aarch64-darwin", STABLE_ABI, (2, 10), Backend("metal")),
        ("torch-cuda", NOARCH, None, Backend("cuda")),
        ("torch-universal", NOARCH, None, Backend("universal")),
        ("torch-npu", NOARCH, None, Backend("npu")),
        ("torch-cann", NOARCH, None, Backend("cann")),
        ("mlx-metal", MLX, None, Backend("metal")),
        ("sdk", SDK, None, None),
        ("sdk-cuda", SDK, None, Backend("cuda")),
        ("sdk-cuda-12.8-cpython-3.12-abi3-x86_64-linux", SDK, None, cuda(12, 8)),
        ("sdk-cpython-3.12-abi3-x86_64-linux", SDK, None, None),
        ("torch-2.13-cxx11-cuda-13.0-cpython-3.10-abi3-x86_64-linux", TORCH, (2, 13), cuda(13, 0)),
        ("torch-2.13-rocm-7.14-cpython-3.10-abi3-x86_64-linux", TORCH, (2, 13), Backend("rocm", (7, 14))),
        ("torch213-cxx11-rocm714-x86_64-linux", TORCH, (2, 13), Backend("rocm", (7, 14))),
        ("torch-stable-abi-2.11-cpu-cpython-3.15-abi3t-x86_64-linux", STABLE_ABI, (2, 11), CPU),
        ("tvm-ffi-0.1-xpu-2025.3-cpython-3.10-abi3-x86_64-linux", TVM_FFI, (0, 1), Backend("xpu", (2025, 3))),
        ("torch213-cxx11-rocm71-x86_64-linux", TORCH, (2, 13), Backend("rocm", (7, 1))),
        ("torch212-cpu-aarch64-darwin", TORCH, (2, 12), CPU),
        ("torch213-cxx11-xpu20253-x86_64-linux", TORCH, (2, 13), Backend("xpu", (2025, 3))),
        ("torch213-cann81-aarch64-linux", TORCH, (2, 13), Backend("cann", (8, 1))),
        ("torch213-cu130-x86_64-windows", TORCH, (2, 13), cuda(13, 0)),
        ("torch210-metal-aarch64-darwin", TORCH, (2, 10), Backend("metal")),
        ("tvm-ffi01-cu130-x86_64-linux", TVM_FFI, (0, 1), cuda(13, 0)),
        ("tvm-ffi012-cpu-x86_64-linux", TVM_FFI, (0, 12), CPU),
    ],
)
def test_ecosystem_names_parse_and_round_trip(name, framework, version, backend):
    variant = Variant.parse(name)
    assert (variant.framework, variant.version, variant.backend) == (framework, version, backend)
    assert variant.name == name


@pytest.mark.parametrize(
    "name",
    [
        "torch213-cuda-x86_64-linux",
        "torch213-cu1-x86_64-linux",
        "torch-stable-abi-cpu",
        "torch213-cxx11-cpu-x86_64",
        "tvm-ffi-cpu-x86_64-linux",
        "cpu-x86_64-linux",
        "torch213-cxx11-npu-x86_64-linux",
        "torchx-cpu-x86_64-linux",
        # kernel-builder's new names: the Python floor and ABI are required, and exact
        "torch-2.13-cxx11-cuda-13.0-x86_64-linux",
        "torch-2.13-cuda-13-cpython-3.10-abi3-x86_64-linux",
        "torch-2.13-cpu-cpython-3.14-abi3t-x86_64-linux",
        "torch-2.13-cpu-cpython-3.10-abi4-x86_64-linux",
        "torch213-cxx11-cu130-cpython-3.10-abi3-x86_64-linux",
        "sdk-cuda-13.0",
        "sdk-cuda-cpython-3.12-abi3-x86_64-linux",
        "mlx-0.1-metal",
        "torch-2",
    ],
)
def test_names_kernels_does_not_read_are_refused(name):
    with pytest.raises(ValueError, match="not a"):
        Variant.parse(name)


ROCM = Environment(torch=(2, 13), backend=Backend("rocm", (7, 1)))
XPU = Environment(torch=(2, 13), backend=Backend("xpu", (2025, 3)))
MAC = Environment(torch=(2, 13), os="darwin", arch="aarch64", cxx11_abi=None, backend=Backend("metal"), macos=(26, 1))
OLD_MAC = Environment(
    torch=(2, 13), os="darwin", arch="aarch64", cxx11_abi=None, backend=Backend("metal"), macos=(15, 5)
)
NPU = Environment(torch=(2, 13), arch="aarch64", backend=Backend("cann", (8, 1)))
WINDOWS = Environment(torch=(2, 13), os="windows", cxx11_abi=None, backend=cuda(13, 0))
TVM = Environment(torch=None, cxx11_abi=None, backend=cuda(13, 0), tvm_ffi=(0, 1))
FREE_THREADED = Environment(torch=(2, 13), free_threaded=True)

EVERY_BACKEND = {
    "torch-stable-abi210-cu130-x86_64-linux": None,
    "torch213-cxx11-cu130-x86_64-linux": None,
    "torch213-cxx11-rocm71-x86_64-linux": None,
    "torch213-cxx11-rocm70-x86_64-linux": None,
    "torch213-cxx11-xpu20253-x86_64-linux": None,
    "torch213-metal-aarch64-darwin": None,
    "torch213-cann81-aarch64-linux": None,
    "torch213-cu130-x86_64-windows": None,
    "tvm-ffi01-cu130-x86_64-linux": None,
    "torch213-cxx11-cpu-x86_64-linux": None,
    "torch-metal": None,
    "torch-npu": None,
    "torch-rocm": None,
    "torch-cpu": None,
    "torch-universal": None,
}


@pytest.mark.parametrize(
    ("environment", "chosen"),
    [
        (ROCM, "torch213-cxx11-rocm71-x86_64-linux"),
        (XPU, "torch213-cxx11-xpu20253-x86_64-linux"),
        (MAC, "torch213-metal-aarch64-darwin"),
        (OLD_MAC, "torch-metal"),  # Metal builds need macOS 26
        (NPU, "torch213-cann81-aarch64-linux"),
        (WINDOWS, "torch213-cu130-x86_64-windows"),
        (TVM, "tvm-ffi01-cu130-x86_64-linux"),
        (FREE_THREADED, "torch-cpu"),  # legacy names are abi3 builds: free-threaded Python loads none
        (env(cuda=(13, 0)), "torch-stable-abi210-cu130-x86_64-linux"),
        (env(), "torch213-cxx11-cpu-x86_64-linux"),
    ],
    ids=["rocm", "xpu", "metal", "metal-macos15", "npu", "windows", "tvm-ffi", "free-threaded", "cuda", "cpu"],
)
def test_backends(environment, chosen):
    assert select(EVERY_BACKEND, environment).chosen == chosen


def test_python_floor_and_abi_tag():
    """kernel-builder's new names carry the oldest Python their compiled parts load on and the ABI: abi3 (not on
    free-threaded Python) or abi3t (3.15+, GIL or not); the highest fitting floor wins, abi3 before abi3t."""
    names = dict.fromkeys(
        [
            "torch-2.13-cpu-cpython-3.10-abi3-x86_64-linux",
            "torch-2.13-cpu-cpython-3.12-abi3-x86_64-linux",
            "torch-2.13-cpu-cpython-3.15-abi3t-x86_64-linux",
            "torch213-cpu-x86_64-linux",
        ]
    )
    assert select(names, env(python=(3, 11))).ranked == (
        "torch-2.13-cpu-cpython-3.10-abi3-x86_64-linux",
        "torch213-cpu-x86_64-linux",
    )
    assert select(names, env(python=(3, 15))).ranked == (
        "torch-2.13-cpu-cpython-3.12-abi3-x86_64-linux",
        "torch-2.13-cpu-cpython-3.10-abi3-x86_64-linux",
        "torch213-cpu-x86_64-linux",
        "torch-2.13-cpu-cpython-3.15-abi3t-x86_64-linux",
    )
    free = select(names, env(python=(3, 15), free_threaded=True))
    assert free.chosen == "torch-2.13-cpu-cpython-3.15-abi3t-x86_64-linux"
    assert free.rejected["torch213-cpu-x86_64-linux"] == "abi3 build; free-threaded Python loads abi3t builds only"
    assert select(names, env(python=(3, 11))).rejected["torch-2.13-cpu-cpython-3.12-abi3-x86_64-linux"] == (
        "needs Python 3.12 or later, this is 3.11"
    )


def test_sdk_and_mlx_builds():
    names = dict.fromkeys(
        [
            "sdk",
            "sdk-cuda",
            "sdk-cpython-3.12-abi3-x86_64-linux",
            "mlx-metal",
            "torch-metal",
            "sdk-cuda-12.8-cpython-3.12-abi3-x86_64-linux",
            "sdk-cuda-13.0-cpython-3.12-abi3-x86_64-linux",
        ]
    )
    assert select(names, env(cuda=(13, 0), python=(3, 12))).ranked == (  # CUDA 12.8: another major
        "sdk-cuda-13.0-cpython-3.12-abi3-x86_64-linux",
        "sdk-cpython-3.12-abi3-x86_64-linux",
        "sdk-cuda",
        "sdk",
    )
    assert select(names, env(cuda=(12, 9), python=(3, 11))).ranked == ("sdk-cuda", "sdk")  # below the floor
    mac = Environment(torch=None, os="darwin", arch="aarch64", cxx11_abi=None, backend=Backend("metal"), macos=(26, 1))
    assert select(names, mac).ranked == ("torch-metal", "sdk")  # mlx-metal needs MLX installed
    assert select(names, replace(mac, mlx=True)).ranked == ("mlx-metal", "torch-metal", "sdk")


def test_noarch_builds_follow_the_backend():
    assert select({"torch-npu": None, "torch-universal": None}, NPU).chosen == "torch-universal"  # kernels 0.19
    assert select({"torch-cann": None, "torch-npu": None, "torch-universal": None}, NPU).chosen == "torch-cann"
    assert select({"torch-rocm": None, "torch-cpu": None}, ROCM).chosen == "torch-rocm"
    assert select({"torch-cpu": None}, ROCM).rejected == {
        "torch-cpu": "Python-only build for cpu; this machine's backend is rocm"
    }
    assert select({"torch-universal": None}, ROCM).chosen == "torch-universal"


@pytest.mark.parametrize(
    ("name", "recorded"),
    [
        ("torch-npu", "cann"),  # torch's device type in the name, kernel-builder's backend in metadata.json
        ("torch-cann", "cann"),
        ("torch213-cxx11-cu130-x86_64-linux", "cuda"),
        ("torch-2.13-cpu-cpython-3.10-abi3-x86_64-linux", "cpu"),
        ("mlx-metal", "metal"),
        ("sdk-cpu", "cpu"),
        ("torch-universal", None),
        ("sdk", None),
    ],
)
def test_the_backend_a_variant_records_in_its_metadata(name, recorded):
    assert Variant.parse(name).recorded_backend == recorded


@pytest.mark.parametrize(
    ("name", "backend"),
    [
        ("torch-stable-abi212-rocm71-x86_64-linux", Backend("rocm", (7, 1))),
        ("torch-stable-abi212-xpu20253-x86_64-linux", Backend("xpu", (2025, 3))),
        ("torch-stable-abi212-metal-aarch64-darwin", Backend("metal")),
        ("torch-stable-abi212-cu130-x86_64-linux", cuda(13, 0)),
    ],
)
def test_non_cpu_stable_abi_builds_are_not_cpu_builds(name, backend):
    assert Variant.parse(name).backend == backend
    assert select({name: None}, env()).chosen is None


def test_a_stable_abi_build_fits_its_own_torch_and_newer_only():
    name = "torch-stable-abi213-cpu-x86_64-linux"
    assert select({name: None}, env(torch=(2, 13))).chosen == name
    assert select({name: None}, env(torch=(2, 14))).chosen == name
    assert select({name: None}, env(torch=(3, 0))).chosen == name
    assert select({name: None}, env(torch=(2, 12))).rejected == {name: "torch stable ABI 2.13 is newer than torch 2.12"}
    assert select({name: None}, env(torch=None)).chosen is None


def test_tvm_ffi_builds_need_exactly_that_tvm_ffi():
    name = "tvm-ffi01-cpu-x86_64-linux"
    assert select({name: None}, env(tvm_ffi=(0, 1))).chosen == name
    assert select({name: None}, env(tvm_ffi=(0, 2))).chosen is None
    assert select({name: None}, env()).rejected == {name: "tvm-ffi 0.1 build, this machine has no tvm-ffi"}


def test_windows_builds_fit_windows():
    """kernels compares with platform.system().lower(): 'windows', never sys.platform's 'win32'."""
    assert select({"torch213-cpu-x86_64-windows": None}, env(os="windows", cxx11_abi=None)).chosen is not None
    assert select({"torch213-cpu-x86_64-windows": None}, env()).rejected == {
        "torch213-cpu-x86_64-windows": "built for windows, this is linux"
    }


def order(variants, environment) -> list[str]:
    remaining, chosen = dict.fromkeys(variants), []
    while (pick := select(remaining, environment).chosen) is not None:
        chosen.append(pick)
        del remaining[pick]
    return chosen


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        # newest stable ABI first; stable ABI before per-torch; untagged before tagged even with an older CUDA
        # minor; the highest CUDA minor within one kind; then tvm-ffi, Python-only, torch-universal last
        (
            env(cuda=(13, 1), tvm_ffi=(0, 1)),
            [
                "torch-stable-abi212-cu130-x86_64-linux",
                "torch-stable-abi210-cu131-x86_64-linux",
                "torch-stable-abi210-cu130-x86_64-linux",
                "torch213-cu130-x86_64-linux",
                "torch213-cxx11-cu131-x86_64-linux",
                "torch213-cxx11-cu130-x86_64-linux",
                "tvm-ffi01-cu131-x86_64-linux",
                "tvm-ffi01-cu130-x86_64-linux",
                "torch-cuda",
                "torch-universal",
            ],
        ),
        (
            env(tvm_ffi=(0, 1)),
            [
                "torch-stable-abi212-cpu-x86_64-linux",
                "torch213-cxx11-cpu-x86_64-linux",
                "tvm-ffi01-cpu-x86_64-linux",
                "torch-cpu",
                "torch-universal",
            ],
        ),
    ],
    ids=["cuda", "cpu"],
)
def test_preference_tie_breakers(environment, expected):
    names = [
        "torch-universal",
        "torch-cpu",
        "torch-cuda",
        "tvm-ffi01-cpu-x86_64-linux",
        "tvm-ffi01-cu130-x86_64-linux",
        "tvm-ffi01-cu131-x86_64-linux",
        "torch213-cxx11-cpu-x86_64-linux",
        "torch213-cxx11-cu130-x86_64-linux",
        "torch213-cxx11-cu131-x86_64-linux",
        "torch213-cu130-x86_64-linux",
        "torch-stable-abi210-cu130-x86_64-linux",
        "torch-stable-abi210-cu131-x86_64-linux",
        "torch-stable-abi212-cu130-x86_64-linux",
        "torch-stable-abi212-cpu-x86_64-linux",
    ]
    assert order(names, environment) == expected
    assert order(reversed(names), environment) == expected  # the listing's order never matters
    assert select(dict.fromkeys(names), environment).ranked == tuple(expected)


def test_names_that_rank_alike_are_chosen_by_name_not_listing_order():
    alike = ["tvm-ffi01-cpu-x86_64-linux", "tvm-ffi001-cpu-x86_64-linux"]  # both tvm-ffi 0.1, CPU
    for names in (alike, alike[::-1]):
        assert select(dict.fromkeys(names), env(tvm_ffi=(0, 1))).chosen == "tvm-ffi001-cpu-x86_64-linux"
