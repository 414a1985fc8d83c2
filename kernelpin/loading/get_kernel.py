"""`get_kernel` without a lock: the notebook one-liner of `kernels`, with kernelpin's checks.

`kernelpin.get_kernel(repo, version=1)` takes what `kernels.get_kernel` takes (switching is one import) and
resolves on the spot: `version=N` is the branch vN as kernels reads it, `version="^1.2"` a range over version
tags (kernelpin only), `revision=` a tag, branch or commit. Only the variant this machine needs is pinned
(its metadata.json read in memory, checked against the file listing) and downloaded, every file checked
against its metadata.json digest and size before it is used, the kernel's `python-depends` and
`kernels-minver` are checked before any binary is downloaded, and only verified bytes are imported
(kernelpin.loading.loader). What was resolved is remembered where only this user writes (kernelpin.store.resolutions), so
the same call works offline afterwards, `version=N` included. An `UnpinnedKernelWarning` says how to pin it.

Trust as `lock` has it (kernelpin.trust.policy), with the publisher policy of the project around the working
directory (its [tool.kernelpin.trust], else the defaults): a publisher the policy does not name needs the Hub's
trusted mark or `trust_remote_code` (checked before any file of the kernel is read), and the chosen variant's
Sigstore bundle, where it has one or the policy requires one, is verified before its metadata.json is parsed.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from kernelpin.errors import KernelpinError, NoVariantError
from kernelpin.format.layout import BUILD_DIR, METADATA
from kernelpin.format.lockfile import LockedKernel, LockedVariant, choose_build
from kernelpin.format.metadata import MAX_METADATA_SIZE
from kernelpin.format.spec import Requirement, describe_value, parse_requirement, requirement_from_arguments
from kernelpin.format.variant import Environment, Variant, arch_rejection, exact_build, select
from kernelpin.hub.source import HubSettings, HubSource
from kernelpin.loading import local_override, python_depends
from kernelpin.loading.importing import Verified, import_pinned
from kernelpin.loading.runtime import environment_for, module_name
from kernelpin.project import find_project, read_policy
from kernelpin.resolve import KernelMoved, Located, Pinner, locate, pick_revision, same_publisher, served_as
from kernelpin.store.content import Store
from kernelpin.store.resolutions import Remembered, Resolutions, state_dir
from kernelpin.trust.checker import ReleaseChecker
from kernelpin.trust.gate import Evidence, EvidenceKind, admit_publisher, enforce
from kernelpin.trust.policy import Policy
from kernelpin.trust.receipts import SignatureReceipts

if TYPE_CHECKING:
    from kernelpin.builds import VariantFit


class UnpinnedKernelWarning(UserWarning):
    """A kernel was loaded without a lock; the message says how to pin it."""


@dataclass(frozen=True)
class Resolved:
    """One kernel resolved for this machine: the kernel with (at least) the chosen variant pinned, and whether
    the Hub's trusted mark on its publisher is what let it through (remembered with it, kernelpin.store.resolutions)."""

    kernel: LockedKernel
    variant: str
    requirement: Requirement
    publisher_trusted: bool = False


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
    call waits for one round trip less. Neither waited for nor its failure raised when another build is chosen,
    and its thread is a daemon: an answer nobody waits for never holds up the interpreter's exit (an executor's
    threads are joined at exit, up to the request's timeout)."""
    if variant is None:
        return None
    ahead: Future[bytes | None] = Future()

    def read() -> None:
        try:
            ahead.set_result(
                source.read_ahead(repo_id, repo_type, commit, f"{BUILD_DIR}/{variant}/{METADATA}", MAX_METADATA_SIZE)
            )
        except BaseException as error:  # noqa: BLE001  # handed to whoever waits for it
            ahead.set_exception(error)

    threading.Thread(target=read, name="kernelpin-metadata-ahead", daemon=True).start()
    return variant, ahead


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
        with ThreadPoolExecutor(max_workers=1) as pool:  # the publisher check runs beside the refs request
            trusted = pool.submit(check)
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
    return Resolved(kernel, chosen, requirement, marked), names, document, fetched


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


def get_kernel(
    repo_id: str,
    *,
    revision: str | None = None,
    version: int | str | None = None,
    backend: str | None = None,
    user_agent: str | dict[str, Any] | None = None,
    trust_remote_code: bool | list[str] = False,
    check_arch: bool = True,
) -> ModuleType:
    """Load a kernel from the Hub without a lock, verified; arguments as `kernels.get_kernel`'s.

    `version` is a major version (the branch vN, as kernels reads it) or, kernelpin only, a range over
    version tags ("^1.2"); `revision` a tag, branch or commit. `backend="cpu"` takes a CPU build on an
    accelerator's machine; `check_arch=False` skips the GPU-arch check of the chosen build;
    `trust_remote_code` (True, or a list of repository ids) allows publishers the Hub does not mark trusted.
    `user_agent` is accepted for compatibility; kernelpin's requests carry huggingface_hub's user agent.
    LOCAL_KERNELS overrides the Hub for the repositories it names (kernelpin.loading.local_override).
    """
    del user_agent  # accepted so that switching from kernels is one import
    requirement = requirement_from_arguments(repo_id, version, revision)
    env = environment_for(backend)
    override = local_override.override_for(repo_id)
    checker = release_checker_here()
    if override is not None:
        return local_override.load(repo_id, override, env, checker.policy, check_arch=check_arch)
    return _load_resolved(requirement, env, check_arch, trust_remote_code, checker)


MAX_REDIRECTS = 4  # kernel-status.toml moves followed for one kernel; a longer chain (or a loop) is refused


class KernelRedirectWarning(UserWarning):
    """A kernel's repository says it moved (kernel-status.toml), and get_kernel loaded the destination."""


def _follow(
    moved: KernelMoved,
    env: Environment,
    check_arch: bool,
    trust_remote_code: bool | Sequence[str],
    checker: ReleaseChecker,
    moved_from: tuple[str, ...],
) -> ModuleType:
    """Load what a moved kernel's kernel-status.toml names, where the publisher policy admits it: in the same
    organization, as any kernel of that publisher; in another, only when the policy or trust_remote_code names the
    destination (a move across organizations is a new publisher, which the Hub's trusted mark alone does not make
    one the caller chose)."""
    old, new = moved.requirement.repo_id, moved.instead.repo_id
    chain = (*moved_from, old)
    if new in chain or len(chain) > MAX_REDIRECTS:
        raise KernelpinError(
            f"{' -> '.join((*chain, new))}: kernel-status.toml redirects loop or run longer than "
            f"{MAX_REDIRECTS}; ask the publisher, or name the repository to load"
        )
    named = checker.policy.publisher(new) is not None or (
        not isinstance(trust_remote_code, bool) and new in trust_remote_code
    )
    if not same_publisher(old, new) and not named:
        org = new.split("/", 1)[0]
        raise KernelpinError(
            f"{old} has moved to {new} (its kernel-status.toml at {moved.commit[:12]} says so), "
            f"another organization's: a new publisher, which neither the publisher policy nor "
            f"trust_remote_code names; if you trust it, pass trust_remote_code=[{new!r}] or add "
            f'[tool.kernelpin.trust.publishers."{org}"] to pyproject.toml'
        )
    warnings.warn(
        f"{old} has moved to {new} (its kernel-status.toml at {moved.commit[:12]} says so); loading "
        f"{new} {moved.instead.text} instead: to load it by its new name, get_kernel({new!r}, ...)",
        KernelRedirectWarning,
        stacklevel=4,
    )
    return _load_resolved(moved.instead, env, check_arch, trust_remote_code, checker, chain)


def _load_resolved(
    requirement: Requirement,
    env: Environment,
    check_arch: bool,
    trust_remote_code: bool | Sequence[str],
    checker: ReleaseChecker,
    moved_from: tuple[str, ...] = (),
) -> ModuleType:
    """Load one kernel and, first, the kernels its variant depends on (following kernel-status.toml moves)."""
    settings = HubSettings.from_env()
    source = HubSource(settings)
    resolutions = Resolutions(settings.endpoint, state_dir())
    remembered = resolutions.read(requirement)
    if settings.offline:
        resolved = resolve_remembered(
            remembered, requirement, env, check_arch, settings.cache_dir, checker, trust_remote_code
        )
        document: dict[str, Any] | None = None
        fetched: dict[str, bytes] = {}
        names: tuple[str, ...] = ()
    else:
        try:
            resolved, names, document, fetched = resolve_online(
                source, requirement, env, check_arch, remembered, trust_remote_code, checker
            )
        except KernelMoved as moved:
            return _follow(moved, env, check_arch, trust_remote_code, checker, moved_from)
    kernel, variant = resolved.kernel, resolved.kernel.variant(resolved.variant)
    assert variant is not None
    what = f"{kernel.label} ({variant.name})"
    if document is not None:  # before anything is downloaded
        python_depends.check(document, env.selected.name, what)
    if not settings.offline:
        resolutions.remember(kernel, names, requirement, resolved.publisher_trusted)
    # Only what the GPU runs (before any download): the variant's per-capability build for it, if it has one.
    installed, build = choose_build(kernel, variant.name, env, check_arch)
    if build.build is not None:
        fetched = {}  # the small files read to pin the variant are the fat build's, not this build's

    def verify() -> Verified:
        store = Store(source)
        directory = store.ensure_variant(installed, variant.name, fetched=fetched).directory
        taken = installed.variant(variant.name)
        assert taken is not None  # choose_build narrows the variant, never drops it
        return Verified(directory, taken, store.receipts)

    def cycle(chain: str) -> KernelpinError:
        return KernelpinError(
            f"kernel dependency cycle: {chain} ({what}, kernel-depends); a kernel cannot depend "
            "on itself: ask the publisher to break it"
        )

    def dependency(repo_id: str, value: object) -> ModuleType:
        return _load_resolved(
            parse_requirement(
                repo_id, value, f"{what} kernel-depends", declared=f"the metadata.json of {what} (ask its publisher)"
            ),
            env,
            check_arch,
            trust_remote_code,
            checker,
        )

    # python-depends: checked above when read now, else (remembered) from the verified store.
    module, imported = import_pinned(
        module_name(kernel.repo_id, kernel.commit, variant.name),
        what,
        (kernel.repo_id, kernel.commit),
        verify,
        cycle_error=cycle,
        python_backend=env.selected.name if document is None else None,
        load_dependency=dependency,
    )
    if imported:
        warnings.warn(
            f"{kernel.label} was loaded without a lock (commit {kernel.commit[:12]}); to pin it, "
            f"{pin_hint(requirement)}",
            UnpinnedKernelWarning,
            stacklevel=3,
        )
    # Which build was taken: a per-capability one, or the fat one (an attribute kernelpin adds to the module).
    setattr(module, "__kernelpin_build__", build.describe())  # noqa: B010  (mypy: a module has no such attribute)
    return module


def has_kernel(
    repo_id: str,
    *,
    revision: str | None = None,
    version: int | str | None = None,
    backend: str | None = None,
    trust_remote_code: bool | list[str] = False,
    check_arch: bool = True,
) -> bool:
    """Whether a build of the kernel fits this machine (arguments as `kernels.has_kernel`'s); downloads no
    binary (online it reads the listing and the chosen build's metadata.json; offline what was resolved)."""
    requirement = requirement_from_arguments(repo_id, version, revision)
    env = environment_for(backend)
    override = local_override.override_for(repo_id)
    try:
        checker = release_checker_here()
        if override is not None:
            directory, _ = local_override.choose(repo_id, override, env, check_arch)
            local_override.admit(repo_id, directory, checker.policy, "answering from", stacklevel=3)
            return True
        settings = HubSettings.from_env()
        source = HubSource(settings)
        remembered = Resolutions(settings.endpoint, state_dir()).read(requirement)
        if settings.offline:
            resolve_remembered(remembered, requirement, env, check_arch, settings.cache_dir, checker, trust_remote_code)
        else:
            resolve_online(source, requirement, env, check_arch, remembered, trust_remote_code, checker)
    except NoVariantError:
        return False
    return True


def get_kernel_variants(
    repo_id: str,
    *,
    revision: str | None = None,
    version: int | str | None = None,
    backend: str | None = None,
) -> list[VariantFit]:
    """Every build variant of the kernel judged for this machine (arguments as `kernels.get_kernel_variants`'):
    those that fit first, the one get_kernel would choose leading, then the others with the reason."""
    from kernelpin.builds import kernel_variants

    requirement = requirement_from_arguments(repo_id, version, revision)
    return kernel_variants(HubSource(HubSettings.from_env()), requirement, environment_for(backend))
