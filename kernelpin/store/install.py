"""Install what the lock pins: choose the variant, download only it (kernelpin.store.content), verify every file,
repair what changed and remove what the lock does not list."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelpin.files import confined
from kernelpin.format.layout import BUILD_DIR
from kernelpin.format.lockfile import Lock, LockedFile, LockedKernel, LockedVariant, choose_variant
from kernelpin.format.variant import Environment
from kernelpin.hub.source import HubSource
from kernelpin.store.content import Store
from kernelpin.store.parallel import run_all
from kernelpin.trust.checker import ReleaseChecker


@dataclass
class SyncedVariant:
    repo_id: str
    label: str
    variant: str
    directory: Path
    downloaded: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # unlisted entries deleted from the variant directory


class Installer:
    """`sync`'s side of the store: installs variants, repairs what changed, removes what the lock does not list,
    and reports it all."""

    def __init__(
        self, source: HubSource, target: Path | None = None, progress: Callable[..., Any] | None = None
    ) -> None:
        self.store = Store(source, target, progress)

    def present(self, kernel: LockedKernel, variant_name: str, locked: LockedFile) -> Path | None:
        return self.store.installed(kernel, variant_name, locked)

    def variant_directory(self, kernel: LockedKernel, variant_name: str) -> Path:
        return self.store.variant_directory(kernel, variant_name)

    def linked_directory(self, kernel: LockedKernel, variant_name: str) -> Path | None:
        return self.store.linked_directory(kernel, variant_name)

    def install(self, kernel: LockedKernel, variant_name: str) -> SyncedVariant:
        """Make every file of one variant present and verified, repairing what changed (see
        Store.ensure_variant), and remove the entries of the variant directory that the lock does not list."""
        installed = self.store.ensure_variant(kernel, variant_name, repair=True)
        result = SyncedVariant(
            kernel.repo_id,
            kernel.label,
            variant_name,
            installed.directory,
            installed.downloaded,
            installed.reused,
            installed.repaired,
        )
        variant = kernel.variant(variant_name)
        assert variant is not None  # ensure_variant refused it otherwise
        for extra in unlisted_entries(result.directory, variant):
            confined.remove(self.store.base, result.directory / extra, f"{kernel.label}: removing {extra}")
            result.removed.append(f"{BUILD_DIR}/{variant_name}/{extra}")
        return result

    def record_major_ref(self, kernel: LockedKernel) -> None:
        """For a branch pin `refs/heads/vN` in the Hub cache: record `refs/vN` at the locked commit, so `kernels`
        finds the synced files offline by version (`get_kernel(repo, version=N)` with HF_HUB_OFFLINE=1 reads
        the cache's refs/v<N>). Not for a vendoring target, which `kernels` never reads."""
        branch = (kernel.ref or "").removeprefix("refs/heads/")
        if self.store.target is None and kernel.repo_type == "kernel" and re.fullmatch(r"v[0-9]+", branch):
            self.store.write_ref(kernel.repo_id, kernel.repo_type, branch, kernel.commit)


def unlisted_entries(directory: Path, variant: LockedVariant) -> list[str]:
    """Entries of a variant directory the lock does not list (planted files, links, bytecode caches):
    never imported, reported by `verify`, removed by `sync`. Links are not followed, `directory` included
    (Store.linked_directory checks the directories above it)."""
    if directory.is_symlink() or not directory.is_dir():
        return []
    listed = {f.path for f in variant.files}
    parents = {"/".join(p.split("/")[:i]) for p in listed for i in range(1, p.count("/") + 1)}
    found = []

    def walk(folder: Path, relative: str) -> None:
        for entry in sorted(folder.iterdir()):
            name = f"{relative}{entry.name}"
            if name in parents and entry.is_dir() and not entry.is_symlink():
                walk(entry, name + "/")
            elif name not in listed or (entry.is_dir() and not entry.is_symlink()):
                found.append(name)

    walk(directory, "")
    return found


def sync(
    lock: Lock,
    installer: Installer,
    env: Environment | None,
    all_variants: bool = False,
    checker: ReleaseChecker | None = None,
) -> list[SyncedVariant]:
    """Install the variant each locked kernel needs in `env` (or every variant with `all_variants`): every
    variant is chosen first (a kernel without one for `env` fails the command before any download), then the
    kernels are installed in parallel (KERNELPIN_DOWNLOADS at once, each repository by one thread). With a
    `checker`, what the lock records of each installed variant's signature (or that it records nothing) is put to
    the current policy (kernelpin.trust.gate), and a recorded signature is verified again from its files, offline
    (unless this user's receipt vouches for those bytes), against the signer the lock recorded."""
    chosen = [(kernel, _variant_names(kernel, env, all_variants)) for kernel in lock.kernels]

    def install(step: tuple[LockedKernel, list[str]]) -> list[SyncedVariant]:
        kernel, names = step
        done = []
        for name in names:
            synced = installer.install(kernel, name)
            variant = kernel.variant(name)
            if checker is not None and variant is not None:  # a variant without a signature record too
                checker.recheck(kernel.repo_id, name, synced.directory, variant.signature)
            done.append(synced)
        installer.record_major_ref(kernel)
        return done

    return [
        synced for done in run_all(install, chosen, installer.store.source.settings.limits.downloads) for synced in done
    ]


@dataclass(frozen=True)
class PlannedVariant:
    repo: str
    variant: str
    missing: list[str]  # locked files not yet present and verified
    directory: Path


def plan(lock: Lock, installer: Installer, env: Environment | None, all_variants: bool = False) -> list[PlannedVariant]:
    """What `sync` would install: per kernel the chosen variant(s) and the files not yet present and verified."""
    rows = []
    for kernel in lock.kernels:
        for name in _variant_names(kernel, env, all_variants):
            variant = kernel.variant(name)
            assert variant is not None
            missing = [f.path for f in variant.files if installer.present(kernel, name, f) is None]
            rows.append(PlannedVariant(kernel.repo_id, name, missing, installer.variant_directory(kernel, name)))
    return rows


def _variant_names(kernel: LockedKernel, env: Environment | None, all_variants: bool) -> list[str]:
    if all_variants:
        return [v.name for v in kernel.variants]
    assert env is not None, "an environment is needed to choose variants"
    return [choose_variant(kernel, env)]
