"""A variant's load-time requirements on the Python environment, checked before it is downloaded or imported:
its `python-depends` (names from the kernels ecosystem's table, each naming a pip package and the module it
installs) and its `kernels-minver` (the oldest `kernels` it works with). A missing package is an error with
the pip command that fixes it, as `kernels` says it, instead of an ImportError at first use.

python_depends.json is the table `kernels` 0.17.2 ships (kernels/python_depends.json); a test checks it equals
the installed `kernels`' copy, so kernelpin needs no `kernels` installed to check.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kernelpin.errors import KernelpinError
from kernelpin.format.layout import METADATA
from kernelpin.format.lockfile import LockedVariant
from kernelpin.format.metadata import KERNELS_MINVER_KEY, MetadataError, parse_metadata
from kernelpin.loading.provenance import warn_if_dirty
from kernelpin.records import record

PYTHON_DEPENDS_KEY = "python-depends"
_MAX_DEPENDS = 64  # real variants name a handful


class DependencyError(KernelpinError):
    """The Python environment lacks what a kernel variant declares it needs; the message has the fix."""


@record
class PythonPackage:
    pip: str  # what `pip install` takes
    module: str | None  # what it installs for `import`; None for packages without Python code (oneAPI)


@functools.cache
def dependency_table() -> dict[str, Any]:
    table: dict[str, Any] = json.loads(Path(__file__).with_name("python_depends.json").read_text())
    return table


def packages(dependency: str, backend: str, table: Mapping[str, Any]) -> tuple[PythonPackage, ...] | None:
    """The pip packages a `python-depends` name stands for (general names first, then the backend's), or None
    for a name the table does not know."""
    info = table.get("general", {}).get(dependency) or table.get("backends", {}).get(backend, {}).get(dependency)
    if info is None:
        return None
    return tuple(PythonPackage(item["pkg"], item.get("import")) for item in info.get("python", ()))


def declared(document: Mapping[str, Any], where: str) -> tuple[str, ...]:
    """The `python-depends` names of a parsed metadata.json, checked for shape (it comes from the publisher)."""
    names = document.get(PYTHON_DEPENDS_KEY) or []
    if (
        not isinstance(names, list)
        or len(names) > _MAX_DEPENDS
        or not all(isinstance(name, str) and 0 < len(name) <= 100 for name in names)
    ):
        raise MetadataError(
            f"{where}: {PYTHON_DEPENDS_KEY} must be a list of at most {_MAX_DEPENDS} dependency "
            'names such as ["einops"]'
        )
    return tuple(names)


def missing_packages(
    names: tuple[str, ...], backend: str, what: str, table: Mapping[str, Any] | None = None
) -> list[PythonPackage]:
    """The packages of `names` whose module cannot be imported here (found without importing it)."""
    if not names:  # most builds declare none: the table is not read
        return []
    table = dependency_table() if table is None else table
    missing = []
    for name in names:
        found = packages(name, backend, table)
        if found is None:
            raise DependencyError(
                f"{what}: python-depends names {name[:100]!r}, which is no dependency the kernels ecosystem knows "
                f"for the {backend} backend (known: {', '.join(sorted(_known(table, backend)))}); the build is "
                "broken: ask its publisher, or pick another version"
            )
        missing += [
            package
            for package in found
            if package.module is not None and importlib.util.find_spec(package.module) is None
        ]
    return missing


def _known(table: Mapping[str, Any], backend: str) -> set[str]:
    return set(table.get("general", {})) | set(table.get("backends", {}).get(backend, {}))


def installed_kernels_version() -> str | None:
    """The installed `kernels` distribution's version, read without importing it; None when not installed."""
    import importlib.metadata  # only where a build names a kernels minimum: ~25 modules (email, csv, zipfile ...)

    try:
        return importlib.metadata.version("kernels")
    except importlib.metadata.PackageNotFoundError:
        return None


def kernels_too_old(minver: str, installed: str | None) -> bool:
    """Whether an installed `kernels` is older than `minver`, release numbers only (0.17.0.dev0 counts as
    0.17.0, as kernels compares); a version that cannot be read never blocks a load (as in kernels)."""
    from packaging.version import InvalidVersion, Version

    if installed is None:
        return False
    try:
        return Version(installed).release < Version(minver).release
    except InvalidVersion:
        return False


def check(document: Mapping[str, Any], backend: str, what: str) -> None:
    """Refuse a variant whose `python-depends` are not importable here, or that needs a newer `kernels` than
    the one installed, with the pip command that fixes it. `what` names the kernel and variant. Every loader calls
    this before the kernel runs, so it also warns of a build made from uncommitted changes (loading.provenance)."""
    warn_if_dirty(document, what)
    missing = missing_packages(declared(document, what), backend, what)
    if missing:
        pips = " ".join(dict.fromkeys(package.pip for package in missing))
        raise DependencyError(
            f"{what} requires the Python package(s) {pips.replace(' ', ', ')}, which are not "
            f"installed; install them with: pip install {pips}"
        )
    minver = document.get(KERNELS_MINVER_KEY)
    if not isinstance(minver, str):  # nothing to compare: the installed version is not looked up (a scan of sys.path)
        return
    installed = installed_kernels_version()
    if kernels_too_old(minver, installed):
        raise DependencyError(
            f"{what} requires kernels>={minver}, but kernels {installed} is installed; "
            f"upgrade it with: pip install --upgrade 'kernels>={minver}'"
        )


def check_installed(directory: Path, variant: LockedVariant, backend: str, what: str) -> None:
    """`check` for an installed variant, reading its metadata.json from the verified store (the caller has
    verified the variant's files); a variant without metadata.json declares nothing."""
    if variant.file(METADATA) is not None:
        check(parse_metadata((directory / METADATA).read_bytes(), f"{what}: {METADATA}").document, backend, what)
