"""The Hub without a lock as a resolver of the load front (kernelpin.loading.front): what `get_kernel` loads,
resolved on the spot online or as resolved before offline (kernelpin.lockless), its python-depends and
kernels-minver checked before any binary is downloaded, only verified bytes imported (kernelpin.loading.loader),
and an UnpinnedKernelWarning saying how to pin it. A kernel whose kernel-status.toml says it moved is followed
where the publisher policy admits the destination (KernelRedirectWarning)."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from dataclasses import field

from kernelpin import lockless
from kernelpin.errors import KernelpinError
from kernelpin.format.lockfile import choose_build
from kernelpin.format.spec import Requirement, parse_requirement
from kernelpin.format.variant import Environment
from kernelpin.hub.source import HubSettings, HubSource
from kernelpin.loading import python_depends
from kernelpin.loading.front import PinnedBuild, Request
from kernelpin.loading.importing import Verified
from kernelpin.loading.local_override import LocalResolver
from kernelpin.loading.runtime import module_name
from kernelpin.records import record
from kernelpin.resolve import KernelMoved, same_publisher
from kernelpin.store.content import Store
from kernelpin.trust.checker import ReleaseChecker


class UnpinnedKernelWarning(UserWarning):
    """A kernel was loaded without a lock; the message says how to pin it."""


MAX_REDIRECTS = 4  # kernel-status.toml moves followed for one kernel; a longer chain (or a loop) is refused


class KernelRedirectWarning(UserWarning):
    """A kernel's repository says it moved (kernel-status.toml), and get_kernel loaded the destination."""


@record
class HubResolver:
    """The Hub without a lock (online: kernelpin.resolve on the spot, the publisher and the chosen build's signature
    checked, the resolution remembered for offline use) or, offline, what was resolved online before
    (kernelpin.store.resolutions). Answers every request; a kernel's kernel-depends through LOCAL_KERNELS, then
    itself again (as kernels asks them). A kernel whose kernel-status.toml says it moved is followed where the
    publisher policy admits the destination."""

    env: Environment
    check_arch: bool
    trust_remote_code: bool | Sequence[str]
    checker: ReleaseChecker
    settings: HubSettings
    moved_from: tuple[str, ...] = ()
    pinned_by: object = None  # the lock that names the commit asked for (a kernels.lock): no UnpinnedKernelWarning
    # The first resolve's Hub source, where the caller made it: the refs of the kernel asked for may be on their way
    # (HubSource.refs_ahead). A kernel's dependencies, or the one it moved to, are resolved with sources of their own.
    source: HubSource | None = field(default=None, compare=False, repr=False)

    def resolve(self, request: Request) -> PinnedBuild:
        requirement, source = self._requirement(request), self.source or HubSource(self.settings)
        try:
            resolved, names, document, fetched = lockless.pin(
                self.settings, source, requirement, self.env, self.check_arch, self.trust_remote_code, self.checker
            )
        except KernelMoved as moved:
            if not self.settings.offline:  # so that an offline get_kernel follows the same move
                lockless.remember_move(self.settings, moved)
            return self._follow(moved)
        kernel, variant = resolved.kernel, resolved.kernel.variant(resolved.variant)
        assert variant is not None
        what = f"{kernel.label} ({variant.name})"
        if document is not None:  # before anything is downloaded
            python_depends.check(document, self.env.selected.name, what)
        if not self.settings.offline:
            lockless.remember(self.settings, resolved, names)

        # Only what the GPU runs (before any download): the variant's per-capability build for it, if it has one.
        installed, build = choose_build(kernel, variant.name, self.env, self.check_arch)
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

        def unpinned() -> None:
            warnings.warn(
                f"{kernel.label} was loaded without a lock (commit {kernel.commit[:12]}); to pin it, "
                f"{lockless.pin_hint(requirement)}",
                UnpinnedKernelWarning,
                stacklevel=4,
            )

        # python-depends: checked above when read now, else (remembered) from the verified store.
        return PinnedBuild(
            module_name(kernel.repo_id, kernel.commit, variant.name),
            what,
            (kernel.repo_id, kernel.commit),
            verify,
            python_backend=self.env.selected.name if document is None else None,
            dependencies=self._dependencies(),
            cycle_error=cycle,
            imported=unpinned if self.pinned_by is None else None,
            build=build.describe(),
        )

    def _dependencies(self) -> tuple[LocalResolver, HubResolver]:
        """What answers a build's kernel-depends, asked as kernels asks them: LOCAL_KERNELS, then the Hub."""
        hub = dataclasses.replace(self, moved_from=(), source=None)
        return LocalResolver(self.env, self.checker.policy, self.check_arch, hub=hub), hub

    @staticmethod
    def _requirement(request: Request) -> Requirement:
        if isinstance(request.value, Requirement):
            return request.value
        return parse_requirement(
            request.repo_id,
            request.value,
            f"{request.asked_by} kernel-depends",
            declared=f"the metadata.json of {request.asked_by} (ask its publisher)",
        )

    def answer(self, requirement: Requirement) -> None:
        """has_kernel's resolution: resolve's, moves followed as resolve follows them, nothing downloaded."""
        try:
            lockless.pin(
                self.settings,
                self.source or HubSource(self.settings),
                requirement,
                self.env,
                self.check_arch,
                self.trust_remote_code,
                self.checker,
            )
        except KernelMoved as moved:
            checker, chain = admit_move(moved, self.trust_remote_code, self.checker, self.moved_from)
            dataclasses.replace(self, checker=checker, moved_from=chain, source=None).answer(moved.instead)

    def _follow(self, moved: KernelMoved) -> PinnedBuild:
        """What a moved kernel's kernel-status.toml names, where the publisher policy admits it (admit_move)."""
        old, new = moved.requirement.repo_id, moved.instead.repo_id
        checker, chain = admit_move(moved, self.trust_remote_code, self.checker, self.moved_from)
        warnings.warn(
            f"{old} has moved to {new} (its kernel-status.toml at {moved.commit[:12]} says so); loading "
            f"{new} {moved.instead.text} instead: to load it by its new name, get_kernel({new!r}, ...)",
            KernelRedirectWarning,
            stacklevel=6 + 2 * len(self.moved_from),  # through each _follow and resolve before
        )
        moved_on = dataclasses.replace(self, checker=checker, moved_from=chain, source=None)
        return moved_on.resolve(Request(new, moved.instead))


def admit_move(
    moved: KernelMoved, trust_remote_code: bool | Sequence[str], checker: ReleaseChecker, moved_from: tuple[str, ...]
) -> tuple[ReleaseChecker, tuple[str, ...]]:
    """Whether the publisher policy admits a moved kernel's destination: in the same organization, as any kernel
    of that publisher; in another, only when the policy or trust_remote_code names the destination (a move across
    organizations is a new publisher, which the Hub's trusted mark alone does not make one the caller chose).
    Returns the checker the destination is judged by (the policy with the entry of the repository moved from as
    its floor: kernel-status.toml is not signed, so a move never loosens what the policy asked of the repository
    the user named) and the chain of repositories moved from."""
    old, new = moved.requirement.repo_id, moved.instead.repo_id
    chain = (*moved_from, old)
    if new in chain or len(chain) > MAX_REDIRECTS:
        raise KernelpinError(
            f"{' -> '.join((*chain, new))}: kernel-status.toml redirects loop or run longer than "
            f"{MAX_REDIRECTS}; ask the publisher, or name the repository to load"
        )
    named = checker.policy.names(new) or (not isinstance(trust_remote_code, bool) and new in trust_remote_code)
    if not same_publisher(old, new) and not named:
        org = new.split("/", 1)[0]
        raise KernelpinError(
            f"{old} has moved to {new} (its kernel-status.toml at {moved.commit[:12]} says so), "
            f"another organization's: a new publisher, which neither the publisher policy nor "
            f"trust_remote_code names; if you trust it, pass trust_remote_code=[{new!r}] or add "
            f'[tool.kernelpin.trust.publishers."{org}"] to pyproject.toml'
        )
    policy = checker.policy.moved(old, new)
    if policy is checker.policy:
        return checker, chain
    floored = ReleaseChecker(
        policy, checker.project_root, checker.refresh, checker.refresh_timeout, receipts=checker.receipts
    )
    return floored, chain


def hub_resolvers(
    env: Environment,
    check_arch: bool,
    trust_remote_code: bool | Sequence[str],
    checker: ReleaseChecker,
    source: HubSource | None = None,
) -> tuple[LocalResolver, HubResolver]:
    """The resolvers of a load without a lock, asked in this order: LOCAL_KERNELS (a build there with kernel-depends
    gets them as kernels gets them: LOCAL_KERNELS, then the Hub), then the Hub (or offline, what was resolved on it
    before): through `source` where the caller made it (its settings, and what it asked ahead)."""
    settings = HubSettings.from_env() if source is None else source.settings
    hub = HubResolver(env, check_arch, trust_remote_code, checker, settings, source=source)
    return LocalResolver(env, checker.policy, check_arch, hub=hub), hub
