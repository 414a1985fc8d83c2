"""The machine a variant is chosen for: described by flags / KERNELPIN_* variables, or detected from torch."""

from __future__ import annotations

import sys

import pytest

from kernelpin import environment
from kernelpin.errors import KernelpinError
from kernelpin.format.variant import CPU, Backend, cuda


def describe(environ=None, **given):
    return environment.current(given, environ or {})


def test_a_linux_cuda_image_described_from_any_machine(monkeypatch):
    monkeypatch.setattr("platform.system", lambda: "Darwin")  # vendoring from a Mac
    monkeypatch.setattr("platform.machine", lambda: "arm64")
    env = describe(torch="2.13", cuda="13.0", os="linux", cpu_arch="x86_64", gpu_capability="9.0")
    assert (env.os, env.arch, env.torch, env.selected, env.cxx11_abi, env.gpu_capability) == (
        "linux",
        "x86_64",
        (2, 13),
        cuda(13, 0),
        True,
        (9, 0),
    )
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"  # the interpreter's unless described (--python)
    assert env.describe() == f"linux/x86_64, torch 2.13 (cxx11 ABI), CUDA 13.0, GPU capability 9.0, Python {python}"
    described = describe(torch="2.13", python="3.15", free_threaded="yes", mlx="yes")
    assert (described.python, described.free_threaded, described.mlx) == ((3, 15), True, True)
    assert described.describe().endswith(", MLX, free-threaded Python 3.15")
    mac = describe(torch="2.13", backend="metal", macos="26.1")
    assert (mac.os, mac.arch, mac.cxx11_abi, mac.macos, mac.selected) == (
        "darwin",
        "aarch64",
        None,
        (26, 1),
        Backend("metal"),
    )


def test_every_fact_has_a_variable_and_flags_win():
    environ = {
        "KERNELPIN_TORCH": "2.12",
        "KERNELPIN_BACKEND": "rocm71",
        "KERNELPIN_OS": "linux",
        "KERNELPIN_CPU_ARCH": "aarch64",
        "KERNELPIN_CXX_ABI": "cxx98",
        "KERNELPIN_TVM_FFI": "0.1",
        "KERNELPIN_FREE_THREADED": "yes",
        "KERNELPIN_GPU_ARCH": "gfx942",
    }
    env = describe(environ)
    assert (env.torch, env.selected, env.os, env.arch, env.cxx11_abi, env.tvm_ffi, env.free_threaded, env.gpu_arch) == (
        (2, 12),
        Backend("rocm", (7, 1)),
        "linux",
        "aarch64",
        False,
        (0, 1),
        True,
        "gfx942",
    )
    del environ["KERNELPIN_GPU_ARCH"]
    assert describe(environ, torch="2.13", cuda="12.8").selected == cuda(12, 8)  # --cuda beats KERNELPIN_BACKEND
    assert describe({"KERNELPIN_TORCH": "2.13", "KERNELPIN_CUDA": "none"}).selected == CPU
    assert describe({"KERNELPIN_TORCH": "none", "KERNELPIN_TVM_FFI": "0.1"}).torch is None


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"torch": "2.13", "os": "win32"}, "OS 'win32' is not one of linux, darwin, windows"),
        ({"torch": "2.13", "backend": "cuda"}, "backend 'cuda': not a backend: 'cuda'"),
        ({"torch": "2.13", "python": "3"}, "Python version '3' is not MAJOR.MINOR"),
        ({"torch": "2.13", "mlx": "perhaps"}, "--mlx 'perhaps' is not yes or no"),
        ({"torch": "2.13", "backend": "cu130", "cuda": "13.0"}, "either --backend or --cuda"),
        ({"torch": "2.13", "gpu_capability": "9.0"}, "--gpu-capability is a CUDA GPU's"),
        ({"torch": "2.13", "cuda": "13.0", "gpu_arch": "gfx942"}, "--gpu-arch is a ROCm GPU's"),
        ({"torch": "2.13", "cxx_abi": "gnu"}, "C++ ABI 'gnu' is not one of"),
        ({"torch": "two"}, "torch version 'two' is not MAJOR.MINOR"),
        ({"torch": "2.13", "free_threaded": "maybe"}, "is not yes or no"),
        ({"os": "linux", "cuda": "13.0"}, "--cuda, --os describe another machine: give its torch too"),
    ],
)
def test_a_bad_description_is_one_clear_error(given, message):
    with pytest.raises(KernelpinError, match=message.replace("(", r"\(").replace("+", r"\+")):
        describe(**given)


def test_detection_takes_only_cpu_or_its_own_backend():
    """Without a description, --backend is kernels' backend=: cpu or the detected torch's own, nothing else."""
    pytest.importorskip("torch")
    detected = describe()
    assert describe(backend=detected.selected.tag) == detected
    assert describe(backend="cpu").selected == CPU
    with pytest.raises(KernelpinError, match="backend 'rocm71' is not this machine's"):
        describe(backend="rocm71")
    assert (
        environment.with_backend(detected.__class__(torch=(2, 13), cuda=(13, 0), gpu_capability=(9, 0)), "cpu").selected
        == CPU
    )


def test_windows_is_windows(monkeypatch):
    """kernels compares variant OSes with platform.system().lower(); sys.platform would say win32."""
    monkeypatch.setattr("platform.system", lambda: "Windows")
    monkeypatch.setattr("platform.machine", lambda: "AMD64")
    assert environment.machine() == ("windows", "x86_64")
    assert describe(torch="2.13", python="3.12").describe() == "windows/x86_64, torch 2.13, no CUDA, Python 3.12"
