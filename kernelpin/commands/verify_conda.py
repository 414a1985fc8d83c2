"""`kernelpin verify-conda [PREFIX]`: is the kernel a conda environment holds (`pixi add img2gray`) the Hub
release's build, published by an identity the project's policy allows?

For each kernel checked (`repo_id`, else every kernel of the project's lock whose conda package the prefix holds),
two independent checks:

- signature: the package's CEP 27 attestation (from the channel's CEP 50 sidecar `<package>.sigs.<sha256>` that
  its repodata names in `attestations_sha256`, or a file given), verified with Sigstore against the policy's trust
  root and its signer put to `[tool.kernelpin.trust]` through the trust gate, as for a Hub release. It binds the
  package file's name and sha256 that conda-meta records.
- bytes: every file of the installed variant directory (`[lib/pythonX.Y/]site-packages/<package>/`, the Hub
  variant directory the package ships: kernelpin.format.conda_package) against the Hub build of that variant:
  the files kernelpin.lock pins for it or, without a lock, the digest of the release's signed metadata.json
  (tag v<package version>, its Sigstore bundle verified through the gate), metadata.json itself byte for byte.

Nothing under the prefix is followed through a symbolic link, and conda-meta is read strictly: a hostile prefix
is refused with one line.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import Any

from kernelpin.errors import KernelpinError
from kernelpin.files.integrity import sha256_file
from kernelpin.format import lockfile
from kernelpin.format.conda_attestation import (
    MAX_SIDECAR_BYTES,
    SIDECAR_INFIX,
    channel_url,
    parse_sidecar,
)
from kernelpin.format.conda_package import (
    MAX_RECORD_BYTES,
    CondaRecordError,
    InstalledPackage,
    package_channel,
    parse_prefix_record,
    variant_directory,
)
from kernelpin.format.layout import METADATA, SIGNATURE
from kernelpin.format.metadata import MetadataError, digest_covers, parse_metadata
from kernelpin.format.nesting import within_nesting
from kernelpin.format.signer import Signer
from kernelpin.format.spec import check_repo_id
from kernelpin.hub.limits import Limits
from kernelpin.hub.source import OFFLINE, HubSource
from kernelpin.project import Project, find_project, read_policy
from kernelpin.records import record
from kernelpin.store import lockfiles
from kernelpin.trust.policy import Policy

MAX_REPODATA_BYTES = 512 * 1024 * 1024  # conda-forge's linux-64 repodata.json is about 300 MB
MAX_META_ENTRIES = 100_000
SIGNATURE_PART, BYTES_PART = "signature", "bytes"


class CondaVerifyError(KernelpinError):
    """The prefix, its conda-meta or the request cannot be checked at all (neither part ran)."""


@record
class CondaPackageCheck:
    """One kernel's conda package in the prefix, and what each of the two checks found (None: it passed)."""

    repo_id: str
    package: str  # the package file conda-meta records
    version: str
    variant: str | None
    channel: str | None
    signer: Signer | None  # the allowed signer of its attestation (None: none, admitted unsigned, or refused)
    build_source: str  # what the bytes were compared with: "kernelpin.lock" or "release v<version>"
    files: int  # installed files of the variant compared
    signature_error: str | None = None
    bytes_error: str | None = None

    @property
    def ok(self) -> bool:
        return self.signature_error is None and self.bytes_error is None

    def as_json(self) -> dict[str, Any]:
        return {
            "repo": self.repo_id,
            "package": self.package,
            "version": self.version,
            "variant": self.variant,
            "channel": self.channel,
            "signer": None if self.signer is None else vars(self.signer),
            "compared_with": self.build_source,
            "files": self.files,
            "ok": self.ok,
            SIGNATURE_PART: self.signature_error,
            BYTES_PART: self.bytes_error,
        }


@record
class CondaVerification:
    prefix: Path
    packages: list[CondaPackageCheck] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.packages)

    def check(self) -> None:
        """Raise KernelpinError naming the first failed check (signature or bytes) unless everything passed."""
        for found in self.packages:
            for problem in (found.signature_error, found.bytes_error):
                if problem is not None:
                    raise KernelpinError(problem)


# The prefix ------------------------------------------------------------------------------------------------------


def _no_link_below(prefix: Path, relative: str, what: str) -> Path:
    """`prefix/relative`, refused where it or a directory on the way below `prefix` is a symbolic link."""
    path = prefix
    for part in relative.split("/"):
        path = path / part
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return path  # missing: the caller says so
        except OSError as error:
            raise CondaVerifyError(f"{path}: cannot read it ({error.strerror}); {what}") from None
        if stat.S_ISLNK(mode):
            raise CondaVerifyError(
                f"{path} is a symbolic link; kernelpin does not follow links in a conda prefix ({what}). "
                "Reinstall the package so that the environment holds its own files"
            )
    return path


def _read_bounded(path: Path, limit: int, what: str) -> bytes:
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as error:
        raise CondaVerifyError(f"{path}: cannot read {what} ({error.strerror})") from None
    with os.fdopen(descriptor, "rb") as stream:
        info = os.fstat(stream.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise CondaVerifyError(f"{path}: {what} is not a regular file")
        if info.st_size > limit:
            raise CondaVerifyError(f"{path}: {what} is {info.st_size} bytes, over the {limit} it may be")
        return stream.read(limit + 1)[:limit]


def installed_package(prefix: Path, name: str) -> InstalledPackage | None:
    """The conda-meta record of package `name` in `prefix` (None: not installed there)."""
    meta = _no_link_below(prefix, "conda-meta", "conda-meta")
    if not meta.is_dir():
        raise CondaVerifyError(
            f"{prefix} is not a conda environment (no conda-meta/); give the environment's directory, "
            "e.g. .pixi/envs/default or $CONDA_PREFIX"
        )
    found = []
    with os.scandir(meta) as entries:
        for count, entry in enumerate(entries):
            if count >= MAX_META_ENTRIES:
                raise CondaVerifyError(f"{meta}: more than {MAX_META_ENTRIES} entries; this is not a conda-meta")
            if entry.name.startswith(f"{name}-") and entry.name.endswith(".json"):
                found.append(entry.name)
    records = []
    for file_name in sorted(found):
        path = _no_link_below(prefix, f"conda-meta/{file_name}", "conda-meta")
        try:
            record = parse_prefix_record(_read_bounded(path, MAX_RECORD_BYTES, "a conda-meta record"), str(path))
        except CondaRecordError as error:
            raise CondaVerifyError(str(error)) from None
        if record.name == name:
            records.append(record)
    if len(records) > 1:
        raise CondaVerifyError(
            f"{meta}: {len(records)} records of {name} ({', '.join(r.filename for r in records)}); an environment "
            "holds one: reinstall it"
        )
    return records[0] if records else None


# Attestations ----------------------------------------------------------------------------------------------------


def _fetch(url: str, limit: int, timeout: float) -> bytes:
    """A file:// or http(s):// URL's bytes, at most `limit`."""
    if url.startswith("file://"):
        path = Path(urllib.request.url2pathname(url.removeprefix("file://")))
        try:
            with open(path, "rb") as stream:
                body = stream.read(limit + 1)
        except OSError as error:
            raise OSError(f"{path}: {error.strerror}") from None
    elif url.startswith(("http://", "https://")):
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            body = answer.read(limit + 1)
    else:
        raise OSError(f"{url[:100]}: not a file or http(s) URL")
    if len(body) > limit:
        raise OSError(f"{url[:200]} is over {limit} bytes")
    return body


def channel_attestations(package: InstalledPackage, channel: str, subdir: str, timeout: float) -> tuple[str, ...]:
    """The bundles of the CEP 50 sidecar the channel's repodata advertises for `package` (none advertised: ())."""
    base = f"{channel}/{subdir}"
    body = _fetch(f"{base}/repodata.json", MAX_REPODATA_BYTES, timeout)
    try:
        repodata = within_nesting(json.loads(body))
        records = {**repodata.get("packages", {}), **repodata.get("packages.conda", {})}
        record = records.get(package.filename)
    except (ValueError, AttributeError, TypeError, RecursionError) as error:
        raise OSError(f"{base}/repodata.json is not repodata ({' '.join(str(error).split())[:100]})") from None
    if not isinstance(record, dict):
        raise OSError(f"{base}/repodata.json does not list {package.filename}")
    if record.get("sha256") not in (None, package.sha256):
        raise OSError(
            f"{base}/repodata.json lists {package.filename} with sha256 {str(record.get('sha256'))[:64]}, "
            f"the environment installed {package.sha256}"
        )
    advertised = record.get("attestations_sha256")
    if advertised is None:
        return ()
    if not isinstance(advertised, str):
        raise OSError(f"{base}/repodata.json: attestations_sha256 of {package.filename} is not a sha256")
    sidecar = _fetch(f"{base}/{package.filename}{SIDECAR_INFIX}{advertised}", MAX_SIDECAR_BYTES, timeout)
    return parse_sidecar(sidecar, advertised)


def file_attestations(path: Path) -> tuple[str, ...]:
    """The bundles of an attestation file: a CEP 50 sidecar (a JSON array of bundles) or one bundle."""
    body = _read_bounded(path, MAX_SIDECAR_BYTES, "an attestation file")
    if body.lstrip().startswith(b"["):
        return parse_sidecar(body, hashlib.sha256(body).hexdigest())
    return (body.decode("utf-8", errors="replace"),)


# The Hub build ---------------------------------------------------------------------------------------------------


def _locked_files(lock: lockfile.Lock, repo_id: str, variant: str, package: str, version: str) -> dict[str, str]:
    kernel = lock.kernel(repo_id)
    assert kernel is not None
    locked = kernel.variant(variant)
    if locked is None:
        names = ", ".join(v.name for v in kernel.variants) or "none"
        raise _BytesMismatch(
            f"kernelpin.lock has no variant {variant} of {repo_id} (it locks {names})",
            "lock the release the conda package is a build of (`kernelpin lock`), or install that release's package",
        )
    if kernel.version is not None and kernel.version.removeprefix("v") != version:
        raise _BytesMismatch(
            f"the conda package is version {version}, kernelpin.lock pins {kernel.version}",
            f"install {package} {kernel.version} from the channel, or lock {version}",
        )
    return {f.path: f.sha256 for f in locked.files if f.path != SIGNATURE}


def _released_files(
    source: HubSource, policy: Policy, project_root: Path, repo_id: str, variant: str, version: str
) -> dict[str, str]:
    """The files of the Hub release v<version>'s `variant` by its signed metadata.json (verified through the gate)."""
    from kernelpin.resolve import matches_listing
    from kernelpin.trust.checker import ReleaseChecker

    refs = source.refs(repo_id, None)
    commit = refs.tags.get(f"v{version}")
    if commit is None:
        raise _BytesMismatch(
            f"{repo_id} has no release v{version} on {source.settings.endpoint}",
            "install a package of a released version, or lock the project (`kernelpin lock`) and check against it",
        )
    listing = {remote.path: remote for remote in source.tree(repo_id, refs.repo_type, commit)}
    where = f"build/{variant}"
    if f"{where}/{METADATA}" not in listing:
        raise _BytesMismatch(
            f"release v{version} of {repo_id} has no variant {variant}", "the conda package is no build of this release"
        )
    small = {}
    for name in (METADATA, SIGNATURE):
        remote = listing.get(f"{where}/{name}")
        if remote is not None:
            content = source.read(repo_id, refs.repo_type, commit, remote.path, remote.size)
            if not matches_listing(remote, content):
                raise KernelpinError(f"{remote.path} of {repo_id} at {commit[:12]}: the server sent other bytes")
            small[name] = content
    with ReleaseChecker(policy, project_root) as checker:
        checker.check(repo_id, variant, small[METADATA], small.get(SIGNATURE))
    try:
        digests = parse_metadata(small[METADATA], f"{repo_id} v{version} {where}/{METADATA}").digests
    except MetadataError as error:
        raise KernelpinError(str(error)) from None
    return {**digests, METADATA: hashlib.sha256(small[METADATA]).hexdigest()}


class _BytesMismatch(Exception):
    def __init__(self, cause: str, fix: str) -> None:
        super().__init__(cause)
        self.cause, self.fix = cause, fix


def _installed_files(prefix: Path, directory: str, package: InstalledPackage) -> dict[str, Path]:
    """The variant directory's files (relative to it) that the record lists and the ones on disk, never through
    a link."""
    root = _no_link_below(prefix, directory, "the kernel's directory")
    found: dict[str, Path] = {}
    for path in package.files:
        if path.startswith(directory + "/"):
            found[path[len(directory) + 1 :]] = _no_link_below(prefix, path, "a file of the kernel")
    if root.is_dir():
        for top, directories, files in os.walk(root):
            for name in directories + files:
                entry = Path(top) / name
                relative = entry.relative_to(root).as_posix()
                if entry.is_symlink():
                    raise CondaVerifyError(
                        f"{entry} is a symbolic link; kernelpin does not follow links in a conda prefix. "
                        "Reinstall the package"
                    )
                if name in files:
                    found.setdefault(relative, entry)
    return {path: file for path, file in found.items() if digest_covers(path) or path == METADATA}


def _provenance_note(installed: Path) -> str:
    """Where the installed metadata.json differs from the Hub build's: the commit it says the package was built from."""
    try:
        provenance = within_nesting(json.loads(_read_bounded(installed, 1 << 20, METADATA))).get("provenance", {})
        commit = provenance.get("source_commit") if isinstance(provenance, dict) else None
    except (ValueError, AttributeError, RecursionError, CondaVerifyError):
        return ""
    return f" (the conda package says it was built from commit {commit[:12]})" if isinstance(commit, str) else ""


def compare_build(installed: dict[str, Path], expected: dict[str, str]) -> list[str]:
    """Each difference between the installed files and the Hub build's, one short line each."""
    problems = [f"{path}: missing" for path in sorted(expected.keys() - installed.keys())]
    problems += [f"{path}: not in the Hub build" for path in sorted(installed.keys() - expected.keys())]
    for path in sorted(installed.keys() & expected.keys()):
        if not installed[path].is_file():
            problems.append(f"{path}: missing")
            continue
        actual = sha256_file(installed[path])
        if actual != expected[path]:
            problems.append(f"{path}: sha256 {actual[:16]}... != {expected[path][:16]}... of the Hub build")
    return problems


# The command -----------------------------------------------------------------------------------------------------


def default_prefix(project: Project | None, environ: Mapping[str, str] = os.environ) -> Path:
    """$CONDA_PREFIX (an activated environment, `pixi shell` included), else the project's pixi environment."""
    if environ.get("CONDA_PREFIX"):
        return Path(environ["CONDA_PREFIX"])
    if project is not None and (project.root / ".pixi" / "envs" / "default").is_dir():
        return project.root / ".pixi" / "envs" / "default"
    raise CondaVerifyError(
        "no conda environment given: pass its directory (e.g. .pixi/envs/default), or run inside it "
        "(`pixi shell`, `conda activate`), which sets CONDA_PREFIX"
    )


def verify_conda(
    prefix: Path | None = None,
    *,
    repo_id: str | None = None,
    package: str | None = None,
    attestation: Path | None = None,
    channel: str | None = None,
    project: Project | None = None,
    source: HubSource | None = None,
    use_lock: bool = True,
) -> CondaVerification:
    """Check the kernels a conda environment holds against the project's policy and its Hub builds (see the module
    docstring). `repo_id`: the Hub repository (default: each kernel of kernelpin.lock found in the prefix);
    `package`: its conda package name (default: the repository's name); `attestation`: an attestation file instead
    of the channel's sidecar; `channel`: the channel URL instead of the one conda-meta records; `use_lock=False`
    compares with the Hub release even where a lock exists."""
    project = project or find_project(Path.cwd())
    source = source or HubSource.from_env()
    policy = read_policy(project)
    prefix = (prefix or default_prefix(project)).resolve()
    if not prefix.is_dir():
        raise CondaVerifyError(f"{prefix}: no such directory; give a conda environment's directory")
    lock = lockfiles.read(project.lockfile) if use_lock else None
    if repo_id is not None:
        repos = [repo_id]
    elif lock is not None and lock.kernels:
        repos = [kernel.repo_id for kernel in lock.kernels]
    else:
        raise CondaVerifyError(
            f"{project.lockfile.name} locks no kernels; name the Hub repository the conda package is a build of "
            "with --repo ORG/NAME"
        )
    if package is not None and len(repos) != 1:
        raise CondaVerifyError("--package names the conda package of one kernel; give --repo too")
    if channel is not None:
        channel = channel_url(channel) if not channel.startswith("file://") else channel.rstrip("/")
    results = []
    for repo in repos:
        name = package or check_repo_id(repo).split("/", 1)[1].lower()
        installed = installed_package(prefix, name)
        if installed is None:
            if repo_id is not None:
                raise CondaVerifyError(
                    f"{prefix} holds no conda package {name}; install it (`pixi add {name}`) or name it with --package"
                )
            continue
        results.append(_check_package(prefix, installed, repo, lock, attestation, channel, policy, project, source))
    if not results:
        raise CondaVerifyError(f"{prefix} holds the conda package of no kernel in {project.lockfile.name}")
    return CondaVerification(prefix, results)


def _check_package(
    prefix: Path,
    installed: InstalledPackage,
    repo_id: str,
    lock: lockfile.Lock | None,
    attestation: Path | None,
    channel: str | None,
    policy: Policy,
    project: Project,
    source: HubSource,
) -> CondaPackageCheck:
    from kernelpin.trust.conda_signature import admit_conda_package
    from kernelpin.trust.policy import SignatureError
    from kernelpin.trust.signature import verifier

    where = f"{prefix / 'conda-meta'} ({installed.filename})"
    try:
        directory = variant_directory(installed.files, where)
    except CondaRecordError as error:
        raise CondaVerifyError(str(error)) from None
    metadata_path = _no_link_below(prefix, f"{directory}/{METADATA}", "the kernel's metadata.json")
    variant: str | None = None
    if not metadata_path.is_file():
        metadata_problem: str | None = f"{metadata_path} is missing"
    else:
        try:
            variant = parse_metadata(_read_bounded(metadata_path, 1 << 20, METADATA), str(metadata_path)).variant
        except MetadataError as error:
            metadata_problem = str(error)
        else:
            metadata_problem = None if variant else f"{metadata_path} names no variant"
    label = f"{repo_id} {variant or '(unknown variant)'}"
    reinstall = (
        f"reinstall it from its channel (pixi: remove .pixi/envs and run `pixi install`; conda: "
        f"`conda install --force-reinstall {installed.name}`); if that does not help, the conda package and the Hub "
        "release are different builds: tell the publisher"
    )

    # (1) the signature and its identity
    recorded = package_channel(installed)
    use_channel = channel or (recorded[0] if recorded else None)
    subdir = recorded[1] if recorded else (installed.subdir or "noarch")
    bind_to = use_channel if use_channel and use_channel.startswith(("http://", "https://")) else None
    signer, signature_error = None, None
    try:
        if attestation is not None:
            bundles = file_attestations(attestation)
        elif use_channel is None:
            raise OSError("conda-meta records no channel URL")
        elif source.settings.offline and not use_channel.startswith("file://"):
            raise OSError(f"{OFFLINE}: the channel is not contacted")
        else:
            bundles = channel_attestations(installed, use_channel, subdir, Limits.from_env().http_timeout)
        check = verifier(policy, project.root) if bundles else None
        signer = admit_conda_package(
            policy,
            repo_id,
            variant or "(unknown variant)",
            bundles,
            installed.filename,
            installed.sha256,
            bind_to,
            check,
        )
    except SignatureError as error:
        signature_error = f"{SIGNATURE_PART}: {error}"
    except (OSError, urllib.error.URLError, KernelpinError) as error:
        cause = getattr(error, "reason", None) or error
        signature_error = (
            f"{SIGNATURE_PART}: {label}: cannot read the attestation of {installed.filename} "
            f"({' '.join(str(cause).split())[:200]}); pass the channel with --channel URL or the attestation "
            "with --attestation FILE"
        )

    # (2) the bytes against the Hub build
    build_source = (
        "kernelpin.lock" if lock is not None and lock.kernel(repo_id) is not None else f"release v{installed.version}"
    )
    files = _installed_files(prefix, directory, installed)
    bytes_error = None
    if metadata_problem is not None:
        bytes_error = f"{BYTES_PART}: {label}: {metadata_problem}; {reinstall}"
    else:
        try:
            if build_source == "kernelpin.lock":
                assert lock is not None and variant is not None
                expected = _locked_files(lock, repo_id, variant, installed.name, installed.version)
            else:
                assert variant is not None
                expected = _released_files(source, policy, project.root, repo_id, variant, installed.version)
            problems = compare_build(files, expected)
            if problems:
                note = ""
                if METADATA in files and any(p.startswith(f"{METADATA}: sha256") for p in problems):
                    note = _provenance_note(files[METADATA])
                shown = "; ".join(problems[:4]) + (f"; and {len(problems) - 4} more" if len(problems) > 4 else "")
                bytes_error = (
                    f"{BYTES_PART}: {label}: the installed {installed.filename} is not the Hub build of {variant} "
                    f"({build_source}): {shown}{note}; {reinstall}"
                )
        except _BytesMismatch as mismatch:
            bytes_error = f"{BYTES_PART}: {label}: {mismatch.cause}; {mismatch.fix}"
        except KernelpinError as error:
            bytes_error = f"{BYTES_PART}: {label}: cannot read the Hub build ({error})"
    return CondaPackageCheck(
        repo_id,
        installed.filename,
        installed.version,
        variant,
        use_channel,
        signer if signature_error is None else None,
        build_source,
        len(files),
        signature_error,
        bytes_error,
    )
