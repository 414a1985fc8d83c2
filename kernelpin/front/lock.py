"""A kernelpin.lock as a resolver of the load front (kernelpin.loading.front): what `kernelpin.load` imports, the
locked, verified build of a kernel that fits this process's torch."""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

from kernelpin.errors import KernelpinError
from kernelpin.format import lockfile
from kernelpin.format.lockfile import choose_build, choose_variant
from kernelpin.format.variant import Environment
from kernelpin.hub.source import HubSettings, HubSource
from kernelpin.loading import front
from kernelpin.loading.front import PinnedBuild, Request
from kernelpin.loading.importing import Verified
from kernelpin.loading.local_kernels import override_for
from kernelpin.loading.runtime import (
    caller_file,
    environment_for,
    lock_path,
    module_name,
    policy_beside,
    read_lock_cached,
)
from kernelpin.records import record
from kernelpin.store.content import Store
from kernelpin.store.receipts import Receipts
from kernelpin.trust.gate import Evidence, EvidenceKind, enforce
from kernelpin.trust.policy import Policy


@record
class LockResolver:
    """The builds a kernelpin.lock pins: the variant for this environment, its signer (as `lock` verified it)
    checked against today's policy, its files from `target` (a `sync --target` directory) or the Hub cache,
    downloading missing ones unless HF_HUB_OFFLINE=1. A kernel's kernel-depends from the same lock and the same
    backend (as `kernels` does: a CPU build's are CPU builds too). A kernel LOCAL_KERNELS names is its local
    build where that is allowed explicitly (kernelpin.loading.local_override), else refused."""

    path: Path
    pinned: lockfile.LockEntries
    env: Environment
    policy: Policy
    check_arch: bool = True
    target: Path | None = None
    settings: HubSettings | None = None  # where missing files come from (None: as the environment says)

    def resolve(self, request: Request) -> PinnedBuild:
        repo_id = request.repo_id
        kernel = self.pinned.kernel(repo_id)
        if kernel is None:
            locked = ", ".join(self.pinned.repo_ids) or "none"
            raise KernelpinError(f"{repo_id} is not in {self.path} (locked: {locked}); run `kernelpin add {repo_id}`")
        # LOCAL_KERNELS under a lock: refused unless allowed explicitly (kernelpin.loading.local_override, imported
        # only where LOCAL_KERNELS names the kernel: most loads have no override to refuse).
        if override_for(repo_id) is not None:
            from kernelpin.loading.local_override import LocalResolver

            local = LocalResolver(self.env, self.policy, self.check_arch, under_lock=self.path, stacklevel=7).resolve(
                request
            )
            if local is not None:
                return local
        variant = choose_variant(kernel, self.env, self.check_arch)
        # Only what the GPU runs: the variant's per-capability build for it, where the lock has one (before any
        # download).
        kernel, build = choose_build(kernel, variant, self.env, self.check_arch)
        locked_variant = kernel.variant(variant)
        assert locked_variant is not None  # chosen among the kernel's variants
        # The signer `lock` verified, against today's policy: string compares, no cryptography (`sync` and
        # `kernelpin verify --signatures` verify the bundle itself; the lock pins its sha256 like any file's).
        enforce(self.policy, repo_id, variant, Evidence.recorded(locked_variant.signature, EvidenceKind.LOCK))

        def verify() -> Verified:  # every file (downloading missing ones); needs only read access when all are there
            receipts = Receipts.of_user()
            store = Store(HubSource(self.settings or HubSettings.from_env()), self.target, receipts=receipts)
            return Verified(store.ensure_variant(kernel, variant).directory, locked_variant, receipts)

        def cycle(chain: str) -> KernelpinError:  # only a hand-edited lock has one: locking refuses cycles
            return KernelpinError(
                f"{self.path}: kernel dependency cycle {chain}; run `kernelpin lock` to regenerate the lock"
            )

        return PinnedBuild(
            module_name(kernel.repo_id, kernel.commit, variant),
            f"{kernel.label} ({variant})",
            (kernel.repo_id, kernel.commit),
            verify,
            python_backend=self.env.selected.name,
            dependencies=(self,),
            cycle_error=cycle,
            build=build.describe(),
        )


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
    path = lock_path(lock, caller_file(2) if lock is None else None)
    pinned = read_lock_cached(path)
    if pinned is None:
        raise KernelpinError(f"{path} does not exist; run `kernelpin lock`")
    target = target or os.environ.get("KERNELPIN_TARGET") or None
    resolver = LockResolver(
        path, pinned, environment_for(backend), policy_beside(path), check_arch, Path(target) if target else None
    )
    return front.load(Request(repo_id), (resolver,))
