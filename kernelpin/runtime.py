"""Runtime: import the locked, verified build of a kernel that fits this process's torch."""

from __future__ import annotations

import functools
import os
import re
import sys
from pathlib import Path
from types import ModuleType

from kernelpin import environment
from kernelpin import lockfile
from kernelpin.errors import KernelpinError
from kernelpin.layout import LOCKFILE
from kernelpin.loader import import_verified
from kernelpin.source import HubSettings, HubSource
from kernelpin.store import Store
from kernelpin.sync import choose_variant
from kernelpin.variant import Environment


def find_lock(start: Path) -> Path | None:
    start = start.resolve()
    for directory in (start if start.is_dir() else start.parent, *start.parents):
        if (directory / LOCKFILE).is_file():
            return directory / LOCKFILE
    return None


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
def _environment() -> Environment:
    return environment.detect()


def module_name(repo_id: str, commit: str, variant: str) -> str:
    """Unique per repository, commit and variant, so two versions of one kernel load side by side."""
    return "_kernelpin_" + re.sub(r"\W", "_", f"{repo_id}_{commit[:12]}_{variant}")


def load(repo_id: str, *, lock: str | os.PathLike | None = None, target: str | os.PathLike | None = None) -> ModuleType:
    """Import the kernel `repo_id` as the project's kernelpin.lock pins it.

    The lock is `lock` (a file or its directory) or the nearest kernelpin.lock above the calling module
    (then above the working directory). Files come from `target` / $KERNELPIN_TARGET (a `sync --target`
    directory) or the Hub cache, downloading missing ones unless HF_HUB_OFFLINE=1. Every file is
    verified against the lock before import; a modified file raises IntegrityError and is never imported.
    Only modules the lock lists are importable, compiled from the bytes that were hashed (kernelpin.loader).
    """
    if lock is not None:
        lock_path = Path(lock)
        lock_path = lock_path / LOCKFILE if lock_path.is_dir() else lock_path
    else:
        caller = _caller_file(2)
        lock_path = (find_lock(caller) if caller else None) or find_lock(Path.cwd())
        if lock_path is None:
            raise KernelpinError(
                f"no {LOCKFILE} found above {caller or Path.cwd()}; run `kernelpin lock` in your project "
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
    variant = choose_variant(kernel, _environment())
    name = module_name(kernel.repo_id, kernel.commit, variant)
    if name in sys.modules:
        return sys.modules[name]
    target = target or os.environ.get("KERNELPIN_TARGET") or None
    # Verifies every file (downloading missing ones); needs only read access when all are present.
    directory = Store(HubSource(HubSettings.from_env()), Path(target) if target else None).ensure_variant(
        kernel, variant).directory
    return import_verified(name, directory, kernel.variant(variant), f"{kernel.label} ({variant})")
