"""`kernelpin info`: its options and how its result is shown (kernelpin.commands.info.info does the work)."""

from __future__ import annotations

import argparse
from pathlib import Path

from kernelpin import environment
from kernelpin.cli.context import REPO_HELP, Context, emit_json
from kernelpin.commands.info import DependencyNode, info, local_info
from kernelpin.errors import KernelpinError
from kernelpin.format.spec import describe_value


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("repo", metavar="REPO|DIR", help=f"{REPO_HELP}, or a build on disk (build/<variant>/)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--version", metavar="N|RANGE", help="a major version (the branch vN) or a range of tags")
    which.add_argument("--revision", metavar="REV", help="a tag, branch or commit")
    parser.add_argument(
        "--dep-tree",
        action="store_true",
        help="show the whole kernel-depends tree (as kernels info --dep-tree), then each kernel's release and the "
        "build this machine (or the one --torch ... describes) takes",
    )
    environment.add_arguments(parser)


def run(ctx: Context) -> int:
    version, env = ctx.args.version, environment.current(vars(ctx.args))
    given = Path(ctx.args.repo)  # as kernels reads it (the shell expands ~)
    if given.is_dir():
        if ctx.args.version or ctx.args.revision:
            raise KernelpinError("--version and --revision name a revision on the Hub, not a directory; drop them")
        found = local_info(ctx.source, given, env)
    else:
        found = info(
            ctx.source,
            ctx.args.repo,
            env,
            version=int(version) if version and version.isascii() and version.isdigit() else version,
            revision=ctx.args.revision,
            project=ctx.project_if_any(),  # outside a project: no requirement to default to
        )
    if ctx.args.json:
        emit_json(found.as_json(ctx.args.dep_tree), sort_keys=False)  # kernels' keys first, in its order
        return 0

    def shown(value: object) -> str:
        return "-" if value is None else str(value)

    def listed(values: list[str]) -> str:
        return ", ".join(values) if values else "-"

    # `kernels info`'s lines (0.19), byte for byte: a script reading them reads kernelpin's the same.
    where = (
        [f"Path: {found.path}"]
        if found.path is not None
        else [f"Repository: {found.repo_id}", f"Revision: {found.revision}"]
    )
    lines = [*where, f"Variant: {shown(found.variant)}"]
    lines += [
        f"{label}: {shown(value)}"
        for label, value in (
            ("Name", found.name),
            ("Version", found.version),
            ("Minimum kernels version", found.kernels_minver),
            ("License", found.license),
            ("Upstream", found.upstream),
            ("Source", found.source),
        )
    ]
    if ctx.args.dep_tree:
        lines += ["Kernel dependencies:", *_tree_lines(found.dependency_tree, names_only=True)]
    else:
        lines.append(f"Kernel dependencies: {listed(found.kernel_depends)}")
    lines += [f"Python dependencies: {listed(found.python_depends)}", f"Backends: {', '.join(found.backends)}"]
    # kernelpin's lines, after kernels' (docs/kernelpin.md): what the revision named and what the tree resolved to.
    if found.commit is not None:  # a build on disk has none of these
        lines += [
            f"Commit: {found.commit}",
            f"Ref: {shown(found.ref)}",
            f"Repository type: {found.repo_type}",
            f"Release: {shown(found.release)}",
        ]
    lines += [
        f"Variants: {listed(found.variants)}",
        "Kernel requirements: "
        + listed([f"{d['repo']} {describe_value(d['requirement'])}" for d in found.kernel_requirements]),
    ]
    if ctx.args.dep_tree:
        lines += ["Dependency releases:", *_tree_lines(found.dependency_tree)]
    for line in lines:
        ctx.out.print(line)
    return 0


def _tree_lines(node: DependencyNode, prefix: str = "", last: bool = True, names_only: bool = False) -> list[str]:
    """`kernels info --dep-tree`'s drawing (`|-- `, `` `-- ``): of the repositories' names (`names_only`, as
    kernels draws it), or each kernel with the requirement its parent writes, its release and build."""
    if names_only:
        label = node.repo
    else:
        release = (
            "on disk"
            if node.commit is None
            else node.version or f"{(node.ref or '').rpartition('/')[2] or 'commit'}@{node.commit[:12]}"
        )
        asked = "" if node.requirement is None else f" {describe_value(node.requirement)} ->"
        label = f"{node.repo}{asked} {release} ({node.variant or 'no build'})" + (f": {node.note}" if node.note else "")
    top = node.requirement is None
    lines = [label if top else f"{prefix}{'`-- ' if last else '|-- '}{label}"]
    below = prefix if top else prefix + ("    " if last else "|   ")
    for index, child in enumerate(node.depends):
        lines += _tree_lines(child, below, index == len(node.depends) - 1, names_only)
    return lines
