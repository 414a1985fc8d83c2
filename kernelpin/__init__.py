"""kernelpin: pin, install and load kernels published on the Hugging Face Hub.

Importing kernelpin imports neither torch nor huggingface_hub; `load` imports them when called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernelpin.runtime import load

__all__ = ["load"]


def __getattr__(name: str) -> Any:
    if name == "load":
        from kernelpin.runtime import load

        return load
    raise AttributeError(f"module 'kernelpin' has no attribute {name!r}")
