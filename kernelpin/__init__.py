"""kernelpin: pin, install and load kernels published on the Hugging Face Hub.

Every command of the `kernelpin` CLI is a function here, named like the command, returning data (the result
types exported here too) and raising KernelpinError or one of its subclasses (exported here too). `lock`,
`check_lock`, `sync`, `sync_plan`, `verify`, `verify_conda` and `outdated` take the project around the working directory and the
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
    from kernelpin.builds import VariantFit
    from kernelpin.commands.cache import CachedRevision, CacheReport, cache
    from kernelpin.commands.info import (
        DependencyNode,
        DescribedApi,
        KernelInfo,
        RevisionVariants,
        describe_api,
        info,
        variants,
    )
    from kernelpin.commands.lock import Added, Removed, add, check_lock, lock, remove
    from kernelpin.commands.outdated import Outdated, TaggedVersion, VersionList, outdated, versions
    from kernelpin.commands.sync import Synced, SyncPlan, download, sync, sync_plan
    from kernelpin.commands.verify import FileStatus, Verification, verify
    from kernelpin.commands.verify_conda import CondaPackageCheck, CondaVerification, CondaVerifyError, verify_conda
    from kernelpin.environment import detect as detect_environment
    from kernelpin.errors import IntegrityError, KernelpinError, NoVariantError
    from kernelpin.files.confined import LinkRefused
    from kernelpin.format.conda_attestation import AttestationError
    from kernelpin.format.conda_package import CondaRecordError
    from kernelpin.format.metadata import MetadataError
    from kernelpin.format.python_api import KernelApi
    from kernelpin.format.ranges import RangeError, VersionError
    from kernelpin.format.signer import Signer
    from kernelpin.format.variant import Environment, VariantNameError
    from kernelpin.front.get_kernel import get_kernel, get_kernel_variants, has_kernel
    from kernelpin.front.hub import KernelRedirectWarning, UnpinnedKernelWarning
    from kernelpin.front.kernelize import VerifiedLayer, integrate_kernels, integrated_kernels, kernelized_layers
    from kernelpin.front.kernels_api import (
        get_loaded_kernels,
        get_local_kernel,
        get_locked_kernel,
        install_kernel,
        load_kernel,
    )
    from kernelpin.front.lock import load
    from kernelpin.hub.http_errors import HubHTTPError
    from kernelpin.hub.limits import LimitExceeded
    from kernelpin.hub.listing import MalformedAnswer
    from kernelpin.hub.source import HubSettings, HubSource
    from kernelpin.hub.wire import HubTimeout, HubUnreachable
    from kernelpin.loading.archive import ArchiveError
    from kernelpin.loading.kernels_internals import KernelsPackageError
    from kernelpin.loading.loader import VerifiedKernel, loaded_kernels
    from kernelpin.loading.local_override import LocalKernelOverrideWarning
    from kernelpin.loading.provenance import DirtyBuildWarning
    from kernelpin.loading.python_depends import DependencyError
    from kernelpin.project import Project, find_project
    from kernelpin.publisher.abi_gate import AbiError
    from kernelpin.publisher.release import (
        Published,
        PublishError,
        Release,
        ReleaseFile,
        TagExistsError,
        check_release,
        check_signatures,
        publish,
    )
    from kernelpin.relock import Locked, LockMode
    from kernelpin.resolve import KernelMoved
    from kernelpin.store.install import PlannedVariant, SyncedVariant
    from kernelpin.trust.policy import PolicyError, SignatureError
    from kernelpin.trust.signature import TrustRootError

# name -> (module, name there): looked up on first use, so `import kernelpin` stays cheap. The functions (every
# command is one, named like it), the types they return, and the errors and warnings they raise.
_FUNCTIONS = {
    "load": ("kernelpin.front.lock", "load"),
    "lock": ("kernelpin.commands.lock", "lock"),
    "check_lock": ("kernelpin.commands.lock", "check_lock"),
    "add": ("kernelpin.commands.lock", "add"),
    "remove": ("kernelpin.commands.lock", "remove"),
    "sync": ("kernelpin.commands.sync", "sync"),
    "sync_plan": ("kernelpin.commands.sync", "sync_plan"),
    "download": ("kernelpin.commands.sync", "download"),
    "verify": ("kernelpin.commands.verify", "verify"),
    "verify_conda": ("kernelpin.commands.verify_conda", "verify_conda"),
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
    "get_kernel": ("kernelpin.front.get_kernel", "get_kernel"),
    "has_kernel": ("kernelpin.front.get_kernel", "has_kernel"),
    "get_kernel_variants": ("kernelpin.front.get_kernel", "get_kernel_variants"),
    "loaded_kernels": ("kernelpin.loading.loader", "loaded_kernels"),
    "get_locked_kernel": ("kernelpin.front.kernels_api", "get_locked_kernel"),
    "load_kernel": ("kernelpin.front.kernels_api", "load_kernel"),
    "get_local_kernel": ("kernelpin.front.kernels_api", "get_local_kernel"),
    "install_kernel": ("kernelpin.front.kernels_api", "install_kernel"),
    "get_loaded_kernels": ("kernelpin.front.kernels_api", "get_loaded_kernels"),
    "integrate_kernels": ("kernelpin.front.kernelize", "integrate_kernels"),
    "integrated_kernels": ("kernelpin.front.kernelize", "integrated_kernels"),
    "kernelized_layers": ("kernelpin.front.kernelize", "kernelized_layers"),
}
# The types the functions take beyond the standard library's and those above.
_ARGUMENTS = {
    "LockMode": ("kernelpin.relock", "LockMode"),
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
    "CondaVerification": ("kernelpin.commands.verify_conda", "CondaVerification"),
    "CondaPackageCheck": ("kernelpin.commands.verify_conda", "CondaPackageCheck"),
    "Outdated": ("kernelpin.commands.outdated", "Outdated"),
    "VersionList": ("kernelpin.commands.outdated", "VersionList"),
    "TaggedVersion": ("kernelpin.commands.outdated", "TaggedVersion"),
    "KernelInfo": ("kernelpin.commands.info", "KernelInfo"),
    "VerifiedLayer": ("kernelpin.front.kernelize", "VerifiedLayer"),
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
    "VerifiedKernel": ("kernelpin.loading.loader", "VerifiedKernel"),
    "Environment": ("kernelpin.format.variant", "Environment"),
    "Signer": ("kernelpin.format.signer", "Signer"),
}
_ERRORS = {
    "KernelpinError": ("kernelpin.errors", "KernelpinError"),
    "IntegrityError": ("kernelpin.errors", "IntegrityError"),
    "NoVariantError": ("kernelpin.errors", "NoVariantError"),
    "MetadataError": ("kernelpin.format.metadata", "MetadataError"),
    "CondaVerifyError": ("kernelpin.commands.verify_conda", "CondaVerifyError"),
    "CondaRecordError": ("kernelpin.format.conda_package", "CondaRecordError"),
    "AttestationError": ("kernelpin.format.conda_attestation", "AttestationError"),
    "DependencyError": ("kernelpin.loading.python_depends", "DependencyError"),
    "ArchiveError": ("kernelpin.loading.archive", "ArchiveError"),
    "VariantNameError": ("kernelpin.format.variant", "VariantNameError"),
    "RangeError": ("kernelpin.format.ranges", "RangeError"),
    "VersionError": ("kernelpin.format.ranges", "VersionError"),
    "KernelsPackageError": ("kernelpin.loading.kernels_internals", "KernelsPackageError"),
    "PolicyError": ("kernelpin.trust.policy", "PolicyError"),
    "SignatureError": ("kernelpin.trust.policy", "SignatureError"),
    "TrustRootError": ("kernelpin.trust.signature", "TrustRootError"),
    "HubHTTPError": ("kernelpin.hub.http_errors", "HubHTTPError"),
    "HubTimeout": ("kernelpin.hub.wire", "HubTimeout"),
    "HubUnreachable": ("kernelpin.hub.wire", "HubUnreachable"),
    "LimitExceeded": ("kernelpin.hub.limits", "LimitExceeded"),
    "MalformedAnswer": ("kernelpin.hub.listing", "MalformedAnswer"),
    "LinkRefused": ("kernelpin.files.confined", "LinkRefused"),
    "PublishError": ("kernelpin.publisher.release", "PublishError"),
    "TagExistsError": ("kernelpin.publisher.release", "TagExistsError"),
    "AbiError": ("kernelpin.publisher.abi_gate", "AbiError"),
    "UnpinnedKernelWarning": ("kernelpin.front.hub", "UnpinnedKernelWarning"),
    "LocalKernelOverrideWarning": ("kernelpin.loading.local_override", "LocalKernelOverrideWarning"),
    "DirtyBuildWarning": ("kernelpin.loading.provenance", "DirtyBuildWarning"),
    "KernelRedirectWarning": ("kernelpin.front.hub", "KernelRedirectWarning"),
    "KernelMoved": ("kernelpin.resolve", "KernelMoved"),
}
_EXPORTS = {**_FUNCTIONS, **_ARGUMENTS, **_RESULTS, **_ERRORS}
# The rest of kernels.__all__ (0.17.2 to 0.19.1): kernels' own layer and function API and types, loading through
# kernelpin (kernelpin.front.kernelize.kernels_attribute; tests/kernelpin/front/test_kernels_api.py holds every name).
_FROM_KERNELS = frozenset(
    {
        "Benchmark",
        "CUDAProperties",
        "Device",
        "FuncRepository",
        "KernelizeFallback",
        "KernelizedFunc",
        "KernelizedLayer",
        "KernelizedLayers",
        "LayerRepository",
        "LoadedKernel",
        "LocalFuncRepository",
        "LocalLayerRepository",
        "LockedFuncRepository",
        "LockedLayerRepository",
        "Metadata",
        "Mode",
        "ROCMProperties",
        "RepoInfo",
        "VariantAccepted",
        "VariantRejected",
        "get_kernel_dep",
        "get_kernelized_layers",
        "kernelize",
        "register_kernel_mapping",
        "replace_kernel_forward_from_hub",
        "use_kernel_forward_from_hub",
        "use_kernel_func_from_hub",
        "use_kernel_mapping",
        "use_kernelized_func",
    }
)

# Literal, for type checkers (a strict one re-exports what __all__ names); __dir__ lists the table above, so
# tests/kernelpin/package/test_api.py sees the two differ.
__all__ = [
    "AbiError",
    "Added",
    "ArchiveError",
    "AttestationError",
    "Benchmark",
    "CUDAProperties",
    "CacheReport",
    "CachedRevision",
    "CondaPackageCheck",
    "CondaRecordError",
    "CondaVerification",
    "CondaVerifyError",
    "DependencyError",
    "DependencyNode",
    "DescribedApi",
    "Device",
    "DirtyBuildWarning",
    "Environment",
    "FileStatus",
    "FuncRepository",
    "HubHTTPError",
    "HubSettings",
    "HubSource",
    "HubTimeout",
    "HubUnreachable",
    "IntegrityError",
    "KernelApi",
    "KernelInfo",
    "KernelMoved",
    "KernelRedirectWarning",
    "KernelizeFallback",
    "KernelizedFunc",
    "KernelizedLayer",
    "KernelizedLayers",
    "KernelpinError",
    "KernelsPackageError",
    "LayerRepository",
    "LimitExceeded",
    "LinkRefused",
    "LoadedKernel",
    "LocalFuncRepository",
    "LocalKernelOverrideWarning",
    "LocalLayerRepository",
    "LockMode",
    "Locked",
    "LockedFuncRepository",
    "LockedLayerRepository",
    "MalformedAnswer",
    "Metadata",
    "MetadataError",
    "Mode",
    "NoVariantError",
    "Outdated",
    "PlannedVariant",
    "PolicyError",
    "Project",
    "PublishError",
    "Published",
    "ROCMProperties",
    "RangeError",
    "Release",
    "ReleaseFile",
    "Removed",
    "RepoInfo",
    "RevisionVariants",
    "SignatureError",
    "Signer",
    "SyncPlan",
    "Synced",
    "SyncedVariant",
    "TagExistsError",
    "TaggedVersion",
    "TrustRootError",
    "UnpinnedKernelWarning",
    "VariantAccepted",
    "VariantFit",
    "VariantNameError",
    "VariantRejected",
    "Verification",
    "VerifiedKernel",
    "VerifiedLayer",
    "VersionError",
    "VersionList",
    "__version__",
    "add",
    "cache",
    "check_lock",
    "check_release",
    "check_signatures",
    "describe_api",
    "detect_environment",
    "download",
    "find_project",
    "get_kernel",
    "get_kernel_dep",
    "get_kernel_variants",
    "get_kernelized_layers",
    "get_loaded_kernels",
    "get_local_kernel",
    "get_locked_kernel",
    "has_kernel",
    "info",
    "install_kernel",
    "integrate_kernels",
    "integrated_kernels",
    "kernelize",
    "kernelized_layers",
    "load",
    "load_kernel",
    "loaded_kernels",
    "lock",
    "outdated",
    "publish",
    "register_kernel_mapping",
    "remove",
    "replace_kernel_forward_from_hub",
    "sync",
    "sync_plan",
    "use_kernel_forward_from_hub",
    "use_kernel_func_from_hub",
    "use_kernel_mapping",
    "use_kernelized_func",
    "variants",
    "verify",
    "verify_conda",
    "versions",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module, attribute = _EXPORTS[name]
        return getattr(importlib.import_module(module), attribute)
    if name in _FROM_KERNELS:
        return importlib.import_module("kernelpin.front.kernelize").kernels_attribute(name)
    if name == "__version__":  # kernelpin's own, as kernels.__version__ is kernels'
        from importlib.metadata import version  # only when asked: `import kernelpin` stays cheap

        return version("kernelpin")
    raise AttributeError(f"module 'kernelpin' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*_EXPORTS, *_FROM_KERNELS, "__version__"})
