"""Issue 48, finding 8: two kernels never share a module. acme/a-b and acme/a_b locked at commits with the same
12-hex prefix mapped to one module name, and load("acme/a_b") returned acme/a-b's module (d72b531: import_pinned
reused sys.modules[name] without checking that it is the kernel asked for). Names are now collision-proof (a
digest of repository, whole commit and variant), and a module found under the name is checked before reuse."""

from __future__ import annotations

import hashlib
import sys
import types
from pathlib import Path

import pytest

import kernelpin
from kernelpin.errors import KernelpinError
from kernelpin.format import lockfile
from kernelpin.loading.importing import Verified, import_pinned
from kernelpin.loading.runtime import module_name
from kernelpin.store import lockfiles
from testkit.fake_kernel import CPU_213, variant_files

PREFIX = "0123456789ab"


def locked_kernel(target: Path, repo_id: str, commit: str, version: str) -> lockfile.LockedKernel:
    files = variant_files(version, CPU_213)
    directory = target / repo_id / commit / "build" / CPU_213
    for path, data in files.items():
        (directory / path).parent.mkdir(parents=True, exist_ok=True)
        (directory / path).write_bytes(data)
    listed = tuple(
        lockfile.LockedFile(path, len(data), hashlib.sha256(data).hexdigest()) for path, data in sorted(files.items())
    )
    variant = lockfile.LockedVariant(CPU_213, listed)
    return lockfile.LockedKernel(repo_id, "kernel", "^1", commit, None, version, (variant,))


def forget(*names: str) -> None:
    for loaded in [key for key in sys.modules if any(key == n or key.startswith(n + ".") for n in names)]:
        del sys.modules[loaded]


def test_names_differ_where_the_readable_part_meets() -> None:
    first, second = PREFIX + "0" * 28, PREFIX + "1" * 28
    assert module_name("acme/a-b", first, CPU_213) != module_name("acme/a_b", second, CPU_213)
    assert module_name("acme/a-b", first, CPU_213) != module_name("acme/a-b", second, CPU_213)
    assert module_name("acme/a.b", first, "x-y") != module_name("acme/a_b", first, "x_y")
    assert module_name("acme/a-b", first, CPU_213) == module_name("acme/a-b", first, CPU_213)
    assert module_name("acme/a-b", first, CPU_213).isidentifier()


def test_two_kernels_whose_names_meet_load_as_themselves(tmp_path: Path) -> None:
    target = tmp_path / "vendor"
    dashed = locked_kernel(target, "acme/a-b", PREFIX + "0" * 28, "1.0.0")
    underscored = locked_kernel(target, "acme/a_b", PREFIX + "1" * 28, "2.0.0")
    lockfiles.write(tmp_path / "kernelpin.lock", lockfile.Lock((dashed, underscored)))
    names = [module_name(k.repo_id, k.commit, CPU_213) for k in (dashed, underscored)]
    forget(*names)
    try:
        lock = tmp_path / "kernelpin.lock"
        assert kernelpin.load("acme/a-b", lock=lock, target=target).VERSION == "1.0.0"
        assert kernelpin.load("acme/a_b", lock=lock, target=target).VERSION == "2.0.0"
    finally:
        forget(*names)


def test_a_module_under_the_name_that_is_not_the_kernel_asked_for_is_refused(tmp_path: Path) -> None:
    kernel = locked_kernel(tmp_path, "acme/planted", "f" * 40, "1.0.0")
    name = module_name(kernel.repo_id, kernel.commit, CPU_213)
    directory = tmp_path / kernel.repo_id / kernel.commit / "build" / CPU_213

    def verify() -> Verified:
        return Verified(directory, kernel.variants[0])

    sys.modules[name] = types.ModuleType(name)  # planted: not imported by kernelpin
    try:
        with pytest.raises(KernelpinError, match=r"^acme/planted: the module name .* is taken in this process by "):
            import_pinned(name, "acme/planted", (kernel.repo_id, kernel.commit), verify, python_backend=None)
    finally:
        forget(name)
    module, imported = import_pinned(name, "acme/planted", (kernel.repo_id, kernel.commit), verify, python_backend=None)
    try:
        assert imported and module.VERSION == "1.0.0"
        with pytest.raises(KernelpinError, match=r"is taken in this process by acme/planted at ffffffffffff"):
            import_pinned(name, "acme/other", ("acme/other", "e" * 40), verify, python_backend=None)
        assert import_pinned(name, "acme/planted", (kernel.repo_id, kernel.commit), verify, python_backend=None) == (
            module,
            False,
        )
    finally:
        forget(name)
