"""`get_kernel`, `has_kernel` and `get_kernel_variants` without a lock: the notebook one-liners of `kernels`, with
kernelpin's checks (kernelpin.front.hub says which). Each asks the resolvers of a lockless load (LOCAL_KERNELS, then
the Hub) through the one load front (kernelpin.loading.front)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from kernelpin.format.spec import requirement_from_arguments
from kernelpin.hub.source import HubSettings, HubSource
from kernelpin.loading.local_kernels import override_for

# get_kernel and has_kernel ask the Hub for the kernel's refs first where they will ask for them (online, LOCAL_KERNELS
# not naming it), then import the rest of their way (the resolvers, the store, the trust gate, the loader) and run
# the checks before the Hub is asked (the environment, the publisher policy, what was resolved before): those cannot
# make a call ask the Hub anything else first, only fail it, and a warm call's one request runs beside them.


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
    source = HubSource.from_env(refs_ahead=requirement if override_for(repo_id) is None else None)
    from kernelpin.front.hub import hub_resolvers
    from kernelpin.loading import front
    from kernelpin.loading.runtime import environment_for
    from kernelpin.lockless import release_checker_here

    checker = release_checker_here()
    resolvers = hub_resolvers(environment_for(backend), check_arch, trust_remote_code, checker, source)
    return front.load(front.Request(repo_id, requirement), resolvers)


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
    binary (online it reads the listing and the chosen build's metadata.json; offline what was resolved). A moved
    kernel is followed as get_kernel follows it."""
    requirement = requirement_from_arguments(repo_id, version, revision)
    override = override_for(repo_id)
    source = HubSource.from_env(refs_ahead=requirement if override is None else None)
    from kernelpin.errors import NoVariantError
    from kernelpin.front.hub import hub_resolvers
    from kernelpin.loading import local_override
    from kernelpin.loading.runtime import environment_for
    from kernelpin.lockless import release_checker_here

    env = environment_for(backend)
    try:
        checker = release_checker_here()
        if override is not None:
            directory, _ = local_override.choose(repo_id, override, env, check_arch)
            local_override.admit(repo_id, directory, checker.policy, "answering from", stacklevel=3)
            return True
        _, hub = hub_resolvers(env, check_arch, trust_remote_code, checker, source)
        hub.answer(requirement)
    except NoVariantError:
        return False
    return True


def get_kernel_variants(
    repo_id: str,
    *,
    revision: str | None = None,
    version: int | str | None = None,
    backend: str | None = None,
) -> list[Any]:
    """Every build variant of the kernel judged for this machine, as `kernels.get_kernel_variants` answers (same
    arguments): kernels' own VariantAccepted / VariantRejected (`.variant`, a kernels variant; `.reason`),
    those that fit first with the one get_kernel would choose leading, then the others, each with kernelpin's
    reason. kernelpin.variants() answers the same judgement without kernels (kernelpin.VariantFit)."""
    from kernelpin.builds import kernel_variants
    from kernelpin.loading import kernels_internals  # kernels' own classes: this function alone answers with them
    from kernelpin.loading.runtime import environment_for

    purpose = "kernelpin.get_kernel_variants, which answers kernels' VariantAccepted and VariantRejected,"
    parse = kernels_internals.attribute("variants", "parse_variant", purpose)
    accepted = kernels_internals.attribute("variants", "VariantAccepted", purpose)
    rejected = kernels_internals.attribute("variants", "VariantRejected", purpose)
    requirement = requirement_from_arguments(repo_id, version, revision)
    fits = kernel_variants(HubSource(HubSettings.from_env()), requirement, environment_for(backend))
    return [accepted(parse(fit.name)) if fit.fits else rejected(parse(fit.name), fit.reason) for fit in fits]
