"""What this machine is: detected from torch as `kernels` detects it (an I/O edge: only sync and load call it),
or described explicitly for another machine.

Detection reads the installed torch's files where they tell everything `kernels` would ask the running torch
(`detect_installed`: torch/version.py's version and CUDA/ROCm/XPU versions, the CUDA driver for the GPU's
compute capability), so `sync` does not pay for `import torch` (about 1.6 s); where only the running torch can
tell (macOS's MPS, ROCm's GPU name, device plugins torch loads on import, a torch older than 2.7 whose C++ ABI
differs between builds) it imports torch (`detect`), as it does when torch is imported already.

A description (`--torch X.Y` or KERNELPIN_TORCH, plus the other flags / KERNELPIN_* variables below) imports
nothing, e.g. to vendor a Linux CUDA image's kernels from a CPU-only CI runner or a Mac. Without --torch the
machine is detected and only --backend may be given: `cpu`, or the machine's own, as kernels' backend=.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import platform
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelpin.errors import KernelpinError
from kernelpin.format.variant import CPU, Backend, Environment, this_python

if TYPE_CHECKING:
    import argparse

__untrusted_input__ = ("parse_backend",)  # parsers of input kernelpin does not control (kernelpin.errors)

_ARCH_ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}
_OS_NAMES = ("linux", "darwin", "windows")
_CXX_ABIS = {"cxx11": True, "cxx98": False, "none": None}

# Every fact a description can give: flag --<name with dashes>, variable KERNELPIN_<NAME>, and its help.
DESCRIPTION = {
    "torch": (
        "X.Y|none",
        (
            "describe the target machine instead of detecting it: its torch (needed by every other "
            "flag below but --backend)"
        ),
    ),
    "backend": (
        "TAG",
        (
            "the backend as variant names spell it: cpu, cu130 (or cuda-13.0), rocm71, xpu20253, cann81, "
            "metal, neuron, tpu; without --torch only cpu (or this machine's own), as kernels' backend="
        ),
    ),
    "cuda": ("X.Y|none", "the CUDA version (same as --backend cuXY; default none: CPU)"),
    "os": ("linux|darwin|windows", "the target's OS (default this machine's)"),
    "cpu_arch": ("x86_64|aarch64", "the target's CPU (default this machine's)"),
    "cxx_abi": ("cxx11|cxx98|none", "its torch's C++ ABI (default cxx11 on Linux, none elsewhere)"),
    "macos": ("X.Y", "the macOS version (Metal builds need 26 or later; default this Mac's)"),
    "tvm_ffi": ("X.Y|none", "the installed tvm-ffi version (default none)"),
    "python": ("X.Y", "the target's Python (builds name their floor, e.g. cpython-3.10; default this interpreter's)"),
    "free_threaded": ("yes|no", "a free-threaded Python, which loads only abi3t builds (default no)"),
    "mlx": ("yes|no", "MLX is installed (mlx-<backend> builds need it; default no)"),
    "gpu_capability": ("X.Y", "the CUDA GPU's compute capability (default: not checked)"),
    "gpu_arch": ("GFX", "the ROCm GPU's gcnArchName, e.g. gfx942 (default: not checked)"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The description flags, for the commands that choose a variant."""
    group = parser.add_argument_group("target machine (default: detected from the installed torch)")
    for name, (metavar, help_text) in DESCRIPTION.items():
        group.add_argument(f"--{name.replace('_', '-')}", dest=name, metavar=metavar, help=help_text)


def _pair(text: str, what: str) -> tuple[int, int]:
    try:
        major, minor = (int(part) for part in text.strip().split("+")[0].split(".")[:2])
    except ValueError:
        raise KernelpinError(f"{what} {text!r} is not MAJOR.MINOR (e.g. 2.13)") from None
    return major, minor


def _none(text: str) -> bool:
    return text.strip().lower() in ("", "none")


def machine() -> tuple[str, str]:
    """(os, cpu) as `kernels` names them: platform.system() lowercased ("linux", "darwin", "windows", never
    sys.platform's "win32") and platform.machine() with amd64/arm64 as x86_64/aarch64."""
    arch = platform.machine().lower()
    return platform.system().lower(), _ARCH_ALIASES.get(arch, arch)


def _macos_version() -> tuple[int, int] | None:
    release = platform.mac_ver()[0]
    return _pair(release + ".0", "macOS version") if release else None


def _free_threaded() -> bool:
    # Free-threaded builds exist from 3.13 on; before, the answer needs no sysconfig (whose first
    # get_config_var imports and builds the build configuration: about 3 ms of every get_kernel).
    if sys.version_info < (3, 13):
        return False
    import sysconfig

    return bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def _mlx_installed() -> bool:
    return importlib.util.find_spec("mlx") is not None  # as kernels' has_mlx


def _tvm_ffi_version() -> tuple[int, int] | None:
    if importlib.util.find_spec("tvm_ffi") is None:
        return None
    import tvm_ffi

    return _pair(tvm_ffi.__version__, "tvm-ffi version")


def _torch_backend(torch: Any) -> Backend:
    """The backend of the running torch, in `kernels`' order (kernels 0.19's _backend)."""
    accelerator = torch.accelerator.current_accelerator() if hasattr(torch, "accelerator") else None
    if accelerator is not None and accelerator.type == "tpu":
        return Backend("tpu")
    if hasattr(torch, "neuron"):
        return Backend("neuron")
    if torch.version.cuda is not None or torch.version.hip is not None:
        return _built_for(torch.version.cuda, getattr(torch.version, "rocm", None) or torch.version.hip, None)
    if torch.backends.mps.is_available():
        return Backend("metal")
    xpu = getattr(torch.version, "xpu", None)
    if xpu is not None:
        return _built_for(None, None, xpu)
    privateuse = getattr(torch._C, "_get_privateuse1_backend_name", None)
    if privateuse is not None and privateuse() == "npu":
        from torch_npu.utils.collect_env import get_cann_version

        version = get_cann_version()
        return Backend("cann", (int(version[0]), int(version[2])))
    return CPU


def _built_for(cuda: str | None, hip: str | None, xpu: str | None) -> Backend:
    """The backend torch.version's fields name (CUDA first, then ROCm, then XPU, as `kernels` reads them);
    `hip` is torch.version.rocm where torch has it (2.10+: ROCm and HIP versions can differ), else .hip."""
    if cuda is not None:
        return Backend("cuda", _pair(cuda, "CUDA version"))
    if hip is not None:
        return Backend("rocm", _pair(hip.split("-")[0], "ROCm version"))
    if xpu is not None:
        return Backend("xpu", (int(xpu[0:4]), int(xpu[5:6])))  # "20250301" -> 2025.3, as kernels reads it
    return CPU


def installed_torch_version() -> dict[str, Any] | None:
    """The assignments of the installed torch's torch/version.py (`__version__`, `cuda`, `hip`, `xpu`, ...), read
    as data without importing torch: the file torch's build generates, a plain list of literal assignments in
    every build (PyPI wheels, +cu/+rocm/+xpu wheels, conda packages, source builds). None without a torch."""
    import ast  # here: a load with torch imported reads torch itself, and `import kernelpin` stays cheap

    spec = importlib.util.find_spec("torch")  # a top-level package is found without being imported
    if spec is None or not spec.origin:
        return None
    try:
        tree = ast.parse((Path(spec.origin).parent / "version.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    values: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name):
            with contextlib.suppress(ValueError):  # not a literal: not data
                values[target.id] = ast.literal_eval(value)
    return values


def _cuda_capability(cuda: tuple[int, int]) -> tuple[int, int] | None:
    """Compute capability of the GPU torch.cuda would use first (device 0 of those CUDA_VISIBLE_DEVICES leaves),
    from the CUDA driver; None where torch.cuda.is_available() would be False: no driver, no GPU, or a driver
    of an older major version than the torch's CUDA."""
    import ctypes  # here: only a CUDA build of torch asks the driver

    name = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
    try:
        driver = ctypes.CDLL(name)
    except OSError:
        return None
    version, count, device, major, minor = (ctypes.c_int(0) for _ in range(5))
    if (
        driver.cuInit(0) != 0
        or driver.cuDriverGetVersion(ctypes.byref(version)) != 0
        or version.value // 1000 < cuda[0]
        or driver.cuDeviceGetCount(ctypes.byref(count)) != 0
        or count.value == 0
        or driver.cuDeviceGet(ctypes.byref(device), 0) != 0
    ):
        return None
    if (
        driver.cuDeviceGetAttribute(ctypes.byref(major), 75, device)
        != 0  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
        or driver.cuDeviceGetAttribute(ctypes.byref(minor), 76, device) != 0
    ):  # ..._MINOR
        return None
    return major.value, minor.value


def _device_plugins() -> bool:
    """Whether `import torch` would load out-of-tree device backends (torch_npu, torch_tpu, ...: entry points
    of the group torch.backends), which change what torch reports."""
    if os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD", "1") != "1":
        return False
    import importlib.metadata  # here: it imports email, csv and zipfile (~30 modules), for this question only

    return bool(importlib.metadata.entry_points(group="torch.backends"))


def detect_installed() -> Environment | None:
    """What detect() would find, read from the installed torch's files without importing it; None where only
    the running torch can tell (see the module's docstring)."""
    os_name, arch = machine()
    facts = installed_torch_version()
    if facts is None or os_name == "darwin" or _device_plugins():
        return None
    try:
        torch = _pair(str(facts["__version__"]), "torch version")
        backend = _built_for(facts.get("cuda"), facts.get("rocm") or facts.get("hip"), facts.get("xpu"))
    except (KernelpinError, KeyError, TypeError, ValueError):
        return None
    if torch < (2, 7) and os_name == "linux":  # older PyPI wheels were cxx98, conda's cxx11: ask torch
        return None
    if backend.name == "rocm":  # the GPU's gfx name comes from torch.cuda
        return None
    return Environment(
        torch=torch,
        arch=arch,
        os=os_name,
        cxx11_abi=True if os_name == "linux" else None,  # every Linux build of torch 2.7 and later
        gpu_capability=_cuda_capability(backend.version) if backend.name == "cuda" and backend.version else None,
        backend=backend,
        tvm_ffi=_tvm_ffi_version(),
        free_threaded=_free_threaded(),
        mlx=_mlx_installed(),
    )


def machine_environment() -> Environment:
    """This machine's environment: from the running torch when it is imported already, else from the installed
    torch's files where they tell everything, else by importing torch."""
    if "torch" not in sys.modules:
        found = detect_installed()
        if found is not None:
            return found
    return detect()


def detect() -> Environment:
    """The environment of the running torch (imports torch)."""
    try:
        import torch
    except ImportError:
        raise KernelpinError(
            "torch is not installed, so this environment cannot be detected; install torch or describe the "
            "target with --torch 2.13 [--backend cu130] (or KERNELPIN_TORCH / KERNELPIN_BACKEND)"
        ) from None
    os_name, arch = machine()
    backend = _torch_backend(torch)
    capability: tuple[int, int] | None = None
    gpu_arch: str | None = None
    if backend.name in ("cuda", "rocm") and torch.cuda.is_available():
        if backend.name == "cuda":
            major, minor = torch.cuda.get_device_capability()
            capability = (major, minor)
        else:
            gpu_arch = torch.cuda.get_device_properties(torch.cuda.current_device()).gcnArchName.split(":")[0]
    return Environment(
        torch=_pair(torch.__version__, "torch version"),
        arch=arch,
        os=os_name,
        cxx11_abi=bool(torch.compiled_with_cxx11_abi()) if os_name == "linux" else None,
        gpu_capability=capability,
        backend=backend,
        gpu_arch=gpu_arch,
        macos=_macos_version() if os_name == "darwin" else None,
        tvm_ffi=_tvm_ffi_version(),
        free_threaded=_free_threaded(),
        mlx=_mlx_installed(),
    )


def with_backend(env: Environment, backend: str) -> Environment:
    """`env` with the backend asked for: `cpu` or the machine's own (kernels' backend= allows nothing else)."""
    chosen = parse_backend(backend)
    if chosen not in (CPU, env.selected):
        raise KernelpinError(
            f"backend {backend!r} is not this machine's ({env.selected.tag}) nor cpu; to select for another "
            "machine describe it with --torch (and --backend, --os, ...)"
        )
    if chosen == env.selected:
        return env
    return replace(env, cuda=None, backend=CPU, gpu_capability=None, gpu_arch=None)


def parse_backend(text: str) -> Backend:
    try:
        return Backend.parse(text.strip().lower())
    except ValueError as error:
        raise KernelpinError(f"backend {text!r}: {error}") from None


def current(given: Mapping[str, str | None], environ: Mapping[str, str] = os.environ) -> Environment:
    """The described environment when a torch version is given (flags first, then KERNELPIN_*), else detect()
    with the asked backend. `given` maps DESCRIPTION's names to flag values (None when not given)."""
    values = {name: given.get(name) for name in DESCRIPTION}
    backend_given = values["backend"] is not None or values["cuda"] is not None
    for name, value in values.items():
        if value is None and not (backend_given and name in ("backend", "cuda")):  # a flag beats both variables
            values[name] = environ.get(f"KERNELPIN_{name.upper()}") or None
    if not values["torch"]:
        extra = sorted(name for name, value in values.items() if value is not None and name != "backend")
        if extra:
            flags = ", ".join(f"--{name.replace('_', '-')}" for name in extra)
            raise KernelpinError(
                f"{flags} describe another machine: give its torch too (--torch X.Y or KERNELPIN_TORCH)"
            )
        env = machine_environment()
        return env if values["backend"] is None else with_backend(env, values["backend"])
    return describe(values)


def describe(values: Mapping[str, str | None]) -> Environment:
    """An environment from description values (DESCRIPTION's names; None: this machine's or the default)."""
    host_os, host_arch = machine()
    os_name = (values.get("os") or host_os).strip().lower()
    if os_name not in _OS_NAMES:
        raise KernelpinError(f"OS {os_name!r} is not one of {', '.join(_OS_NAMES)} (as variant names spell it)")
    arch = (values.get("cpu_arch") or host_arch).strip().lower()
    arch = _ARCH_ALIASES.get(arch, arch)
    backend = CPU
    no_cuda = _none(values.get("cuda") or "") or (values.get("cuda") or "").strip().lower() == "cpu"
    if values.get("backend") and not no_cuda:
        raise KernelpinError("give either --backend or --cuda, not both")
    if values.get("backend"):
        backend = parse_backend(values["backend"] or "")
    elif not no_cuda:
        backend = Backend("cuda", _pair(values["cuda"] or "", "CUDA version"))
    cxx_abi = (values.get("cxx_abi") or ("cxx11" if os_name == "linux" else "none")).strip().lower()
    if cxx_abi not in _CXX_ABIS:
        raise KernelpinError(f"C++ ABI {cxx_abi!r} is not one of cxx11, cxx98, none")
    macos = values.get("macos")
    tvm_ffi = values.get("tvm_ffi")
    free_threaded, mlx = (_yes_no(values, name) for name in ("free_threaded", "mlx"))
    capability, gpu_arch = values.get("gpu_capability"), values.get("gpu_arch")
    if capability and backend.name != "cuda":
        raise KernelpinError("--gpu-capability is a CUDA GPU's; give --backend cuXY (or --cuda X.Y) too")
    if gpu_arch and backend.name != "rocm":
        raise KernelpinError("--gpu-arch is a ROCm GPU's; give --backend rocmXY too")
    torch = values.get("torch") or ""
    return Environment(
        torch=None if _none(torch) else _pair(torch, "torch version"),
        arch=arch,
        os=os_name,
        cxx11_abi=_CXX_ABIS[cxx_abi],
        gpu_capability=_pair(capability, "GPU capability") if capability else None,
        backend=backend,
        gpu_arch=gpu_arch.strip() if gpu_arch else None,
        macos=_pair(macos, "macOS version")
        if macos
        else (_macos_version() if os_name == host_os == "darwin" else None),
        tvm_ffi=None if not tvm_ffi or _none(tvm_ffi) else _pair(tvm_ffi, "tvm-ffi version"),
        free_threaded=free_threaded,
        python=_pair(python, "Python version") if (python := values.get("python")) else this_python(),
        mlx=mlx,
    )


def _yes_no(values: Mapping[str, str | None], name: str) -> bool:
    answer = (values.get(name) or "no").strip().lower()
    if answer not in ("yes", "no", "1", "0", "true", "false"):
        raise KernelpinError(f"--{name.replace('_', '-')} {answer!r} is not yes or no")
    return answer in ("yes", "1", "true")
