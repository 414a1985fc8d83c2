"""Which builds of a kernel fit a machine, judged from the Hub's file listing without downloading anything: every
variant with its verdict (`kernelpin versions --variants`, `get_kernel_variants`), and, when the version in use
has no build for the machine, the newer release that has one (`sync`, `get_kernel`)."""

from __future__ import annotations

from kernelpin.errors import KernelpinError
from kernelpin.format.ranges import Version
from kernelpin.format.spec import Requirement
from kernelpin.format.variant import Environment, Selection, Variant, preference, select
from kernelpin.hub.source import HubSource
from kernelpin.records import record
from kernelpin.resolve import group_variants, locate, tag_versions


@record
class VariantFit:
    """One build variant judged for a machine: whether it fits, why not, and whether it is the one chosen."""

    name: str
    fits: bool
    chosen: bool
    reason: str | None  # why it is not chosen (None for the chosen one)


def fits(selection: Selection, names: list[str]) -> list[VariantFit]:
    """Every variant with the verdict of `selection`, in the order `kernels variants` and kernels'
    get_kernel_variants give them (kernels sorts the whole trace with one key): those that fit first (the chosen
    leading, best first), then the rejected ones by the same preference; where kernels' key ties, kernels keeps
    the listing's arbitrary order and kernelpin the names' (names kernels cannot parse last)."""
    rejected = sorted(set(names) - set(selection.ranked), key=_rejected_order)
    order = list(selection.ranked) + rejected
    return [
        VariantFit(name, name in selection.ranked, name == selection.chosen, selection.rejected.get(name))
        for name in order
    ]


def _rejected_order(name: str) -> tuple[object, ...]:
    try:
        return (0, preference(Variant.parse(name)), name)
    except ValueError:
        return (1, (), name)


def kernel_variants(source: HubSource, requirement: Requirement, env: Environment) -> list[VariantFit]:
    names = sorted(locate(source, requirement, lambda message: None).variants)
    return fits(select(dict.fromkeys(names), env), names)


def newer_build_hint(
    source: HubSource, repo_id: str, repo_type: str | None, than: Version | None, env: Environment, limit: int = 3
) -> str:
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
            return (
                f"Version {version} (tag {versions[version]}) has a build for this machine ({chosen}): "
                f"require it, e.g. `kernelpin add {repo_id}@^{version}`"
            )
    return ""
