"""`kernelpin info`: its options and how its result is shown (kernelpin.commands.info.info does the work)."""

from __future__ import annotations

import argparse
import dataclasses

from kernelpin import environment
from kernelpin.cli.context import REPO_HELP, Context, emit_json
from kernelpin.commands.info import DependencyNode, info
from kernelpin.format.spec import describe_value


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("repo", metavar="REPO", help=REPO_HELP)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--version", metavar="N|RANGE", help="a major version (the branch vN) or a range of tags")
    which.add_argument("--revision", metavar="REV", help="a tag, branch or commit")
    parser.add_argument(
        "--dep-tree",
        action="store_true",
        help="show the whole kernel-depends tree: each kernel's release and the build this machine "
        "(or the one --torch ... describes) takes",
    )
    environment.add_arguments(parser)


def run(ctx: Context) -> int:
    version = ctx.args.version
    found = info(
        ctx.source,
        ctx.args.repo,
        version=int(version) if version and version.isdigit() else version,
        revision=ctx.args.revision,
        project=ctx.project_if_any(),  # outside a project: no requirement to default to
        dep_tree=environment.current(vars(ctx.args)) if ctx.args.dep_tree else None,
    )
    if ctx.args.json:
        emit_json(dataclasses.asdict(found))
        return 0

    def shown(value: object) -> str:
        return "-" if value in (None, []) else ", ".join(map(str, value)) if isinstance(value, list) else str(value)

    at = f"{found.ref or found.commit} ({found.commit[:12]})"
    for label, value in (
        ("Repository", f"{found.repo} ({found.repo_type} repo)"),
        ("Revision", at),
        ("Name", found.name),
        ("Version", found.version or found.major),
        ("Minimum kernels version", found.kernels_minver),
        ("License", found.license),
        ("Upstream", found.upstream),
        ("Source", found.source),
        ("Python dependencies", found.python_depends),
        ("Kernel dependencies", [f"{d['repo']} {describe_value(d['requirement'])}" for d in found.kernel_depends]),
        ("Backends", found.backends),
        ("Variants", found.variants),
    ):
        ctx.out.print(f"{label}: {shown(value)}")
    if found.dependency_tree is not None:
        ctx.out.print("Dependency tree:")
        for line in _tree_lines(found.dependency_tree):
            ctx.out.print(line)
    return 0


def _tree_lines(node: DependencyNode, prefix: str = "", last: bool = True, top: bool = True) -> list[str]:
    """`kernels info --dep-tree`'s drawing (`|-- `, `` `-- ``), each kernel with its release and build."""
    release = node.version or f"{(node.ref or '').rpartition('/')[2] or 'commit'}@{node.commit[:12]}"
    asked = "" if node.requirement is None else f" {describe_value(node.requirement)} ->"
    label = f"{node.repo}{asked} {release} ({node.variant or 'no build'})" + (f": {node.note}" if node.note else "")
    lines = [label if top else f"{prefix}{'`-- ' if last else '|-- '}{label}"]
    below = prefix if top else prefix + ("    " if last else "|   ")
    for index, child in enumerate(node.depends):
        lines += _tree_lines(child, below, index == len(node.depends) - 1, top=False)
    return lines
