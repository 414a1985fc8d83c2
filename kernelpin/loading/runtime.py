"""What every load reads on this machine: the project's kernelpin.lock (found as git finds its repository) and the
publisher policy beside it, this process's environment, and the module name of a build."""

from __future__ import annotations

import functools
import hashlib
import os
import re
import sys
import tomllib
from pathlib import Path

from kernelpin import environment
from kernelpin.errors import KernelpinError
from kernelpin.files.integrity import find_owned_upward
from kernelpin.format import lockfile
from kernelpin.format.layout import LOCKFILE
from kernelpin.format.nesting import within_nesting
from kernelpin.format.variant import Environment
from kernelpin.trust.policy import Policy, parse_policy

__untrusted_input__ = ("policy_beside",)  # parsers of input kernelpin does not control (kernelpin.errors)


def find_lock(start: Path) -> Path | None:
    """The nearest kernelpin.lock at or above `start`, trusting only what this user or root owns (as git's
    safe.directory check does): the search stops at a directory another user owns, and a lock another user
    owns is refused, since in a shared parent (/tmp, a group directory) anyone can plant one."""
    start = start.resolve()
    found, _ = find_owned_upward(
        start if start.is_dir() else start.parent,
        LOCKFILE,
        "Pass load(..., lock='path/to/kernelpin.lock') to name your project's lock",
    )
    return found


def caller_file(depth: int) -> Path | None:
    caller = sys._getframe(depth).f_globals.get("__file__")
    return Path(caller) if caller else None


@functools.cache
def _read_lock(path: Path, mtime_ns: int, size: int) -> lockfile.LockEntries | None:
    from kernelpin.store import lockfiles  # a lock's loads only: get_kernel reads none

    return lockfiles.read_entries(path)


def read_lock_cached(path: Path) -> lockfile.LockEntries | None:
    """The lock, read once per version of the file (load() runs once per kernel); each entry parsed when asked for."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return _read_lock(path.resolve(), stat.st_mtime_ns, stat.st_size)


@functools.cache
def _read_policy(path: Path, mtime_ns: int, size: int, inode: int) -> Policy:
    try:
        return parse_policy(within_nesting(tomllib.loads(path.read_text(encoding="utf-8"))))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as error:
        raise KernelpinError(f"{path}: not valid TOML ({error}); fix it (it holds [tool.kernelpin.trust])") from None


def policy_beside(lock_path: Path) -> Policy:
    """The publisher policy of the pyproject.toml beside the lock (the defaults without one), parsed once per
    version of the file."""
    path = lock_path.parent / "pyproject.toml"
    try:
        stat = path.stat()
    except FileNotFoundError:
        return Policy()
    # Keyed by the path as given and the file's identity: resolving it costs more than the check (load's hot path).
    return _read_policy(path, stat.st_mtime_ns, stat.st_size, stat.st_ino)


@functools.cache
def _environment() -> Environment:
    return environment.machine_environment()


def environment_for(backend: str | None) -> Environment:
    """This process's environment (detected once), with the backend asked for (`cpu` or the machine's own)."""
    return _environment() if backend is None else environment.with_backend(_environment(), backend)


def module_name(repo_id: str, commit: str, variant: str) -> str:
    """Unique per repository, commit and variant, so two versions of one kernel load side by side: a readable
    part (which two kernels can share: acme/a-b and acme/a_b at commits of one 12-hex prefix) and a digest of
    all three, whole, that they cannot."""
    identity = hashlib.sha256("\0".join((repo_id, commit, variant)).encode()).hexdigest()[:32]
    return "_kernelpin_" + re.sub(r"\W", "_", f"{repo_id}_{commit[:12]}_{variant}") + f"_{identity}"


def lock_path(lock: str | os.PathLike[str] | None, caller: Path | None) -> Path:
    """The lock `load` follows: `lock` (a file or its directory), else the nearest above `caller`, then above
    the working directory."""
    if lock is not None:
        given = Path(lock)
        return given / LOCKFILE if given.is_dir() else given
    lock_path = (find_lock(caller) if caller else None) or find_lock(Path.cwd())
    if lock_path is None:
        raise KernelpinError(
            f"no {LOCKFILE} found above {caller or Path.cwd()} (the search stops at a directory owned by "
            "another user, as git's does); run `kernelpin lock` in your project "
            "or pass load(..., lock='path/to/kernelpin.lock')"
        )
    return lock_path
