"""Resolving without a lock, for `get_kernel` (kernelpin.front): on the spot online, from what was resolved before
offline.

`version=N` is the branch vN as kernels reads it, `version="^1.2"` a range over version tags (kernelpin only),
`revision=` a tag, branch or commit. Only the variant this machine needs is pinned (its metadata.json read in
memory, checked against the file listing), its files checked against its metadata.json digest and size before they
are used. What was resolved is remembered where only this user writes (kernelpin.store.resolutions), so the same
call works offline afterwards, `version=N` included.

Trust as `lock` has it (kernelpin.trust.policy), with the publisher policy of the project around the working
directory (its [tool.kernelpin.trust], else the defaults): a publisher the policy does not name needs the Hub's
trusted mark or `trust_remote_code` (checked before any file of the kernel is read), and the chosen variant's
Sigstore bundle, where it has one or the policy requires one, is verified before its metadata.json is parsed.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import field
from pathlib import Path
from typing import Any

from kernelpin.errors import KernelpinError, NoVariantError
from kernelpin.format.layout import BUILD_DIR, METADATA
from kernelpin.format.lockfile import LockedKernel, LockedVariant
from kernelpin.format.metadata import MAX_METADATA_SIZE
from kernelpin.format.spec import Requirement, describe_value
from kernelpin.format.variant import Environment, Variant, arch_rejection, exact_build, select
from kernelpin.hub.source import HubSettings, HubSource, in_a_thread
from kernelpin.project import find_project, read_policy
from kernelpin.records import record
from kernelpin.resolve import KernelMoved, Located, Pinner, locate, moved_to, pick_revision, served_as
from kernelpin.store.resolutions import Remembered, Resolutions, state_dir
from kernelpin.trust.checker import ReleaseChecker
from kernelpin.trust.gate import Evidence, EvidenceKind, admit_publisher, enforce
from kernelpin.trust.policy import Policy
from kernelpin.trust.receipts import SignatureReceipts


@record
class Resolved:
    """One kernel resolved for this machine: the kernel with (at least) the chosen variant pinned, and whether
    the Hub's trusted mark on its publisher is what let it through (remembered with it, kernelpin.store.resolutions)."""

    kernel: LockedKernel
    variant: str
    requirement: Requirement
    publisher_trusted: bool = False
    # What was remembered for the requirement when this call began (remember() writes nothing where it is the same).
    remembered: Remembered | None = field(default=None, compare=False, repr=False)


def pin_hint(requirement: Requirement) -> str:
    """How to pin what get_kernel resolved, in this project's pyproject.toml and kernelpin.lock."""
    value = requirement.value
    if isinstance(value, dict):
        return (
            f'add "{requirement.repo_id}" = {describe_value(value)} to [tool.kernels.dependencies] in '
            "pyproject.toml and run `kernelpin lock`"
        )
    return f"run `kernelpin add {requirement.repo_id}@{value}`"


def _trusted(repo_id: str, trust_remote_code: bool | Sequence[str]) -> bool:
    if trust_remote_code is True:
        return True
    return not isinstance(trust_remote_code, bool) and repo_id in trust_remote_code


def release_checker_here() -> ReleaseChecker:
    """The publisher policy get_kernel applies: the one of the project around the working directory (its
    [tool.kernelpin.trust]), else kernelpin.trust.policy's defaults; with this user's signature receipts, as `lock` has
    them (a bundle verified by either is not verified again by the other)."""
    try:
        project = find_project(Path.cwd())
    except KernelpinError:  # no project here: the defaults
        policy, root = Policy(), Path.cwd()
    else:
        policy, root = read_policy(project), project.root
    return ReleaseChecker(policy, root, receipts=SignatureReceipts.of_user())


def _check_trust(source: HubSource, repo_id: str, trust_remote_code: bool | Sequence[str], policy: Policy) -> bool:
    """Refuse a publisher that neither the policy names nor the Hub marks trusted unless the caller trusts it
    (as kernels does). Returns whether the Hub's mark was asked for and let it through."""
    return admit_publisher(
        policy, repo_id, source.trusted_publisher, _trusted(repo_id, trust_remote_code), source.settings.endpoint
    )


def _no_fit(kernel_label: str, commit: str, selection_text: str, env: Environment) -> NoVariantError:
    return NoVariantError(
        f"{kernel_label}: no build variant fits this environment ({env.describe()}). Variants at {commit[:12]}:\n"
        f"{selection_text}\nPick a kernel version built for this torch/backend, or change torch."
    )


def _check_remembered(checker: ReleaseChecker, repo_id: str, variant: LockedVariant) -> None:
    """A variant pinned before (its signature verified then) against the current policy, as load checks a lock."""
    enforce(checker.policy, repo_id, variant.name, Evidence.recorded(variant.signature, EvidenceKind.REMEMBERED))


def _metadata_ahead(
    source: HubSource, repo_id: str, repo_type: str, commit: str, variant: str | None
) -> tuple[str, Future[bytes | None]] | None:
    """The metadata.json of `variant` (the build most likely chosen), requested beside the file listing: where
    the listing then chooses it, the listing's size and git blob id check it and it is not read again, so a cold
    call waits for one round trip less. Neither waited for nor its failure raised when another build is chosen
    (kernelpin.hub.source.in_a_thread: its thread never holds up the interpreter's exit)."""
    if variant is None:
        return None
    path = f"{BUILD_DIR}/{variant}/{METADATA}"
    return variant, in_a_thread(
        "kernelpin-metadata-ahead", lambda: source.read_ahead(repo_id, repo_type, commit, path, MAX_METADATA_SIZE)
    )


def resolve_online(
    source: HubSource,
    requirement: Requirement,
    env: Environment,
    check_arch: bool,
    remembered: Remembered | None,
    trust_remote_code: bool | Sequence[str],
    checker: ReleaseChecker,
) -> tuple[Resolved, tuple[str, ...], dict[str, Any] | None, dict[str, bytes]]:
    """Resolve `requirement` on the Hub for `env`, pinning only the chosen variant (its signature verified
    by `checker`). At a commit resolved before, neither its listing nor a variant pinned then is fetched again
    (a commit's files never change), nor the publisher's trusted mark when that is what let it through then: the
    refs are the one request (as `load` of a lock asks nothing; the policy and `trust_remote_code` are checked
    on every call, and a commit not resolved before asks for the mark again).
    Returns the resolution, every variant name at the commit, and the chosen variant's metadata.json document
    and the files read to pin it (path in the variant -> bytes) when it was read now (None, {} when it was
    remembered)."""

    def check() -> bool:
        return _check_trust(source, requirement.repo_id, trust_remote_code, checker.policy)

    if remembered is not None and remembered.publisher_trusted:
        refs, marked = source.refs(requirement.repo_id, requirement.repo_type, requirement.declared), None
    else:
        # The publisher check runs beside the refs request, in a daemon thread: an executor's `with` waited for it
        # when the refs failed or Ctrl-C came, up to the request's timeout against a Hub that does not answer.
        trusted = in_a_thread("kernelpin-publisher-check", check)
        refs = source.refs(requirement.repo_id, requirement.repo_type, requirement.declared)
        marked = trusted.result()
    pick = pick_revision(requirement, refs)
    known = remembered if remembered is not None and remembered.kernel.commit == pick.commit else None
    if marked is None:  # the mark let this publisher's commit through before
        marked = True if known is not None else check()
    located, ahead = None, None
    if known is None:
        ahead = _metadata_ahead(source, requirement.repo_id, refs.repo_type, pick.commit, exact_build(env))
        located = locate(source, requirement, lambda message: None, refs)
        names = tuple(sorted(located.variants))
    else:
        names = known.variants
    selection = select(dict.fromkeys(names), env)
    label = f"{requirement.repo_id} {requirement.text}"
    if selection.chosen is None:
        from kernelpin.builds import newer_build_hint  # only to explain a miss: not on get_kernel's way

        hint = newer_build_hint(source, requirement.repo_id, refs.repo_type, pick.version, env)
        raise _no_fit(label, pick.commit, "\n".join(filter(None, [selection.explain(), hint])), env)
    chosen = selection.chosen
    variant = known.kernel.variant(chosen) if known is not None else None
    document: dict[str, Any] | None = None
    fetched: dict[str, bytes] = {}
    if variant is None:
        located = located or locate(source, requirement, lambda message: None, refs)
        # No blob kept for the next lock: the install below writes what was read into the snapshot, where a
        # lock looks first (a second copy cost a file lock and an fsync on every cold call).
        pinner = Pinner(
            source,
            requirement.repo_id,
            refs.repo_type,
            pick.commit,
            checker,
            keep=False,
            served=served_as(requirement, pick),
        )
        if ahead is not None and ahead[0] == chosen:
            pinner.offer(chosen, located.variants[chosen], METADATA, ahead[1].result)
        variant = pinner.variant(chosen, located.variants[chosen])
        metadata = pinner.metadata.get(chosen)
        document, fetched = None if metadata is None else metadata.document, pinner.fetched[chosen]
    else:
        _check_remembered(checker, requirement.repo_id, variant)
    if check_arch:
        reason = arch_rejection(Variant.parse(chosen), variant.archs, env)
        if reason is not None:
            raise _no_fit(label, pick.commit, f"  {chosen}: {reason}", env)
    kernel = Located(pick, refs.repo_type, {}).kernel(requirement, (variant,))
    return Resolved(kernel, chosen, requirement, marked, remembered), names, document, fetched


def resolve_remembered(
    remembered: Remembered | None,
    requirement: Requirement,
    env: Environment,
    check_arch: bool,
    cache: Path,
    checker: ReleaseChecker,
    trust_remote_code: bool | Sequence[str],
) -> Resolved:
    """Offline: the variant for `env` among those get_kernel pinned online before (as this user), checked
    against the current policy, and its publisher as online: named by the policy, trusted by this caller, or
    marked trusted by the Hub when it was resolved (whatever an earlier caller trusted)."""
    if remembered is not None:
        admit_publisher(
            checker.policy,
            requirement.repo_id,
            lambda org: remembered.publisher_trusted,
            _trusted(requirement.repo_id, trust_remote_code),
            "the Hub (offline: as resolved before)",
        )
    if remembered is None:
        raise KernelpinError(
            f"{requirement.repo_id} {requirement.text}: offline (HF_HUB_OFFLINE=1), and kernelpin has not resolved "
            "it online before on this machine, so it cannot tell which files to trust in the cache "
            f"({cache}); call get_kernel once online, or pin it ({pin_hint(requirement)}) and `kernelpin sync`"
        )
    kernel = remembered.kernel
    selection = select({v.name: v.archs if check_arch else None for v in kernel.variants}, env)
    if selection.chosen is None:
        raise _no_fit(f"{kernel.label} (offline: the builds resolved before)", kernel.commit, selection.explain(), env)
    variant = kernel.variant(selection.chosen)
    assert variant is not None
    _check_remembered(checker, kernel.repo_id, variant)
    return Resolved(kernel, selection.chosen, requirement)


def pin(
    settings: HubSettings,
    source: HubSource,
    requirement: Requirement,
    env: Environment,
    check_arch: bool,
    trust_remote_code: bool | Sequence[str],
    checker: ReleaseChecker,
) -> tuple[Resolved, tuple[str, ...], dict[str, Any] | None, dict[str, bytes]]:
    """`requirement` resolved and its build for `env` pinned, online (resolve_online's answer) or, offline, as
    resolved before (resolve_remembered's, with no variant names, document or files read). Raises KernelMoved
    where the kernel moved: online as its kernel-status.toml says, offline as remembered (remember_move)."""
    resolutions = Resolutions(settings.endpoint, state_dir())
    remembered = resolutions.read(requirement)
    if settings.offline:
        move = resolutions.read_move(requirement) if remembered is None else None
        if move is not None:  # online, get_kernel followed a move for it: follow the same
            raise moved_to(requirement, *move)
        resolved = resolve_remembered(
            remembered, requirement, env, check_arch, settings.cache_dir, checker, trust_remote_code
        )
        return resolved, (), None, {}
    return resolve_online(source, requirement, env, check_arch, remembered, trust_remote_code, checker)


def remember(settings: HubSettings, resolved: Resolved, names: tuple[str, ...]) -> None:
    """Keep what was resolved online, so that the same call works offline afterwards."""
    Resolutions(settings.endpoint, state_dir()).remember(
        resolved.kernel, names, resolved.requirement, resolved.publisher_trusted, resolved.remembered
    )


def remember_move(settings: HubSettings, moved: KernelMoved) -> None:
    """Keep the move followed online, so that the same call follows it offline afterwards (pin raises it)."""
    Resolutions(settings.endpoint, state_dir()).remember_move(moved.requirement, moved.commit, moved.redirect)
