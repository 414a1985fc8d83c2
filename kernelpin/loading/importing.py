"""The tail every load shares, written once: `kernelpin.load` (a lock), `get_kernel` (resolved on the spot) and
LOCAL_KERNELS (a build on disk) each decide which build to import, then `import_pinned` takes it from there:
the kernel module's lock, its files verified, its python-depends and kernel-depends checked, and only the
verified bytes imported (kernelpin.loading.loader).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from types import ModuleType

from kernelpin.errors import KernelpinError
from kernelpin.format.lockfile import LockedVariant
from kernelpin.format.spec import RequirementValue
from kernelpin.loading import python_depends
from kernelpin.loading.loader import import_verified, loaded_as
from kernelpin.records import record
from kernelpin.store.receipts import Receipts


@record
class Verified:
    """A build's files, every one checked against `variant`: where they are, and the receipts (this user's) that
    vouch for binaries hashed before (None: every file is hashed when imported)."""

    directory: Path
    variant: LockedVariant
    receipts: Receipts | None = None


_module_locks: dict[str, threading.RLock] = {}
_module_locks_guard = threading.Lock()


def module_lock(name: str) -> threading.RLock:
    """One lock per kernel module: a concurrent load waits for the import in progress instead of getting
    the half-executed module from sys.modules. Re-entrant, so a kernel that loads itself while it is being
    imported gets the partial module, as a circular import does."""
    with _module_locks_guard:
        return _module_locks.setdefault(name, threading.RLock())


_loading: ContextVar[tuple[str, ...]] = ContextVar("_loading", default=())  # the chain of kernels being loaded


def import_pinned(
    name: str,
    what: str,
    kernel: tuple[str, str | None],
    verify: Callable[[], Verified],
    *,
    python_backend: str | None,
    load_dependency: Callable[[str, object], ModuleType] | None = None,
    cycle_error: Callable[[str], KernelpinError] | None = None,
) -> tuple[ModuleType, bool]:
    """Import the build `kernel` (repo id, commit; None for a local build) as the module `name`, once per
    process: under the module's lock, `verify()` (which downloads what is missing), the variant's python-depends
    checked from its verified metadata.json for `python_backend` (None: the caller checked them before anything
    was downloaded), each kernel it depends on (`kernel-depends`) loaded by `load_dependency(repo_id, value)`
    (a cycle raises `cycle_error(chain)`), then the verified bytes imported. Returns the module and whether this
    call imported it (False: it was imported before)."""
    with module_lock(name):
        if name in sys.modules:
            _check_same_kernel(name, what, kernel)
            return sys.modules[name], False
        verified = verify()
        directory, variant, receipts = verified.directory, verified.variant, verified.receipts
        if python_backend is not None:
            python_depends.check_installed(directory, variant, python_backend, what)
        dependencies = _load_dependencies(kernel[0], variant.depends, load_dependency, cycle_error)
        return _import_with_dependencies(name, directory, variant, what, dependencies, kernel, receipts), True


def _check_same_kernel(name: str, what: str, kernel: tuple[str, str | None]) -> None:
    """Refuse to reuse the module `name` for another kernel than the one it is a build of (or for one kernelpin
    did not import): a module name is a digest of what it loads, so a clash is a planted module or a hostile lock."""
    loaded = loaded_as(name)
    if loaded is not None and (loaded.repo_id, loaded.commit) == kernel:
        return
    holder = (
        "a module kernelpin did not import"
        if loaded is None
        else f"{loaded.repo_id} at {loaded.commit[:12] if loaded.commit else 'a local build'}"
    )
    raise KernelpinError(
        f"{what}: the module name {name} is taken in this process by {holder}, so it is not reused; start a new "
        "Python process, and check what put it there"
    )


def _load_dependencies(
    repo_id: str,
    depends: tuple[tuple[str, RequirementValue], ...],
    load_dependency: Callable[[str, object], ModuleType] | None,
    cycle_error: Callable[[str], KernelpinError] | None,
) -> dict[str, ModuleType]:
    """Each kernel of `depends` loaded first, with `repo_id` on the chain of kernels being loaded."""
    if not depends:
        return {}
    assert load_dependency is not None and cycle_error is not None, "a variant with kernel-depends needs a loader"
    chain = (*_loading.get(), repo_id)
    token = _loading.set(chain)
    try:
        modules = {}
        for dependency, value in depends:
            if dependency in chain:
                raise cycle_error(" -> ".join((*chain, dependency)))
            modules[dependency] = load_dependency(dependency, value)
        return modules
    finally:
        _loading.reset(token)


def _import_with_dependencies(
    name: str,
    directory: Path,
    variant: LockedVariant,
    what: str,
    dependencies: dict[str, ModuleType],
    kernel: tuple[str, str | None],
    receipts: Receipts | None,
) -> ModuleType:
    """Import a verified variant. One with dependencies calls `kernels.get_kernel_dep(repo)` while it loads:
    `kernels` keeps the dependencies of the kernel being loaded in a context variable
    (its use_kernel_deps, located by kernelpin.loading.kernels_internals), set here; without dependencies no
    `kernels` is needed."""
    if not dependencies:
        return import_verified(name, directory, variant, what, kernel, receipts)
    from kernelpin.loading import kernels_internals  # only a kernel with kernel-depends needs `kernels`' internals

    purpose = (
        f"{what} depends on {', '.join(dependencies)} (kernel-depends) and gets them with kernels.get_kernel_dep, which"
    )
    with kernels_internals.kernel_deps(dependencies, purpose):
        return import_verified(name, directory, variant, what, kernel, receipts)
