"""Looking at a kernel before using it: what it is (`kernelpin info`: license, upstream, backends,
dependencies), which of its builds a machine can use (per variant; `kernelpin versions --variants` per version),
and, when the version asked for has no build for this machine, which newer one has. `kernels info`, `kernels
versions` and `get_kernel_variants`, answered from the repository listing and checked metadata.json files;
nothing is downloaded to disk.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelpin.errors import KernelpinError
from kernelpin.format.metadata import KERNELS_MINVER_KEY, UPSTREAM_KEY
from kernelpin.project import Project, read_requirements
from kernelpin.loading.python_depends import declared
from kernelpin.resolve import Pinner, locate
from kernelpin.hub.source import HubSource
from kernelpin.format.spec import Requirement, check_repo_id, parse_requirement, requirement_from_arguments
from kernelpin.format.variant import Variant


def backends(names: list[str]) -> list[str]:
    found = set()
    for name in names:
        try:
            found.add(Variant.parse(name).backend.name)
        except ValueError:
            continue
    return sorted(found)


@dataclass(frozen=True)
class KernelInfo:
    """What `kernelpin info` shows (kernels info's fields, and the revision they were read at)."""

    repo: str
    repo_type: str
    commit: str
    ref: str | None
    version: str | None  # the release tag's version on the commit, if any
    name: str | None
    major: int | None
    license: str | None
    upstream: str | None
    source: str | None
    kernels_minver: str | None
    python_depends: list[str]
    kernel_depends: list[dict[str, Any]]
    backends: list[str]
    variants: list[str]


def info(source: HubSource, repo_id: str, *, version: int | str | None = None, revision: str | None = None,
         project: Project | None = None) -> KernelInfo:
    """What a kernel is, read from one variant's checked metadata.json (the fields that describe the kernel, not a
    build, are the same in every variant) at the revision `version` or `revision` names; without either, the
    project's requirement on it, else the newest major-version branch (as `kernels info`)."""
    repo_id = check_repo_id(repo_id)
    if version is not None or revision is not None:
        requirement = requirement_from_arguments(repo_id, version, revision)
    else:
        required = read_requirements(project) if project is not None else []
        requirement = next((r for r in required if r.repo_id == repo_id), None) or _newest_line(source, repo_id)
    located = locate(source, requirement, lambda message: None)
    names = sorted(located.variants)
    first = names[0]
    pinner = Pinner(source, repo_id, located.repo_type, located.pick.commit)
    pinner.variant(first, located.variants[first])
    metadata = pinner.metadata.get(first)
    document = metadata.document if metadata is not None else {}
    where = f"{repo_id} at {located.pick.commit[:12]}: build/{first}/metadata.json"
    return KernelInfo(
        repo=repo_id, repo_type=located.repo_type, commit=located.pick.commit, ref=located.pick.ref,
        version=None if located.pick.version is None else str(located.pick.version),
        name=_text(document.get("name")), major=metadata.major if metadata is not None else None,
        license=_text(document.get("license")), upstream=_text(document.get(UPSTREAM_KEY)),
        source=_text(document.get("source")), kernels_minver=_text(document.get(KERNELS_MINVER_KEY)),
        python_depends=list(declared(document, where)),
        kernel_depends=[{"repo": dependency, "requirement": value}
                        for dependency, value in (metadata.kernel_depends if metadata is not None else ())],
        backends=backends(names), variants=names,
    )


def _newest_line(source: HubSource, repo_id: str) -> Requirement:
    refs = source.refs(repo_id, None)
    majors = sorted(int(name[1:]) for name in refs.branches if name.startswith("v") and name[1:].isdigit())
    if not majors:
        raise KernelpinError(f"{repo_id} has no major-version branch (v1, v2, ...); name the revision to show: "
                             "--revision TAG|BRANCH|COMMIT (or --version)")
    return parse_requirement(repo_id, majors[-1])


def _text(value: object) -> str | None:
    return value[:500] if isinstance(value, str) else None
