"""kernelpin: pin, install and load kernels published on the Hugging Face Hub.

Every command of the `kernelpin` CLI is a function here, named like the command, taking its inputs
explicitly, returning data and raising KernelpinError (kernelpin.errors):

    project, source = kernelpin.find_project(Path.cwd()), kernelpin.HubSource(kernelpin.HubSettings.from_env())
    kernelpin.add(project, source, {"acme/img2gray": "^0.1"})   # edits pyproject.toml, re-locks
    kernelpin.sync(project, source, kernelpin.detect_environment())
    module = kernelpin.load("acme/img2gray")
    module = kernelpin.get_kernel("acme/img2gray", version=0)   # no lock: as kernels.get_kernel, verified

Importing kernelpin imports neither torch nor huggingface_hub; each function imports what it needs when called.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernelpin.environment import detect as detect_environment
    from kernelpin.hub_cache import cache
    from kernelpin.inspection import info
    from kernelpin.kernels_integration import integrate_kernels, integrated_kernels
    from kernelpin.loader import loaded_kernels
    from kernelpin.lockless import get_kernel, get_kernel_variants, has_kernel
    from kernelpin.locking import add, check_lock, lock, remove
    from kernelpin.project import Project, find_project
    from kernelpin.publisher.release import check_release, check_signatures, publish
    from kernelpin.runtime import load
    from kernelpin.source import HubSettings, HubSource
    from kernelpin.syncing import sync, sync_plan
    from kernelpin.updates import outdated, versions
    from kernelpin.verification import verify

# name -> (module, name there): looked up on first use, so `import kernelpin` stays cheap.
_EXPORTS = {
    "load": ("kernelpin.runtime", "load"),
    "lock": ("kernelpin.locking", "lock"),
    "check_lock": ("kernelpin.locking", "check_lock"),
    "add": ("kernelpin.locking", "add"),
    "remove": ("kernelpin.locking", "remove"),
    "sync": ("kernelpin.syncing", "sync"),
    "sync_plan": ("kernelpin.syncing", "sync_plan"),
    "verify": ("kernelpin.verification", "verify"),
    "outdated": ("kernelpin.updates", "outdated"),
    "versions": ("kernelpin.updates", "versions"),
    "cache": ("kernelpin.hub_cache", "cache"),
    "info": ("kernelpin.inspection", "info"),
    "check_release": ("kernelpin.publisher.release", "check_release"),
    "check_signatures": ("kernelpin.publisher.release", "check_signatures"),
    "publish": ("kernelpin.publisher.release", "publish"),
    "find_project": ("kernelpin.project", "find_project"),
    "Project": ("kernelpin.project", "Project"),
    "HubSettings": ("kernelpin.source", "HubSettings"),
    "HubSource": ("kernelpin.source", "HubSource"),
    "detect_environment": ("kernelpin.environment", "detect"),
    "get_kernel": ("kernelpin.lockless", "get_kernel"),
    "has_kernel": ("kernelpin.lockless", "has_kernel"),
    "get_kernel_variants": ("kernelpin.lockless", "get_kernel_variants"),
    "loaded_kernels": ("kernelpin.loader", "loaded_kernels"),
    "integrate_kernels": ("kernelpin.kernels_integration", "integrate_kernels"),
    "integrated_kernels": ("kernelpin.kernels_integration", "integrated_kernels"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module, attribute = _EXPORTS[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module 'kernelpin' has no attribute {name!r}")
