"""What the Hub offers against what the project requires and locks: `kernelpin outdated` (per requirement: the
locked, the newest satisfying and the newest version) and `kernelpin versions` (a repository's version tags, and
with an environment which of each version's builds it can use)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelpin.builds import VariantFit, fits
from kernelpin.format.ranges import Version
from kernelpin.format.spec import Requirement, RequirementValue, check_repo_id
from kernelpin.format.variant import Environment, select
from kernelpin.hub.listing import Refs
from kernelpin.hub.source import HubSource
from kernelpin.project import Project, find_project, read_requirements
from kernelpin.records import record
from kernelpin.resolve import group_variants, tag_versions
from kernelpin.store import lockfiles


@record
class Outdated:
    repo: str
    requirement: RequirementValue
    locked: str | None  # the locked version, or `v1@0123456789ab` for a pin no release tag names
    newest_satisfying: str | None
    newest: str | None  # the newest release
    branch_moved: bool | None = None  # for a `= N` requirement: the branch v<N> left the locked commit

    def as_json(self) -> dict[str, Any]:
        data = dict(vars(self))
        if self.branch_moved is None:
            del data["branch_moved"]
        return data


@record
class TaggedVersion:
    version: str
    tag: str
    commit: str
    satisfies: bool | None  # None: the project has no requirement on the repository (or pins a revision)
    locked: bool
    variants: list[VariantFit] | None = None  # each build judged for the environment asked about (else None)


@record
class VersionList:
    repo: str
    repo_type: str
    requirement: Requirement | None
    versions: list[TaggedVersion]  # newest first
    ignored_tags: list[str]  # tags that are not versions


def outdated(project: Project | None = None, source: HubSource | None = None) -> list[Outdated]:
    """For each requirement: the locked version, the newest version it allows, and the newest release. By
    default the project around the working directory and the Hub the environment names."""
    project, source = project or find_project(Path.cwd()), source or HubSource.from_env()
    locked = lockfiles.read(project.lockfile)
    rows = []
    for requirement in read_requirements(project):
        current = locked.kernel(requirement.repo_id) if locked else None
        refs = source.refs(requirement.repo_id, requirement.repo_type)
        versions, _ = tag_versions(refs.tags)
        releases = [v for v in versions if not v.is_prerelease]
        newest_satisfying, branch_moved = None, None
        if requirement.branch is not None:  # `= N`: the newest is the branch head, which moves without a tag
            head = refs.branches.get(requirement.branch)
            at_head = [v for v, tag in versions.items() if refs.tags[tag] == head]
            if head is not None:
                newest_satisfying = (
                    str(max(at_head)) if at_head else _short_pin(f"refs/heads/{requirement.branch}", head)
                )
            branch_moved = current is not None and head is not None and head != current.commit
        elif requirement.range is not None and (satisfying := requirement.range.best(versions)) is not None:
            newest_satisfying = str(satisfying)
        rows.append(
            Outdated(
                requirement.repo_id,
                requirement.value,
                None if current is None else current.version or _short_pin(current.ref, current.commit),
                newest_satisfying,
                str(max(releases)) if releases else None,
                branch_moved,
            )
        )
    return rows


def _short_pin(ref: str | None, commit: str) -> str:
    """`v1@0123456789ab`: a branch (or commit) pin that no release tag names."""
    return f"{ref.rpartition('/')[2]}@{commit[:12]}" if ref else commit[:12]


def versions(project: Project, source: HubSource, repo_id: str, env: Environment | None = None) -> VersionList:
    """A repository's version tags, newest first, with which satisfy the project's requirement and which is locked;
    with `env` (this machine or a described one), every build of each version judged for it (one file listing
    per version)."""
    repo_id = check_repo_id(repo_id)
    requirement = next((r for r in read_requirements(project) if r.repo_id == repo_id), None)
    refs = source.refs(repo_id, requirement.repo_type if requirement else None)
    found, ignored = tag_versions(refs.tags)
    locked = lockfiles.read(project.lockfile)
    locked_kernel = locked.kernel(repo_id) if locked else None
    rows = [
        TaggedVersion(
            str(v),
            found[v],
            refs.tags[found[v]],
            _satisfies(requirement, refs, v, found[v]),
            locked_kernel is not None and locked_kernel.version == str(v),
            None if env is None else _judged(source, repo_id, refs.repo_type, refs.tags[found[v]], env),
        )
        for v in sorted(found, reverse=True)
    ]
    return VersionList(repo_id, refs.repo_type, requirement, rows, ignored)


def _satisfies(requirement: Requirement | None, refs: Refs, version: Version, tag: str) -> bool | None:
    """Whether a tagged version meets the requirement: in its range, or (`= N`) at the head of branch vN."""
    if requirement is None:
        return None
    if requirement.branch is not None:
        return refs.tags[tag] == refs.branches.get(requirement.branch)
    return None if requirement.range is None else requirement.range.contains(version)


def _judged(source: HubSource, repo_id: str, repo_type: str, commit: str, env: Environment) -> list[VariantFit]:
    names = sorted(group_variants(source.tree(repo_id, repo_type, commit), f"{repo_id} at {commit[:12]}"))
    return fits(select(dict.fromkeys(names), env), names)
