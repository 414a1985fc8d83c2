"""kernelpin.loader and load() on a vendored kernel written to disk (no Hub): only listed, verified modules
run, and concurrent loads of one kernel see one complete module."""

from __future__ import annotations

import hashlib
import sys
import threading
import types
from pathlib import Path

import pytest

import kernelpin
from kernelpin import lockfile
from kernelpin.errors import IntegrityError
from kernelpin.runtime import module_name
from testkit.fake_kernel import CPU_213, variant_files

REPO = "acme/loader-test"
COMMIT = "c0ffee" + "0" * 34


def locked_variant(files: dict[str, bytes]) -> lockfile.LockedVariant:
    return lockfile.LockedVariant(CPU_213, tuple(
        lockfile.LockedFile(path, len(data), hashlib.sha256(data).hexdigest()) for path, data in sorted(files.items())))


def vendor(tmp_path: Path, extra: dict[str, bytes] | None = None, repo_id: str = REPO) -> tuple[Path, Path, str]:
    """A `sync --target` directory and its lock for a fake kernel: (lock, target, module name)."""
    files = variant_files("1.0.0", CPU_213, extra=extra)
    target = tmp_path / "vendor"
    directory = target / repo_id / COMMIT / "build" / CPU_213
    for path, data in files.items():
        (directory / path).parent.mkdir(parents=True, exist_ok=True)
        (directory / path).write_bytes(data)
    kernel = lockfile.LockedKernel(repo_id, "kernel", "^1", COMMIT, "refs/tags/v1.0.0", "1.0.0",
                                   (locked_variant(files),))
    lockfile.write(tmp_path / "kernelpin.lock", lockfile.Lock((kernel,)))
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


BLOCKING_INIT = (b"import kernelpin_test_gate as gate\n"
                 b"gate.runs += 1\n"
                 b"gate.entered.set()\n"
                 b"gate.release.wait(60)\n")


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
