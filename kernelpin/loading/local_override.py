"""LOCAL_KERNELS: a kernel author's build on disk in place of the Hub, as `kernels` reads the variable.

`LOCAL_KERNELS="org/a=/path/a:org/b=/path/b"`: each path a directory holding `build/<variant>/` (or the
variants themselves, or one variant directory with its metadata.json, used whatever its name), used instead of the Hub for that repository by
`get_kernel` and `has_kernel`. The override is never silent: every load through it warns
(LocalKernelOverrideWarning) naming the repository and the directory. Where a lock decides what runs
(`kernelpin.load`, the kernelize integration's locked layers) an override is refused unless it is allowed
explicitly with KERNELPIN_ALLOW_LOCAL_KERNELS=1, so it cannot reach production by accident.

A local build is held to the same checks as a downloaded one: its metadata.json must list a digest of
every file it runs; each file is checked against it, and only listed modules are imported (kernelpin.loading.loader).
"""

from __future__ import annotations

import hashlib
import os
import re
import warnings
from collections.abc import Mapping
from pathlib import Path

from kernelpin.errors import IntegrityError, KernelpinError, NoVariantError
from kernelpin.files.integrity import sha256_file
from kernelpin.format.layout import BUILD_DIR, METADATA
from kernelpin.format.lockfile import LockedFile, LockedVariant, is_variant_name
from kernelpin.format.metadata import BuildMetadata, check_size, parse_metadata
from kernelpin.format.variant import Environment, Variant, select
from kernelpin.loading import python_depends
from kernelpin.loading.front import PinnedBuild, Request, Resolver
from kernelpin.loading.importing import Verified
from kernelpin.loading.local_kernels import VARIABLE, override_for
from kernelpin.records import record
from kernelpin.trust.gate import Evidence, EvidenceKind, enforce
from kernelpin.trust.policy import Policy

ALLOW_VARIABLE = "KERNELPIN_ALLOW_LOCAL_KERNELS"
_TRUE = {"1", "yes", "true", "on"}


class LocalKernelOverrideWarning(UserWarning):
    """A kernel was loaded from a directory named by LOCAL_KERNELS instead of the Hub."""


def allowed_under_lock(environ: Mapping[str, str] = os.environ) -> bool:
    return environ.get(ALLOW_VARIABLE, "").strip().lower() in _TRUE


def refuse_under_lock(repo_id: str, lock: object, environ: Mapping[str, str] = os.environ) -> Path | None:
    """For a load that a lock decides: the override to use when allowed explicitly, None when there is none;
    an override that is not allowed is an error (a build on disk must never replace a locked one by accident)."""
    path = override_for(repo_id, environ)
    if path is None or allowed_under_lock(environ):
        return path
    raise KernelpinError(
        f"{VARIABLE} overrides {repo_id} with {path}, but this load follows {lock}, which pins what runs: "
        f"unset {VARIABLE} (or remove {repo_id} from it), or allow the local build explicitly with {ALLOW_VARIABLE}=1"
    )


def variant_directories(base: Path) -> list[Path]:
    """The build variant directories directly in `base` (none when it is not a directory), sorted by name."""
    if not base.is_dir():
        return []
    return [
        entry
        for entry in sorted(base.iterdir())
        if entry.is_dir() and is_variant_name(entry.name) and _is_variant(entry.name)
    ]


def _candidates(root: Path) -> dict[str, Path]:
    """Variant directories of a local kernel, searched as `kernels` does: ROOT/build/<variant>/, then
    ROOT/<variant>/."""
    for base in (root / BUILD_DIR, root):
        found = {entry.name: entry for entry in variant_directories(base)}
        if found:
            return found
    return {}


def _is_variant(name: str) -> bool:
    try:
        Variant.parse(name)
    except ValueError:
        return False
    return True


def _metadata(directory: Path, where: str) -> BuildMetadata:
    path = directory / METADATA
    if not path.is_file():
        raise KernelpinError(
            f"{where}: no {METADATA}; a local build needs one listing the sha256 of its files "
            "(tools/builder/op.py and kernel-builder write it)"
        )
    check_size(path.stat().st_size, where)
    return parse_metadata(path.read_bytes(), f"{where}/{METADATA}")


def choose(repo_id: str, root: Path, env: Environment, check_arch: bool = True) -> tuple[Path, BuildMetadata]:
    """The variant directory of the local build at `root` that fits `env`, and its metadata."""
    where = f"{VARIABLE} {repo_id}={root}"
    if not root.is_dir():
        relative = "" if root.is_absolute() else f" (a relative path, read from the working directory {Path.cwd()})"
        problem = "is not a directory" if root.exists() else "does not exist"
        raise NoVariantError(
            f"{where}: {root}{relative} {problem}; point {VARIABLE} at the directory of a build "
            f"(holding {BUILD_DIR}/<variant>/, or one variant's files with its {METADATA})"
        )
    candidates = _candidates(root)
    if not candidates and (root / METADATA).is_file():  # ROOT is one variant directory: used as it is (as kernels)
        return root, _metadata(root, where)
    if not candidates:
        raise NoVariantError(f"{where}: no build variants there (expected {root}/{BUILD_DIR}/<variant>/)")
    metadata = {name: _metadata(directory, f"{where}: {directory}") for name, directory in candidates.items()}
    selection = select({name: meta.archs if check_arch else None for name, meta in metadata.items()}, env)
    if selection.chosen is None:
        raise NoVariantError(
            f"{where}: no build variant fits this environment ({env.describe()}):\n{selection.explain()}"
        )
    return candidates[selection.chosen], metadata[selection.chosen]


def verified_variant(directory: Path, metadata: BuildMetadata, where: str) -> LockedVariant:
    """The local variant pinned by its own metadata.json: every digest checked against the file now."""
    if not metadata.digests:
        raise KernelpinError(
            f"{where}: {METADATA} lists no digest of the build's files, so nothing can be "
            "verified; rebuild it (the build writes digest.files)"
        )
    files = []
    for relative, sha256 in sorted(metadata.digests.items()):
        path = directory / relative
        if not path.is_file() or (path.is_symlink() and not path.resolve().is_relative_to(directory.resolve())):
            raise IntegrityError(f"{where}: {relative} is listed in {METADATA} but is not a file of the build")
        actual = sha256_file(path)
        if actual != sha256:
            raise IntegrityError(
                f"{where}: {relative} has sha256 {actual}, not the {sha256} its {METADATA} "
                "lists; the build changed after its metadata was written: rebuild it"
            )
        files.append(LockedFile(relative, path.stat().st_size, sha256))
    own = directory / METADATA
    files.append(LockedFile(METADATA, own.stat().st_size, sha256_file(own)))
    return LockedVariant(
        directory.name,
        tuple(sorted(files, key=lambda f: f.path)),
        metadata.backend,
        metadata.archs,
        metadata.kernel_depends,
    )


def module_name(repo_id: str, directory: Path) -> str:
    """Unique per build directory, and never the name of a Hub build (which is per commit)."""
    digest = hashlib.sha256(str(directory.resolve()).encode()).hexdigest()[:12]
    return "_kernelpin_local_" + re.sub(r"\W", "_", f"{repo_id}_{digest}")


def admit(repo_id: str, directory: Path, policy: Policy, doing: str = "loading", stacklevel: int = 4) -> None:
    """Put the local build to the one decision (kernelpin.trust.gate: nothing signed it, the user named it) and
    warn that the override is in effect: every answer from a local build says so, a load's and has_kernel's."""
    enforce(policy, repo_id, directory.name, Evidence(EvidenceKind.LOCAL))
    warnings.warn(
        f"{VARIABLE} overrides {repo_id}: {doing} the local build {directory} instead of the Hub",
        LocalKernelOverrideWarning,
        stacklevel=stacklevel,
    )


@record
class LocalResolver:
    """Builds on disk, by repository: LOCAL_KERNELS' (warning on every load that the override is in effect; under
    a lock, `under_lock`, refused unless allowed explicitly), or the one directory get_local_kernel names
    (`named`: no warning, the caller named it). Answers None for a repository it does not name. A build's
    kernel-depends are asked as kernels asks them: of LOCAL_KERNELS, then of `hub`; without `hub` (under a lock,
    which pins what runs) a build with kernel-depends is refused."""

    env: Environment
    policy: Policy
    check_arch: bool = True
    under_lock: object = None  # the lock that decides the load, if one does
    named: Mapping[str, Path] | None = None
    stacklevel: int = 6  # the override's warning names the caller's line: the user's call 5 frames up
    hub: Resolver | None = None  # what answers a build's kernel-depends that LOCAL_KERNELS does not override

    def resolve(self, request: Request) -> PinnedBuild | None:
        if self.named is not None:
            root = self.named.get(request.repo_id)
        elif self.under_lock is not None:
            root = refuse_under_lock(request.repo_id, self.under_lock)
        else:
            root = override_for(request.repo_id)
        if root is None:
            return None
        directory, metadata = choose(request.repo_id, root, self.env, self.check_arch)
        what = f"{request.repo_id} from {VARIABLE} ({directory})" if self.named is None else f"{directory}"
        if metadata.kernel_depends and self.hub is None:
            raise KernelpinError(
                f"{what}: a local build with kernel-depends is not loaded where a lock decides what runs (the lock "
                f"pins none of its dependencies); remove it from {VARIABLE}, or load it with get_kernel or "
                "get_local_kernel"
            )
        python_depends.check(metadata.document, self.env.selected.name, what)
        if self.named is None:
            admit(request.repo_id, directory, self.policy, stacklevel=self.stacklevel)
        else:
            enforce(self.policy, request.repo_id, directory.name, Evidence(EvidenceKind.LOCAL))

        def cycle(chain: str) -> KernelpinError:
            return KernelpinError(
                f"kernel dependency cycle: {chain} ({what}, kernel-depends); a kernel cannot depend on itself"
            )

        overrides = LocalResolver(self.env, self.policy, self.check_arch, hub=self.hub)
        # python-depends checked above, before the warning; kernel-depends: LOCAL_KERNELS, then the Hub.
        return PinnedBuild(
            module_name(request.repo_id, directory),
            what,
            (request.repo_id, None),
            lambda: Verified(directory, verified_variant(directory, metadata, what)),
            python_backend=None,
            dependencies=() if self.hub is None else (overrides, self.hub),
            cycle_error=cycle,
        )
