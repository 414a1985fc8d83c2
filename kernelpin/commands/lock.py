"""Locking: resolve pyproject.toml's [tool.kernels.dependencies] into kernelpin.lock (`kernelpin.lock`, through
kernelpin.relock), check that the lock is fresh (`check_lock`), and the edits that re-lock (`add`, `remove`).

Every function takes the project and the Hub source (`lock` and `check_lock` by default the project around the
working directory and the Hub the environment names), returns what it did as data and raises
KernelpinError; what to print is the caller's (the CLI's) business. `note` receives detail (-v), `warn`
problems that do not stop the command.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from pathlib import Path

from kernelpin.errors import KernelpinError
from kernelpin.files.atomic import write_atomic
from kernelpin.format import kernels_lock, lockfile
from kernelpin.format.ranges import Range, Version
from kernelpin.hub.source import HubSource
from kernelpin.project import (
    NewEntry,
    Project,
    entry_to_add,
    find_project,
    read_requirements,
    remove_requirement,
    set_requirement,
)
from kernelpin.records import record
from kernelpin.relock import Locked, LockMode, RelockOptions, Report, release_checker, relock
from kernelpin.resolve import describe_versions, tag_versions
from kernelpin.store import lockfiles


def _ignore(message: str) -> None:
    pass


@record
class Added(Locked):
    entries: dict[str, NewEntry]  # repo id -> what was written to pyproject.toml


@record
class Removed(Locked):
    repo_ids: list[str]


def check_lock(project: Project | None = None) -> list[str]:
    """Why kernelpin.lock (and a kept kernels.lock) is stale against pyproject.toml; empty when it is fresh.
    Reads only local files."""
    project = project or find_project(Path.cwd())
    locked = lockfiles.read(project.lockfile)
    reasons = lockfile.staleness(read_requirements(project), locked)
    if locked is not None and not reasons:
        reasons += filter(None, [lockfiles.kernels_lock_out_of_step(project.root / kernels_lock.KERNELS_LOCK, locked)])
    return reasons


def lock(
    project: Project | None = None,
    source: HubSource | None = None,
    *,
    upgrade: Collection[str] = (),
    upgrade_all: bool = False,
    mode: LockMode = LockMode.UPDATE,
    note: Report = _ignore,
    warn: Report = _ignore,
    accepted_signers: Mapping[str, Collection[str]] | None = None,
    refresh_trust_root: bool = False,
) -> Locked:
    """Resolve every requirement and write kernelpin.lock (`mode` UPDATE; DRY_RUN writes nothing). A requirement
    the lock already satisfies keeps its locked version unless `upgrade_all`, or `upgrade` names it. Every release
    resolved passes the publisher policy (kernelpin.trust.policy: trusted publisher, signature, signer continuity unless
    `accepted_signers[repo]` names the new signer). By default the project around the working directory and
    the Hub the environment names (HF_ENDPOINT, HF_HUB_OFFLINE, ...)."""
    options = RelockOptions(
        upgrade=frozenset(upgrade),
        upgrade_all=upgrade_all,
        mode=mode.check("lock", LockMode.UPDATE, LockMode.DRY_RUN),
        note=note,
        warn=warn,
        accepted_signers=accepted_signers or {},
    )
    project, source = project or find_project(Path.cwd()), source or HubSource.from_env()
    if source.settings.offline and not project.lockfile.exists() and read_requirements(project):
        raise KernelpinError(
            f"offline, and {project.lockfile.name} "
            "does not exist yet: the first lock resolves against the Hub, so run `kernelpin lock` "
            "once with network access (without --offline and HF_HUB_OFFLINE) and commit the lock"
        )
    with release_checker(project, source, refresh_trust_root) as checker, project.edit_lock():
        return relock(project, source, checker, options)


def add(
    project: Project,
    source: HubSource,
    requirements: Mapping[str, str | None],
    *,
    mode: LockMode = LockMode.UPDATE,
    note: Report = _ignore,
    warn: Report = _ignore,
    accepted_signers: Mapping[str, Collection[str]] | None = None,
) -> Added:
    """Add each repository (repo id -> a version range, or None for the newest release's line) to
    [tool.kernels.dependencies] and re-lock (a kernel already locked keeps its signer unless `accepted_signers`
    names the new one, as `lock`). With DRY_RUN, or when locking fails, pyproject.toml is put back byte for
    byte and the lock is not written."""
    options = RelockOptions(
        mode=mode.check("add", LockMode.UPDATE, LockMode.DRY_RUN),
        note=note,
        warn=warn,
        accepted_signers=accepted_signers or {},
    )
    entries = {
        repo_id: _entry_to_add(project, source, repo_id, range_text) for repo_id, range_text in requirements.items()
    }

    def edit(project: Project) -> None:
        for repo_id, entry in entries.items():
            set_requirement(project, repo_id, entry.value)

    done = _edit_andrelock(project, source, edit, options)
    return Added(done.lock, done.changes, entries)


def remove(
    project: Project, source: HubSource, repo_ids: Collection[str], *, note: Report = _ignore, warn: Report = _ignore
) -> Removed:
    """Remove each repository from [tool.kernels.dependencies] and re-lock (pyproject.toml is put back when
    locking fails)."""

    def edit(project: Project) -> None:
        for repo_id in repo_ids:
            remove_requirement(project, repo_id)

    done = _edit_andrelock(project, source, edit, RelockOptions(note=note, warn=warn))
    return Removed(done.lock, done.changes, list(repo_ids))


def _entry_to_add(project: Project, source: HubSource, repo_id: str, range_text: str | None) -> NewEntry:
    """What `add` writes (project.entry_to_add) from the repository's tags and branches; offline, from what the lock
    already holds for it (its version, and its branch when it is locked as `= N`), since the Hub cannot be asked."""
    if not source.settings.offline:
        refs = source.refs(repo_id, None, named_in="`kernelpin add`'s arguments")
        versions, _ = tag_versions(refs.tags)
        entry = entry_to_add(repo_id, range_text, list(versions), set(refs.branches))
        if isinstance(entry.value, str) and Range.parse(entry.value).best(versions) is None:
            # Said here, about the argument: the re-lock's message would send the user to pyproject.toml.
            raise KernelpinError(
                f"{repo_id}@{range_text}: no version satisfies {range_text} (available: "
                f"{describe_versions(list(versions))}); give `kernelpin add` a range that one of "
                f"them satisfies, or {repo_id} alone for the newest release"
            )
        return entry
    locked = lockfiles.read(project.lockfile)
    kernel = locked.kernel(repo_id) if locked else None
    if kernel is None or (kernel.version is None and range_text is None):
        raise KernelpinError(
            f"{repo_id}: offline, its versions cannot be looked up and {project.lockfile.name} "
            f"does not lock a version of it; go online to add it"
        )
    branch = (kernel.ref or "").removeprefix("refs/heads/") if (kernel.ref or "").startswith("refs/heads/") else None
    locked_version = [Version.parse(kernel.version)] if kernel.version else []
    return entry_to_add(repo_id, range_text, locked_version, {branch} if branch else set())


def _edit_andrelock(
    project: Project,
    source: HubSource,
    edit: Callable[[Project], None],
    options: RelockOptions,
) -> Locked:
    """Change pyproject.toml with `edit`, then re-lock. When locking fails, pyproject.toml is put back
    byte for byte (as `uv add` does): a requirement that cannot be locked is never left behind. With
    DRY_RUN it is put back in any case and the lock is not written."""
    with project.edit_lock():
        with open(project.pyproject, encoding="utf-8", newline="") as stream:
            original = stream.read()
        edit(project)
        try:
            with release_checker(project, source) as checker:
                result = relock(project, source, checker, options)
        except BaseException:
            write_atomic(project.pyproject, original)
            raise
        if options.mode is LockMode.DRY_RUN:
            write_atomic(project.pyproject, original)
        return result
