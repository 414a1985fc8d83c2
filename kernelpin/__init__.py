"""kernelpin: pin, install and load kernels published on the Hugging Face Hub.

Importing kernelpin imports neither torch nor huggingface_hub; `load` and `get_kernel` import them when called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernelpin.kernels_integration import integrate_kernels, integrated_kernels
    from kernelpin.loader import loaded_kernels
    from kernelpin.lockless import get_kernel, get_kernel_variants, has_kernel
    from kernelpin.runtime import load

__all__ = ["get_kernel", "get_kernel_variants", "has_kernel", "integrate_kernels", "integrated_kernels", "load",
           "loaded_kernels"]
_HOMES = {"load": "kernelpin.runtime", "get_kernel": "kernelpin.lockless", "has_kernel": "kernelpin.lockless",
          "get_kernel_variants": "kernelpin.lockless", "loaded_kernels": "kernelpin.loader",
          "integrate_kernels": "kernelpin.kernels_integration", "integrated_kernels": "kernelpin.kernels_integration"}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        import importlib

        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'kernelpin' has no attribute {name!r}")
