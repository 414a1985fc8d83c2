"""transformers' path through kernelpin: `kernelize` with `kernels`' layer and function repositories loads
through kernelpin's verified loader, switched on in one line.

    import kernelpin
    kernelpin.integrate_kernels()   # or: with kernelpin.integrated_kernels(): ...

`kernels` resolves what a repository in a kernel mapping means through the repository's `load()` (its
`RepositoryProtocol`, the seam `register_kernel_mapping` documents for repositories of one's own); transformers
builds its mapping from kernels' own classes, so the integration replaces `load()` of those classes:

- `LayerRepository` / `FuncRepository` (`version=` or `revision=`): `kernelpin.get_kernel` (resolved on the
  spot, verified, remembered for offline use; LOCAL_KERNELS honoured with a warning);
- `LockedLayerRepository` / `LockedFuncRepository`: `kernelpin.load` from the kernelpin.lock beside the
  kernels.lock they read (or the one found from the working directory), refused when the two locks name
  different commits; LOCAL_KERNELS is refused there unless allowed (kernelpin.loading.local_override).

The layer or function is then taken from the loaded module exactly as kernels takes it (its own
`_get_kernel_layer` / `_get_kernel_func`, so their checks and errors stay kernels'). Where kernels keeps these
classes and functions, for each version kernelpin supports: kernelpin.loading.kernels_internals.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelpin.errors import KernelpinError
from kernelpin.format.layout import LOCKFILE
from kernelpin.loading import kernels_internals

# The replaced methods, by (class, attribute): restored by `integrated_kernels` on exit.
_Originals = dict[tuple[type, str], Callable[..., Any]]


def _hub_kernel(repository: Any) -> ModuleType:
    from kernelpin.loading.get_kernel import get_kernel

    return get_kernel(repository._repo_id, revision=repository._revision, version=repository._version,
                      trust_remote_code=repository._trust_remote_code)


def kernelpin_lock_for(kernels_lock: Path | None) -> Path:
    """The kernelpin.lock that decides a locked repository: beside its kernels.lock, else found from the
    working directory as `kernelpin.load` finds it."""
    from kernelpin.loading.runtime import find_lock

    found = (kernels_lock.parent / LOCKFILE) if kernels_lock is not None else find_lock(Path.cwd())
    if found is None or not found.is_file():
        raise KernelpinError(
            f"no {LOCKFILE} {'beside ' + str(kernels_lock) if kernels_lock else 'above ' + str(Path.cwd())}: "
            "with kernelpin.integrate_kernels(), locked kernels load from the kernelpin.lock that `kernelpin lock` "
            "keeps in step with kernels.lock; run `kernelpin lock` in the project"
        )
    return found


def _locked_kernel(repository: Any) -> ModuleType:
    from kernelpin.loading.runtime import load, read_lock_cached

    lock = kernelpin_lock_for(repository._lockfile)
    commit = kernels_internals.commit_text(repository.kernel_locks[repository.kernel_dep].commit)
    pinned = read_lock_cached(lock)
    kernel = pinned.kernel(repository._repo_id) if pinned is not None else None
    if kernel is not None and kernel.commit != commit:
        raise KernelpinError(
            f"{repository._repo_id}: kernels.lock pins {commit[:12]} but {lock} pins {kernel.commit[:12]}; "
            "run `kernelpin lock` to bring kernels.lock in step"
        )
    return load(repository._repo_id, lock=lock)


def _replacements() -> dict[tuple[type, str], Callable[..., Any]]:
    purpose = "kernelpin.integrate_kernels(), which hooks the layers and functions of `kernels`,"
    layer = kernels_internals.module("layer", purpose)
    func = kernels_internals.module("func", purpose)

    def layer_load(get: Callable[[Any], ModuleType]) -> Callable[[Any], Any]:
        return lambda self: layer._get_kernel_layer(self, get(self))

    def func_load(get: Callable[[Any], ModuleType]) -> Callable[[Any], Any]:
        return lambda self: func._get_kernel_func(self, get(self))

    def described(kind: str) -> Callable[[Any], str]:
        # kernels' own __str__ resolves the revision with kernels' client (kernelize logs every repository).
        def text(self: Any) -> str:
            wanted = f"version {self._version}" if self._revision is None else f"revision {self._revision}"
            return f"`{self._repo_id}` ({wanted}, through kernelpin), {kind} `{getattr(self, kind + '_name')}`"
        return text

    return {
        (layer.LayerRepository, "__str__"): described("layer"),
        (func.FuncRepository, "__str__"): described("func"),
        (layer.LayerRepository, "load"): layer_load(_hub_kernel),
        (layer.LockedLayerRepository, "load"): layer_load(_locked_kernel),
        (func.FuncRepository, "load"): func_load(_hub_kernel),
        (func.LockedFuncRepository, "load"): func_load(_locked_kernel),
    }


def integrate_kernels() -> _Originals:
    """Make kernels' layer and function repositories load through kernelpin (see the module's docstring).
    Idempotent; returns the methods it replaced (for `integrated_kernels`)."""
    replacements = _replacements()
    originals: _Originals = {}
    for (cls, name), method in replacements.items():
        current = cls.__dict__[name]
        if getattr(current, "__kernelpin__", False):
            continue
        method.__kernelpin__ = True  # type: ignore[attr-defined]
        originals[(cls, name)] = current
        setattr(cls, name, method)
    return originals


@contextlib.contextmanager
def integrated_kernels() -> Iterator[None]:
    """`integrate_kernels()` for the duration of a block; kernels' own loading is back afterwards."""
    originals = integrate_kernels()
    try:
        yield
    finally:
        for (cls, name), method in originals.items():
            setattr(cls, name, method)
