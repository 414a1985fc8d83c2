"""kernelpin: pin, install and load kernels published on the Hugging Face Hub.

Every command of the `kernelpin` CLI is a function here, named like the command, returning data (the result
types exported here too) and raising KernelpinError or one of its subclasses (exported here too). `lock`,
`check_lock`, `sync`, `sync_plan`, `verify` and `outdated` take the project around the working directory and the
Hub the environment names unless given others, as the CLI does:

    project, source = kernelpin.find_project(Path.cwd()), kernelpin.HubSource.from_env()
    kernelpin.add(project, source, {"acme/img2gray": "^0.1"})   # edits pyproject.toml, re-locks
    kernelpin.sync()                                            # this project, this Hub, this machine's torch
    module = kernelpin.load("acme/img2gray")
    module = kernelpin.get_kernel("acme/img2gray", version=0)   # no lock: as kernels.get_kernel, verified

Importing kernelpin imports neither torch nor huggingface_hub; each function imports what it needs when called.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernelpin.loading.runtime import load
    from kernelpin.commands.lock import lock
    from kernelpin.commands.lock import check_lock
    from kernelpin.commands.lock import add
    from kernelpin.commands.lock import remove
    from kernelpin.commands.sync import sync
    from kernelpin.commands.sync import sync_plan
    from kernelpin.commands.verify import verify
    from kernelpin.commands.outdated import outdated
    from kernelpin.commands.outdated import versions
    from kernelpin.commands.cache import cache
    from kernelpin.commands.info import info
    from kernelpin.commands.info import variants
    from kernelpin.commands.info import describe_api
    from kernelpin.publisher.release import check_release
    from kernelpin.publisher.release import check_signatures
    from kernelpin.publisher.release import publish
    from kernelpin.project import find_project
    from kernelpin.project import Project
    from kernelpin.hub.source import HubSettings
    from kernelpin.hub.source import HubSource
    from kernelpin.environment import detect as detect_environment
    from kernelpin.loading.get_kernel import get_kernel
    from kernelpin.loading.get_kernel import has_kernel
    from kernelpin.loading.get_kernel import get_kernel_variants
    from kernelpin.loading.loader import loaded_kernels
    from kernelpin.loading.kernelize import integrate_kernels
    from kernelpin.loading.kernelize import integrated_kernels
    from kernelpin.loading.kernelize import kernelized_layers
    from kernelpin.loading.kernelize import KernelizedLayer
    from kernelpin.relock import Locked
    from kernelpin.commands.lock import Added
    from kernelpin.commands.lock import Removed
    from kernelpin.commands.sync import Synced
    from kernelpin.commands.sync import SyncPlan
    from kernelpin.store.install import SyncedVariant
    from kernelpin.store.install import PlannedVariant
    from kernelpin.commands.verify import Verification
    from kernelpin.commands.verify import FileStatus
    from kernelpin.commands.outdated import Outdated
    from kernelpin.commands.outdated import VersionList
    from kernelpin.commands.outdated import TaggedVersion
    from kernelpin.commands.info import KernelInfo
    from kernelpin.commands.info import DependencyNode
    from kernelpin.commands.info import RevisionVariants
    from kernelpin.commands.info import DescribedApi
    from kernelpin.format.python_api import KernelApi
    from kernelpin.builds import VariantFit
    from kernelpin.commands.cache import CacheReport
    from kernelpin.commands.cache import CachedRevision
    from kernelpin.publisher.release import Release
    from kernelpin.publisher.release import ReleaseFile
    from kernelpin.publisher.release import Published
    from kernelpin.loading.loader import LoadedKernel
    from kernelpin.format.variant import Environment
    from kernelpin.format.signer import Signer
    from kernelpin.errors import KernelpinError
    from kernelpin.errors import IntegrityError
    from kernelpin.errors import NoVariantError
    from kernelpin.format.metadata import MetadataError
    from kernelpin.loading.python_depends import DependencyError
    from kernelpin.loading.archive import ArchiveError
    from kernelpin.loading.kernels_internals import KernelsPackageError
    from kernelpin.trust.policy import PolicyError
    from kernelpin.trust.policy import SignatureError
    from kernelpin.trust.signature import TrustRootError
    from kernelpin.hub.client import HubTimeout
    from kernelpin.hub.limits import LimitExceeded
    from kernelpin.hub.listing import MalformedAnswer
    from kernelpin.files.confined import LinkRefused
    from kernelpin.publisher.release import PublishError
    from kernelpin.publisher.release import TagExistsError
    from kernelpin.publisher.abi_gate import AbiError
    from kernelpin.loading.get_kernel import UnpinnedKernelWarning
    from kernelpin.loading.local_override import LocalKernelOverrideWarning
    from kernelpin.loading.provenance import DirtyBuildWarning
    from kernelpin.loading.get_kernel import KernelRedirectWarning
    from kernelpin.resolve import KernelMoved

# name -> (module, name there): looked up on first use, so `import kernelpin` stays cheap. The functions (every
# command is one, named like it), the types they return, and the errors and warnings they raise.
_FUNCTIONS = {
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
    "get_kernel": ("kernelpin.loading.get_kernel", "get_kernel"),
    "has_kernel": ("kernelpin.loading.get_kernel", "has_kernel"),
    "get_kernel_variants": ("kernelpin.loading.get_kernel", "get_kernel_variants"),
    "loaded_kernels": ("kernelpin.loading.loader", "loaded_kernels"),
    "integrate_kernels": ("kernelpin.loading.kernelize", "integrate_kernels"),
    "integrated_kernels": ("kernelpin.loading.kernelize", "integrated_kernels"),
    "kernelized_layers": ("kernelpin.loading.kernelize", "kernelized_layers"),
}
_RESULTS = {
    "Locked": ("kernelpin.relock", "Locked"),
    "Added": ("kernelpin.commands.lock", "Added"),
    "Removed": ("kernelpin.commands.lock", "Removed"),
    "Synced": ("kernelpin.commands.sync", "Synced"),
    "SyncPlan": ("kernelpin.commands.sync", "SyncPlan"),
    "SyncedVariant": ("kernelpin.store.install", "SyncedVariant"),
    "PlannedVariant": ("kernelpin.store.install", "PlannedVariant"),
    "Verification": ("kernelpin.commands.verify", "Verification"),
    "FileStatus": ("kernelpin.commands.verify", "FileStatus"),
    "Outdated": ("kernelpin.commands.outdated", "Outdated"),
    "VersionList": ("kernelpin.commands.outdated", "VersionList"),
    "TaggedVersion": ("kernelpin.commands.outdated", "TaggedVersion"),
    "KernelInfo": ("kernelpin.commands.info", "KernelInfo"),
    "KernelizedLayer": ("kernelpin.loading.kernelize", "KernelizedLayer"),
    "DependencyNode": ("kernelpin.commands.info", "DependencyNode"),
    "RevisionVariants": ("kernelpin.commands.info", "RevisionVariants"),
    "DescribedApi": ("kernelpin.commands.info", "DescribedApi"),
    "KernelApi": ("kernelpin.format.python_api", "KernelApi"),
    "VariantFit": ("kernelpin.builds", "VariantFit"),
    "CacheReport": ("kernelpin.commands.cache", "CacheReport"),
    "CachedRevision": ("kernelpin.commands.cache", "CachedRevision"),
    "Release": ("kernelpin.publisher.release", "Release"),
    "ReleaseFile": ("kernelpin.publisher.release", "ReleaseFile"),
    "Published": ("kernelpin.publisher.release", "Published"),
    "LoadedKernel": ("kernelpin.loading.loader", "LoadedKernel"),
    "Environment": ("kernelpin.format.variant", "Environment"),
    "Signer": ("kernelpin.format.signer", "Signer"),
}
_ERRORS = {
    "KernelpinError": ("kernelpin.errors", "KernelpinError"),
    "IntegrityError": ("kernelpin.errors", "IntegrityError"),
    "NoVariantError": ("kernelpin.errors", "NoVariantError"),
    "MetadataError": ("kernelpin.format.metadata", "MetadataError"),
    "DependencyError": ("kernelpin.loading.python_depends", "DependencyError"),
    "ArchiveError": ("kernelpin.loading.archive", "ArchiveError"),
    "KernelsPackageError": ("kernelpin.loading.kernels_internals", "KernelsPackageError"),
    "PolicyError": ("kernelpin.trust.policy", "PolicyError"),
    "SignatureError": ("kernelpin.trust.policy", "SignatureError"),
    "TrustRootError": ("kernelpin.trust.signature", "TrustRootError"),
    "HubTimeout": ("kernelpin.hub.client", "HubTimeout"),
    "LimitExceeded": ("kernelpin.hub.limits", "LimitExceeded"),
    "MalformedAnswer": ("kernelpin.hub.listing", "MalformedAnswer"),
    "LinkRefused": ("kernelpin.files.confined", "LinkRefused"),
    "PublishError": ("kernelpin.publisher.release", "PublishError"),
    "TagExistsError": ("kernelpin.publisher.release", "TagExistsError"),
    "AbiError": ("kernelpin.publisher.abi_gate", "AbiError"),
    "UnpinnedKernelWarning": ("kernelpin.loading.get_kernel", "UnpinnedKernelWarning"),
    "LocalKernelOverrideWarning": ("kernelpin.loading.local_override", "LocalKernelOverrideWarning"),
    "DirtyBuildWarning": ("kernelpin.loading.provenance", "DirtyBuildWarning"),
    "KernelRedirectWarning": ("kernelpin.loading.get_kernel", "KernelRedirectWarning"),
    "KernelMoved": ("kernelpin.resolve", "KernelMoved"),
}
_EXPORTS = {**_FUNCTIONS, **_RESULTS, **_ERRORS}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module, attribute = _EXPORTS[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module 'kernelpin' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
