"""`kernelpin sync` for a project: take its lock (re-locked first when stale, unless the LockMode is LOCKED or
FROZEN; kernelpin.relock.lock_for_sync) and install it (kernelpin.store.install); `sync_plan` says what a sync
would install (--dry-run)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from kernelpin import environment
from kernelpin.builds import newer_build_hint
from kernelpin.errors import NoVariantError
from kernelpin.format.lockfile import Lock
from kernelpin.format.ranges import Version
from kernelpin.format.variant import Environment, select
from kernelpin.hub.source import HubSource
from kernelpin.project import Project, find_project
from kernelpin.records import record
from kernelpin.relock import Locked, LockMode, Report, lock_for_sync, release_checker_when_needed
from kernelpin.store import install
from kernelpin.store.install import Installer, PlannedVariant, SyncedVariant
from kernelpin.trust.checker import ReleaseChecker


def _ignore(told: object) -> None:
    """The default of each callback (a message, the fresh lock): nothing is shown."""


@record
class Synced:
    lock: Locked  # what was installed; its changes are non-empty when a stale lock was re-locked
    variants: list[SyncedVariant]


@record
class SyncPlan:
    lock: Locked
    variants: list[PlannedVariant]


def sync(
    project: Project | None = None,
    source: HubSource | None = None,
    env: Environment | None = None,
    *,
    all_variants: bool = False,
    target: Path | None = None,
    mode: LockMode = LockMode.UPDATE,
    progress: Callable[..., Any] | None = None,
    note: Report = _ignore,
    warn: Report = _ignore,
    accepted_signers: Mapping[str, Collection[str]] | None = None,
    on_lock: Callable[[Locked], object] = _ignore,
) -> Synced:
    """Install the locked variant that fits `env` (every locked variant with `all_variants`) into the Hub cache
    or `target`, verify every byte, repair what changed and remove what the lock does not list. A stale lock is
    re-locked first unless `mode` is LOCKED (an error) or FROZEN (`accepted_signers`: as `lock`'s); `on_lock` gets
    the lock to install, before anything is installed (the CLI shows a re-lock's changes there). By default the
    project around the working directory, the Hub of the environment (HF_ENDPOINT, HF_HUB_OFFLINE, ...) and this
    machine's environment (KERNELPIN_* variables, else the running torch)."""
    project, source = project or find_project(Path.cwd()), source or HubSource.from_env()
    env = env if env is not None or all_variants else environment.current({})
    with release_checker_when_needed(project, source) as checker:  # the re-lock and the install share one
        fresh = lock_for_sync(
            project,
            source,
            mode=mode,
            note=note,
            warn=warn,
            accepted_signers=accepted_signers,
            checker=checker,
        )
        on_lock(fresh)
        return Synced(
            fresh, install_lock(fresh.lock, Installer(source, target, progress), env, all_variants, checker=checker())
        )


def download(
    project: Project | None = None,
    source: HubSource | None = None,
    *,
    all_variants: bool = False,
    note: Report = _ignore,
    warn: Report = _ignore,
) -> Synced:
    """Install what the lock names, as it is, as `kernels download DIR` installs what kernels.lock names: `sync`
    with the lock frozen (nothing resolved), this machine's variant of each kernel (every locked variant with
    `all_variants`), every byte verified."""
    return sync(project, source, all_variants=all_variants, mode=LockMode.FROZEN, note=note, warn=warn)


def install_lock(
    lock: Lock,
    installer: Installer,
    env: Environment | None,
    all_variants: bool = False,
    checker: ReleaseChecker | None = None,
) -> list[SyncedVariant]:
    """kernelpin.install.sync (with `checker`, each installed variant's signature verified again); when a
    locked version has no build for `env`, the error also names the newer release that has one (asked of the
    Hub, unless offline)."""
    try:
        return install.sync(lock, installer, env, all_variants, checker)
    except NoVariantError as error:
        hints = (
            []
            if env is None or installer.store.source.settings.offline
            else [
                newer_build_hint(
                    installer.store.source,
                    kernel.repo_id,
                    kernel.repo_type,
                    Version.parse(kernel.version) if kernel.version else None,
                    env,
                )
                for kernel in lock.kernels
                if select({v.name: v.archs for v in kernel.variants}, env).chosen is None
            ]
        )
        if not any(hints):
            raise
        raise NoVariantError("\n".join([str(error), *filter(None, hints)])) from None


def sync_plan(
    project: Project | None = None,
    source: HubSource | None = None,
    env: Environment | None = None,
    *,
    all_variants: bool = False,
    target: Path | None = None,
    mode: LockMode = LockMode.UPDATE,
    note: Report = _ignore,
    warn: Report = _ignore,
    accepted_signers: Mapping[str, Collection[str]] | None = None,
    on_lock: Callable[[Locked], object] = _ignore,
) -> SyncPlan:
    """What `sync` would install, downloading nothing (a stale lock is still re-locked, as `sync` would); the
    defaults and `on_lock` as `sync`'s."""
    project, source = project or find_project(Path.cwd()), source or HubSource.from_env()
    env = env if env is not None or all_variants else environment.current({})
    fresh = lock_for_sync(project, source, mode=mode, note=note, warn=warn, accepted_signers=accepted_signers)
    on_lock(fresh)
    return SyncPlan(fresh, install.plan(fresh.lock, Installer(source, target), env, all_variants))
