"""The one load front: every load asks resolvers which build to import, then import_pinned imports it.

A resolver answers a request (a repository and what is asked of it) with a pinned build: the module name, the
files' verification (which downloads what is missing), what python-depends check is left, and the resolvers
that answer the build's own kernel-depends. The resolvers of a load are asked in order, as `kernels`' own
SequentialResolver asks them: the first that answers decides (LOCAL_KERNELS answers only for the repositories it
names and lets the next one answer the rest). kernelpin's resolvers: a kernelpin.lock or a kernels.lock
(kernelpin.front.lock), the Hub without a lock and a resolution remembered from it (kernelpin.front.hub), a build on
disk (kernelpin.loading.local_override). This module knows none of them: the front that starts a load hands
them in, so loading needs neither the resolver nor the Hub.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Protocol

from kernelpin.errors import KernelpinError
from kernelpin.loading.importing import Verified, import_pinned
from kernelpin.records import record


@record
class Request:
    """A kernel asked for: its repository, what is asked of it (a kernelpin.format.spec.Requirement for the Hub, a
    kernel-depends value, None where a lock decides), and for a dependency the build whose kernel-depends names it."""

    repo_id: str
    value: object = None
    asked_by: str | None = None


@record
class PinnedBuild:
    """One build chosen and pinned for this process, ready for import_pinned (arguments as it takes them)."""

    module: str  # the module's name in sys.modules: unique per build
    what: str  # the build as messages name it
    kernel: tuple[str, str | None]  # repo id and commit (None: a build on disk)
    verify: Callable[[], Verified]  # every file checked (downloading missing ones)
    python_backend: str | None  # check python-depends from the verified files for this backend (None: done)
    dependencies: Sequence[Resolver] = ()  # what answers the build's kernel-depends
    cycle_error: Callable[[str], KernelpinError] | None = None
    imported: Callable[[], None] | None = None  # said once, when this load imported the build (not before)
    build: str | None = (
        None  # which build was taken (a per-capability one or the fat one): the module's __kernelpin_build__
    )


class Resolver(Protocol):
    def resolve(self, request: Request) -> PinnedBuild | None:
        """The build `request` names, pinned; None where this resolver does not answer for the repository."""
        ...


def resolve(request: Request, resolvers: Sequence[Resolver]) -> PinnedBuild:
    """The first answer of `resolvers`, asked in order."""
    for resolver in resolvers:
        build = resolver.resolve(request)
        if build is not None:
            return build
    raise KernelpinError(f"{request.repo_id}: nothing can load it here ({len(resolvers)} resolvers asked)")


def load(request: Request, resolvers: Sequence[Resolver]) -> ModuleType:
    """Import the build `resolvers` choose for `request`, and first the kernels it depends on, through theirs."""
    build = resolve(request, resolvers)

    def dependency(repo_id: str, value: object) -> ModuleType:
        return load(Request(repo_id, value, build.what), build.dependencies)

    module, imported = import_pinned(
        build.module,
        build.what,
        build.kernel,
        build.verify,
        python_backend=build.python_backend,
        load_dependency=dependency,
        cycle_error=build.cycle_error,
    )
    if imported and build.imported is not None:
        build.imported()
    if build.build is not None:
        setattr(module, "__kernelpin_build__", build.build)  # noqa: B010  (mypy: a module has no such attribute)
    return module
