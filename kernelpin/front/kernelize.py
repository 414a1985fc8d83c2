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
  kernels.lock they read (or the one found from the working directory) where it pins the kernel, refused when
  the two locks name different commits (LOCAL_KERNELS is refused there unless allowed,
  kernelpin.loading.local_override); else the kernels.lock's commit from the Hub, verified as `get_kernel`
  verifies (kernelpin.front.kernels_api.load_commit);
- `LocalLayerRepository` / `LocalFuncRepository`: `kernelpin.get_local_kernel` (the build on disk, verified
  against its own metadata.json).

`kernels_attribute(name)` gives kernels' own objects of `kernels.__all__` (`kernelpin.kernelize`,
`kernelpin.LayerRepository`, ...) with this integration switched on: switching from kernels is one import.

The layer or function is then taken from the loaded module exactly as kernels takes it (its own
`_get_kernel_layer` / `_get_kernel_func`, so their checks and errors stay kernels'). Where kernels keeps these
classes and functions, for each version kernelpin supports: kernelpin.loading.kernels_internals.

`kernelized_layers(model)` answers what `kernels.get_kernelized_layers` (0.18+) answers, which layers kernelize
replaced and from which repository, with what kernelpin verified beside each: the commit and build it loaded,
and for a locked repository the kernelpin.lock, the release and the signer it pins. It reads the model's own
modules (the forward kernelize put there), so it works with kernels 0.17.2 too, which records nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from types import MethodType, ModuleType
from typing import Any

from kernelpin.errors import KernelpinError
from kernelpin.format.layout import LOCKFILE
from kernelpin.front.kernels_api import get_local_kernel, load_commit
from kernelpin.loading import kernels_internals
from kernelpin.records import record

# The replaced methods, by (class, attribute): restored by `integrated_kernels` on exit.
_Originals = dict[tuple[type, str], Callable[..., Any]]


@record
class VerifiedLayer:
    """A layer (or a function, `func` set) that kernelize replaced through kernelpin, and what kernelpin verified."""

    name: str  # the module's name in the model (`named_modules`)
    func: str | None  # the kernel function's name, for a function repository; None for a layer
    repo_id: str  # for a Local repository, its path
    asked: str  # what the repository asked for: "version 1", "revision v1.0.0", "locked", or "local PATH"
    commit: str
    variant: str  # the build loaded, every file verified
    lock: Path | None  # the kernelpin.lock that pinned it; None: resolved on the spot (get_kernel)
    version: str | None  # the release the lock records (a lock only)
    signer: str | None  # who signed the build, as the lock records it (None: unsigned, or no lock)
    repository: Any  # kernels' repository object (what kernels.get_kernelized_layers gives as `.repo`)


@record
class _Loaded:
    """What kernelpin loaded for one repository: the facts a VerifiedLayer shows beside it."""

    repository: Any
    commit: str
    variant: str
    lock: Path | None = None
    version: str | None = None
    signer: str | None = None
    asked: str | None = None  # what the repository asked for, where the lock does not say it


# Layer (and function) classes kernelpin handed to kernelize, with what was loaded for them.
_HANDED: weakref.WeakKeyDictionary[type, _Loaded] = weakref.WeakKeyDictionary()


def _built(repository: Any, module: ModuleType, **locked: Any) -> _Loaded:
    from kernelpin.loading.loader import loaded_kernels

    loaded = next(k for k in loaded_kernels() if k.module == module.__name__)
    return _Loaded(repository, loaded.commit or "", loaded.variant, **locked)


def _local_kernel(repository: Any) -> tuple[ModuleType, _Loaded]:
    module = get_local_kernel(repository._repo_path, check_arch=getattr(repository, "_check_arch", True))
    return module, dataclasses.replace(_built(repository, module), asked=f"local {repository._repo_path}")


def _hub_kernel(repository: Any) -> tuple[ModuleType, _Loaded]:
    from kernelpin.front.get_kernel import get_kernel

    module = get_kernel(
        repository._repo_id,
        revision=repository._revision,
        version=repository._version,
        trust_remote_code=repository._trust_remote_code,
        check_arch=getattr(repository, "_check_arch", True),
    )  # kernels 0.19 repositories carry it
    return module, _built(repository, module)


def _locked_kernel(repository: Any) -> tuple[ModuleType, _Loaded]:
    from kernelpin.front.lock import load
    from kernelpin.loading.runtime import find_lock, read_lock_cached

    commit = kernels_internals.commit_text(repository.kernel_locks[repository.kernel_dep].commit)
    kernels_lock = repository._lockfile
    lock = (kernels_lock.parent / LOCKFILE) if kernels_lock is not None else find_lock(Path.cwd())
    pinned = read_lock_cached(lock) if lock is not None else None
    kernel = pinned.kernel(repository._repo_id) if pinned is not None else None
    if kernel is None:  # kernels.lock alone: its commit from the Hub, verified as get_kernel verifies
        where = str(kernels_lock) if kernels_lock is not None else "kernels.lock"
        check_arch = getattr(repository, "_check_arch", True)
        module = load_commit(repository._repo_id, commit, where, None, check_arch=check_arch)
        return module, dataclasses.replace(_built(repository, module), asked="locked")
    if kernel.commit != commit:
        raise KernelpinError(
            f"{repository._repo_id}: kernels.lock pins {commit[:12]} but {lock} pins {kernel.commit[:12]}; "
            "run `kernelpin lock` to bring kernels.lock in step"
        )
    module = load(repository._repo_id, lock=lock, check_arch=getattr(repository, "_check_arch", True))
    loaded = _built(repository, module, lock=lock)
    variant = kernel.variant(loaded.variant)
    signer = variant.signature.signer if variant is not None and variant.signature is not None else None
    return module, _Loaded(
        repository,
        loaded.commit,
        loaded.variant,
        lock,
        kernel.version,
        signer.describe() if signer is not None else None,
    )


def _replacements() -> dict[tuple[type, str], Callable[..., Any]]:
    purpose = "kernelpin.integrate_kernels(), which hooks the layers and functions of `kernels`,"
    layer = kernels_internals.module("layer", purpose)
    func = kernels_internals.module("func", purpose)

    def handed(
        take: Callable[[Any, ModuleType], type], get: Callable[[Any], tuple[ModuleType, _Loaded]]
    ) -> Callable[[Any], Any]:
        def load(self: Any) -> type:
            module, loaded = get(self)
            found = take(self, module)
            _HANDED[found] = loaded  # kernelize puts its forward on the model's modules: kernelized_layers finds it
            return found

        return load

    def layer_load(get: Callable[[Any], tuple[ModuleType, _Loaded]]) -> Callable[[Any], Any]:
        return handed(layer._get_kernel_layer, get)

    def func_load(get: Callable[[Any], tuple[ModuleType, _Loaded]]) -> Callable[[Any], Any]:
        return handed(func._get_kernel_func, get)

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
        (layer.LocalLayerRepository, "load"): layer_load(_local_kernel),
        (func.LocalFuncRepository, "load"): func_load(_local_kernel),
    }


def kernels_attribute(name: str) -> Any:
    """kernels' own `name` (one of kernels.__all__), its repositories loading through kernelpin: taking one from
    kernelpin integrates them (integrate_kernels, idempotent). KernelsPackageError naming `pip install kernels`
    without it."""
    found = kernels_internals.public(name, f"kernelpin.{name} (kernels' own, loading through kernelpin)")
    integrate_kernels()
    return found


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


def kernelized_layers(model: Any) -> list[VerifiedLayer]:
    """The layers and functions of `model` that kernelize replaced with a kernel loaded through kernelpin
    (`integrate_kernels`), by their names in the model, with the repository (as `kernels.get_kernelized_layers`
    0.18+ gives it) and what kernelpin verified: commit, build, and for a locked one the lock, release and signer.
    Read from the model's modules (the forward kernelize set), so it answers with any kernels version."""
    found = []
    for name, module in model.named_modules():
        for func_name, owner in ((None, module), *getattr(module, "_kernel_funcs", {}).items()):
            forward = owner.__dict__.get("forward")
            layer_class = _owner(forward) if isinstance(forward, MethodType) else None
            if layer_class is None:
                continue
            loaded = _HANDED[layer_class]
            repository = loaded.repository
            asked = (
                "locked"
                if loaded.lock is not None
                else loaded.asked  # "locked" (a kernels.lock alone), "local PATH"
                or (
                    f"revision {repository._revision}"
                    if getattr(repository, "_revision", None) is not None
                    else f"version {repository._version}"
                )
            )
            found.append(
                VerifiedLayer(
                    name,
                    func_name,
                    # a Local repository has a path, which kernels' get_local_kernel names the kernel by
                    getattr(repository, "_repo_id", None) or str(repository._repo_path),
                    asked,
                    loaded.commit,
                    loaded.variant,
                    loaded.lock,
                    loaded.version,
                    loaded.signer,
                    repository,
                )
            )
    return found


def _owner(forward: MethodType) -> type | None:
    """The layer class whose forward kernelize bound to a module (the function's defining class)."""
    function = forward.__func__
    return next((cls for cls in list(_HANDED.keys()) if getattr(cls, "forward", None) is function), None)
