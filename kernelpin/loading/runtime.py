"""Runtime: import the locked, verified build of a kernel that fits this process's torch."""

from __future__ import annotations

import functools
import os
import re
import sys
import tomllib
from pathlib import Path
from types import ModuleType

from kernelpin import environment
from kernelpin.errors import KernelpinError
from kernelpin.files.integrity import find_owned_upward
from kernelpin.format import lockfile
from kernelpin.format.layout import LOCKFILE
from kernelpin.format.lockfile import choose_build, choose_variant
from kernelpin.format.variant import Environment
from kernelpin.hub.source import HubSettings, HubSource
from kernelpin.loading import local_override
from kernelpin.loading.importing import Verified, import_pinned
from kernelpin.store import lockfiles
from kernelpin.store.content import Store
from kernelpin.store.receipts import Receipts
from kernelpin.trust.gate import Evidence, EvidenceKind, enforce
from kernelpin.trust.policy import Policy, parse_policy


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


def _caller_file(depth: int) -> Path | None:
    caller = sys._getframe(depth).f_globals.get("__file__")
    return Path(caller) if caller else None


@functools.cache
def _read_lock(path: Path, mtime_ns: int, size: int) -> lockfile.Lock | None:
    return lockfiles.read(path)


def read_lock_cached(path: Path) -> lockfile.Lock | None:
    """The lock, parsed once per version of the file (load() runs once per kernel)."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return _read_lock(path.resolve(), stat.st_mtime_ns, stat.st_size)


@functools.cache
def _read_policy(path: Path, mtime_ns: int, size: int, inode: int) -> Policy:
    try:
        return parse_policy(tomllib.loads(path.read_text(encoding="utf-8")))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
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
    """Unique per repository, commit and variant, so two versions of one kernel load side by side."""
    return "_kernelpin_" + re.sub(r"\W", "_", f"{repo_id}_{commit[:12]}_{variant}")


def _lock_path(lock: str | os.PathLike[str] | None, caller: Path | None) -> Path:
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


def load(
    repo_id: str,
    *,
    lock: str | os.PathLike[str] | None = None,
    target: str | os.PathLike[str] | None = None,
    backend: str | None = None,
    check_arch: bool = True,
) -> ModuleType:
    """Import the kernel `repo_id` as the project's kernelpin.lock pins it.

    The lock is `lock` (a file or its directory) or the nearest kernelpin.lock above the calling module
    (then above the working directory). Files come from `target` / $KERNELPIN_TARGET (a `sync --target`
    directory) or the Hub cache, downloading missing ones unless HF_HUB_OFFLINE=1. Every file is
    verified against the lock before import; a modified file raises IntegrityError and is never imported.
    Only modules the lock lists are importable, compiled from the bytes that were hashed (kernelpin.loading.loader).
    `backend="cpu"` takes a CPU build on an accelerator's machine (as kernels' backend="cpu"); by default
    the variant is the one `kernels.get_kernel` would choose. `check_arch=False` skips the check of the chosen
    build's GPU archs (as kernels 0.19's `get_locked_kernel`/`load_kernel`: a kernel with a Triton fallback may
    declare fewer archs than it runs on); the build is chosen as with the check, every file verified the same.
    """
    lock_path = _lock_path(lock, _caller_file(2) if lock is None else None)
    pinned = read_lock_cached(lock_path)
    if pinned is None:
        raise KernelpinError(f"{lock_path} does not exist; run `kernelpin lock`")
    kernel = pinned.kernel(repo_id)
    if kernel is None:
        locked = ", ".join(k.repo_id for k in pinned.kernels) or "none"
        raise KernelpinError(f"{repo_id} is not in {lock_path} (locked: {locked}); run `kernelpin add {repo_id}`")
    env = environment_for(backend)
    override = local_override.refuse_under_lock(repo_id, lock_path)
    if override is not None:
        return local_override.load(repo_id, override, env, policy_beside(lock_path), check_arch=check_arch)
    variant = choose_variant(kernel, env, check_arch)
    # Only what the GPU runs: the variant's per-capability build for it, where the lock has one (before any download).
    kernel, build = choose_build(kernel, variant, env, check_arch)
    locked_variant = kernel.variant(variant)
    assert locked_variant is not None  # chosen among the kernel's variants
    # The signer `lock` verified, against today's policy: string compares, no cryptography (`sync` and
    # `kernelpin verify --signatures` verify the bundle itself; the lock pins its sha256 like any file's).
    enforce(
        policy_beside(lock_path),
        repo_id,
        variant,
        Evidence.recorded(locked_variant.signature, EvidenceKind.LOCK),
    )
    name = module_name(kernel.repo_id, kernel.commit, variant)
    target = target or os.environ.get("KERNELPIN_TARGET") or None

    def verify() -> Verified:  # every file (downloading missing ones); needs only read access when all are present
        receipts = Receipts.of_user()
        store = Store(HubSource(HubSettings.from_env()), Path(target) if target else None, receipts=receipts)
        return Verified(store.ensure_variant(kernel, variant).directory, locked_variant, receipts)

    def cycle(chain: str) -> KernelpinError:  # only a hand-edited lock has one: locking refuses cycles
        return KernelpinError(
            f"{lock_path}: kernel dependency cycle {chain}; run `kernelpin lock` to regenerate the lock"
        )

    # Dependencies from the same lock, for the same backend (as `kernels` does: a CPU build's are CPU builds too).
    module, _ = import_pinned(
        name,
        f"{kernel.label} ({variant})",
        (kernel.repo_id, kernel.commit),
        verify,
        python_backend=env.selected.name,
        cycle_error=cycle,
        load_dependency=lambda repo, _: load(
            repo, lock=lock_path, target=target, backend=backend, check_arch=check_arch
        ),
    )
    # Which build was taken: a per-capability one, or the fat one (an attribute kernelpin adds to the module).
    setattr(module, "__kernelpin_build__", build.describe())  # noqa: B010  (mypy: a module has no such attribute)
    return module
