"""Install what the lock pins: choose the variant, download only it (kernelpin.store.content), verify every file,
repair what changed and remove what the lock does not list."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import field, replace
from pathlib import Path
from typing import Any

from kernelpin.errors import KernelpinError
from kernelpin.files import confined
from kernelpin.format.layout import METADATA, SIGNATURE
from kernelpin.format.lockfile import (
    BuildChoice,
    Lock,
    LockedFile,
    LockedKernel,
    LockedVariant,
    choose_build,
    choose_variant,
)
from kernelpin.format.metadata import parse_metadata
from kernelpin.format.variant import Environment
from kernelpin.hub.source import HubSource
from kernelpin.records import record
from kernelpin.store.content import Store
from kernelpin.store.parallel import run_all
from kernelpin.trust.checker import ReleaseChecker
from kernelpin.trust.gate import enforce_capability_build


@record(frozen=False)
class SyncedVariant:
    repo_id: str
    label: str
    variant: str
    directory: Path
    downloaded: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # unlisted entries deleted from the variant directory
    build: BuildChoice | None = None  # the per-capability build taken (or why the fat one); None: --all-variants


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
            result.removed.append(f"{variant.directory}/{extra}")
        return result

    def install_signed_part(self, kernel: LockedKernel, variant: LockedVariant) -> Path:
        """For a per-capability build: the fat variant's metadata.json and its bundle (what is signed, and lists the
        build's files), installed where they lie in the repository; the variant's other files are not fetched,
        and nothing else of its directory is touched. Returns that directory."""
        signed = tuple(f for f in variant.files if f.path in (METADATA, SIGNATURE))
        if not any(f.path == METADATA for f in signed):
            raise KernelpinError(f"{kernel.label}: {variant.name}: the lock lists no {METADATA}; run `kernelpin lock`")
        part = replace(kernel, variants=(replace(variant, files=signed, capability_builds=()),))
        return self.store.ensure_variant(part, variant.name, repair=True).directory

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
    chosen = [_builds(kernel, env, all_variants) for kernel in lock.kernels]

    def install(step: tuple[LockedKernel, list[tuple[LockedKernel, str, BuildChoice | None]]]) -> list[SyncedVariant]:
        kernel, builds = step
        done = []
        for narrowed, name, build in builds:
            synced = installer.install(narrowed, name)
            synced.build = build
            variant = kernel.variant(name)
            signed_directory = synced.directory
            if build is not None and build.build is not None and variant is not None:
                signed_directory = installer.install_signed_part(kernel, variant)
            if checker is not None and variant is not None:  # a variant without a signature record too
                checker.recheck(kernel.repo_id, name, signed_directory, variant.signature)
            if signed_directory != synced.directory and variant is not None:
                # What the lock records of the build, against what the (just verified) metadata.json lists.
                metadata = parse_metadata((signed_directory / METADATA).read_bytes(), f"{kernel.label}: {name}")
                taken = next(b for b in variant.capability_builds if build is not None and b.name == build.build)
                enforce_capability_build(kernel.repo_id, name, metadata, taken)
            done.append(synced)
        installer.record_major_ref(kernel)
        return done

    source = installer.store.source
    return [
        synced
        for done in run_all(install, chosen, source.settings.limits.downloads, source.stop_waiting)
        for synced in done
    ]


@record
class PlannedVariant:
    repo: str
    variant: str
    missing: list[str]  # locked files not yet present and verified
    directory: Path


def plan(lock: Lock, installer: Installer, env: Environment | None, all_variants: bool = False) -> list[PlannedVariant]:
    """What `sync` would install: per kernel the chosen variant(s) and the files not yet present and verified."""
    rows = []
    for kernel, builds in (_builds(kernel, env, all_variants) for kernel in lock.kernels):
        for narrowed, name, _ in builds:
            variant = narrowed.variant(name)
            assert variant is not None
            missing = [f.path for f in variant.files if installer.present(narrowed, name, f) is None]
            rows.append(PlannedVariant(kernel.repo_id, name, missing, installer.variant_directory(narrowed, name)))
    return rows


def _builds(
    kernel: LockedKernel, env: Environment | None, all_variants: bool
) -> tuple[LockedKernel, list[tuple[LockedKernel, str, BuildChoice | None]]]:
    """What to install of a locked kernel: (the kernel narrowed to the build taken, variant, the build choice) for
    the variant `env` needs, its per-capability build where one fits the GPU; every fat variant with
    `all_variants` (a vendored tree serves other machines)."""
    if all_variants:
        return kernel, [(kernel, v.name, None) for v in kernel.variants]
    assert env is not None, "an environment is needed to choose variants"
    name = choose_variant(kernel, env)
    narrowed, choice = choose_build(kernel, name, env)
    return kernel, [(narrowed, name, choice)]
