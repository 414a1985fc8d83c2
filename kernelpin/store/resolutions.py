"""What `get_kernel` resolved online, remembered so the same call works offline (and online needs no second
look at an unchanged commit): per (Hub, repository, requirement), a small lock of the variants loaded and the
names of every variant at that commit, in a directory only this user can write.

The Hub cache is no place for it: it may be shared, and a `refs/v1` there is whatever anyone who can write the
cache put there (kernels reads it as the truth). A remembered resolution holds the commit and the sha256 of
every file of the variants loaded, so an offline load verifies the cached files exactly as a lock does.
The directory is $KERNELPIN_STATE_DIR, else $XDG_STATE_HOME/kernelpin, else ~/.local/state/kernelpin; it is
created private (0700), and a directory or record that another user owns or can write is not used.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelpin.errors import KernelpinError
from kernelpin.files import confined
from kernelpin.files.integrity import is_commit
from kernelpin.format import lockfile
from kernelpin.format.lockfile import Lock, LockedKernel, is_variant_name
from kernelpin.format.nesting import within_nesting
from kernelpin.format.spec import Requirement, is_repo_id
from kernelpin.records import record

if TYPE_CHECKING:
    from kernelpin.format.kernel_status import Redirect

__untrusted_input__ = (
    "Resolutions.read_move",
    "Resolutions.read",
)  # parsers of input kernelpin does not control (kernelpin.errors)

_RESOLVED = "resolved"
_MOVED = "moved"  # a record of a move (kernel-status.toml) instead of a resolution
_FORMAT = 1


@record
class Remembered:
    """A resolution: the kernel with the variants loaded pinned, and every variant name at its commit (a
    commit's files never change, so its listing need not be fetched again)."""

    kernel: LockedKernel
    variants: tuple[str, ...]
    # The Hub marked the publisher trusted (`trustedKernelPublisher`) when the commit was resolved, and that is
    # what let it through: the same commit is loaded again without asking (its files cannot change).
    publisher_trusted: bool = False


def state_dir(environ: Mapping[str, str] = os.environ) -> Path:
    given = environ.get("KERNELPIN_STATE_DIR")
    if given:
        return Path(given).expanduser()
    base = environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "kernelpin"


def _unsafe(path: Path) -> str | None:
    """Why `path` (a directory or file of the state) cannot be trusted, or None: it must be this user's and
    writable by no one else. Links are not followed."""
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link"
    if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
        return f"belongs to another user (uid {info.st_uid})"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "can be written by other users"
    return None


class Resolutions:
    """The remembered resolutions of one Hub (endpoint)."""

    def __init__(self, endpoint: str, root: Path) -> None:
        self.endpoint, self.root = endpoint, root

    def path(self, requirement: Requirement) -> Path:
        key = json.dumps([self.endpoint, requirement.repo_id, requirement.value], sort_keys=True)
        name = f"{requirement.repo_id.replace('/', '--')}-{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"
        return self.root / _RESOLVED / name

    def _check(self, *levels: Path) -> None:
        for level in levels:
            problem = _unsafe(level)
            if problem is not None:
                raise KernelpinError(
                    f"{level} {problem}, so kernelpin does not use what it holds (anyone who can write it could "
                    f"redirect a kernel): make it yours with mode 0700 or 0600, or set KERNELPIN_STATE_DIR"
                )

    def _broken(self, requirement: Requirement) -> KernelpinError:
        return KernelpinError(
            f"{self.path(requirement)} is not a resolution kernelpin wrote for {requirement.repo_id} "
            f"{requirement.text}; delete it (the next online get_kernel writes it again)"
        )

    def _record(self, requirement: Requirement) -> dict[str, Any] | None:
        """The record kept for `requirement` (a resolution or a move), or None when there is none."""
        path = self.path(requirement)
        if not path.exists() and not path.is_symlink():
            return None
        self._check(self.root, self.root / _RESOLVED, path)
        try:
            record = within_nesting(json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, UnicodeDecodeError, RecursionError):
            raise self._broken(requirement) from None
        if not isinstance(record, dict) or record.get("format") != _FORMAT:
            raise self._broken(requirement)
        return record

    def read_move(self, requirement: Requirement) -> tuple[str, Redirect] | None:
        """The move get_kernel followed for `requirement` (the commit whose kernel-status.toml said so, and what
        it said), or None when none was remembered."""
        record = self._record(requirement)
        if record is None or _MOVED not in record:
            return None
        moved = record[_MOVED]
        if not isinstance(moved, dict) or set(moved) != {"commit", "destination", "revision"}:
            raise self._broken(requirement)
        from kernelpin.format.kernel_status import Redirect  # a move remembered: rare

        commit, destination, revision = moved["commit"], moved["destination"], moved["revision"]
        if (
            not isinstance(commit, str)
            or not is_commit(commit)
            or not isinstance(destination, str)
            or not is_repo_id(destination)
            or not (revision is None or (isinstance(revision, str) and revision.strip() == revision != ""))
        ):
            raise self._broken(requirement)
        return commit, Redirect(destination, revision)

    def read(self, requirement: Requirement) -> Remembered | None:
        """The remembered resolution of `requirement`, or None when there is none (or a move: read_move)."""
        record = self._record(requirement)
        if record is None or _MOVED in record:
            return None
        path, broken = self.path(requirement), self._broken(requirement)
        if not isinstance(record.get("lock"), str):
            raise broken
        names = record.get("variants")
        if not isinstance(names, list) or not all(isinstance(name, str) and is_variant_name(name) for name in names):
            raise broken
        kernel = lockfile.parse(record["lock"], str(path)).kernel(requirement.repo_id)
        marked = record.get("publisher-trusted", False)
        if kernel is None or kernel.requirement != requirement.value or not isinstance(marked, bool):
            raise broken
        return Remembered(kernel, tuple(names), marked)

    def remember(
        self,
        kernel: LockedKernel,
        variants: tuple[str, ...],
        requirement: Requirement,
        publisher_trusted: bool = False,
        read_before: Remembered | None = None,
    ) -> Path:
        """Keep `kernel` (and the variant names at its commit, and whether the Hub's mark on the publisher let it
        through) for `requirement`; the variants remembered for the same commit are kept beside the new one.
        `read_before`: what the caller read for `requirement` (Resolutions.read) before it resolved; where that
        is already what would be written, nothing is read or written again (a warm get_kernel). Written through
        kernelpin.files.confined, as the cache is: a link at the record's name or on the way below the state
        directory is never written through."""
        path = self.path(requirement)
        if read_before is not None and read_before == Remembered(
            _kept_beside(read_before, kernel), variants, publisher_trusted
        ):
            return path
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)  # trusted as given, as the cache's root is
        self._check(*(level for level in (self.root, self.root / _RESOLVED) if os.path.lexists(level)))
        previous = self.read(requirement)  # again: another process may have written it since
        kernel = _kept_beside(previous, kernel)
        if previous == Remembered(kernel, variants, publisher_trusted):
            return path
        record = {
            "format": _FORMAT,
            "variants": list(variants),
            "lock": lockfile.render(Lock((kernel,))),
            "publisher-trusted": publisher_trusted,
        }
        return self._write(requirement, record)

    def remember_move(self, requirement: Requirement, commit: str, redirect: Redirect) -> Path:
        """Keep that `requirement` resolved to `commit`, whose kernel-status.toml says the kernel moved, so an
        offline get_kernel follows the same move (the destination's resolution is kept under its own)."""
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._check(*(level for level in (self.root, self.root / _RESOLVED) if os.path.lexists(level)))
        if self.read_move(requirement) == (commit, redirect):
            return self.path(requirement)
        moved = {"commit": commit, "destination": redirect.destination, "revision": redirect.revision}
        return self._write(requirement, {"format": _FORMAT, _MOVED: moved})

    def _write(self, requirement: Requirement, record: dict[str, Any]) -> Path:
        path = self.path(requirement)
        confined.replace_file(
            self.root,
            path,
            json.dumps(record, indent=1).encode("utf-8"),
            f"remembering {requirement.repo_id} {requirement.text}",
            mode=0o600,
            directory_mode=0o700,
            durable=True,
        )
        return path


def _kept_beside(previous: Remembered | None, kernel: LockedKernel) -> LockedKernel:
    """`kernel` with the variants remembered for the same commit that it does not pin itself."""
    if previous is None or previous.kernel.commit != kernel.commit:
        return kernel
    names = {variant.name for variant in kernel.variants}
    kept = tuple(variant for variant in previous.kernel.variants if variant.name not in names)
    return dataclasses.replace(kernel, variants=tuple(sorted(kernel.variants + kept, key=lambda v: v.name)))
