"""Import a locked build so that only bytes whose sha256 matched the lock are executed.

The normal import machinery would run whatever the variant directory holds: a planted package `_impl/`
next to the listed `_impl.py` (a package wins over a module), a `__pycache__/*.pyc` written by anyone, any
unlisted module. Here a finder placed first on `sys.meta_path` answers for every module of a loaded kernel
package: it knows only the modules the lock lists and refuses the rest. Python source is read once, its
bytes hashed and compiled from memory (no bytecode cache is read or written) and its verified lines are
what linecache (inspect, tracebacks) serves afterwards; extension modules and the
shared libraries the package loads itself (e.g. `torch.ops.load_library` in `_ops.py`) are re-hashed right
before the package's code runs. A ZIP build (kernelpin.loading.archive) is verified as one file and its
modules served from those verified bytes in memory, the variant directory's listed modules first (as kernels puts
the directory before the archive on the package's path). What this does not cover is documented in
docs/kernelpin.md (threat model).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import linecache
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from kernelpin.errors import IntegrityError, KernelpinError
from kernelpin.format.lockfile import LockedFile, LockedVariant
from kernelpin.records import record
from kernelpin.store.receipts import Receipts

_INIT = "__init__.py"


def _is_shared_library(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.endswith(".so") or ".so." in name


@record
class _Module:
    file: LockedFile
    is_package: bool
    is_extension: bool
    archived: bytes | None = None  # a ZIP build's member: its verified bytes


@record
class VerifiedKernel:
    """A kernel variant imported by kernelpin: the module's name in sys.modules, the kernel (repo id and
    commit; None for a local build), the variant and its directory."""

    module: str
    repo_id: str | None
    commit: str | None
    variant: str
    directory: Path


@record
class _Package:
    """One imported kernel variant: its directory and the modules its lock lists, by full module name."""

    name: str
    directory: Path
    what: str
    modules: dict[str, _Module]
    shared_libraries: tuple[LockedFile, ...]
    loaded: VerifiedKernel
    receipts: Receipts  # extension modules and shared libraries are large: checked against this user's receipts

    archive: Path | None = None  # a ZIP build's archive, whose members `modules` serves from memory

    def path(self, file: LockedFile) -> Path:
        return self.directory / file.path

    def location(self, module: _Module) -> Path:
        """Where a module is, as its __file__ and tracebacks name it (<archive>/<member> inside a ZIP build)."""
        if module.archived is not None:
            assert self.archive is not None
            return self.archive / module.file.path
        return self.path(module.file)


def _module_names(name: str, files: Sequence[LockedFile]) -> dict[str, _Module]:
    modules: dict[str, _Module] = {}
    extension_suffixes = sorted(importlib.machinery.EXTENSION_SUFFIXES, key=len, reverse=True)
    for file in files:
        parts = file.path.split("/")
        stem, leaf = parts[:-1], parts[-1]
        if leaf == _INIT:
            modules[".".join([name, *stem])] = _Module(file, is_package=True, is_extension=False)
            continue
        if leaf.endswith(".py"):
            module, extension = leaf[: -len(".py")], False
        else:
            suffix = next((s for s in extension_suffixes if leaf.endswith(s)), None)
            if suffix is None:
                continue
            module, extension = leaf[: -len(suffix)], True
        if module.isidentifier():
            # A listed package (x/__init__.py) wins over a listed module x.py, as in Python's own search.
            modules.setdefault(".".join([name, *stem, module]), _Module(file, False, extension))
    return modules


class _VerifiedFinder(importlib.abc.MetaPathFinder):
    """The finder of every kernel package kernelpin imported: listed modules only, verified bytes only."""

    def __init__(self) -> None:
        self.packages: dict[str, _Package] = {}

    def _package(self, fullname: str) -> _Package | None:
        return self.packages.get(fullname.partition(".")[0])

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        package = self._package(fullname)
        if package is None:
            return None
        module = package.modules.get(fullname)
        if module is None:
            # Authoritative for its packages: no other finder may supply an unlisted file from the directory.
            raise ModuleNotFoundError(
                f"{fullname}: {package.what} lists no such module, so it is not imported from {package.directory}",
                name=fullname,
            )
        location = package.location(module)
        if module.is_extension and module.archived is not None:
            raise ImportError(
                f"{fullname}: an extension module inside {package.what}'s ZIP archive cannot be "
                "loaded (nor can kernels load one); the build must place it beside the archive",
                name=fullname,
            )
        if module.is_extension:
            loader: importlib.abc.Loader = _VerifiedExtensionLoader(fullname, str(location), package, module.file)
        else:
            loader = _VerifiedSourceLoader(package, module)
        search = [str(location.parent)] if module.is_package else None
        return importlib.util.spec_from_file_location(
            fullname, location, loader=loader, submodule_search_locations=search
        )


class _VerifiedSourceLoader(importlib.abc.Loader):
    """Runs Python source compiled from the very bytes that were hashed; never touches __pycache__."""

    def __init__(self, package: _Package, module: _Module) -> None:
        self.package, self.file, self.archived = package, module.file, module.archived
        self.location = package.location(module)

    def _verified_source(self) -> bytes:
        if self.archived is not None:  # hashed with its archive
            return self.archived
        path = self.package.path(self.file)
        with open(path, "rb") as stream:
            # One byte more than pinned, so a longer file is seen without reading an unbounded one.
            source = stream.read(self.file.size + 1)
        if len(source) != self.file.size or hashlib.sha256(source).hexdigest() != self.file.sha256:
            raise IntegrityError(
                f"{self.package.what}: {self.file.path} does not match the lock; it is not imported. "
                "Run `kernelpin sync` to replace it"
            )
        return source

    def get_source(self, fullname: str) -> str:
        return self._verified_source().decode("utf-8")

    def exec_module(self, module: ModuleType) -> None:
        if module.__name__ == self.package.name:
            _verify_shared_libraries(self.package)
        source, filename = self._verified_source(), str(self.location)
        # What reads source again after the import (inspect.getsource: TorchScript, Triton's @jit, tracebacks)
        # goes through linecache, which would read the file from disk, edited or not; an entry without an mtime
        # is never re-checked against the file, so they see the verified source.
        lines = importlib.util.decode_source(source).splitlines(keepends=True)
        linecache.cache[filename] = (len(source), None, lines, filename)
        exec(compile(source, filename, "exec", dont_inherit=True), module.__dict__)  # noqa: S102  # the import: verified source


class _VerifiedExtensionLoader(importlib.machinery.ExtensionFileLoader):
    def __init__(self, fullname: str, path: str, package: _Package, file: LockedFile) -> None:
        super().__init__(fullname, path)
        self.package, self.file = package, file

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        _verify(self.package, self.file)  # right before dlopen
        return super().create_module(spec)


def _verify(package: _Package, file: LockedFile) -> None:
    try:
        package.receipts.verify_file(package.path(file), file.size, file.sha256, f"{package.what}: {file.path}")
    except FileNotFoundError:
        raise IntegrityError(f"{package.what}: {file.path} is missing; run `kernelpin sync`") from None
    except IntegrityError as error:
        raise IntegrityError(f"{error}. It is not loaded; run `kernelpin sync` to replace it") from None


def _verify_shared_libraries(package: _Package) -> None:
    """Re-hash the shared libraries the package may dlopen itself, as late as kernelpin can."""
    for file in package.shared_libraries:
        _verify(package, file)


_FINDER = _VerifiedFinder()


def loaded_as(name: str) -> VerifiedKernel | None:
    """The kernel kernelpin imports (or imported) as the module `name`; None when it imported none as `name`."""
    package = _FINDER.packages.get(name)
    return None if package is None else package.loaded


def loaded_kernels() -> list[VerifiedKernel]:
    """The kernels imported (completely) in this process, in import order."""
    return [package.loaded for name, package in _FINDER.packages.items() if name in sys.modules]


def import_verified(
    name: str,
    directory: Path,
    variant: LockedVariant,
    what: str,
    kernel: tuple[str, str | None] | None = None,
    receipts: Receipts | None = None,
) -> ModuleType:
    """Import `directory` as the package `name`, executing only files `variant` pins, each verified (without
    re-reading binaries this user's `receipts` vouch for; default: none, every file is hashed). `kernel` is
    the (repo id, commit) it is a build of, for loaded_kernels()."""
    modules = _module_names(name, variant.files)
    archive = None
    if name not in modules:  # no listed __init__.py: a ZIP build's, or none at all
        from kernelpin.loading.archive import read_members, verified_bytes, zip_member_of

        archive = zip_member_of(directory, variant, what)
    if archive is not None:
        members = read_members(verified_bytes(directory / archive.path, archive, what), f"{what}: {archive.path}")
        listed = [LockedFile(path, len(data), hashlib.sha256(data).hexdigest()) for path, data in members.items()]
        archived = {
            module_name: _Module(module.file, module.is_package, module.is_extension, members[module.file.path])
            for module_name, module in _module_names(name, listed).items()
        }
        modules = {**archived, **modules}  # the directory's listed modules first, as on kernels' package path
    if name not in modules:
        raise KernelpinError(
            f"{what}: the lock lists no {_INIT} for variant {variant.name}, so nothing verified can be imported "
            "(a lock that omits the package's own code is damaged or hostile); run `kernelpin lock` to "
            "regenerate it"
        )
    shared = tuple(f for f in variant.files if _is_shared_library(f.path))
    repo_id, commit = kernel or (None, None)
    _FINDER.packages[name] = _Package(
        name,
        directory,
        what,
        modules,
        shared,
        VerifiedKernel(name, repo_id, commit, variant.name, directory),
        receipts or Receipts(None),
        None if archive is None else directory / archive.path,
    )
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    spec = _FINDER.find_spec(name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        for loaded in [key for key in sys.modules if key == name or key.startswith(name + ".")]:
            del sys.modules[loaded]
        del _FINDER.packages[name]
        raise
    return module
