"""What this machine is: detected from torch (an I/O edge, only sync and load call it) or given explicitly.

`--torch/--cuda/--gpu-capability` (or KERNELPIN_TORCH / KERNELPIN_CUDA / KERNELPIN_GPU_CAPABILITY) describe
an environment without importing torch, e.g. to sync for a container image from a machine without torch.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping

from kernelpin.errors import KernelpinError
from kernelpin.variant import Environment

_ARCH_ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}


def _pair(text: str, what: str) -> tuple[int, int]:
    try:
        major, minor = (int(part) for part in text.split("+")[0].split(".")[:2])
    except ValueError:
        raise KernelpinError(f"{what} {text!r} is not MAJOR.MINOR (e.g. 2.13)") from None
    return major, minor


def machine() -> tuple[str, str]:
    arch = platform.machine().lower()
    return sys.platform if sys.platform != "linux2" else "linux", _ARCH_ALIASES.get(arch, arch)


def detect() -> Environment:
    """The environment of the running torch (imports torch)."""
    try:
        import torch
    except ImportError:
        raise KernelpinError(
            "torch is not installed, so this environment cannot be detected; install torch or describe the "
            "target with --torch 2.13 [--cuda 13.0] (or KERNELPIN_TORCH / KERNELPIN_CUDA)"
        ) from None
    os_name, arch = machine()
    capability = None
    if torch.version.cuda and torch.cuda.is_available():
        capability = tuple(torch.cuda.get_device_capability())
    return Environment(
        torch=_pair(torch.__version__, "torch version"),
        cuda=_pair(torch.version.cuda, "CUDA version") if torch.version.cuda else None,
        arch=arch,
        os=os_name,
        cxx11_abi=bool(torch.compiled_with_cxx11_abi()),
        gpu_capability=capability,
    )


def current(
    torch: str | None = None,
    cuda: str | None = None,
    gpu_capability: str | None = None,
    environ: Mapping[str, str] = os.environ,
) -> Environment:
    """The given environment when a torch version is given (flags first, then KERNELPIN_*), else detect()."""
    torch = torch or environ.get("KERNELPIN_TORCH")
    cuda = cuda if cuda is not None else environ.get("KERNELPIN_CUDA")
    gpu_capability = gpu_capability or environ.get("KERNELPIN_GPU_CAPABILITY")
    if not torch:
        if cuda or gpu_capability:
            raise KernelpinError("--cuda/--gpu-capability need --torch too (or KERNELPIN_TORCH)")
        return detect()
    os_name, arch = machine()
    no_cuda = cuda is None or cuda.strip().lower() in ("", "none", "cpu")
    return Environment(
        torch=_pair(torch, "torch version"),
        cuda=None if no_cuda else _pair(cuda, "CUDA version"),
        arch=arch,
        os=os_name,
        gpu_capability=None if not gpu_capability else _pair(gpu_capability, "GPU capability"),
    )
