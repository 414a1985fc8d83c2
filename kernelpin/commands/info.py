"""Looking at a kernel before using it: what it is (`kernelpin info`: license, upstream, backends,
dependencies), which of its builds a machine can use (per variant: `kernelpin variants`; `kernelpin versions
--variants` per version),
and, when the version asked for has no build for this machine, which newer one has. `kernels info`, `kernels
versions` and `get_kernel_variants`, answered from the repository listing and checked metadata.json files;
nothing is downloaded to disk.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from kernelpin.builds import VariantFit, fits
from kernelpin.errors import KernelpinError
from kernelpin.format.layout import METADATA
from kernelpin.format.metadata import KERNELS_MINVER_KEY, UPSTREAM_KEY, BuildMetadata, parse_metadata
from kernelpin.format.python_api import KernelApi, Unreadable
from kernelpin.format.python_api import describe as describe_sources
from kernelpin.format.spec import (
    Requirement,
    RequirementValue,
    check_repo_id,
    parse_requirement,
    requirement_from_arguments,
)
from kernelpin.format.variant import Environment, Variant, select
from kernelpin.hub.source import HubSource
from kernelpin.loading.local_override import choose, variant_directories
from kernelpin.loading.python_depends import declared
from kernelpin.project import Project, read_requirements
from kernelpin.records import record
from kernelpin.resolve import Located, locate, matches_listing


@record
class RevisionVariants:
    """The builds of one revision of a kernel, judged for a machine (a block of `kernelpin variants`)."""

    version: int | None  # the major version (the branch vN), as `kernels variants` numbers them; None: a revision
    revision: str  # refs/heads/vN, or the revision as given
    commit: str
    variants: list[VariantFit]


def variants(
    source: HubSource,
    repo_id: str,
    env: Environment,
    *,
    version: int | str | None = None,
    revision: str | None = None,
    all_versions: bool = False,
) -> list[RevisionVariants]:
    """Every build of a kernel judged for `env`, as `kernels variants` 0.19 shows them: of the newest major-version
    branch (`version` None or "latest"), of branch vN (`version` N), of every one (`all_versions`), or of a tag,
    branch or commit (`revision`). One refs listing and one file listing per revision; nothing is downloaded."""
    repo_id = check_repo_id(repo_id)
    if sum((all_versions, version is not None, revision is not None)) > 1:
        raise KernelpinError("give at most one of --all-versions, --version and --revision")
    refs = source.refs(repo_id, None)
    requirements: list[tuple[int | None, Requirement]]
    if revision is not None:
        requirements = [(None, requirement_from_arguments(repo_id, None, revision))]
    else:
        majors = sorted(int(name[1:]) for name in refs.branches if re.fullmatch(r"v[0-9]+", name))
        if not majors:
            raise KernelpinError(
                f"{repo_id} has no major-version branch (v1, v2, ...), which is what a kernel's "
                "versions are to `kernels`; name a revision: --revision TAG|BRANCH|COMMIT"
            )
        if isinstance(version, str) and version != "latest":
            if not (version.isascii() and version.isdigit()):
                raise KernelpinError(f"--version {version}: a major version (the branch vN) or latest")
            version = int(version)
        if isinstance(version, int) and version not in majors:
            raise KernelpinError(
                f"{repo_id}: no version {version} (the branch v{version}); versions: {', '.join(map(str, majors))}"
            )
        chosen = majors if all_versions else [majors[-1] if version in (None, "latest") else int(version)]
        requirements = [(major, parse_requirement(repo_id, major)) for major in chosen]
    found = []
    for major, requirement in requirements:
        located = locate(source, requirement, lambda message: None, refs)
        names = sorted(located.variants)
        found.append(
            RevisionVariants(
                major,
                located.pick.ref or revision or located.pick.commit,
                located.pick.commit,
                fits(select(dict.fromkeys(names), env), names),
            )
        )
    return found


def backends(names: list[str]) -> list[str]:
    """The backends the variants named build for (an `sdk` build names none)."""
    found = set()
    for name in names:
        try:
            backend = Variant.parse(name).backend
        except ValueError:
            continue
        if backend is not None:
            found.add(backend.name)
    return sorted(found)


MAX_TREE_DEPTH = 32  # kernel-depends levels `info` walks; deeper ones are cut, with a note


@record
class DependencyNode:
    """A kernel of a kernel-depends tree: the release its requirement resolves to and the build a machine takes."""

    repo: str
    requirement: RequirementValue | None  # as the parent's metadata.json writes it; None for the top
    version: str | None  # the release tag's version on the commit, if any
    ref: str | None
    commit: str | None  # None: a build on disk
    variant: str | None  # the build the machine takes; None: none fits (see note)
    depends: list[DependencyNode]
    note: str | None = None  # a cycle, no fitting build, or the depth cut
    python_depends: tuple[str, ...] = ()  # the python-depends of the build taken

    def names(self) -> dict[str, Any]:
        """The kernels below this one as `kernels info --json` nests them: {repo_id: {...}}, sorted by repo."""
        return {child.repo: child.names() for child in self.depends}

    def walk(self) -> list[DependencyNode]:
        """This kernel and every one below it, depth first."""
        return [self, *(node for child in self.depends for node in child.walk())]


def _chosen_metadata(source: HubSource, repo_id: str, located: Located, variant: str) -> BuildMetadata | None:
    """A variant's metadata.json, read into memory and checked against the listing (nothing else is read)."""
    remote = next((r for r in located.variants[variant] if r.path == f"build/{variant}/{METADATA}"), None)
    if remote is None:
        return None
    where = f"{repo_id} at {located.pick.commit[:12]}: {remote.path}"
    content = source.read(repo_id, located.repo_type, located.pick.commit, remote.path, remote.size)
    if not matches_listing(remote, content):
        raise KernelpinError(
            f"{where} as downloaded does not match the repository listing; the server or a proxy "
            "altered it: do not use this revision"
        )
    return parse_metadata(content, where)


class _TreeWalk:
    """Walks kernel-depends as `env` loads them, reading each kernel's refs, listing and metadata.json once."""

    def __init__(self, source: HubSource, env: Environment) -> None:
        self.source, self.env = source, env
        self.located_by: dict[tuple[str, str], Located] = {}
        self.read: dict[tuple[str, str], BuildMetadata | None] = {}  # metadata.json by commit and build

    def node(self, requirement: Requirement, asked: RequirementValue | None, path: tuple[str, ...]) -> DependencyNode:
        """The kernel `requirement` resolves to, and below it its kernel-depends; `path`: the kernels above it."""
        key = (requirement.repo_id, json.dumps(requirement.value, sort_keys=True))
        if key not in self.located_by:
            self.located_by[key] = locate(self.source, requirement, lambda message: None)
        located = self.located_by[key]
        pick, repo_id = located.pick, requirement.repo_id
        names = sorted(located.variants)
        chosen = select(dict.fromkeys(names), self.env).chosen
        version = None if pick.version is None else str(pick.version)

        def made(
            depends: list[DependencyNode], note: str | None = None, python: tuple[str, ...] = ()
        ) -> DependencyNode:
            return DependencyNode(repo_id, asked, version, pick.ref, pick.commit, chosen, depends, note, python)

        if repo_id in path:
            return made([], f"cycle: {' -> '.join((*path[path.index(repo_id) :], repo_id))}; lock and load refuse it")
        if chosen is None:
            return made([], f"no build fits {self.env.describe()}")
        if len(path) >= MAX_TREE_DEPTH:
            return made([], f"deeper than {MAX_TREE_DEPTH} levels: not shown")
        if (pick.commit, chosen) not in self.read:
            self.read[(pick.commit, chosen)] = _chosen_metadata(self.source, repo_id, located, chosen)
        metadata = self.read[(pick.commit, chosen)]
        where = f"{repo_id} at {pick.commit[:12]}: build/{chosen}/{METADATA}"
        return made(
            self.below(repo_id, chosen, metadata, (*path, repo_id)),
            python=declared(metadata.document, where) if metadata else (),
        )

    def below(
        self, repo_id: str, variant: str, metadata: BuildMetadata | None, path: tuple[str, ...]
    ) -> list[DependencyNode]:
        """The kernels the build `variant` of `repo_id` names under kernel-depends, each with the tree below it."""
        asker = f"{repo_id} ({variant}, kernel-depends)"
        return [
            self.node(
                parse_requirement(
                    dependency,
                    value,
                    where=f"{asker} {dependency!r}",
                    declared=f"the metadata.json of {asker} (ask its publisher)",
                ),
                value,
                path,
            )
            for dependency, value in sorted(metadata.kernel_depends if metadata else ())
        ]


def dependency_tree(
    source: HubSource,
    requirement: Requirement,
    env: Environment,
    located: Located | None = None,
    read: dict[tuple[str, str], BuildMetadata | None] | None = None,
) -> DependencyNode:
    """The whole kernel-depends tree of a kernel as `env` loads it: each kernel's requirement resolved to its
    release and the build `env` takes, whose metadata.json names the next level (as `kernels` and `kernelpin.load`
    walk it). One refs listing, one file listing and one metadata.json per kernel; no binary. `located` (the
    top's) and `read` (metadata.json by commit and build): what the caller has read already."""
    walk = _TreeWalk(source, env)
    walk.read.update(read or {})
    if located is not None:
        walk.located_by[(requirement.repo_id, json.dumps(requirement.value, sort_keys=True))] = located
    return walk.node(requirement, None, ())


@record
class KernelInfo:
    """What `kernelpin info` shows: `kernels info`'s fields (0.19), in its order, then kernelpin's. A kernel on the
    Hub has `repo_id` and `revision`, a build on disk `path` (as kernels shows the one or the other)."""

    name: str | None
    version: int | None  # the kernel's major version, as its metadata.json says it (kernels: `Version: 1`)
    kernels_minver: str | None
    license: str | None
    upstream: str | None
    source: str | None
    python_depends: list[str]  # of every kernel in the tree, sorted (as kernels 0.19)
    backends: list[str]
    variant: str | None  # the build the machine takes; None where none fits (kernels stops there)
    kernel_depends: list[str]  # every kernel of the kernel-depends tree, sorted (as kernels 0.19)
    dependency_tree: DependencyNode  # the whole tree with releases and builds (kernels: the names, with --dep-tree)
    repo_id: str | None
    revision: str | None  # as kernels shows it: what --revision said, vN for a major version, else the ref's name
    path: str | None  # a build on disk, as given
    # kernelpin's (None for a build on disk, but `variants` and `kernel_requirements`)
    commit: str | None
    ref: str | None
    repo_type: str | None
    release: str | None  # the release tag's version on the commit, if any
    variants: list[str]  # every build at the revision (beside the chosen one, on disk)
    kernel_requirements: list[dict[str, Any]]  # the top's kernel-depends: {repo, requirement} as its metadata says

    def as_json(self, dep_tree: bool) -> dict[str, Any]:
        """`kernels info --json`'s keys in its order (`dependency_tree`, {repo: {...}}, with `dep_tree` only),
        then kernelpin's (`dependency_releases`, the tree with releases and builds, with `dep_tree` only)."""
        shown = {
            "name": self.name,
            "version": self.version,
            "kernels_minver": self.kernels_minver,
            "license": self.license,
            "upstream": self.upstream,
            "source": self.source,
            "python_depends": self.python_depends,
            "backends": self.backends,
            "variant": self.variant,
            "kernel_depends": self.kernel_depends,
            **({"dependency_tree": self.dependency_tree.names()} if dep_tree else {}),
            **({"path": self.path} if self.path is not None else {"repo_id": self.repo_id, "revision": self.revision}),
        }
        return {
            **shown,
            "commit": self.commit,
            "ref": self.ref,
            "repo_type": self.repo_type,
            "release": self.release,
            "variants": self.variants,
            "kernel_requirements": self.kernel_requirements,
            **({"dependency_releases": dataclasses.asdict(self.dependency_tree)} if dep_tree else {}),
        }


def info(
    source: HubSource,
    repo_id: str,
    env: Environment,
    *,
    version: int | str | None = None,
    revision: str | None = None,
    project: Project | None = None,
) -> KernelInfo:
    """What a kernel is, as `kernels info` 0.19 says it for the machine `env`: read from the checked metadata.json
    of the build `env` takes (of the first build when none fits; the fields that describe the kernel, not a build,
    are the same in every build) at the revision `version` or `revision` names; without either, the project's
    requirement on it, else the newest major-version branch, else main (as `kernels info`); with the whole
    kernel-depends tree as `env` loads it (its kernels and Python dependencies are the tree's, as in kernels 0.19)."""
    repo_id = check_repo_id(repo_id)
    requirement = _asked(source, repo_id, version, revision, project, unversioned="main")  # as kernels info
    located = locate(source, requirement, lambda message: None)
    names = sorted(located.variants)
    chosen = select(dict.fromkeys(names), env).chosen
    described = chosen or names[0]
    metadata = _chosen_metadata(source, repo_id, located, described)
    document = metadata.document if metadata is not None else {}
    tree = dependency_tree(source, requirement, env, located, {(located.pick.commit, described): metadata})
    below = tree.walk()[1:]
    return KernelInfo(
        name=_text(document.get("name")),
        version=metadata.major if metadata is not None else None,
        kernels_minver=_text(document.get(KERNELS_MINVER_KEY)),
        license=_text(document.get("license")),
        upstream=_text(document.get(UPSTREAM_KEY)),
        source=_text(document.get("source")),
        python_depends=sorted(
            {*declared(document, f"{repo_id} at {located.pick.commit[:12]}: build/{described}/{METADATA}")}
            | {name for node in below for name in node.python_depends}
        ),
        backends=backends(names),
        variant=chosen,
        kernel_depends=sorted({node.repo for node in below}),
        dependency_tree=tree,
        repo_id=repo_id,
        revision=_revision_shown(requirement, located),
        path=None,
        commit=located.pick.commit,
        ref=located.pick.ref,
        repo_type=located.repo_type,
        release=None if located.pick.version is None else str(located.pick.version),
        variants=names,
        kernel_requirements=[
            {"repo": dependency, "requirement": value}
            for dependency, value in (metadata.kernel_depends if metadata is not None else ())
        ],
    )


def local_info(source: HubSource, path: Path, env: Environment) -> KernelInfo:
    """`info` for a build on disk (`build/<variant>/`, the variants, or one variant directory), as `kernels info
    PATH` shows it: the build `env` takes, read from its metadata.json, and its kernel-depends from the Hub."""
    directory, metadata = choose(str(path), path, env)
    name = str(path)
    where = f"{directory}/{METADATA}"
    walk = _TreeWalk(source, env)
    python = declared(metadata.document, where)
    tree = DependencyNode(
        name, None, None, None, None, directory.name, walk.below(name, directory.name, metadata, (name,)), None, python
    )
    below = tree.walk()[1:]
    names = [entry.name for entry in variant_directories(directory.parent)] or [directory.name]
    document = metadata.document
    return KernelInfo(
        name=_text(document.get("name")),
        version=metadata.major,
        kernels_minver=_text(document.get(KERNELS_MINVER_KEY)),
        license=_text(document.get("license")),
        upstream=_text(document.get(UPSTREAM_KEY)),
        source=_text(document.get("source")),
        python_depends=sorted({*python} | {dependency for node in below for dependency in node.python_depends}),
        backends=backends(names),
        variant=directory.name,
        kernel_depends=sorted({node.repo for node in below}),
        dependency_tree=tree,
        repo_id=None,
        revision=None,
        path=name,
        commit=None,
        ref=None,
        repo_type=None,
        release=None,
        variants=names,
        kernel_requirements=[
            {"repo": dependency, "requirement": value} for dependency, value in metadata.kernel_depends
        ],
    )


def _revision_shown(requirement: Requirement, located: Located) -> str:
    """The revision as `kernels info` shows it: the revision given, vN for the major version N, else (a range,
    kernelpin's) the tag or branch name the requirement resolved to, or its commit."""
    if requirement.revision is not None:
        return requirement.revision
    if requirement.branch is not None:
        return requirement.branch
    ref = located.pick.ref
    return ref.removeprefix("refs/heads/").removeprefix("refs/tags/") if ref else located.pick.commit


def _asked(
    source: HubSource,
    repo_id: str,
    version: int | str | None,
    revision: str | None,
    project: Project | None,
    unversioned: str | None = None,
) -> Requirement:
    """The revision to look at: `version` or `revision`, else the project's requirement, else the newest line, else
    (a repository without a vN branch) the revision `unversioned` (None: an error)."""
    if version is not None or revision is not None:
        return requirement_from_arguments(repo_id, version, revision)
    required = read_requirements(project) if project is not None else []
    return next((r for r in required if r.repo_id == repo_id), None) or _newest_line(source, repo_id, unversioned)


MAX_SOURCE_BYTES = 1 << 20  # one Python file describe_api reads; a bigger one is not a kernel's public module


@record
class DescribedApi:
    """What `kernelpin describe-api` shows: where the sources were read, and the API read from them."""

    repo: str | None  # None for a build on disk
    path: str | None
    ref: str | None
    commit: str | None
    variant: str
    api: KernelApi


def describe_api(
    source: HubSource,
    repo_id: str,
    env: Environment,
    *,
    version: int | str | None = None,
    revision: str | None = None,
    project: Project | None = None,
) -> DescribedApi:
    """A kernel's public functions and layers, read with `ast` from the Python sources of the build `env` would
    load (at `version`/`revision`, else the project's requirement, else the newest major branch): only its
    `metadata.json` and the `.py` files the API reaches are downloaded, into memory, each checked against the
    listing and the metadata's digest; no binary is fetched, nothing is imported or run (so no publisher check
    either: `kernels describe-api` wants --trust-remote-code for a publisher the Hub does not mark)."""
    repo_id = check_repo_id(repo_id)
    located = locate(source, _asked(source, repo_id, version, revision, project), lambda message: None)
    names = sorted(located.variants)
    selection = select(dict.fromkeys(names), env)
    if selection.chosen is None:
        raise KernelpinError(
            f"{repo_id} at {located.pick.commit[:12]}: no build fits {env.describe()}:\n{selection.explain()}"
        )
    commit, prefix = located.pick.commit, f"build/{selection.chosen}/"
    listed = {remote.path[len(prefix) :]: remote for remote in located.variants[selection.chosen]}
    where = f"{repo_id} at {commit[:12]}: {prefix}"

    def read(relative: str) -> bytes:
        remote = listed[relative]
        if remote.size > MAX_SOURCE_BYTES and relative != METADATA:  # metadata.json has its own bound
            raise Unreadable(f"{remote.size} bytes, over {MAX_SOURCE_BYTES}: not read")
        content = source.read(repo_id, located.repo_type, commit, remote.path, remote.size)
        if not matches_listing(remote, content):
            raise KernelpinError(
                f"{where}{relative} as downloaded does not match the repository listing; the "
                "server or a proxy altered it: do not use this revision"
            )
        return content

    digests = parse_metadata(read(METADATA), where + METADATA).digests if METADATA in listed else {}

    def checked_source(relative: str) -> bytes | None:
        if relative not in listed:
            return None
        content = read(relative)
        if relative in digests and hashlib.sha256(content).hexdigest() != digests[relative]:
            raise KernelpinError(
                f"{where}{relative} does not match the sha256 its metadata.json records: do not use this revision"
            )
        return content

    return DescribedApi(repo_id, None, located.pick.ref, commit, selection.chosen, describe_sources(checked_source))


def describe_local_api(path: Path, env: Environment) -> DescribedApi:
    """The same for a build on disk (what LOCAL_KERNELS names: `build/<variant>/`, or one variant directory)."""
    directory, _ = choose(str(path), path, env)

    def on_disk(relative: str) -> bytes | None:
        file = directory / relative
        if not file.is_file():
            return None
        if file.stat().st_size > MAX_SOURCE_BYTES:
            raise Unreadable(f"{file.stat().st_size} bytes, over {MAX_SOURCE_BYTES}: not read")
        return file.read_bytes()

    return DescribedApi(None, str(path), None, None, directory.name, describe_sources(on_disk))


def _newest_line(source: HubSource, repo_id: str, unversioned: str | None) -> Requirement:
    refs = source.refs(repo_id, None)
    majors = sorted(int(name[1:]) for name in refs.branches if re.fullmatch(r"v[0-9]+", name))
    if not majors and unversioned is not None:
        return requirement_from_arguments(repo_id, None, unversioned)
    if not majors:
        raise KernelpinError(
            f"{repo_id} has no major-version branch (v1, v2, ...); name the revision to show: "
            "--revision TAG|BRANCH|COMMIT (or --version)"
        )
    return parse_requirement(repo_id, majors[-1])


def _text(value: object) -> str | None:
    return value[:500] if isinstance(value, str) else None
