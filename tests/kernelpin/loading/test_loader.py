"""kernelpin.loading.loader and load() on a vendored kernel written to disk (no Hub): only listed, verified modules
run, and concurrent loads of one kernel see one complete module."""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import inspect
import itertools
import linecache
import os
import re
import runpy
import sys
import threading
import types
from pathlib import Path

import pytest

import kernelpin
from kernelpin.errors import IntegrityError, KernelpinError
from kernelpin.format import lockfile
from kernelpin.loading.loader import VerifiedKernel, import_verified, loaded_kernels
from kernelpin.loading.runtime import find_lock, module_name
from kernelpin.store import lockfiles
from testkit.fake_kernel import CPU_213, variant_files
from tests.kernelpin.helpers import NOBODY

REPO = "acme/loader-test"
COMMIT = "c0ffee" + "0" * 34


def locked_variant(files: dict[str, bytes]) -> lockfile.LockedVariant:
    return lockfile.LockedVariant(
        CPU_213,
        tuple(
            lockfile.LockedFile(path, len(data), hashlib.sha256(data).hexdigest())
            for path, data in sorted(files.items())
        ),
    )


def vendor(tmp_path: Path, extra: dict[str, bytes] | None = None, repo_id: str = REPO) -> tuple[Path, Path, str]:
    """A `sync --target` directory and its lock for a fake kernel: (lock, target, module name)."""
    files = variant_files("1.0.0", CPU_213, extra=extra)
    target = tmp_path / "vendor"
    directory = target / repo_id / COMMIT / "build" / CPU_213
    for path, data in files.items():
        (directory / path).parent.mkdir(parents=True, exist_ok=True)
        (directory / path).write_bytes(data)
    kernel = lockfile.LockedKernel(
        repo_id, "kernel", "^1", COMMIT, "refs/tags/v1.0.0", "1.0.0", (locked_variant(files),)
    )
    lockfiles.write(tmp_path / "kernelpin.lock", lockfile.Lock((kernel,)))
    name = module_name(repo_id, COMMIT, CPU_213)
    for loaded in [key for key in sys.modules if key == name or key.startswith(name + ".")]:
        del sys.modules[loaded]
    return tmp_path / "kernelpin.lock", target, name


@pytest.fixture
def gate(monkeypatch):
    """A module a kernel's __init__.py imports to block until the test lets it go."""
    gate = types.SimpleNamespace(entered=threading.Event(), release=threading.Event(), runs=0)
    monkeypatch.setitem(sys.modules, "kernelpin_test_gate", gate)
    yield gate
    gate.release.set()


BLOCKING_INIT = b"import kernelpin_test_gate as gate\ngate.runs += 1\ngate.entered.set()\ngate.release.wait(60)\n"


@pytest.mark.parametrize("fails", [False, True], ids=["completes", "raises"])
def test_a_second_thread_waits_for_the_first_load_and_gets_the_complete_module_or_the_error(tmp_path, gate, fails):
    # Failed before: the second load() returned sys.modules' half-executed module (no COMPLETE yet).
    init = BLOCKING_INIT + (b"raise RuntimeError('init failed')\n" if fails else b"COMPLETE = True\n")
    lock, target, name = vendor(tmp_path, {"__init__.py": init})
    outcomes: dict[str, object] = {}

    def load(who: str) -> None:
        try:
            module = kernelpin.load(REPO, lock=lock, target=target)
            outcomes[who] = getattr(module, "COMPLETE", "half-executed")  # looked at the moment load returns
        except RuntimeError as error:
            outcomes[who] = str(error)

    first = threading.Thread(target=load, args=("first",))
    first.start()
    assert gate.entered.wait(60)
    second = threading.Thread(target=load, args=("second",))
    second.start()
    second.join(0.5)  # the old code returned here; waiting longer only slows the passing case
    gate.release.set()
    first.join(60)
    second.join(60)
    expected = "init failed" if fails else True
    assert outcomes == {"first": expected, "second": expected}
    assert gate.runs == (2 if fails else 1)  # a failed import is retried by the next load, as Python's import does
    assert (name in sys.modules) is not fails


def test_lock_discovery_refuses_a_lock_another_user_planted_in_a_shared_parent(tmp_path, shared_parent):
    # Failed before: the planted lock was found and used.
    lock, _, _ = vendor(tmp_path)
    planted = shared_parent / "kernelpin.lock"
    planted.write_bytes(lock.read_bytes())
    os.chown(planted, NOBODY, NOBODY)
    with pytest.raises(KernelpinError, match=rf"{planted} belongs to another user \(uid {NOBODY}\), so it is not used"):
        find_lock(shared_parent / "app" / "main.py")
    os.chown(planted, os.geteuid(), os.getegid())
    assert find_lock(shared_parent / "app" / "main.py") == planted


def test_lock_discovery_stops_at_a_directory_another_user_owns(tmp_path, shared_parent, monkeypatch):
    lock, _, _ = vendor(tmp_path)
    monkeypatch.chdir(shared_parent / "app")  # load() also searches above the working directory
    (shared_parent / "kernelpin.lock").write_bytes(lock.read_bytes())
    (shared_parent / "app" / "kernelpin.lock").write_bytes(lock.read_bytes())
    assert find_lock(shared_parent / "app") == shared_parent / "app" / "kernelpin.lock"
    (shared_parent / "app" / "kernelpin.lock").unlink()
    os.chown(shared_parent, NOBODY, NOBODY)
    assert find_lock(shared_parent / "app") is None
    script = shared_parent / "app" / "main.py"
    script.write_text(f"import kernelpin\nkernelpin.load({REPO!r})\n")
    with pytest.raises(KernelpinError, match="the search stops at a directory owned by another user"):
        runpy.run_path(str(script))


# --- kernelpin.loading.loader, called directly --------------------------------------------------------------


_package_numbers = itertools.count()


def variant_on_disk(tmp_path: Path, files: dict[str, bytes]) -> tuple[Path, lockfile.LockedVariant, str]:
    directory = tmp_path / "variant"
    for path, data in files.items():
        (directory / path).parent.mkdir(parents=True, exist_ok=True)
        (directory / path).write_bytes(data)
    name = f"_kernelpin_loader_test_{next(_package_numbers)}"
    return directory, locked_variant(files), name


@pytest.fixture
def imported():
    """Forget the modules a test imported (as a new process would not have them)."""
    names: list[str] = []
    yield names
    for name in names:
        for loaded in [key for key in sys.modules if key == name or key.startswith(name + ".")]:
            del sys.modules[loaded]


def test_only_listed_modules_are_imported_and_a_listed_package_wins_over_a_module(tmp_path, imported):
    files = {
        "__init__.py": b"from . import helper, sub\nVALUE = helper.VALUE + sub.VALUE\n",
        "helper.py": b"VALUE = 1\n",
        "sub/__init__.py": b"VALUE = 10\n",
        "sub.py": b"raise RuntimeError('the module sub.py must lose to the package sub/')\n",
        "not-a-module.py": b"raise RuntimeError('not an identifier: never importable')\n",
        "data.txt": b"not code\n",
    }
    directory, variant, name = variant_on_disk(tmp_path, files)
    imported.append(name)
    (directory / "planted.py").write_text("VALUE = 'planted'\n")  # on disk, not in the lock
    module = import_verified(name, directory, variant, "acme/x 1.0.0")
    assert module.VALUE == 11 and module.__file__ == str(directory / "__init__.py")
    assert module.sub.__file__ == str(directory / "sub" / "__init__.py") and hasattr(module.sub, "__path__")
    assert not hasattr(module.helper, "__path__")  # a module, not a package: nothing is imported below it
    with pytest.raises(
        ModuleNotFoundError,
        match=rf"{name}.planted: acme/x 1.0.0 lists no such module, so it is not "
        rf"imported from {directory}",
    ):
        importlib.import_module(f"{name}.planted")
    # The source a debugger or inspect reads is the verified one.
    assert inspect.getsource(module.helper) == "VALUE = 1\n"


def test_source_changed_after_verification_is_not_run(tmp_path, imported):
    files = {"__init__.py": b"from . import late\n", "late.py": b"VALUE = 'verified'\n"}
    directory, variant, name = variant_on_disk(tmp_path, files)
    imported.append(name)
    for edit in (b"VALUE = 'edited!!'\n", b"VALUE = 'verified'\n# one more line\n"):  # same size, then longer
        (directory / "late.py").write_bytes(edit)
        with pytest.raises(IntegrityError, match=r"acme/x 1.0.0: late.py does not match the lock; it is not imported"):
            import_verified(name, directory, variant, "acme/x 1.0.0")
        assert not any(key == name or key.startswith(name + ".") for key in sys.modules)  # rolled back
    (directory / "late.py").write_bytes(files["late.py"])
    assert import_verified(name, directory, variant, "acme/x 1.0.0").late.VALUE == "verified"


def test_a_variant_without_a_listed_init_is_refused(tmp_path):
    directory, variant, name = variant_on_disk(tmp_path, {"_impl.py": b"VALUE = 1\n"})
    with pytest.raises(KernelpinError, match=r"acme/x 1.0.0: the lock lists no __init__.py for variant "):
        import_verified(name, directory, variant, "acme/x 1.0.0")


@pytest.mark.parametrize("library", ["_ops.so", "libfoo.so.1"])
def test_shared_libraries_are_reverified_before_the_package_runs(tmp_path, imported, library):
    files = {"__init__.py": b"RAN = True\n", library: b"\x7fELF the verified one\n"}
    directory, variant, name = variant_on_disk(tmp_path, files)
    imported.append(name)
    (directory / library).write_bytes(b"\x7fELF swapped in after sync\n")
    with pytest.raises(IntegrityError, match=rf"{library}: size .* It is not loaded; run `kernelpin sync`"):
        import_verified(name, directory, variant, "acme/x 1.0.0")
    (directory / library).unlink()
    with pytest.raises(IntegrityError, match=rf"{library} is missing; run `kernelpin sync`"):
        import_verified(name, directory, variant, "acme/x 1.0.0")
    (directory / library).write_bytes(files[library])
    assert import_verified(name, directory, variant, "acme/x 1.0.0").RAN


def test_an_extension_module_is_verified_right_before_dlopen(tmp_path, imported):
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    origin = importlib.util.find_spec("_json").origin
    if not origin.endswith(suffix):
        pytest.skip("_json is built into this Python; no extension module file to copy")
    source = Path(origin)
    files = {"__init__.py": b"from . import _json\n", f"_json{suffix}": source.read_bytes()}
    directory, variant, name = variant_on_disk(tmp_path, files)
    imported.append(name)
    verified = files[f"_json{suffix}"]
    (directory / f"_json{suffix}").write_bytes(verified[:-1] + bytes([verified[-1] ^ 1]))
    with pytest.raises(IntegrityError, match=rf"_json{re.escape(suffix)}: sha256 .* It is not loaded"):
        import_verified(name, directory, variant, "acme/x 1.0.0")
    (directory / f"_json{suffix}").write_bytes(verified)
    module = import_verified(name, directory, variant, "acme/x 1.0.0")
    assert module._json.__file__ == str(directory / f"_json{suffix}") and module._json.scanstring


def test_source_read_again_after_the_import_is_the_verified_source(tmp_path, imported):
    # Failed before: inspect (what TorchScript and Triton's @jit compile) read the edited file from disk.
    files = {"__init__.py": b"def kernel(x):\n    return x + 1\n"}
    directory, variant, name = variant_on_disk(tmp_path, files)
    imported.append(name)
    module = import_verified(name, directory, variant, "acme/x 1.0.0")
    (directory / "__init__.py").write_bytes(b"def kernel(x):\n    return __import__('os').system('evil')\n")
    linecache.checkcache()  # what traceback and inspect call before reading
    assert inspect.getsource(module.kernel) == "def kernel(x):\n    return x + 1\n"
    assert module.kernel.__code__.co_filename == str(directory / "__init__.py")


def test_a_failed_import_forgets_every_module_it_imported(tmp_path, imported):
    files = {
        "__init__.py": b"from . import helper\nraise RuntimeError('init failed after importing helper')\n",
        "helper.py": b"VALUE = 1\n",
    }
    directory, variant, name = variant_on_disk(tmp_path, files)
    imported.append(name)
    with pytest.raises(RuntimeError, match="init failed"):
        import_verified(name, directory, variant, "acme/x 1.0.0")
    assert [key for key in sys.modules if key == name or key.startswith(name + ".")] == []


def test_only_shared_libraries_are_rehashed_before_the_package_runs(tmp_path, imported):
    # A directory named like a library version (x.so.d/) holds data: changing it does not stop the import.
    files = {"__init__.py": b"RAN = True\n", "x.so.d/notes.txt": b"notes\n", "lib/libx.so.2": b"\x7fELF\n"}
    directory, variant, name = variant_on_disk(tmp_path, files)
    imported.append(name)
    (directory / "x.so.d" / "notes.txt").write_bytes(b"edited\n")
    assert import_verified(name, directory, variant, "acme/x 1.0.0").RAN
    del sys.modules[name]
    (directory / "lib" / "libx.so.2").write_bytes(b"\x7fELF swapped\n")
    with pytest.raises(IntegrityError, match=r"lib/libx.so.2: size"):
        import_verified(name, directory, variant, "acme/x 1.0.0")


EXTENSION = """
#include <Python.h>
static struct PyModuleDef definition = {PyModuleDef_HEAD_INIT, "_answer", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__answer(void) {
    PyObject *module = PyModule_Create(&definition);
    if (module != NULL) PyModule_AddIntConstant(module, "ANSWER", 42);
    return module;
}
"""


@pytest.fixture(scope="module")
def extension(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A real extension module `_answer` (ANSWER = 42), compiled here: this Python may have _json built in."""
    import shutil
    import subprocess
    import sysconfig

    compiler = shutil.which("gcc") or pytest.skip("no gcc")
    root = tmp_path_factory.mktemp("extension")
    (root / "answer.c").write_text(EXTENSION)
    subprocess.run(
        [
            compiler,
            "-shared",
            "-fPIC",
            f"-I{sysconfig.get_paths()['include']}",
            str(root / "answer.c"),
            "-o",
            str(root / "_answer.so"),
        ],
        check=True,
    )
    return (root / "_answer.so").read_bytes()


@pytest.mark.parametrize("suffix", importlib.machinery.EXTENSION_SUFFIXES)
def test_a_compiled_extension_module_is_verified_and_loaded_from_its_listed_file(tmp_path, imported, extension, suffix):
    files = {
        "__init__.py": b"from .pkg import _answer\nANSWER = _answer.ANSWER\n",
        "pkg/__init__.py": b"",
        f"pkg/_answer{suffix}": extension,
    }
    directory, variant, name = variant_on_disk(tmp_path, files)
    imported.append(name)
    library = directory / "pkg" / f"_answer{suffix}"
    library.write_bytes(extension[:-1] + bytes([extension[-1] ^ 1]))
    with pytest.raises(
        IntegrityError, match=re.escape(f"acme/x 1.0.0: pkg/_answer{suffix}: sha256 ") + ".* It is not loaded"
    ):
        import_verified(name, directory, variant, "acme/x 1.0.0")
    library.write_bytes(extension)
    module = import_verified(name, directory, variant, "acme/x 1.0.0")
    answer = sys.modules[f"{name}.pkg._answer"]
    assert module.ANSWER == 42 and answer.__name__ == f"{name}.pkg._answer"
    assert answer.__file__ == answer.__spec__.origin == str(library)
    assert module.pkg.__path__ == [str(directory / "pkg")] and module.pkg.__spec__.submodule_search_locations == [
        str(directory / "pkg")
    ]


def test_an_extension_module_imported_after_the_package_ran_is_verified_right_before_its_dlopen(
    tmp_path, imported, extension
):
    # The package's shared libraries were re-hashed when it ran; one replaced after that, before a later
    # import of it (lazily, by the kernel's code), is caught by the extension loader itself.
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    files = {"__init__.py": b"", f"_answer{suffix}": extension}
    directory, variant, name = variant_on_disk(tmp_path, files)
    imported.append(name)
    import_verified(name, directory, variant, "acme/x 1.0.0")
    (directory / f"_answer{suffix}").write_bytes(extension[:-1] + bytes([extension[-1] ^ 1]))
    with pytest.raises(
        IntegrityError, match=re.escape(f"acme/x 1.0.0: _answer{suffix}: sha256 ") + ".* It is not loaded"
    ):
        importlib.import_module(f"{name}._answer")
    assert f"{name}._answer" not in sys.modules


def test_kernel_source_is_compiled_without_kernelpins_own_future_imports(tmp_path, imported):
    # kernelpin's modules use `from __future__ import annotations`; a kernel's code must run as Python would
    # run it (its annotations evaluated), not with the flags of the code that compiled it.
    files = {"__init__.py": b"def f(x: int) -> None:\n    pass\nANNOTATION = f.__annotations__['x']\n"}
    directory, variant, name = variant_on_disk(tmp_path, files)
    imported.append(name)
    assert import_verified(name, directory, variant, "acme/x 1.0.0").ANNOTATION is int


def test_loaded_kernels_lists_each_completed_import_with_its_kernel(tmp_path, imported):
    good = {"__init__.py": b"RAN = True\n"}
    directory, variant, name = variant_on_disk(tmp_path / "a", good)
    local_directory, local_variant, local_name = variant_on_disk(tmp_path / "b", good)
    bad_directory, bad_variant, bad_name = variant_on_disk(tmp_path / "c", {"__init__.py": b"raise RuntimeError\n"})
    imported.extend([name, local_name, bad_name])
    import_verified(name, directory, variant, "acme/x 1.0.0", kernel=(REPO, COMMIT))
    import_verified(local_name, local_directory, local_variant, "a local build")
    with pytest.raises(RuntimeError):
        import_verified(bad_name, bad_directory, bad_variant, "acme/y 1.0.0", kernel=("acme/y", COMMIT))
    mine = [kernel for kernel in loaded_kernels() if kernel.module in (name, local_name, bad_name)]
    assert mine == [
        VerifiedKernel(name, REPO, COMMIT, CPU_213, directory),
        VerifiedKernel(local_name, None, None, CPU_213, local_directory),
    ]


def test_an_unlisted_module_is_not_found_under_its_own_name(tmp_path, imported):
    directory, variant, name = variant_on_disk(tmp_path, {"__init__.py": b""})
    imported.append(name)
    import_verified(name, directory, variant, "acme/x 1.0.0")
    with pytest.raises(ModuleNotFoundError) as missing:
        importlib.import_module(f"{name}.gone.deeper")
    assert missing.value.name == f"{name}.gone"
    assert (
        str(missing.value) == f"{name}.gone: acme/x 1.0.0 lists no such module, so it is not imported from {directory}"
    )


def test_the_finder_answers_only_for_kernel_packages_it_imported():
    from kernelpin.loading.loader import _VerifiedFinder

    assert _VerifiedFinder().find_spec("json") is None and _VerifiedFinder().find_spec("json.decoder") is None


def test_a_source_that_does_not_match_says_to_sync(tmp_path, imported):
    directory, variant, name = variant_on_disk(tmp_path, {"__init__.py": b"X = 1\n"})
    (directory / "__init__.py").write_bytes(b"X = 2\n")
    with pytest.raises(
        IntegrityError,
        match="^"
        + re.escape(
            "acme/x 1.0.0: __init__.py does not match the lock; it is not imported. Run `kernelpin sync` to replace it"
        )
        + "$",
    ):
        import_verified(name, directory, variant, "acme/x 1.0.0")


def test_a_name_with_so_in_a_directory_is_no_shared_library():
    from kernelpin.loading.loader import _is_shared_library

    assert _is_shared_library("lib/libx.so.2") and _is_shared_library("_ops.so") and _is_shared_library("a/b/c.so")
    assert not _is_shared_library("data/x.so.d/notes.txt") and not _is_shared_library("x.so.d/notes.txt")
    assert not _is_shared_library("lib.so/readme")


def test_the_finder_comes_first_and_linecache_holds_the_verified_lines_without_an_mtime(tmp_path, imported):
    from kernelpin.loading.loader import _FINDER

    source = b"A = 1\n\ndef f():\n    return A\n"
    directory, variant, name = variant_on_disk(tmp_path, {"__init__.py": source})
    imported.append(name)
    sys.meta_path.remove(_FINDER)
    sys.meta_path.insert(0, importlib.machinery.PathFinder)  # another finder first: kernelpin's goes before it
    try:
        import_verified(name, directory, variant, "acme/x 1.0.0")
        assert sys.meta_path[0] is _FINDER and sys.meta_path.count(_FINDER) == 1
    finally:
        sys.meta_path.remove(importlib.machinery.PathFinder)
    filename = str(directory / "__init__.py")
    assert linecache.cache[filename] == (len(source), None, source.decode().splitlines(keepends=True), filename)


def test_a_lock_without_the_package_init_is_refused_with_the_fix(tmp_path):
    directory, variant, name = variant_on_disk(tmp_path, {"sub/__init__.py": b""})
    with pytest.raises(
        KernelpinError,
        match="^"
        + re.escape(
            f"acme/x 1.0.0: the lock lists no __init__.py for variant {CPU_213}, so nothing verified can be imported "
            "(a lock that omits the package's own code is damaged or hostile); run `kernelpin lock` to regenerate "
            "it"
        )
        + "$",
    ):
        import_verified(name, directory, variant, "acme/x 1.0.0")
