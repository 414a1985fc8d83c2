"""`kernelpin outdated`: how its result is shown (kernelpin.commands.outdated does the work)."""

from __future__ import annotations

import argparse

from kernelpin.cli.context import Context, emit_json
from kernelpin.commands.outdated import outdated
from kernelpin.format.spec import describe_value


def options(parser: argparse.ArgumentParser) -> None:
    """None beyond the global options and --json."""


def run(ctx: Context) -> int:
    rows = outdated(ctx.project, ctx.source)
    if ctx.args.json:
        emit_json([row.as_json() for row in rows])
        return 0
    if not rows:
        ctx.out.print(f"nothing to check: {ctx.project.pyproject.name} has no [tool.kernels.dependencies]")
        return 0
    table = ctx.table("kernel", "requirement", "locked", "newest satisfying", "newest")
    for row in rows:
        newest_satisfying = row.newest_satisfying or "-"
        if row.branch_moved:
            newest_satisfying += " (branch moved: `kernelpin lock --upgrade-package` follows it)"
        table.add_row(
            row.repo, describe_value(row.requirement), row.locked or "-", newest_satisfying, row.newest or "-"
        )
    ctx.show(table)
    return 0
