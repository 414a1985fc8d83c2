"""`kernelpin verify`: re-hash the installed files of every locked kernel against kernelpin.lock and classify
each one (ok, modified, missing, unlisted, or a linked variant directory kernelpin never follows)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from kernelpin.errors import KernelpinError
from kernelpin.files.integrity import verify_file
from kernelpin.format.layout import METADATA, SIGNATURE
from kernelpin.format.lockfile import LockedKernel, LockedVariant
from kernelpin.format.metadata import parse_metadata
from kernelpin.hub.source import HubSource
from kernelpin.project import Project, find_project
from kernelpin.records import record
from kernelpin.relock import release_checker_when_needed
from kernelpin.store import lockfiles
from kernelpin.store.install import Installer, unlisted_entries
from kernelpin.trust.checker import ReleaseChecker
from kernelpin.trust.gate import enforce_capability_build

# What verify found for a file: "ok" (its bytes match the lock), "modified", "missing" (a locked file of an
# installed variant), "unlisted" (in a variant directory, not in the lock), "link" (the variant directory is a
# symbolic link: what it points to is not kernelpin's, never listed nor hashed); with `signatures`, one row more per
# installed signed variant: "signed" (its Sigstore bundle and files verify against the policy and the lock's
# signer) or "signature" (they do not; `error` says why).
STATUSES = ("ok", "modified", "missing", "unlisted", "link", "signed", "signature")


@record
class FileStatus:
    repo: str
    variant: str
    path: str  # below the variant directory; for "link", the link itself
    status: str  # one of STATUSES
    error: str | None = None  # for "signature": the one-line cause and fix

    def as_json(self) -> dict[str, str]:
        """The row as `kernelpin verify --json` prints it: `error` only where there is one."""
        return {key: value for key, value in dataclasses.asdict(self).items() if value is not None}


@record
class Verification:
    locked_kernels: int
    files: list[FileStatus]

    @property
    def problems(self) -> list[FileStatus]:
        return [row for row in self.files if row.status not in ("ok", "signed")]

    @property
    def ok(self) -> bool:
        return not self.problems


def verify(
    project: Project | None = None,
    source: HubSource | None = None,
    target: Path | None = None,
    signatures: bool = False,
) -> Verification:
    """Classify every installed file of every locked kernel (in the Hub cache, or a `sync --target` directory);
    with `signatures`, also verify each installed variant's bundle and files against the policy and the signer
    the lock recorded, as `kernels verify-signature` does (one row for its metadata.json.sigstore). By default
    the project around the working directory and the Hub the environment names."""
    project, source = project or find_project(Path.cwd()), source or HubSource.from_env()
    locked = lockfiles.read(project.lockfile)
    if locked is None:
        raise KernelpinError(f"no {project.lockfile.name}; run `kernelpin lock`")
    installer = Installer(source, target)
    report: list[FileStatus] = []
    with release_checker_when_needed(project, source) as checker:  # made for the first signed variant
        for kernel in locked.kernels:
            for variant in kernel.variants:
                # A per-capability build installs its own directory and, of the variant, only its signed
                # metadata.json (and bundle): that alone is no variant installed with files missing.
                builds = [replace(kernel, variants=(variant.narrowed(build),)) for build in variant.capability_builds]
                slim = any(_variant_report(installer, narrowed, narrowed.variants[0], None) for narrowed in builds)
                report += _variant_report(installer, kernel, variant, checker if signatures else None, slim)
                for narrowed in builds:
                    rows = _variant_report(installer, narrowed, narrowed.variants[0], None)
                    if rows and signatures:
                        rows += _build_signature(installer, kernel, variant, narrowed.variants[0], checker)
                    report += rows
    return Verification(len(locked.kernels), report)


def _variant_report(
    installer: Installer,
    kernel: LockedKernel,
    variant: LockedVariant,
    checker: Callable[[], ReleaseChecker] | None,
    slim: bool = False,
) -> list[FileStatus]:
    """verify's rows for one locked variant; with `checker`, its signature's too where it is installed."""
    linked = installer.linked_directory(kernel, variant.name)
    if linked is not None:  # what it points to is not kernelpin's: never listed nor hashed
        return [FileStatus(kernel.repo_id, variant.name, str(linked), "link")]
    report = []
    found = {f.path: installer.present(kernel, variant.name, f) for f in variant.files}
    # Sync installs one variant per environment: one not installed at all is no problem, a missing file of an
    # installed one is (load would need the network for it).
    installed = any(path is not None for name, path in found.items() if not (slim and name in (METADATA, SIGNATURE)))
    label = variant.name if variant.capability_build is None else f"{variant.name} {variant.capability_build}"
    for locked_file in variant.files:
        path = found[locked_file.path]
        if path is None:
            if installed:
                report.append(FileStatus(kernel.repo_id, label, locked_file.path, "missing"))
            continue
        try:
            verify_file(path, locked_file.size, locked_file.sha256, locked_file.path)
            status = "ok"
        except KernelpinError:
            status = "modified"
        report.append(FileStatus(kernel.repo_id, label, locked_file.path, status))
    # Never imported (load runs listed, verified files only), but not what was installed either.
    for extra in unlisted_entries(installer.variant_directory(kernel, variant.name), variant):
        report.append(FileStatus(kernel.repo_id, label, extra, "unlisted"))
    if checker is not None and installed:  # a variant without a signature record too: the policy decides
        release_checker = checker()  # outside the try: a policy that fails to read fails the command
        try:
            signer = release_checker.recheck(
                kernel.repo_id,
                variant.name,
                installer.variant_directory(kernel, variant.name),
                variant.signature,
                files=True,
            )
            if signer is not None:  # a row for the bundle only where there is one
                report.append(FileStatus(kernel.repo_id, variant.name, SIGNATURE, "signed"))
        except KernelpinError as error:
            report.append(FileStatus(kernel.repo_id, variant.name, SIGNATURE, "signature", str(error)))
    return report


def _build_signature(
    installer: Installer,
    kernel: LockedKernel,
    variant: LockedVariant,
    build: LockedVariant,
    checker: Callable[[], ReleaseChecker],
) -> list[FileStatus]:
    """--signatures for an installed per-capability build: the variant's signed metadata.json (installed beside it)
    verifies for the signer the lock records, and lists the build as the lock does."""
    label = f"{variant.name} {build.capability_build}"
    directory = installer.variant_directory(kernel, variant.name)
    try:
        signer = checker().recheck(kernel.repo_id, variant.name, directory, variant.signature)
        metadata = parse_metadata((directory / METADATA).read_bytes(), f"{kernel.label}: {variant.name}")
        listed = next(b for b in variant.capability_builds if b.name == build.capability_build)
        enforce_capability_build(kernel.repo_id, variant.name, metadata, listed)
    except (KernelpinError, OSError) as error:
        return [FileStatus(kernel.repo_id, label, SIGNATURE, "signature", str(error))]
    return [FileStatus(kernel.repo_id, label, SIGNATURE, "signed")] if signer is not None else []
