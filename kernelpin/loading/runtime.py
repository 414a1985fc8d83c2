"""Runtime: import the locked, verified build of a kernel that fits this process's torch."""

from __future__ import annotations

import functools
import os
import re
import sys
import threading
import tomllib
from contextvars import ContextVar
from pathlib import Path
from types import ModuleType

from kernelpin import environment
from kernelpin.loading import local_override
from kernelpin.loading import python_depends
from kernelpin.loading import kernels_internals
from kernelpin.format import lockfile
from kernelpin.format.lockfile import LockedKernel, LockedVariant
from kernelpin.errors import KernelpinError
from kernelpin.files.integrity import find_owned_upward
from kernelpin.layout import LOCKFILE
from kernelpin.loading.loader import import_verified
from kernelpin.store.receipts import Receipts
from kernelpin.hub.source import HubSettings, HubSource
from kernelpin.store.content import Store
from kernelpin.trust.policy import Policy, parse_policy
from kernelpin.format.variant import Environment, choose_variant


def find_lock(start: Path) -> Path | None:
    """The nearest kernelpin.lock at or above `start`, trusting only what this user or root owns (as git's
    safe.directory check does): the search stops at a directory another user owns, and a lock another user
    owns is refused, since in a shared parent (/tmp, a group directory) anyone can plant one."""
    start = start.resolve()
    found, _ = find_owned_upward(start if start.is_dir() else start.parent, LOCKFILE,
                                 "Pass load(..., lock='path/to/kernelpin.lock') to name your project's lock")
    return found


def _caller_file(depth: int) -> Path | None:
    caller = sys._getframe(depth).f_globals.get("__file__")
    return Path(caller) if caller else None


@functools.cache
def _read_lock(path: Path, mtime_ns: int, size: int) -> lockfile.Lock | None:
    return lockfile.read(path)


def read_lock_cached(path: Path) -> lockfile.Lock | None:
    """The lock, parsed once per version of the file (load() runs once per kernel)."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return _read_lock(path.resolve(), stat.st_mtime_ns, stat.st_size)


@functools.cache
def _read_policy(path: Path, mtime_ns: int, size: int, inode: int) -> Policy:
    try:
        return parse_policy(tomllib.loads(path.read_text(encoding="utf-8")))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise KernelpinError(f"{path}: not valid TOML ({error}); fix it (it holds [tool.kernelpin.trust])") from None


def policy_beside(lock_path: Path) -> Policy:
    """The publisher policy of the pyproject.toml beside the lock (the defaults without one), parsed once per
    version of the file."""
    path = lock_path.parent / "pyproject.toml"
    try:
        stat = path.stat()
    except FileNotFoundError:
        return Policy()
    # Keyed by the path as given and the file's identity: resolving it costs more than the check (load's hot path).
    return _read_policy(path, stat.st_mtime_ns, stat.st_size, stat.st_ino)


@functools.cache
def _environment() -> Environment:
    return environment.machine_environment()


def environment_for(backend: str | None) -> Environment:
    """This process's environment (detected once), with the backend asked for (`cpu` or the machine's own)."""
    return _environment() if backend is None else environment.with_backend(_environment(), backend)


def module_name(repo_id: str, commit: str, variant: str) -> str:
    """Unique per repository, commit and variant, so two versions of one kernel load side by side."""
    return "_kernelpin_" + re.sub(r"\W", "_", f"{repo_id}_{commit[:12]}_{variant}")


_module_locks: dict[str, threading.RLock] = {}
_module_locks_guard = threading.Lock()


def module_lock(name: str) -> threading.RLock:
    """One lock per kernel module: a concurrent load() waits for the import in progress instead of getting
    the half-executed module from sys.modules. Re-entrant, so a kernel that loads itself while it is being
    imported gets the partial module, as a circular import does."""
    with _module_locks_guard:
        return _module_locks.setdefault(name, threading.RLock())


def load(
    repo_id: str,
    *,
    lock: str | os.PathLike | None = None,
    target: str | os.PathLike | None = None,
    backend: str | None = None,
) -> ModuleType:
    """Import the kernel `repo_id` as the project's kernelpin.lock pins it.

    The lock is `lock` (a file or its directory) or the nearest kernelpin.lock above the calling module
    (then above the working directory). Files come from `target` / $KERNELPIN_TARGET (a `sync --target`
    directory) or the Hub cache, downloading missing ones unless HF_HUB_OFFLINE=1. Every file is
    verified against the lock before import; a modified file raises IntegrityError and is never imported.
    Only modules the lock lists are importable, compiled from the bytes that were hashed (kernelpin.loading.loader).
    `backend="cpu"` takes a CPU build on an accelerator's machine (as kernels' backend="cpu"); by default
    the variant is the one `kernels.get_kernel` would choose.
    """
    if lock is not None:
        lock_path = Path(lock)
        lock_path = lock_path / LOCKFILE if lock_path.is_dir() else lock_path
    else:
        caller = _caller_file(2)
        lock_path = (find_lock(caller) if caller else None) or find_lock(Path.cwd())
        if lock_path is None:
            raise KernelpinError(
                f"no {LOCKFILE} found above {caller or Path.cwd()} (the search stops at a directory owned by "
                "another user, as git's does); run `kernelpin lock` in your project "
                "or pass load(..., lock='path/to/kernelpin.lock')"
            )
    pinned = read_lock_cached(lock_path)
    if pinned is None:
        raise KernelpinError(f"{lock_path} does not exist; run `kernelpin lock`")
    kernel = pinned.kernel(repo_id)
    if kernel is None:
        locked = ", ".join(k.repo_id for k in pinned.kernels) or "none"
        raise KernelpinError(
            f"{repo_id} is not in {lock_path} (locked: {locked}); run `kernelpin add {repo_id}`"
        )
    env = environment_for(backend)
    override = local_override.refuse_under_lock(repo_id, lock_path)
    if override is not None:
        return local_override.load(repo_id, override, env)
    variant = choose_variant(kernel, env)
    # The signer `lock` verified, against today's policy: string compares, no cryptography (`sync` and
    # `kernelpin verify --signatures` verify the bundle itself; the lock pins its sha256 like any file's).
    signature = kernel.variant(variant).signature
    policy_beside(lock_path).check_signer(repo_id, variant, None if signature is None else signature.signer)
    name = module_name(kernel.repo_id, kernel.commit, variant)
    with module_lock(name):
        if name in sys.modules:
            return sys.modules[name]
        target = target or os.environ.get("KERNELPIN_TARGET") or None
        receipts = Receipts.of_user()
        # Verifies every file (downloading missing ones); needs only read access when all are present.
        directory = Store(HubSource(HubSettings.from_env()), Path(target) if target else None,
                          receipts=receipts).ensure_variant(kernel, variant).directory
        locked_variant = kernel.variant(variant)
        what = f"{kernel.label} ({variant})"
        python_depends.check_installed(directory, locked_variant, env.selected.name, what)
        dependencies = _load_dependencies(kernel, locked_variant.depends, lock_path, target, backend)
        return import_with_dependencies(name, directory, locked_variant, what, dependencies,
                                        (kernel.repo_id, kernel.commit), receipts)


_loading: ContextVar[tuple[str, ...]] = ContextVar("_loading", default=())  # the chain of kernels being loaded


def _load_dependencies(kernel: LockedKernel, depends: tuple, lock_path: Path, target: object,
                       backend: str | None) -> dict[str, ModuleType]:
    """Each kernel the variant names in `kernel-depends`, loaded (verified) from the same lock first, for the
    same backend (as `kernels` does: a CPU build's dependencies are CPU builds too)."""
    chain = (*_loading.get(), kernel.repo_id)
    token = _loading.set(chain)
    try:
        modules = {}
        for repo_id, _ in depends:
            if repo_id in chain:  # only a hand-edited lock has one: locking refuses cycles
                raise KernelpinError(f"{lock_path}: kernel dependency cycle {' -> '.join((*chain, repo_id))}; "
                                     "run `kernelpin lock` to regenerate the lock")
            modules[repo_id] = load(repo_id, lock=lock_path, target=target, backend=backend)
        return modules
    finally:
        _loading.reset(token)


def import_with_dependencies(name: str, directory: Path, variant: LockedVariant, what: str,
                             dependencies: dict[str, ModuleType], kernel: tuple[str, str | None] | None = None,
                             receipts: Receipts | None = None) -> ModuleType:
    """Import a verified variant. One with dependencies calls `kernels.get_kernel_dep(repo)` while it loads:
    `kernels` keeps the dependencies of the kernel being loaded in a context variable
    (its use_kernel_deps, kernelpin.loading.kernels_internals), set here; without dependencies no `kernels` is needed."""
    if not dependencies:
        return import_verified(name, directory, variant, what, kernel, receipts)
    purpose = (f"{what} depends on {', '.join(dependencies)} (kernel-depends) and gets them with "
               "kernels.get_kernel_dep, which")
    with kernels_internals.kernel_deps(dependencies, purpose):
        return import_verified(name, directory, variant, what, kernel, receipts)
