"""Re-locking: pyproject.toml's [tool.kernels.dependencies] resolved (kernelpin.resolve) and written to kernelpin.lock,
as `lock`, `add`, `remove` and `sync` (a stale lock) do it, with the release checker they verify signatures with.
Returns what it did as data; `note` receives detail (-v), `warn` problems that do not stop the command."""

from __future__ import annotations

import contextlib
import enum
import functools
import os
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import field

from kernelpin.errors import KernelpinError
from kernelpin.format import kernels_lock, lockfile
from kernelpin.hub.source import OFFLINE, HubSource
from kernelpin.project import Project, read_policy, read_requirements
from kernelpin.records import record
from kernelpin.resolve import resolve
from kernelpin.store import lockfiles
from kernelpin.trust.checker import ReleaseChecker
from kernelpin.trust.receipts import SignatureReceipts
from kernelpin.trust.worker import wanted as signature_worker_wanted

Report = Callable[[str], None]


def _ignore(message: str) -> None:
    pass


class LockMode(enum.Enum):
    """What a command may do with the lock, one value where uv and cargo have flags: UPDATE (the default) re-locks
    a stale lock and writes it; DRY_RUN resolves and writes nothing (`lock --dry-run`, `add --dry-run`); LOCKED
    fails on a stale lock (`sync --locked`); FROZEN takes the lock as it is, resolving nothing (`sync --frozen`)."""

    UPDATE = "update"
    DRY_RUN = "dry-run"
    LOCKED = "locked"
    FROZEN = "frozen"

    def check(self, function: str, *allowed: LockMode) -> LockMode:
        """This mode, where `function` takes it; else a ValueError naming the modes it takes."""
        if self not in allowed:
            raise ValueError(f"{function}(mode={self}): {function} takes {' or '.join(str(mode) for mode in allowed)}")
        return self


@record
class RelockOptions:
    """How a re-lock runs besides its project, Hub and release checker: the kernels it moves to their newest
    satisfying version (`upgrade`, or all of them with `upgrade_all`), whether it writes the lock (`mode`: UPDATE
    writes, DRY_RUN does not), the new signers the user accepts by repository, and who hears of it (`note`: detail
    for -v, `warn`: problems that do not stop it)."""

    upgrade: frozenset[str] = frozenset()
    upgrade_all: bool = False
    mode: LockMode = LockMode.UPDATE
    note: Report = _ignore
    warn: Report = _ignore
    accepted_signers: Mapping[str, Collection[str]] = field(default_factory=dict)


@record
class Locked:
    """The lock as resolved, and each change against the previous one (`lockfile.changes`'s lines; a line
    starting with "!" is a release tag that now names another commit)."""

    lock: lockfile.Lock
    changes: list[str]


def release_checker(project: Project, source: HubSource, refresh: bool = False) -> ReleaseChecker:
    """The publisher policy of pyproject.toml ([tool.kernelpin.trust]) with its Sigstore trust root; `refresh`
    asks Sigstore's TUF repository for a newer root first (online only). It verifies in a second process unless
    KERNELPIN_SIGNATURE_WORKER=0, and not again what this user's signature receipts vouch for: close it when the
    command is done."""
    if refresh and source.settings.offline:
        raise KernelpinError(
            f"--refresh-trust-root asks Sigstore's TUF repository for a newer trust root, but "
            f"{OFFLINE}; go online, or drop --refresh-trust-root (the shipped root works offline)"
        )
    checker = ReleaseChecker(
        read_policy(project),
        project.root,
        refresh=refresh,
        refresh_timeout=source.settings.limits.http_timeout,
        worker=signature_worker_wanted(),
        receipts=SignatureReceipts.of_user(),
    )
    if refresh:
        _ = checker.verifier  # the refresh first, once: without network it fails before anything is resolved
    return checker


@contextlib.contextmanager
def release_checker_when_needed(project: Project, source: HubSource) -> Iterator[Callable[[], ReleaseChecker]]:
    """release_checker, made at the first call of what this yields (the same one at every later call) and closed
    with the block: a command that verifies nothing neither reads the policy nor starts a signature worker."""
    with contextlib.ExitStack() as closing:
        yield functools.cache(lambda: closing.enter_context(release_checker(project, source)))


def lock_for_sync(
    project: Project,
    source: HubSource,
    *,
    mode: LockMode = LockMode.UPDATE,
    note: Report = _ignore,
    warn: Report = _ignore,
    accepted_signers: Mapping[str, Collection[str]] | None = None,
    checker: Callable[[], ReleaseChecker] | None = None,
) -> Locked:
    """The lock `sync` installs: as it is with FROZEN; re-locked when stale (UPDATE), unless LOCKED forbids it
    (the re-lock keeps each kernel's signer unless `accepted_signers` names the new one, as `lock`). `checker`
    gives the project's release_checker where the caller verifies what it installs with the same one."""
    mode.check("sync", LockMode.UPDATE, LockMode.LOCKED, LockMode.FROZEN)
    existing = lockfiles.read(project.lockfile)
    if mode is LockMode.FROZEN:
        if existing is None:
            raise KernelpinError(
                f"--frozen needs {project.lockfile}; run `kernelpin lock` first (with network "
                "access: it resolves against the Hub)"
            )
        return Locked(existing, [])
    reasons = lockfile.staleness(read_requirements(project), existing)
    if not reasons:
        return Locked(existing or lockfile.Lock(), [])  # no lock and nothing required: nothing to sync
    if mode is LockMode.LOCKED:
        raise KernelpinError(
            f"{project.lockfile.name} is stale and --locked forbids updating it:\n  "
            + "\n  ".join(reasons)
            + "\nRun `kernelpin lock` and commit the result."
        )
    options = RelockOptions(note=note, warn=warn, accepted_signers=accepted_signers or {})
    with project.edit_lock():
        if checker is not None:  # the caller's, closed by the caller
            return relock(project, source, checker(), options)
        with release_checker(project, source) as own:
            return relock(project, source, own, options)


def relock(project: Project, source: HubSource, checker: ReleaseChecker, options: RelockOptions) -> Locked:
    """Resolve and (unless options.mode is DRY_RUN) write the lock; the caller holds the project's edit lock."""
    options.mode.check("relock", LockMode.UPDATE, LockMode.DRY_RUN)
    upgrade, warn, dry_run = options.upgrade, options.warn, options.mode is LockMode.DRY_RUN
    requirements = read_requirements(project)
    path = project.lockfile
    if path.is_symlink() and not path.exists():
        raise KernelpinError(
            f"{path} is a symbolic link to {os.path.realpath(path)}, which does not exist; refusing to "
            "create a file there: remove the link (or point it at a lock) and re-run"
        )
    try:
        previous = lockfiles.read(path)
    except KernelpinError as error:
        if path.is_symlink():
            # A link is kept as a link (a lock shared between checkouts); what it points at is not a lock,
            # so it is someone else's file: never overwrite it.
            raise KernelpinError(
                f"{path} is a symbolic link to {os.path.realpath(path)}, which is not a kernelpin lock "
                f"({error}); refusing to overwrite it: remove the link (or point it at a lock) and re-run"
            ) from None
        # A damaged or hand-edited lock: its error says "run `kernelpin lock`", so that has to work.
        warn(f"{error}; it is regenerated from pyproject.toml")
        previous = None
    dependencies = {k.repo_id for k in previous.kernels if k.required_by} if previous else set()
    unknown = upgrade - {r.repo_id for r in requirements} - dependencies
    if unknown:
        raise KernelpinError(
            f"--upgrade-package {', '.join(sorted(unknown))}: not in [tool.kernels.dependencies] "
            f"(present: {', '.join(r.repo_id for r in requirements) or 'none'})"
        )
    new = resolve(
        source,
        requirements,
        previous,
        upgrade=lambda repo_id: options.upgrade_all or repo_id in upgrade,
        note=options.note,
        checker=checker,
        accepted_signers=options.accepted_signers,
    )
    changed = lockfile.changes(previous, new)
    for kernel in new.kernels:
        unsigned = [v.name for v in kernel.variants if v.signature is not None and v.signature.signer is None]
        if unsigned and (previous is None or previous.kernel(kernel.repo_id) != kernel):
            warn(
                f"{kernel.label}: unsigned ({', '.join(unsigned)}): locked without a signature; "
                "`require-signatures = true` in [tool.kernelpin.trust] refuses such releases"
            )
    if previous is not None and previous.schema != lockfile.schema_needed(new):
        changed.append(f"~ {path.name}: schema version {previous.schema} -> {lockfile.schema_needed(new)}")
    if not dry_run and (previous is None or changed):
        lockfiles.write(path, new)
    changed += lockfiles.keep_kernels_lock(project.root / kernels_lock.KERNELS_LOCK, new, dry_run)
    return Locked(new, changed)
