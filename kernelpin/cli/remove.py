"""`kernelpin remove`: its options and how its result is shown (kernelpin.commands.lock.remove does the work)."""

from __future__ import annotations

import argparse

from kernelpin.cli.context import REPO_HELP, Context, emit_json
from kernelpin.cli.relocking import distinct, kernel_json, report_changes
from kernelpin.commands import lock as locking
from kernelpin.format.spec import check_repo_id


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("repos", nargs="+", metavar="REPO", help=REPO_HELP)


def run(ctx: Context) -> int:
    repo_ids = distinct([check_repo_id(repo) for repo in ctx.args.repos])
    removed = locking.remove(ctx.project, ctx.source, repo_ids, note=ctx.note, warn=ctx.warn)
    if ctx.args.json:
        emit_json(
            {
                "removed": repo_ids,
                "pyproject": str(ctx.project.pyproject),
                "changes": removed.changes,
                "kernels": [kernel_json(k) for k in removed.lock.kernels],
            }
        )
        return 0
    for repo_id in repo_ids:
        ctx.out.print(f"Removed {repo_id} from {ctx.project.pyproject.name}")
    report_changes(ctx, removed.changes, ctx.out.print)
    return 0
