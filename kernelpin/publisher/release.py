"""Publish a kernel release to the Hub: check a `build/<variant>/` layout, upload it, tag it `v<version>`.

Generic for any kernel laid out as the `kernels` ecosystem expects:

    <dir>/README.md
    <dir>/build/<variant>/metadata.json        (name, version, backend, digest{sha256 of every other file})
    <dir>/build/<variant>/<files of the variant>

Checking is pure (no network; shared libraries pass the ABI gate, kernelpin.publisher.abi_gate); `publish` speaks to
the Hub through huggingface_hub only. A release tag is never moved: publishing a version whose tag exists is
refused before anything is uploaded. The branch `v<major>` follows the newest release of its major version
(`kernels.get_kernel(repo, version=<major>)` loads it) and never moves back.

As kernel-builder's upload: `create_pr` proposes the release as a pull request (the commit lands on `refs/pr/<n>`,
nothing is tagged and no branch moves: a tag names a reviewed commit, so publishing again after the merge tags it),
and `private` creates a missing repository private (an existing public one is refused, not published into).
"""

from __future__ import annotations

import glob
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelpin.errors import KernelpinError
from kernelpin.files.integrity import check_repo_path, sha256_file
from kernelpin.format.layout import BUILD_DIR, CAPABILITY_DIR, METADATA, SIGNATURE
from kernelpin.format.metadata import (
    SEMVER_KEY,
    MetadataError,
    check_kernels_format,
    compat_package_name,
    digest_covers,
    parse_metadata,
)
from kernelpin.format.ranges import Version, VersionError
from kernelpin.format.signer import Signer
from kernelpin.format.spec import REPO_TYPES, check_repo_id
from kernelpin.format.variant import Variant
from kernelpin.hub.limits import Limits
from kernelpin.hub.listing import Refs, parse_refs
from kernelpin.hub.source import http_status, repository_refs, translate_errors
from kernelpin.publisher import abi_gate
from kernelpin.records import record

if TYPE_CHECKING:
    from huggingface_hub import HfApi

# Files huggingface_hub's upload_folder never uploads; they are not part of a release either.
_NOT_UPLOADED = (".git", ".cache")


class PublishError(KernelpinError):
    """A release that must not be published as it is; the message says what to fix."""


class TagExistsError(PublishError):
    """The release tag is already on the Hub: tags are never moved."""


@record
class ReleaseFile:
    path: str  # repository path, POSIX
    size: int
    sha256: str


@record
class Release:
    """A checked release layout: every variant's files match its metadata.json, one version throughout."""

    root: Path
    version: Version
    variants: dict[str, dict[str, Any]]  # variant name -> metadata.json
    files: tuple[ReleaseFile, ...]

    @property
    def without_compat_package(self) -> list[str]:
        """Variants without `<name>/__init__.py`, which `kernels` releases before the flat layout cannot load."""
        paths = {f.path for f in self.files}
        return sorted(
            name
            for name, metadata in self.variants.items()
            if f"{BUILD_DIR}/{name}/{compat_package_name(str(metadata['name']))}/__init__.py" not in paths
        )

    @property
    def tag(self) -> str:
        return f"v{self.version}"

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


def _files_under(directory: Path, where: str) -> dict[str, Path]:
    """Every regular file below `directory` by POSIX relative path; links and odd names are refused."""
    found = {}
    for path in sorted(directory.rglob("*")):
        relative = path.relative_to(directory)
        if relative.parts[0] in _NOT_UPLOADED:
            continue
        if path.is_symlink():
            raise PublishError(f"{where}: {relative.as_posix()} is a symbolic link; a release holds regular files only")
        if path.is_file():
            found[check_repo_path(relative.as_posix(), where)] = path
    return found


def read_variant(directory: Path, name: str | None = None) -> dict[str, Any]:
    """The metadata.json of one variant directory, after checking that it is in the `kernels` format,
    that its digest covers exactly the files present and that each file's sha256 matches. `name` is the
    variant the directory must be."""
    where = str(directory)
    metadata_path = directory / METADATA
    if not metadata_path.is_file():
        raise PublishError(f"{where}: no {METADATA}; every variant needs one (name, version, backend, digest)")
    try:
        metadata = parse_metadata(metadata_path.read_bytes(), str(metadata_path))
        check_kernels_format(metadata, str(metadata_path))
    except MetadataError as error:
        raise PublishError(str(error)) from None
    if name is not None and metadata.variant is not None and metadata.variant != name:
        raise PublishError(
            f"{metadata_path}: says variant {metadata.variant!r} but lies in build/{name}/; rebuild or move it"
        )

    present = {path: file for path, file in _files_under(directory, where).items() if digest_covers(path)}
    _check_digests(where, present, metadata.digests)
    return metadata.document


def _check_digests(where: str, present: dict[str, Path], expected: dict[str, str]) -> None:
    """Refuse files that are not exactly those `expected` lists (path -> hex sha256)."""
    problems = [f"{path}: listed in the digest but missing" for path in sorted(expected.keys() - present.keys())]
    problems += [f"{path}: present but not in the digest" for path in sorted(present.keys() - expected.keys())]
    for path in sorted(expected.keys() & present.keys()):
        actual = sha256_file(present[path])
        if actual != expected[path]:
            problems.append(f"{path}: sha256 {actual} != {expected[path]} in {METADATA}")
    if problems:
        raise PublishError(
            f"{where}: the files do not match {METADATA}:\n  "
            + "\n  ".join(problems)
            + "\nThe build was modified after it was made; rebuild it instead of editing files."
        )


def check_capability_builds(root: Path, variants: dict[str, dict[str, Any]]) -> None:
    """Every per-capability build a variant's metadata.json lists is at capabilities/<variant>/<build>/ with exactly
    the listed files, and capabilities/ holds nothing else."""
    listed = {}
    for name, document in variants.items():
        for build, (_, digests) in parse_metadata(json.dumps(document), name).capability_builds.items():
            listed[f"{name}/{build}"] = digests
    directory = root / CAPABILITY_DIR
    found = set()
    if directory.is_dir() and not directory.is_symlink():
        for path in _files_under(directory, str(directory)):
            found.add("/".join(path.split("/")[:2]))
    elif directory.exists():
        raise PublishError(f"{directory}: {CAPABILITY_DIR} must be a directory of per-capability builds")
    unlisted = sorted(found - listed.keys())
    if unlisted:
        raise PublishError(
            f"{directory}: {', '.join(unlisted)} listed by no variant's {METADATA} (capability-builds); "
            "a per-capability build is published only with the variant that lists it"
        )
    for key, digests in sorted(listed.items()):
        build_dir = directory / key
        if not build_dir.is_dir() or build_dir.is_symlink():
            raise PublishError(
                f"{build_dir}: missing; {BUILD_DIR}/{key.split('/')[0]}/{METADATA} lists it (stage the variant with "
                "its per-capability builds: `python -m tools.builder.op --capability-builds`)"
            )
        _check_digests(str(build_dir), _files_under(build_dir, str(build_dir)), digests)


def release_version(metadata: dict[str, Any]) -> str:
    """The SemVer of a checked variant's metadata (read_variant made sure it has one)."""
    return str(metadata[SEMVER_KEY])


def check_signatures(
    root: Path, variants: dict[str, dict[str, Any]], required: bool, trusted_root: Path | None = None
) -> dict[str, Signer | None]:
    """Who signed each variant (None: unsigned). A bundle that does not verify over its metadata.json is refused
    whatever `required` says; `required` refuses unsigned variants too. Any identity may sign: the consumers'
    publisher policies say whose signatures they accept."""
    from kernelpin.trust.policy import Policy, SignatureError
    from kernelpin.trust.signature import MAX_BUNDLE_BYTES, oversized, verifier, verify_bundle

    policy = Policy(publishers={}, trusted_root=None if trusted_root is None else str(trusted_root.resolve()))
    signers: dict[str, Signer | None] = {}
    check = None
    for name in sorted(variants):
        directory = root / BUILD_DIR / name
        bundle, how = (
            directory / SIGNATURE,
            (
                f"sign it with `python -m sigstore sign --bundle {directory / SIGNATURE} "
                f"{directory / METADATA}` (docs/releasing.md)"
            ),
        )
        if not bundle.is_file():
            if required:
                raise PublishError(f"{BUILD_DIR}/{name}: unsigned (no {SIGNATURE}) and --require-signatures; {how}")
            signers[name] = None
            continue
        check = check or verifier(policy, root)
        try:
            if bundle.stat().st_size > MAX_BUNDLE_BYTES:
                raise oversized(str(root), name, bundle.stat().st_size)
            verified = verify_bundle(
                str(root), name, (directory / METADATA).read_bytes(), bundle.read_bytes(), policy, check
            )
        except SignatureError as error:
            raise PublishError(f"{error}; {how}") from None
        signers[name] = None if verified is None else verified.signer
    return signers


def check_release(root: Path, version: str | None = None) -> Release:
    """Check a release layout (see the module docstring); `version`, when given, must be its version."""
    root = root.resolve()
    build = root / BUILD_DIR
    if not build.is_dir():
        raise PublishError(
            f"{root}: no {BUILD_DIR}/ directory; expected {BUILD_DIR}/<variant>/ (`python -m tools.release stage` makes it)"
        )
    variants: dict[str, dict[str, Any]] = {}
    for entry in sorted(build.iterdir()):
        if not entry.is_dir() or entry.is_symlink():
            raise PublishError(f"{entry}: {BUILD_DIR}/ may hold only variant directories")
        try:
            Variant.parse(entry.name)
        except ValueError as error:
            raise PublishError(f"{BUILD_DIR}/{entry.name}: {error}") from None
        variants[entry.name] = read_variant(entry, entry.name)
    if not variants:
        raise PublishError(f"{build}: no variants; stage at least one build")

    versions = {release_version(metadata) for metadata in variants.values()}
    if len(versions) > 1:
        listing = ", ".join(f"{name}: {release_version(metadata)}" for name, metadata in variants.items())
        raise PublishError(f"{root}: variants of different versions ({listing}); a release has one version")
    (found,) = versions
    if version is not None:
        try:
            wanted = Version.parse(version.removeprefix("v"))
        except VersionError as error:
            raise PublishError(f"--version {version}: {error}") from None
        if wanted != Version.parse(found):
            raise PublishError(f"{root}: --version {version} but the variants are version {found}")

    check_capability_builds(root, variants)
    gated = [build, *([root / CAPABILITY_DIR] if (root / CAPABILITY_DIR).is_dir() else [])]
    abi_gate.gate(gated, relative_to=root)  # every shared library meets manylinux_2_28 and abi3
    files = tuple(
        ReleaseFile(path, file.stat().st_size, sha256_file(file))
        for path, file in _files_under(root, str(root)).items()
    )
    return Release(root, Version.parse(found), variants, files)


@record
class BranchPlan:
    """What publishing a version does to its major-version branch `v<major>` (what `kernels` loads with
    `get_kernel(repo, version=<major>)`): it follows the newest release of its line, never going back."""

    branch: str
    move: bool
    note: str


def plan_major_branch(version: Version, tags: dict[str, str], branches: dict[str, str]) -> BranchPlan:
    """Pure: whether publishing `version` moves `v<major>` to the release commit, given the repository's
    refs before the release. Prereleases never move it; a branch at a newer release stays there."""
    branch = f"v{version.major}"
    if version.is_prerelease:
        return BranchPlan(branch, False, f"{branch} not moved: {version} is a prerelease")
    current = branches.get(branch)
    if current is None:
        return BranchPlan(branch, True, f"{branch} created at {version}")
    at_branch = [v for tag, commit in tags.items() if commit == current and (v := Version.from_tag(tag)) is not None]
    if not at_branch:
        return BranchPlan(
            branch,
            False,
            f"{branch} not moved: it points at {current[:12]}, which no version tag names, so kernelpin cannot "
            f"tell whether {version} is newer; move it yourself if it is",
        )
    newest = max(at_branch)
    if newest > version:
        return BranchPlan(
            branch, False, f"{branch} stays at {newest}: it is newer than {version} (branches never move back)"
        )
    return BranchPlan(branch, True, f"{branch} moved from {newest} to {version}")


@record
class PullRequest:
    """The pull request a `create_pr` publish opened instead of pushing to the main branch."""

    number: int | None
    url: str


@record
class Published:
    repo_id: str
    repo_type: str
    tag: str | None  # None: proposed as a pull request, not tagged yet
    commit: str
    url: str
    branch: BranchPlan
    created: bool  # the repository was created by this publish
    private: bool | None  # what the Hub says of the repository (None: not asked)
    pull_request: PullRequest | None = None


def plan_pull_request(release: Release, branch: BranchPlan, pull_request: PullRequest) -> BranchPlan:
    """Pure: the branch plan of a release proposed as a pull request. Tags and branches name merged commits only;
    the merge makes a new commit, so the tag and the branch wait for a publish after the merge."""
    number = f"#{pull_request.number}" if pull_request.number is not None else pull_request.url
    return BranchPlan(
        branch.branch,
        False,
        f"{release.tag} not tagged and {branch.branch} not moved: the release is pull request {number}; "
        "merge it, then run the same publish without --create-pr to tag the merged commit",
    )


def _refuse_public(repo_id: str, private: bool | None, endpoint: str) -> PublishError:
    state = "public" if private is False else "of unknown visibility (the server did not say)"
    return PublishError(
        f"{repo_id} exists and is {state} at {endpoint}, but --private was given: publishing would make the release "
        f"public. Make it private first (HfApi().update_repo_settings({repo_id!r}, private=True)) or drop --private"
    )


def _refuse_existing(release: Release, repo_id: str, commit: str | None) -> TagExistsError:
    at = f" (at {commit[:12]})" if commit else ""
    return TagExistsError(
        f"{repo_id} already has tag {release.tag}{at}; release tags are never moved, because locks pin "
        "the commit they name. Bump the kernel's version and release again."
    )


def upload_patterns(release: Release) -> list[str]:
    """The release's files as upload_folder patterns: each matches exactly its own path (upload patterns are
    fnmatch globs, so a `[`, `*` or `?` in a file name is escaped)."""
    return [glob.escape(f.path) for f in release.files]


def _refs(api: HfApi, repo_id: str, repo_type: str) -> Refs:
    """The tags and branches of the repository published to, through kernelpin's checks (commit ids, names)."""
    listing = api.list_repo_refs(repo_id, repo_type=repo_type)
    data = {
        kind: [{"name": ref.name, "targetCommit": ref.target_commit} for ref in getattr(listing, kind)]
        for kind in ("tags", "branches")
    }
    return parse_refs(data, repo_type, f"the refs of {repo_id} at {api.endpoint}", Limits.from_env().max_listing)


def _visibility(api: HfApi, repo_id: str, repo_type: str, refs: Refs) -> bool | None:
    """Whether the Hub says the existing repository is private. A revision is named because mirrors (olah)
    answer repo_info only at one; any branch does, visibility belongs to the repository."""
    revision = refs.branches.get("main") or next(iter(sorted(refs.branches.values())), None)
    with translate_errors(f"reading the visibility of {repo_id}", api.endpoint):
        info = api.repo_info(repo_id, repo_type=repo_type, revision=revision)
    return info.private if isinstance(info.private, bool) else None


def publish(
    api: HfApi,
    release: Release,
    repo_id: str,
    repo_type: str | None = None,
    *,
    create_pr: bool = False,
    private: bool = False,
) -> Published:
    """Upload `release` in one commit ("Release vX"), tag that commit `vX` and move the branch
    `v<major>` to it when plan_major_branch says so; with `create_pr`, open a pull request with that commit
    instead and tag nothing (see the module docstring). `private` creates a missing repository private and
    refuses an existing one that is not.

    Refused before any upload when the tag exists. Files of variants that the release no longer has are
    removed in the same commit, so the tagged tree is exactly the release.
    """
    from huggingface_hub.errors import HfHubHTTPError

    check_repo_id(repo_id)
    with translate_errors(f"reading the tags of {repo_id}", api.endpoint):
        refs = repository_refs(lambda kind: _refs(api, repo_id, kind), repo_type)
    repo_type = refs.repo_type if refs else (repo_type or REPO_TYPES[0])
    if refs is not None and release.tag in refs.tags:
        raise _refuse_existing(release, repo_id, refs.tags[release.tag])
    visibility = None
    if private and refs is not None:
        visibility = _visibility(api, repo_id, repo_type, refs)
        if visibility is not True:
            raise _refuse_public(repo_id, visibility, api.endpoint)
    plan = plan_major_branch(release.version, refs.tags if refs else {}, refs.branches if refs else {})
    message = f"Release {release.tag}"
    try:
        with translate_errors(f"uploading {release.tag} to {repo_id}", api.endpoint):
            if refs is None:
                api.create_repo(repo_id, repo_type=repo_type, exist_ok=True, private=private or None)
                visibility = private or None
            commit = api.upload_folder(
                repo_id=repo_id,
                repo_type=repo_type,
                folder_path=release.root,
                commit_message=message,
                allow_patterns=upload_patterns(release),
                delete_patterns=[f"{BUILD_DIR}/**", f"{CAPABILITY_DIR}/**"],
                create_pr=create_pr or None,
            )
    except KernelpinError as error:
        status = http_status(error.__cause__) if isinstance(error.__cause__, HfHubHTTPError) else None
        # 405, or 404 for a repository the server just listed: it serves repositories but takes no uploads.
        if status == 405 or (status == 404 and refs is not None):
            raise PublishError(
                f"{api.endpoint} does not accept uploads to {repo_id} ({status}): is HF_ENDPOINT a read-only "
                "mirror? Publish to the Hub itself (unset HF_ENDPOINT) or to a server that takes uploads"
            ) from error.__cause__
        raise
    created = refs is None
    if create_pr:
        pull_request = PullRequest(commit.pr_num, commit.pr_url or commit.commit_url)
        return Published(
            repo_id,
            repo_type,
            None,
            commit.oid,
            commit.commit_url,
            plan_pull_request(release, plan, pull_request),
            created,
            visibility,
            pull_request,
        )
    try:
        with translate_errors(f"tagging {commit.oid[:12]} of {repo_id} as {release.tag}", api.endpoint):
            api.create_tag(repo_id, tag=release.tag, revision=commit.oid, repo_type=repo_type, tag_message=message)
    except KernelpinError as error:
        cause = error.__cause__
        if isinstance(cause, HfHubHTTPError) and http_status(cause) == 409:  # tagged by someone else meanwhile
            raise _refuse_existing(release, repo_id, None) from cause
        raise PublishError(
            f"{error}. Commit {commit.oid} is uploaded but not tagged: re-run the same publish to tag it"
        ) from cause
    if plan.move:
        try:
            with translate_errors(f"moving branch {plan.branch} of {repo_id} to {release.tag}", api.endpoint):
                # The Hub API has no ref update: the branch is re-created at the release commit.
                if refs is not None and plan.branch in refs.branches:
                    api.delete_branch(repo_id, branch=plan.branch, repo_type=repo_type)
                api.create_branch(repo_id, branch=plan.branch, revision=commit.oid, repo_type=repo_type)
        except KernelpinError as error:
            raise PublishError(
                f"{error}. {release.tag} is published; point the branch at it by hand: "
                f"HfApi().create_branch({repo_id!r}, branch={plan.branch!r}, revision={commit.oid!r}, "
                f"repo_type={repo_type!r})"
            ) from error.__cause__
    return Published(repo_id, repo_type, release.tag, commit.oid, commit.commit_url, plan, created, visibility)
