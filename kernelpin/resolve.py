"""Requirements -> locked kernels: pick the revision (pure), then pin every variant's files with hashes."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from kernelpin.errors import KernelpinError
from kernelpin.files.integrity import GIT_OBJECT_ID_RE, check_repo_path, git_blob_sha1
from kernelpin.format.layout import BUILD_DIR, CAPABILITY_DIR, METADATA, SIGNATURE, STATUS_FILE
from kernelpin.format.lockfile import (
    Lock,
    LockedCapabilityBuild,
    LockedFile,
    LockedKernel,
    LockedVariant,
    is_variant_name,
    why_stale,
)
from kernelpin.format.metadata import BuildMetadata, parse_metadata
from kernelpin.format.metadata import check_size as check_metadata_size
from kernelpin.format.ranges import Version
from kernelpin.format.spec import Requirement, RequirementValue, describe_value, parse_requirement
from kernelpin.hub.listing import Refs, RemoteFile
from kernelpin.hub.source import HubSource
from kernelpin.records import record
from kernelpin.store.content import Store
from kernelpin.trust.checker import ReleaseChecker
from kernelpin.trust.gate import Evidence, EvidenceKind, Served, admit_publisher, enforce
from kernelpin.trust.policy import signer_changes

if TYPE_CHECKING:
    from kernelpin.format.kernel_status import Redirect


@record
class Pick:
    """The revision a requirement resolves to."""

    commit: str
    ref: str | None
    version: Version | None
    tag: str | None = None  # the release tag on the commit, when `ref` is not already that tag


def tag_versions(tags: dict[str, str]) -> tuple[dict[Version, str], list[str]]:
    """Release versions named by tags (`v1.2.3` and `1.2.3`; `v` wins a tie), and the tags ignored."""
    versions: dict[Version, str] = {}
    ignored = []
    for tag in sorted(tags, key=lambda name: (not name.startswith("v"), name)):
        version = Version.from_tag(tag)
        if version is None:
            ignored.append(tag)
        else:
            versions.setdefault(version, tag)
    return versions, sorted(ignored)


def describe_versions(versions: list[Version], limit: int = 15) -> str:
    ordered = [str(v) for v in sorted(versions, reverse=True)]
    if not ordered:
        return "none (no tag of the form v1.2.3 or 1.2.3)"
    more = f", ... ({len(ordered) - limit} more)" if len(ordered) > limit else ""
    return ", ".join(ordered[:limit]) + more


def pick_revision(requirement: Requirement, refs: Refs) -> Pick:
    """Which commit a requirement means, given the repository's refs; errors list what exists."""
    versions, _ = tag_versions(refs.tags)
    repo_id = requirement.repo_id
    if requirement.branch is not None:  # `= N`: the branch vN, as `kernels` reads it; never a tag fallback
        branch = requirement.branch
        if branch not in refs.branches:
            lines = sorted((b for b in refs.branches if re.fullmatch(r"v[0-9]+", b)), key=lambda b: int(b[1:]))
            raise KernelpinError(
                f"{repo_id}: no branch {branch} (`= {requirement.major}` is the branch {branch}, as `kernels` "
                f"reads it; major-version branches: {', '.join(lines) or 'none'}; version tags: "
                f"{describe_versions(list(versions))}); require an existing major, or a tag range such as "
                f'"^{requirement.major}" (kernelpin only: `kernels lock` cannot read it)'
            )
        return _at_commit(refs.branches[branch], f"refs/heads/{branch}", refs.tags, versions)
    if requirement.range is not None:
        best = requirement.range.best(versions)
        if best is not None:
            check_unambiguous(repo_id, best, refs.tags)
            tag = versions[best]
            return Pick(refs.tags[tag], f"refs/tags/{tag}", best)
        raise KernelpinError(
            f"{repo_id}: no version satisfies {requirement.range.text} "
            f"(available: {describe_versions(list(versions))}); "
            f"change the requirement in {requirement.declared} or publish a matching tag"
        )
    revision = requirement.revision
    assert revision is not None, "a requirement is a branch, a range or a revision"
    if GIT_OBJECT_ID_RE.match(revision):
        # A full sha means that commit, as in git: a tag or branch named like it must not redirect the pin.
        return _at_commit(revision, None, refs.tags, versions)
    if revision in refs.tags:
        commit = refs.tags[revision]
        return Pick(
            commit, f"refs/tags/{revision}", Version.from_tag(revision) or _version_at(commit, refs.tags, versions)
        )
    if revision in refs.branches:
        return _at_commit(refs.branches[revision], f"refs/heads/{revision}", refs.tags, versions)
    raise KernelpinError(
        f"{repo_id}: revision {revision!r} is neither a tag nor a branch nor a full 40-character commit sha "
        f"(tags: {', '.join(sorted(refs.tags)) or 'none'}; branches: {', '.join(sorted(refs.branches)) or 'none'})"
    )


def _at_commit(commit: str, ref: str | None, tags: dict[str, str], versions: dict[Version, str]) -> Pick:
    """A branch or commit pick, with the highest release tag on that commit (none on an untagged rebuild)."""
    version = _version_at(commit, tags, versions)
    return Pick(commit, ref, version, None if version is None else versions[version])


def check_unambiguous(repo_id: str, chosen: Version, tags: dict[str, str]) -> None:
    """Refuse a version whose tags disagree: `v1.0.0` vs `1.0.0`, or `1.0.0+aaa` vs `1.0.0+zzz` (equal
    under SemVer precedence) on different commits. Which one a publisher meant cannot be guessed."""
    same = {}
    for tag, commit in tags.items():
        version = Version.from_tag(tag)
        if version is not None and version.same_precedence(chosen):
            same[tag] = commit
    if len(set(same.values())) > 1:
        listed = ", ".join(f"{tag} -> {commit[:12]}" for tag, commit in sorted(same.items()))
        raise KernelpinError(
            f"{repo_id}: version {chosen} is ambiguous: tags that differ only in a 'v' prefix or build metadata "
            f'point at different commits ({listed}). Pin the one you mean, e.g. {{ revision = "{min(same)}" }}, '
            "and ask the publisher to delete the others"
        )


def _version_at(commit: str, tags: dict[str, str], versions: dict[Version, str]) -> Version | None:
    """The highest release tag on a commit, so branch and commit pins still show a version."""
    at = [version for version, tag in versions.items() if tags[tag] == commit]
    return max(at, default=None)


def group_variants(files: list[RemoteFile], where: str) -> dict[str, list[RemoteFile]]:
    """Files under build/<variant>/, by variant, followed by those of its per-capability builds
    (capabilities/<variant>/<build>/, pinned only as far as its metadata.json lists them); every path is checked
    before it is trusted."""
    variants: dict[str, list[RemoteFile]] = {}
    capability_files = []
    for remote in files:
        check_repo_path(remote.path, where)
        parts = remote.path.split("/")
        if parts[0] == BUILD_DIR and len(parts) >= 3:
            variants.setdefault(parts[1], []).append(remote)
        elif parts[0] == CAPABILITY_DIR and len(parts) >= 4:
            capability_files.append(remote)
    for remote in capability_files:  # only beside a variant: a directory of its own names no build
        if (variant := remote.path.split("/")[1]) in variants:
            variants[variant].append(remote)
    return variants


def matches_listing(remote: RemoteFile, content: bytes) -> bool:
    """Whether bytes read from the Hub are the file its listing describes (size, and LFS sha256 or git blob id)."""
    if len(content) != remote.size:
        return False
    if remote.lfs_sha256 is not None:  # the blob id is the LFS pointer's; the content has its sha256
        return hashlib.sha256(content).hexdigest() == remote.lfs_sha256
    return not remote.blob_id or git_blob_sha1(content) == remote.blob_id


class Pinner:
    """Hashes for every file of every variant at a commit, downloading as little as possible.

    A variant's metadata.json carries sha256 digests of the other files, so binaries are never downloaded to
    lock; LFS files come with their sha256. Anything else is streamed and hashed, never stored. metadata.json
    is checked against the listing's git blob id; a commit's files never change, so it is read from the Hub
    cache when the cache holds it (a sync or `kernels download` put it in the snapshot, an earlier lock kept its
    blob) and, fetched once (one GET into memory), kept as blobs/<git blob id> (huggingface_hub's name for it,
    no snapshot entry: the variant is not installed) for the next lock (best effort: a read-only cache costs a GET),
    unless the caller installs the variant from `fetched` (`keep=False`: the snapshot then holds it).
    `fetch` reads the small files of several variants at once (a request's latency, not one per file, on a
    real network); `variant` reads what was not fetched.
    """

    def __init__(
        self,
        source: HubSource,
        repo_id: str,
        repo_type: str,
        commit: str,
        checker: ReleaseChecker | None = None,
        keep: bool = True,
        served: Served | None = None,
    ) -> None:
        self.source, self.repo_id, self.repo_type, self.commit = source, repo_id, repo_type, commit
        self.served = served or Served()  # what the release is served as: a signed metadata.json must say the same
        self.keep = keep  # keep what was downloaded as blobs (False: the caller installs the variant from `fetched`)
        self.where = f"{repo_id} at {commit[:12]}"
        self.checker = checker  # verifies each variant's signature against the publisher policy
        self.store = Store(source)
        # The store files by repository and commit; a lock entry is what names them.
        self.snapshot = LockedKernel(repo_id, repo_type, commit, commit, None, None, ())
        self.metadata: dict[str, BuildMetadata] = {}  # each pinned variant's parsed metadata.json, by name
        # The small files read to pin each variant (metadata.json, its bundle), by variant and path in it: an
        # install of the variant right after writes them from here (hashed against the lock) instead of a GET.
        self.fetched: dict[str, dict[str, bytes]] = {}
        self._failed: dict[str, Exception] = {}  # the first error reading a variant's small files, by variant

    def _hash_checked(self, remote: RemoteFile) -> str:
        """The sha256 of a file without a published digest, streamed and hashed (kept neither in memory nor
        on disk), checked against the listing's git blob id or LFS sha256."""
        sha256 = hashlib.sha256()
        blob = hashlib.sha1(b"blob %d\0" % remote.size)  # git's blob id, computed on the way

        def sink(chunk: bytes) -> None:
            sha256.update(chunk)
            blob.update(chunk)

        self.source.stream(self.repo_id, self.repo_type, self.commit, remote.path, remote.size, sink)
        if remote.blob_id and remote.blob_id != blob.hexdigest():  # only files without LFS digest come here
            raise self._altered(remote)
        return sha256.hexdigest()

    def _read_checked(self, remote: RemoteFile) -> tuple[bytes, bool]:
        """A small file (metadata.json, its signature) from the cache (a synced snapshot's, or the blob an earlier
        lock kept) or in one GET, checked against the listing either way; and whether it was downloaded."""
        _, variant, relative = remote.path.split("/", 2)
        blob = remote.lfs_sha256 or remote.blob_id
        if blob:  # without a digest, nothing cached could be checked
            copies = (
                functools.partial(self.store.cached, self.snapshot, variant, relative, remote.size),
                functools.partial(self.store.blob, self.snapshot, blob, remote.size),
            )
            for copy in copies:
                content = copy()
                if content is not None and matches_listing(remote, content):
                    return content, False
        content = self.source.read(self.repo_id, self.repo_type, self.commit, remote.path, remote.size)
        if not matches_listing(remote, content):
            raise self._altered(remote)
        return content, True

    def _keep(self, remote: RemoteFile, content: bytes) -> None:
        """Keep a downloaded small file, checked against the listing, as its blob in the Hub cache for the next lock."""
        blob = remote.lfs_sha256 or remote.blob_id
        if blob:
            # A cache that takes no writes, or a sync writing: the next lock asks the Hub again.
            with contextlib.suppress(KernelpinError, OSError):
                self.store.keep_blob(self.snapshot, blob, content)

    def _altered(self, remote: RemoteFile) -> KernelpinError:
        return KernelpinError(
            f"{self.where}: {remote.path} as downloaded does not match the repository listing "
            "(size or git blob id); the server or a proxy altered it: do not use this revision"
        )

    def _small_files(self, name: str, files: list[RemoteFile]) -> list[RemoteFile]:
        """The files of a variant that are read to pin it: its signature bundle (with a checker), then its
        metadata.json."""
        prefix = f"{BUILD_DIR}/{name}/"
        by_path = {remote.path: remote for remote in files}
        read = (SIGNATURE, METADATA) if self.checker is not None else (METADATA,)
        return [by_path[prefix + relative] for relative in read if prefix + relative in by_path]

    def _read_small(self, remote: RemoteFile) -> tuple[bytes, bool] | Exception:
        """A bundle or metadata.json, its size checked against its limit before it is downloaded; or the error
        reading it gave, for its variant to raise (see fetch)."""
        try:
            self._check_small_size(remote)
            return self._read_checked(remote)
        except Exception as error:  # noqa: BLE001  # raised by `variant`, in the order one file after another would give
            return error

    def _check_small_size(self, remote: RemoteFile) -> None:
        """Refuse a bundle or metadata.json the listing says is longer than its limit."""
        if remote.path.endswith(f"/{SIGNATURE}"):
            from kernelpin.trust.signature import MAX_BUNDLE_BYTES, oversized  # signed releases only

            if remote.size > MAX_BUNDLE_BYTES:
                raise oversized(self.repo_id, remote.path.split("/")[1], remote.size)
        else:
            check_metadata_size(remote.size, f"{self.where}: {remote.path}")

    def fetch(self, variants: Mapping[str, list[RemoteFile]]) -> None:
        """Read the small files of every variant at once, as many at a time as the source's small reads (its
        bound on them holds across kernels, so parallel kernels do not multiply it). Nothing is parsed or
        verified here, and nothing raised: a variant whose files failed raises the first one's error when it is
        pinned, so a failure is reported as if the variants had been read and verified in turn."""
        wanted = [
            remote
            for name, files in sorted(variants.items())
            for remote in self._small_files(name, files)
            if remote.path.split("/", 2)[2] not in self.fetched.get(name, {})
        ]
        from kernelpin.store.parallel import run_all  # a commit resolved before reads no file

        read = run_all(self._read_small, wanted, self.source.settings.limits.reads, self.source.stop_waiting)
        # Kept one after another once all are read: the store writes a repository's cache with one writer at
        # a time and does not wait for another (parallel keepers would skip their blobs).
        for remote, outcome in zip(wanted, read, strict=False):
            _, name, relative = remote.path.split("/", 2)
            if isinstance(outcome, Exception):
                self._failed.setdefault(name, outcome)
                continue
            content, downloaded = outcome
            if downloaded and self.keep:
                self._keep(remote, content)
            self.fetched.setdefault(name, {})[relative] = content

    def offer(self, name: str, files: list[RemoteFile], relative: str, read: Callable[[], bytes | None]) -> None:
        """Take a small file of variant `name` read ahead of the listing (`read` gives it: HubSource.read_ahead's
        answer, or its error) in place of reading it, if the listing names it, within its size limit, and with this
        size and git blob id (or LFS sha256); else it is read (or refused) as usual."""
        remote = next((remote for remote in files if remote.path == f"{BUILD_DIR}/{name}/{relative}"), None)
        if remote is None:
            return
        try:
            self._check_small_size(remote)
        except KernelpinError:
            return  # refused when it is read as usual, before any download
        content = read()
        if content is not None and matches_listing(remote, content):
            self.fetched.setdefault(name, {})[relative] = content

    def variant(self, name: str, files: list[RemoteFile]) -> LockedVariant:
        prefix = f"{BUILD_DIR}/{name}/"
        by_relative = {remote.path[len(prefix) :]: remote for remote in files if remote.path.startswith(prefix)}
        digests: dict[str, str] = {}
        backend = archs = None
        depends: tuple[tuple[str, RequirementValue], ...] = ()
        fetched = self.fetched.setdefault(name, {})
        if name not in self._failed and any(
            remote.path[len(prefix) :] not in fetched for remote in self._small_files(name, files)
        ):
            self.fetch({name: files})
        if name in self._failed:
            raise self._failed.pop(name)
        pinned = {relative: hashlib.sha256(content).hexdigest() for relative, content in fetched.items()}
        content, bundle = fetched.get(METADATA), fetched.get(SIGNATURE)
        where = f"{self.where}: {prefix}{METADATA}"
        # The signature is verified before metadata.json is parsed: a hostile one never reaches the parser.
        signature = None if self.checker is None else self.checker.check(self.repo_id, name, content, bundle)
        if content is not None:
            metadata = parse_metadata(content, where)
            if self.checker is not None and signature is not None and signature.signer is not None:
                # Signed bytes are bound to where they are served: this variant, this release.
                enforce(
                    self.checker.policy,
                    self.repo_id,
                    name,
                    Evidence(EvidenceKind.RELEASE, signature.signer),
                    metadata,
                    self.served,
                )
            self.metadata[name] = metadata
            digests, backend, archs = metadata.digests, metadata.backend, metadata.archs
            depends = metadata.kernel_depends
        for relative, remote in sorted(by_relative.items()):
            if relative in pinned:
                continue
            digest = digests.get(relative)
            if digest is not None and remote.lfs_sha256 is not None and remote.lfs_sha256 != digest:
                raise KernelpinError(
                    f"{self.where}: {remote.path}: LFS sha256 {remote.lfs_sha256} contradicts metadata.json "
                    f"digest {digest}; the build is inconsistent: do not use this revision"
                )
            if digest is None:
                digest = remote.lfs_sha256
            if digest is None:
                digest = self._hash_checked(remote)
            pinned[relative] = digest
        missing = sorted(set(digests) - set(by_relative))
        if missing:
            raise KernelpinError(
                f"{self.where}: {prefix}metadata.json lists files the repository lacks: {', '.join(missing)}"
            )
        return LockedVariant(
            name=name,
            files=tuple(LockedFile(rel, by_relative[rel].size, pinned[rel]) for rel in sorted(pinned)),
            backend=backend,
            archs=archs,
            depends=depends,
            signature=signature,
            capability_builds=self._capability_builds(name, files, self.metadata.get(name)),
        )

    def _capability_builds(
        self, name: str, files: list[RemoteFile], metadata: BuildMetadata | None
    ) -> tuple[LockedCapabilityBuild, ...]:
        """The per-capability builds metadata.json lists, pinned with its digests (nothing is downloaded); files
        of the listing it does not name are no part of any build."""
        if metadata is None:
            return ()
        listing = {remote.path: remote for remote in files}
        builds = []
        for build, (archs, digests) in sorted(metadata.capability_builds.items()):
            prefix = f"{CAPABILITY_DIR}/{name}/{build}/"
            missing = sorted(path for path in digests if prefix + path not in listing)
            if missing:
                raise KernelpinError(
                    f"{self.where}: {BUILD_DIR}/{name}/{METADATA} lists files of its per-capability build {build} "
                    f"that the repository lacks: {', '.join(prefix + path for path in missing)}; do not use this "
                    "revision (ask the publisher to upload them)"
                )
            for path, digest in digests.items():
                remote = listing[prefix + path]
                if remote.lfs_sha256 is not None and remote.lfs_sha256 != digest:
                    raise KernelpinError(
                        f"{self.where}: {remote.path}: LFS sha256 {remote.lfs_sha256} contradicts metadata.json "
                        f"digest {digest}; the build is inconsistent: do not use this revision"
                    )
            pinned = tuple(LockedFile(path, listing[prefix + path].size, digests[path]) for path in sorted(digests))
            builds.append(LockedCapabilityBuild(build, archs, pinned))
        return tuple(builds)


def served_as(requirement: Requirement, pick: Pick) -> Served:
    """What a resolved release is served as, for its signed metadata.json to confirm: the tag's version and the
    branch's major."""
    return Served(pick.version, requirement.major)


@record
class Located:
    """Where a requirement resolves: the revision, and the files of each build variant there (not pinned yet)."""

    pick: Pick
    repo_type: str
    variants: dict[str, list[RemoteFile]]

    def kernel(self, requirement: Requirement, variants: tuple[LockedVariant, ...]) -> LockedKernel:
        return LockedKernel(
            repo_id=requirement.repo_id,
            repo_type=self.repo_type,
            requirement=requirement.value,
            commit=self.pick.commit,
            ref=self.pick.ref,
            version=None if self.pick.version is None else str(self.pick.version),
            tag=self.pick.tag,
            variants=variants,
        )

    @property
    def signed(self) -> bool:
        return any(f.path.endswith(f"/{SIGNATURE}") for files in self.variants.values() for f in files)


class KernelMoved(KernelpinError):
    """The release a requirement names says the kernel moved (kernel-status.toml): what to ask for instead."""

    def __init__(self, requirement: Requirement, commit: str, redirect: Redirect, instead: Requirement) -> None:
        self.requirement, self.commit, self.redirect, self.instead = requirement, commit, redirect, instead
        super().__init__(
            f"{requirement.repo_id} has moved to {redirect.destination} (its {STATUS_FILE} at {commit[:12]} says "
            f'so); require "{redirect.destination}" = {instead.text} in {requirement.declared} instead: a lock '
            "pins what you name, so kernelpin does not follow a move on its own"
            + (
                ""
                if same_publisher(requirement.repo_id, redirect.destination)
                else f" ({redirect.destination} is another organization's: a new publisher, held to the publisher policy)"
            )
        )


def same_publisher(repo_id: str, other: str) -> bool:
    return repo_id.split("/", 1)[0] == other.split("/", 1)[0]


def _moved(source: HubSource, requirement: Requirement, repo_type: str, commit: str, status: RemoteFile) -> KernelMoved:
    """The redirect a release's kernel-status.toml states, read into memory and checked against the listing."""
    from kernelpin.format.kernel_status import MAX_STATUS_SIZE, parse_status  # a moved kernel only

    where = f"{requirement.repo_id} at {commit[:12]}: {STATUS_FILE}"
    if status.size > MAX_STATUS_SIZE:
        raise KernelpinError(
            f"{where}: {status.size} bytes, over {MAX_STATUS_SIZE}: not a status note; ask the repository's publisher"
        )
    content = source.read(requirement.repo_id, repo_type, commit, status.path, status.size)
    if not matches_listing(status, content):
        raise KernelpinError(
            f"{where} as downloaded does not match the repository listing; the server or a proxy "
            "altered it: do not use this revision"
        )
    return moved_to(requirement, commit, parse_status(content, where))


def moved_to(requirement: Requirement, commit: str, redirect: Redirect) -> KernelMoved:
    """What `requirement` asks of the repository a redirect names (its revision, else the same requirement)."""
    where = f"{requirement.repo_id} at {commit[:12]}: {STATUS_FILE}"
    value: RequirementValue = requirement.value if redirect.revision is None else {"revision": redirect.revision}
    if isinstance(value, dict) and "repo-type" in value:
        value = {key: item for key, item in value.items() if key != "repo-type"}
    instead = parse_requirement(
        redirect.destination, value, where=f"{where} -> {redirect.destination!r}", declared=requirement.declared
    )
    return KernelMoved(requirement, commit, redirect, instead)


def locate(
    source: HubSource, requirement: Requirement, note: Callable[[str], None], refs: Refs | None = None
) -> Located:
    """The revision `requirement` names on the Hub and the variants there (two requests: refs, unless given,
    and the file listing)."""
    refs = refs or source.refs(requirement.repo_id, requirement.repo_type, requirement.declared)
    _, ignored = tag_versions(refs.tags)
    if ignored:
        note(f"{requirement.repo_id}: ignored tags (not versions): {', '.join(ignored)}")
    pick = pick_revision(requirement, refs)
    where = f"{requirement.repo_id} at {pick.commit[:12]}"
    listing = source.tree(requirement.repo_id, refs.repo_type, pick.commit)
    status = next((remote for remote in listing if remote.path == STATUS_FILE), None)
    if status is not None:
        raise _moved(source, requirement, refs.repo_type, pick.commit, status)
    variants = group_variants(listing, where)
    # Stray folders (build/__pycache__/, build/.ipynb_checkpoints/) are no builds; the lock cannot name them.
    stray = sorted(name for name in variants if not is_variant_name(name))
    if stray:
        note(f"{where}: ignored {', '.join(f'{BUILD_DIR}/{name}/' for name in stray)} (not variant names)")
        variants = {name: files for name, files in variants.items() if name not in stray}
    if not variants:
        raise KernelpinError(f"{where}: no build/<variant>/ directories; this revision has no kernel builds")
    return Located(pick, refs.repo_type, variants)


@record
class Fetched:
    """A requirement's release as read from the Hub to lock it (its revision, files and small files), not
    verified or parsed yet."""

    requirement: Requirement
    located: Located
    pinner: Pinner

    def pin(self) -> LockedKernel:
        """Verify and pin every variant (a signature before its metadata.json is parsed)."""
        return self.located.kernel(
            self.requirement,
            tuple(self.pinner.variant(name, files) for name, files in sorted(self.located.variants.items())),
        )


def fetch_one(
    source: HubSource, requirement: Requirement, note: Callable[[str], None], checker: ReleaseChecker | None = None
) -> Fetched:
    """The requests that lock a requirement: refs, the publisher gate, the listing, the small files."""
    refs = source.refs(requirement.repo_id, requirement.repo_type, requirement.declared)
    if checker is not None:  # the publisher gate `kernels` has, before anything of the release is read
        admit_publisher(checker.policy, requirement.repo_id, source.trusted_publisher)
    located = locate(source, requirement, note, refs)
    if checker is not None and located.signed:
        checker.expect_signatures()
    pinner = Pinner(
        source,
        requirement.repo_id,
        located.repo_type,
        located.pick.commit,
        checker,
        served=served_as(requirement, located.pick),
    )
    pinner.fetch(located.variants)
    if checker is not None and located.signed:
        checker.expect_bundles(pinner.fetched)
    return Fetched(requirement, located, pinner)


def resolve(
    source: HubSource,
    requirements: list[Requirement],
    previous: Lock | None,
    upgrade: Callable[[str], bool],
    note: Callable[[str], None] = lambda message: None,
    workers: int = 8,
    checker: ReleaseChecker | None = None,
    accepted_signers: Mapping[str, Collection[str]] | None = None,
) -> Lock:
    """The lock for `requirements` and, transitively, the kernels their variants depend on (`kernel-depends`):
    entries that still satisfy are kept (unless `upgrade(repo_id)`), the others are resolved in parallel.
    With a `checker`, every resolved release passes the publisher policy (kernelpin.trust.policy) and keeps the
    signer the previous lock recorded, unless `accepted_signers[repo]` names the new one; kept entries are
    checked against the current policy too."""

    def kept_or_none(requirement: Requirement) -> LockedKernel | None:
        locked = previous.kernel(requirement.repo_id) if previous else None
        if locked is not None and not upgrade(requirement.repo_id) and why_stale(requirement, locked) is None:
            if checker is not None:  # what the lock records, or that it records nothing, put to today's policy
                for variant in locked.variants:
                    enforce(
                        checker.policy,
                        locked.repo_id,
                        variant.name,
                        Evidence.recorded(variant.signature, EvidenceKind.LOCK),
                    )
            return dataclasses.replace(locked, requirement=requirement.value, required_by=())
        return None

    def lock_one(requirement: Requirement) -> LockedKernel:
        return checked(fetch_one(source, requirement, note, checker))

    def checked(fetched: Fetched) -> LockedKernel:
        locked = fetched.pin()
        before = previous.kernel(locked.repo_id) if previous else None
        if checker is not None and before is not None:
            problems = signer_changes(
                locked.repo_id,
                {v.name: v.signature for v in before.variants},
                {v.name: v.signature for v in locked.variants if v.signature is not None},
                (accepted_signers or {}).get(locked.repo_id, ()),
            )
            if problems:
                raise KernelpinError("\n".join(problems))
        return locked

    kept: dict[str, LockedKernel] = {}
    todo: list[Requirement] = []
    for requirement in requirements:
        locked = kept_or_none(requirement)
        if locked is not None:
            kept[requirement.repo_id] = locked
        else:
            todo.append(requirement)
    if checker is not None and any(_signature_expected(checker, previous, requirement) for requirement in todo):
        checker.expect_signatures()
    if todo:
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(todo)))) as pool:
            # Every kernel's requests are queued before any kernel is verified: a worker waiting for the
            # verifier (sigstore's import, about 0.3 s of CPU) holds back no other kernel's requests.
            fetched = [pool.submit(fetch_one, source, requirement, note, checker) for requirement in todo]

            def pin(fetching: Future[Fetched]) -> LockedKernel:
                return checked(fetching.result())

            pinned = [pool.submit(pin, fetching) for fetching in fetched]
            try:
                for pinning in pinned:
                    locked = pinning.result()
                    kept[locked.repo_id] = locked
            except BaseException as error:
                if not isinstance(error, Exception):  # Ctrl-C: the pool's `with` waits for no request to time out
                    source.stop_waiting()
                raise
            finally:
                for future in fetched + pinned:  # after a failure, nothing more is started
                    future.cancel()
    top = {r.repo_id: r for r in requirements}

    def kept_or_locked(requirement: Requirement) -> LockedKernel:
        return kept_or_none(requirement) or lock_one(requirement)

    dependencies = _resolve_dependencies(kept, top, kept_or_locked)
    return Lock(tuple(kept[r.repo_id] for r in requirements) + tuple(dependencies[k] for k in sorted(dependencies)))


def _signature_expected(checker: ReleaseChecker, previous: Lock | None, requirement: Requirement) -> bool:
    """Whether a requirement's release will have a signature to verify, before it is listed: the policy
    requires one, or names who signs for its publisher (kernels-community's built-in entry does both), or the
    previous lock recorded one."""
    policy = checker.policy
    entry = policy.publisher(requirement.repo_id)
    if policy.requires_signature(requirement.repo_id)[0] or (entry is not None and entry.signers):
        return True
    locked = previous.kernel(requirement.repo_id) if previous else None
    return locked is not None and any(
        variant.signature is not None and variant.signature.signer is not None for variant in locked.variants
    )


def _meaning(requirement: Requirement) -> tuple[int | None, str | None, str | None]:
    """What a requirement asks for, however it is written (`1` and `{ version = 1 }` are the same)."""
    return requirement.major, None if requirement.range is None else str(requirement.range), requirement.revision


def _resolve_dependencies(
    kernels: dict[str, LockedKernel],
    top: dict[str, Requirement],
    lock_one: Callable[[Requirement], LockedKernel],
) -> dict[str, LockedKernel]:
    """Lock every kernel the variants of `kernels` depend on, transitively, as `kernels lock` does; one build
    per repository, so two different requirements on one repository are refused, and so is a cycle. Returns
    the dependencies that are not top-level requirements (with `required_by`); `kernels` gets theirs filled."""
    wanted: dict[str, tuple[RequirementValue, str]] = {}  # repo -> (requirement, who asked first)
    required_by: dict[str, set[str]] = {}
    done: set[str] = set()
    found: dict[str, LockedKernel] = {}

    def depends(kernel: LockedKernel) -> Iterator[tuple[str, str, RequirementValue]]:
        return ((variant.name, repo_id, value) for variant in kernel.variants for repo_id, value in variant.depends)

    # Depth first with a stack of its own: a chain of any length (a hostile one, 1000 deep) is no RecursionError.
    for start in list(kernels.values()):
        path = [(start, depends(start))] if start.repo_id not in done else []
        while path:
            kernel, pending = path[-1]
            step = next(pending, None)
            if step is None:
                done.add(kernel.repo_id)
                path.pop()
                continue
            variant_name, repo_id, value = step
            chain = [on_path.repo_id for on_path, _ in path]
            asker = f"{kernel.repo_id} ({variant_name}, kernel-depends)"
            if repo_id in chain:
                cycle = " -> ".join((*chain[chain.index(repo_id) :], repo_id))
                raise KernelpinError(
                    f"kernel dependency cycle: {cycle} ({asker}); a kernel cannot depend on "
                    "itself, through others or not: ask the publisher to break the cycle"
                )
            requirement = parse_requirement(
                repo_id,
                value,
                where=f"{asker} {repo_id!r}",
                declared=f"the metadata.json of {asker} (ask its publisher)",
            )
            first = (
                (top[repo_id].value, "[tool.kernels.dependencies]")
                if repo_id in top
                else wanted.setdefault(repo_id, (value, asker))
            )
            if _meaning(parse_requirement(repo_id, first[0])) != _meaning(requirement):
                raise KernelpinError(
                    f"{repo_id}: {asker} requires {describe_value(value)}, but {first[1]} requires "
                    f"{describe_value(first[0])}; kernelpin locks one build per repository: make them agree "
                    f"(e.g. require {repo_id!r} = {describe_value(value)} in [tool.kernels.dependencies])"
                )
            required_by.setdefault(repo_id, set()).add(kernel.repo_id)
            if repo_id not in kernels and repo_id not in found:
                found[repo_id] = lock_one(requirement)
            if repo_id not in done:
                dependency = kernels.get(repo_id) or found[repo_id]
                path.append((dependency, depends(dependency)))
    return {
        repo_id: dataclasses.replace(kernel, required_by=tuple(sorted(required_by[repo_id])))
        for repo_id, kernel in found.items()
    }
