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
    from kernelpin.commands.sync import Synced, SyncPlan, sync, sync_plan
    from kernelpin.commands.verify import FileStatus, Verification, verify
    from kernelpin.commands.verify_conda import CondaPackageCheck, CondaVerification, CondaVerifyError, verify_conda
    from kernelpin.environment import detect as detect_environment
    from kernelpin.errors import IntegrityError, KernelpinError, NoVariantError
    from kernelpin.files.confined import LinkRefused
    from kernelpin.format.conda_attestation import AttestationError
    from kernelpin.format.conda_package import CondaRecordError
    from kernelpin.format.metadata import MetadataError
    from kernelpin.format.python_api import KernelApi
    from kernelpin.format.signer import Signer
    from kernelpin.format.variant import Environment
    from kernelpin.hub.client import HubTimeout
    from kernelpin.hub.limits import LimitExceeded
    from kernelpin.hub.listing import MalformedAnswer
    from kernelpin.hub.source import HubSettings, HubSource
    from kernelpin.loading.archive import ArchiveError
    from kernelpin.loading.get_kernel import (
        KernelRedirectWarning,
        UnpinnedKernelWarning,
        get_kernel,
        get_kernel_variants,
        has_kernel,
    )
    from kernelpin.loading.kernelize import KernelizedLayer, integrate_kernels, integrated_kernels, kernelized_layers
    from kernelpin.loading.kernels_internals import KernelsPackageError
    from kernelpin.loading.loader import LoadedKernel, loaded_kernels
    from kernelpin.loading.local_override import LocalKernelOverrideWarning
    from kernelpin.loading.provenance import DirtyBuildWarning
    from kernelpin.loading.python_depends import DependencyError
    from kernelpin.loading.runtime import load
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
    "load": ("kernelpin.loading.runtime", "load"),
    "lock": ("kernelpin.commands.lock", "lock"),
    "check_lock": ("kernelpin.commands.lock", "check_lock"),
    "add": ("kernelpin.commands.lock", "add"),
    "remove": ("kernelpin.commands.lock", "remove"),
    "sync": ("kernelpin.commands.sync", "sync"),
    "sync_plan": ("kernelpin.commands.sync", "sync_plan"),
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
    "get_kernel": ("kernelpin.loading.get_kernel", "get_kernel"),
    "has_kernel": ("kernelpin.loading.get_kernel", "has_kernel"),
    "get_kernel_variants": ("kernelpin.loading.get_kernel", "get_kernel_variants"),
    "loaded_kernels": ("kernelpin.loading.loader", "loaded_kernels"),
    "integrate_kernels": ("kernelpin.loading.kernelize", "integrate_kernels"),
    "integrated_kernels": ("kernelpin.loading.kernelize", "integrated_kernels"),
    "kernelized_layers": ("kernelpin.loading.kernelize", "kernelized_layers"),
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
    "CondaVerifyError": ("kernelpin.commands.verify_conda", "CondaVerifyError"),
    "CondaRecordError": ("kernelpin.format.conda_package", "CondaRecordError"),
    "AttestationError": ("kernelpin.format.conda_attestation", "AttestationError"),
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
_EXPORTS = {**_FUNCTIONS, **_ARGUMENTS, **_RESULTS, **_ERRORS}

# Literal, for type checkers (a strict one re-exports what __all__ names); __dir__ lists the table above, so
# tests/kernelpin/package/test_api.py sees the two differ.
__all__ = [
    "AbiError",
    "Added",
    "ArchiveError",
    "AttestationError",
    "CacheReport",
    "CachedRevision",
    "CondaPackageCheck",
    "CondaRecordError",
    "CondaVerification",
    "CondaVerifyError",
    "DependencyError",
    "DependencyNode",
    "DescribedApi",
    "DirtyBuildWarning",
    "Environment",
    "FileStatus",
    "HubSettings",
    "HubSource",
    "HubTimeout",
    "IntegrityError",
    "KernelApi",
    "KernelInfo",
    "KernelMoved",
    "KernelRedirectWarning",
    "KernelizedLayer",
    "KernelpinError",
    "KernelsPackageError",
    "LimitExceeded",
    "LinkRefused",
    "LoadedKernel",
    "LocalKernelOverrideWarning",
    "LockMode",
    "Locked",
    "MalformedAnswer",
    "MetadataError",
    "NoVariantError",
    "Outdated",
    "PlannedVariant",
    "PolicyError",
    "Project",
    "PublishError",
    "Published",
    "Release",
    "ReleaseFile",
    "Removed",
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
    "VariantFit",
    "Verification",
    "VersionList",
    "add",
    "cache",
    "check_lock",
    "check_release",
    "check_signatures",
    "describe_api",
    "detect_environment",
    "find_project",
    "get_kernel",
    "get_kernel_variants",
    "has_kernel",
    "info",
    "integrate_kernels",
    "integrated_kernels",
    "kernelized_layers",
    "load",
    "loaded_kernels",
    "lock",
    "outdated",
    "publish",
    "remove",
    "sync",
    "sync_plan",
    "variants",
    "verify",
    "verify_conda",
    "versions",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module, attribute = _EXPORTS[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module 'kernelpin' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(_EXPORTS)
