"""Where the internals of HF `kernels` that kernelpin reaches live, for each `kernels` version it supports.

kernelpin uses kernels' public API (`kernels.__all__`) wherever it serves. Two things only its internals offer:
`use_kernel_deps` (the context variable in which a loading kernel's `kernels.get_kernel_dep` finds its
kernel-depends: kernelpin loads such kernels itself) and the modules of the layer and function repositories
(`integrate_kernels` replaces their `load`, and takes the layer from a module with kernels' own
`_get_kernel_layer` / `_get_kernel_func`). kernelpin's tests judge it with a few more (kernels' variant parser and
selector, its backends, its arch check), listed here too, so that every reach into kernels is in this table.

kernels 0.19 moved its internals under `kernels._internals`; the next move breaks this file and
tests/kernelpin/loading/test_kernels_internals.py, loudly: an unsupported or unknown layout raises KernelsPackageError
naming the installed version, never "not installed". Versions checked: OLDEST (CI's oldest environment,
tools/ci/lowest_deps.py) and NEWEST (requirements/dev.txt).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from types import ModuleType
from typing import Any

from kernelpin.errors import KernelpinError
from kernelpin.loading.python_depends import installed_kernels_version

OLDEST, NEWEST = "0.17.2", "0.19.1"

# Each layout: the first `kernels` release with it, and the module of each internal kernelpin (or its tests) uses.
_BEFORE_0_19 = {
    "deps": "kernels.deps",
    "layer": "kernels.layer.layer",
    "func": "kernels.layer.func",
    "variants": "kernels.variants",
    "backends": "kernels.backends",
    "archs": "kernels.archs",
    "versions": "kernels._versions",
    "cli": "kernels.cli",
    "verify": "kernels.verify",
    "digest": "kernels.digest",
}
LAYOUTS: tuple[tuple[tuple[int, ...], Mapping[str, str]], ...] = (
    ((0, 17), _BEFORE_0_19),
    ((0, 19), {name: module.replace("kernels.", "kernels._internals.", 1) for name, module in _BEFORE_0_19.items()}),
)


class KernelsPackageError(KernelpinError):
    """The `kernels` package is missing, too old, or keeps an internal where kernelpin does not know it."""


def _release(version: str) -> tuple[int, ...]:
    match = re.match(r"\d+(?:\.\d+)*", version)
    return tuple(int(part) for part in match[0].split(".")) if match else ()


def installed_version(purpose: str) -> str:
    """The installed kernels' version; KernelsPackageError (saying what needs it) when none is or it is too old."""
    version = installed_kernels_version()
    if version is None:
        raise KernelsPackageError(
            f"{purpose} needs the `kernels` package, which is not installed: pip install 'kernels>={OLDEST}'"
        )
    if _release(version) < _release(OLDEST):
        raise KernelsPackageError(
            f"{purpose} needs kernels {OLDEST} or later, but kernels {version} is installed: "
            f"pip install --upgrade 'kernels>={OLDEST}'"
        )
    return version


def module(internal: str, purpose: str) -> ModuleType:
    """kernels' module of `internal` (a key of LAYOUTS' tables) for the installed version."""
    version = installed_version(purpose)
    layout = next(modules for first, modules in reversed(LAYOUTS) if _release(version)[: len(first)] >= first)
    try:
        return importlib.import_module(layout[internal])
    except ImportError as error:
        raise KernelsPackageError(
            f"{purpose} uses {layout[internal]} of kernels {version}, which cannot be imported ({error}); kernelpin "
            f"knows kernels {OLDEST} to {NEWEST}: install one of those (pip install 'kernels=={NEWEST}') or a "
            "kernelpin that knows this kernels"
        ) from None


def attribute(internal: str, name: str, purpose: str) -> Any:
    """`name` of kernels' module of `internal`; KernelsPackageError naming the version when it has none."""
    found = module(internal, purpose)
    try:
        return getattr(found, name)
    except AttributeError:
        raise KernelsPackageError(
            f"{purpose} uses {found.__name__}.{name}, which kernels {installed_version(purpose)} does not have; "
            f"kernelpin knows kernels {OLDEST} to {NEWEST}"
        ) from None


def public(name: str, purpose: str) -> Any:
    """`kernels.<name>` (its public API, kernels.__all__); KernelsPackageError naming `pip install kernels` when it
    is not installed, or naming the version when it has no such name."""
    version = installed_version(purpose)
    try:
        return getattr(importlib.import_module("kernels"), name)
    except AttributeError:
        raise KernelsPackageError(
            f"{purpose} uses kernels.{name}, which kernels {version} does not have: pip install --upgrade kernels"
        ) from None


@contextmanager
def kernel_deps(dependencies: Mapping[str, ModuleType], purpose: str) -> Iterator[None]:
    """kernels' `use_kernel_deps(dependencies)`: `kernels.get_kernel_dep(repo)` finds them while it is open."""
    use_kernel_deps = attribute("deps", "use_kernel_deps", purpose)
    context: AbstractContextManager[Any] = use_kernel_deps(dict(dependencies))
    with context:
        yield


def commit_text(commit: object) -> str:
    """A commit as kernels gives it (a str until 0.17, a `kernels._rust.Oid` since 0.18, which equals no str and
    cannot be sliced), as kernelpin's hex string."""
    return str(commit)
