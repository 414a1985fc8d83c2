"""The rest of `kernels`' public API (`kernels.__all__`, 0.17.2 to 0.19.1) on kernelpin's load front, so that
switching from `kernels` is one import: same names, same signatures, same inputs.

Loading goes through kernelpin's verified path (kernelpin.loading.front): `get_locked_kernel` and `load_kernel`
read the kernels.lock `kernels` reads and load its commit from the kernelpin.lock beside it when that pins the same
commit (every file checked against the lock), else from the Hub at that commit (every file checked against the
build's metadata.json digest, the publisher and signature checked as `get_kernel` checks them); `load_kernel` never
downloads. `get_local_kernel` loads a build on disk, verified against its own metadata.json. `install_kernel`
downloads and verifies without importing.

The layer and function API (`kernelize`, the repositories, the decorators, the mappings, `Mode`, `Device`, ...)
and the types kernels' functions return are `kernels`' own objects, wired to kernelpin's loader
(kernelpin.front.kernelize.kernels_attribute).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelpin.errors import KernelpinError
from kernelpin.format.kernels_lock import KERNELS_LOCK
from kernelpin.format.layout import LOCKFILE
from kernelpin.format.nesting import within_nesting
from kernelpin.format.spec import is_repo_id, parse_requirement, requirement_from_arguments
from kernelpin.front.hub import HubResolver, hub_resolvers
from kernelpin.front.lock import LockResolver
from kernelpin.hub.source import HubSettings
from kernelpin.loading import front, kernels_internals
from kernelpin.loading.front import Request
from kernelpin.loading.loader import loaded_kernels
from kernelpin.loading.local_override import LocalResolver
from kernelpin.loading.runtime import environment_for, policy_beside, read_lock_cached
from kernelpin.lockless import release_checker_here

__untrusted_input__ = ("locked_commit",)  # parsers of input kernelpin does not control (kernelpin.errors)


def _settings(offline: bool) -> HubSettings:
    settings = HubSettings.from_env()
    return dataclasses.replace(settings, offline=True) if offline else settings


def _caller_kernels_lock(repo_id: str) -> str:
    """The kernels.lock in the metadata of the calling module's installed distribution, as kernels reads it when
    `lockfile=None`: the text, found by the caller's top-level package."""
    module = None
    for depth in range(2, 8):  # the first frame outside kernelpin
        name = sys._getframe(depth).f_globals.get("__name__", "")
        if not name.startswith("kernelpin"):
            module = name
            break
    package = (module or "").split(".")[0]
    for distribution in importlib.metadata.packages_distributions().get(package, []):
        text = importlib.metadata.distribution(distribution).read_text(KERNELS_LOCK)
        if text is not None:
            return text
    raise KernelpinError(
        f"{repo_id}: no {KERNELS_LOCK} in the metadata of the calling package ({package or 'none'}); lock kernels "
        f"with `kernelpin lock` (or `kernels lock`) and reinstall the project, or pass lockfile="
    )


def locked_commit(repo_id: str, text: str, where: str) -> str:
    """The commit a kernels.lock's text pins for `repo_id`."""
    try:
        entries = within_nesting(json.loads(text))
        commits = {e["dependency"]["repo-id"]: e["lock"]["commit"] for e in entries}
    except (ValueError, TypeError, KeyError, RecursionError) as error:
        raise KernelpinError(f"{where}: not a kernels.lock ({error}); run `kernelpin lock` to rewrite it") from None
    if repo_id not in commits:
        # Only the entries that name a repository are listed: the file's other keys (numbers, control characters)
        # neither sort together nor belong in a message.
        locked = sorted(key for key in commits if is_repo_id(key))
        raise KernelpinError(
            f"{repo_id} is not in {where} (locked: {', '.join(locked) or 'none'}); add it to "
            "[tool.kernels.dependencies] and run `kernelpin lock`"
        )
    commit = commits[repo_id]
    if not isinstance(commit, str):
        raise KernelpinError(
            f"{where}: not a kernels.lock (the commit of {repo_id} is no string); run `kernelpin lock` to rewrite it"
        )
    return commit


def load_commit(
    repo_id: str,
    commit: str,
    where: str,
    beside: Path | None,
    backend: str | None = None,
    check_arch: bool = True,
    trust_remote_code: bool | list[str] = False,
    offline: bool = False,
) -> ModuleType:
    """The commit a kernels.lock (`where`) pins for `repo_id`: from the kernelpin.lock `beside` it where that pins
    the kernel (the same commit, or an error), else from the Hub at that commit (offline: never downloading)."""
    env = environment_for(backend)
    pinned = read_lock_cached(beside) if beside is not None else None
    kernel = pinned.kernel(repo_id) if pinned is not None else None
    if beside is not None and pinned is not None and kernel is not None:
        if kernel.commit != commit:
            raise KernelpinError(
                f"{repo_id}: {where} pins {commit[:12]} but {beside} pins {kernel.commit[:12]}; run `kernelpin lock` "
                "to bring kernels.lock in step"
            )
        resolver = LockResolver(beside, pinned, env, policy_beside(beside), check_arch, settings=_settings(offline))
        return front.load(Request(repo_id), (resolver,))
    checker = release_checker_here()
    hub = HubResolver(env, check_arch, trust_remote_code, checker, _settings(offline), pinned_by=where)
    requirement = parse_requirement(repo_id, {"revision": commit}, where=where, declared=where)
    return front.load(Request(repo_id, requirement), (LocalResolver(env, checker.policy, check_arch), hub))


def _locked(
    repo_id: str,
    lockfile: Path | None,
    backend: str | None,
    check_arch: bool,
    trust_remote_code: bool | list[str],
    offline: bool,
) -> ModuleType:
    where = str(lockfile) if lockfile is not None else f"the {KERNELS_LOCK} of the calling package"
    text = Path(lockfile).read_text(encoding="utf-8") if lockfile is not None else _caller_kernels_lock(repo_id)
    beside = Path(lockfile).parent / LOCKFILE if lockfile is not None else None
    commit = locked_commit(repo_id, text, where)
    return load_commit(repo_id, commit, where, beside, backend, check_arch, trust_remote_code, offline)


def get_locked_kernel(
    repo_id: str,
    *,
    lockfile: Path | None,
    trust_remote_code: bool | list[str] = False,
    user_agent: str | dict[str, Any] | None = None,
    check_arch: bool = True,
) -> ModuleType:
    """Load the commit `lockfile` (a kernels.lock; None: the calling package's, as kernels reads it) pins for
    `repo_id`, verified (see the module's docstring); arguments as `kernels.get_locked_kernel`'s."""
    del user_agent  # accepted so that switching from kernels is one import
    return _locked(repo_id, lockfile, None, check_arch, trust_remote_code, offline=False)


def load_kernel(
    repo_id: str,
    *,
    lockfile: Path | None,
    backend: str | None = None,
    check_arch: bool = True,
) -> ModuleType:
    """As get_locked_kernel, from what is on this machine only: nothing is downloaded (arguments as
    `kernels.load_kernel`'s)."""
    return _locked(repo_id, lockfile, backend, check_arch, False, offline=True)


def get_local_kernel(
    repo_path: Path,
    *,
    backend: str | None = None,
    trust_remote_code: bool | list[str] = False,
    user_agent: str | dict[str, Any] | None = None,
    check_arch: bool = True,
) -> ModuleType:
    """Import the build at `repo_path` (a directory holding build/<variant>/, the variants, or one variant), every
    file checked against its own metadata.json; arguments as `kernels.get_local_kernel`'s. Its kernel-depends load
    as kernels loads them: from LOCAL_KERNELS, else from the Hub (offline: as resolved there before), verified as
    `get_kernel` verifies (the publisher, `trust_remote_code` and the build's signature checked, every file hashed)."""
    del user_agent  # accepted so that switching from kernels is one import
    env, checker = environment_for(backend), release_checker_here()
    _, hub = hub_resolvers(env, check_arch, trust_remote_code, checker)
    local = LocalResolver(env, checker.policy, check_arch, named={str(repo_path): Path(repo_path)}, hub=hub)
    return front.load(Request(str(repo_path)), (local,))


def install_kernel(
    repo_id: str,
    *,
    revision: str | None = None,
    version: int | None = None,
    backend: str | None = None,
    local_files_only: bool = False,
    user_agent: str | dict[str, Any] | None = None,
    trust_remote_code: bool | list[str] = False,
) -> Path:
    """Download the build of the kernel for this machine and verify it, importing nothing; the variant directory
    (arguments as `kernels.install_kernel`'s)."""
    del user_agent  # accepted so that switching from kernels is one import
    requirement = requirement_from_arguments(repo_id, version, revision)
    local, hub = hub_resolvers(environment_for(backend), True, trust_remote_code, release_checker_here())
    hub = dataclasses.replace(hub, settings=_settings(local_files_only))
    return front.resolve(Request(repo_id, requirement), (local, hub)).verify().directory


def get_loaded_kernels() -> list[Any]:
    """The kernels kernelpin imported in this process, as `kernels.get_loaded_kernels` gives its own:
    kernels.LoadedKernel(metadata, module, repo_info)."""
    purpose = "kernelpin.get_loaded_kernels, which answers kernels' LoadedKernel,"
    loaded_type, metadata_type, repo_info = (
        kernels_internals.public(name, purpose) for name in ("LoadedKernel", "Metadata", "RepoInfo")
    )
    found = []
    for kernel in loaded_kernels():
        metadata = metadata_type.read_from_file(kernel.directory / "metadata.json")
        info = repo_info(kernel.repo_id, kernel.commit) if kernel.repo_id and kernel.commit else None
        found.append(loaded_type(metadata, sys.modules[kernel.module], info))
    return found
