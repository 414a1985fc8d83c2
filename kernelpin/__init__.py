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
    from kernelpin.commands.cache import cache
    from kernelpin.commands.info import describe_api, info, variants
    from kernelpin.commands.kernelize import integrate_kernels, integrated_kernels
    from kernelpin.loading.loader import loaded_kernels
    from kernelpin.commands.get_kernel import get_kernel, get_kernel_variants, has_kernel
    from kernelpin.commands.lock import add, check_lock, lock, remove
    from kernelpin.project import Project, find_project
    from kernelpin.publisher.release import check_release, check_signatures, publish
    from kernelpin.loading.runtime import load
    from kernelpin.hub.source import HubSettings, HubSource
    from kernelpin.commands.sync import sync, sync_plan
    from kernelpin.commands.outdated import outdated, versions
    from kernelpin.commands.verify import verify

# name -> (module, name there): looked up on first use, so `import kernelpin` stays cheap.
_EXPORTS = {
    "load": ("kernelpin.loading.runtime", "load"),
    "lock": ("kernelpin.commands.lock", "lock"),
    "check_lock": ("kernelpin.commands.lock", "check_lock"),
    "add": ("kernelpin.commands.lock", "add"),
    "remove": ("kernelpin.commands.lock", "remove"),
    "sync": ("kernelpin.commands.sync", "sync"),
    "sync_plan": ("kernelpin.commands.sync", "sync_plan"),
    "verify": ("kernelpin.commands.verify", "verify"),
    "outdated": ("kernelpin.commands.outdated", "outdated"),
    "versions": ("kernelpin.commands.outdated", "versions"),
    "cache": ("kernelpin.commands.cache", "cache"),
    "info": ("kernelpin.commands.info", "info"),
    "variants": ("kernelpin.commands.info", "variants"),
    "describe_api": ("kernelpin.commands.info", "describe_api"),
    "check_release": ("kernelpin.publisher.release", "check_release"),
    "check_signatures": ("kernelpin.publisher.release", "check_signatures"),
    "publish": ("kernelpin.publisher.release", "publish"),
    "find_project": ("kernelpin.project", "find_project"),
    "Project": ("kernelpin.project", "Project"),
    "HubSettings": ("kernelpin.hub.source", "HubSettings"),
    "HubSource": ("kernelpin.hub.source", "HubSource"),
    "detect_environment": ("kernelpin.environment", "detect"),
    "get_kernel": ("kernelpin.commands.get_kernel", "get_kernel"),
    "has_kernel": ("kernelpin.commands.get_kernel", "has_kernel"),
    "get_kernel_variants": ("kernelpin.commands.get_kernel", "get_kernel_variants"),
    "loaded_kernels": ("kernelpin.loading.loader", "loaded_kernels"),
    "integrate_kernels": ("kernelpin.commands.kernelize", "integrate_kernels"),
    "integrated_kernels": ("kernelpin.commands.kernelize", "integrated_kernels"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module, attribute = _EXPORTS[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module 'kernelpin' has no attribute {name!r}")
