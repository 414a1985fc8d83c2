"""Looking at a kernel before using it: what it is (`info`: license, upstream, backends, dependencies), which
of its builds a machine can use (per variant, per version), and, when the version asked for has no build for
this machine, which newer one has. `kernels info`, `kernels versions` and `get_kernel_variants`, answered
from the repository listing and checked metadata.json files; nothing is downloaded to disk.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelpin.errors import KernelpinError
from kernelpin.metadata import KERNELS_MINVER_KEY, UPSTREAM_KEY
from kernelpin.python_depends import declared
from kernelpin.ranges import Version
from kernelpin.resolve import Located, Pinner, group_variants, locate, tag_versions
from kernelpin.source import HubSource
from kernelpin.spec import Requirement
from kernelpin.variant import Environment, Selection, Variant, select


@dataclass(frozen=True)
class VariantFit:
    """One build variant judged for a machine: whether it fits, why not, and whether it is the one chosen."""

    name: str
    fits: bool
    chosen: bool
    reason: str | None  # why it is not chosen (None for the chosen one)

    def as_json(self) -> dict[str, Any]:
        return {"variant": self.name, "fits": self.fits, "chosen": self.chosen, "reason": self.reason}


def fits(selection: Selection, names: list[str]) -> list[VariantFit]:
    """Every variant with the verdict of `selection`: those that fit first (the chosen leading, best first),
    then the rejected ones by name, as kernels' get_kernel_variants orders them."""
    order = list(selection.ranked) + sorted(set(names) - set(selection.ranked))
    return [VariantFit(name, name in selection.ranked, name == selection.chosen, selection.rejected.get(name))
            for name in order]


def variant_fits(located: Located, env: Environment) -> list[VariantFit]:
    """The variants at a located revision judged for `env` by name (GPU archs are not read here)."""
    names = sorted(located.variants)
    return fits(select(dict.fromkeys(names), env), names)


def kernel_variants(source: HubSource, requirement: Requirement, env: Environment) -> list[VariantFit]:
    return variant_fits(locate(source, requirement, lambda message: None), env)


def backends(names: list[str]) -> list[str]:
    found = set()
    for name in names:
        try:
            found.add(Variant.parse(name).backend.name)
        except ValueError:
            continue
    return sorted(found)


def kernel_info(source: HubSource, requirement: Requirement) -> dict[str, Any]:
    """What `kernels info` shows, from one variant's checked metadata.json (the fields that describe the
    kernel, not a build, are the same in every variant): name, license, upstream, source, dependencies,
    kernels-minver, backends and variants."""
    located = locate(source, requirement, lambda message: None)
    names = sorted(located.variants)
    first = names[0]
    pinner = Pinner(source, requirement.repo_id, located.repo_type, located.pick.commit)
    pinner.variant(first, located.variants[first])
    metadata = pinner.metadata.get(first)
    document = metadata.document if metadata is not None else {}
    where = f"{requirement.repo_id} at {located.pick.commit[:12]}: build/{first}/metadata.json"
    return {
        "repo": requirement.repo_id,
        "repo_type": located.repo_type,
        "commit": located.pick.commit,
        "ref": located.pick.ref,
        "version": None if located.pick.version is None else str(located.pick.version),
        "name": _text(document.get("name")),
        "major": metadata.major if metadata is not None else None,
        "license": _text(document.get("license")),
        "upstream": _text(document.get(UPSTREAM_KEY)),
        "source": _text(document.get("source")),
        "kernels_minver": _text(document.get(KERNELS_MINVER_KEY)),
        "python_depends": list(declared(document, where)),
        "kernel_depends": [{"repo": repo_id, "requirement": value}
                           for repo_id, value in (metadata.kernel_depends if metadata is not None else ())],
        "backends": backends(names),
        "variants": names,
    }


def _text(value: object) -> str | None:
    return value[:500] if isinstance(value, str) else None


def versions_with_variants(source: HubSource, repo_id: str, repo_type: str | None,
                           env: Environment) -> list[dict[str, Any]]:
    """Each version tag and major-version branch, newest first, with the verdict on each of its variants
    for `env` (one listing request per revision)."""
    refs = source.refs(repo_id, repo_type)
    versions, _ = tag_versions(refs.tags)
    revisions = [(str(version), f"refs/tags/{versions[version]}", refs.tags[versions[version]])
                 for version in sorted(versions, reverse=True)]
    branches = sorted((name for name in refs.branches if name[1:].isdigit() and name.startswith("v")),
                      key=lambda name: -int(name[1:]))
    revisions += [(f"branch {name}", f"refs/heads/{name}", refs.branches[name]) for name in branches]
    rows = []
    for label, ref, commit in revisions:
        where = f"{repo_id} at {commit[:12]}"
        variants = group_variants(source.tree(repo_id, refs.repo_type, commit), where)
        names = sorted(variants)
        rows.append({"version": label, "ref": ref, "commit": commit,
                     "variants": [fit.as_json() for fit in fits(select(dict.fromkeys(names), env), names)]})
    return rows


def newer_build_hint(source: HubSource, repo_id: str, repo_type: str | None, than: Version | None,
                     env: Environment, limit: int = 3) -> str:
    """When the version in use has no build for `env`: the newest release tag (newer than `than`, at most
    `limit` looked at) that has one, and how to require it; "" when none has (or nothing is newer)."""
    try:
        refs = source.refs(repo_id, repo_type)
    except KernelpinError:
        return ""
    versions, _ = tag_versions(refs.tags)
    newer = sorted((v for v in versions if not v.is_prerelease and (than is None or v > than)), reverse=True)
    for version in newer[:limit]:
        commit = refs.tags[versions[version]]
        names = sorted(group_variants(source.tree(repo_id, refs.repo_type, commit), f"{repo_id} at {commit[:12]}"))
        chosen = select(dict.fromkeys(names), env).chosen
        if chosen is not None:
            return (f"Version {version} (tag {versions[version]}) has a build for this machine ({chosen}): "
                    f"require it, e.g. `kernelpin add {repo_id}@^{version}`")
    return ""
