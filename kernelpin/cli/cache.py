"""`kernelpin cache`: its options and how its result is shown (kernelpin.commands.cache does the work)."""

from __future__ import annotations

import argparse
import dataclasses

from kernelpin.cli.context import Context, count, emit_json
from kernelpin.commands.cache import cache


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        nargs="?",
        choices=["show", "prune"],
        default="show",
        help="show (default): what is cached; prune: remove revisions the lock does not use",
    )
    parser.add_argument("--yes", action="store_true", help="with prune: delete (without it prune only lists)")


def _size(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{size / 1e3:.1f} kB"


def run(ctx: Context) -> int:
    prune = ctx.args.action == "prune"
    cache_dir = ctx.source.settings.cache_dir
    # Outside a project `cache` still shows the Hub cache; pruning needs the project's lock (its error says so).
    found = cache(cache_dir, ctx.project if prune else ctx.project_if_any(), prune=prune, delete=ctx.args.yes)
    cache_dir, rows, unused, deleted = found.cache_dir, found.revisions, found.unused, found.deleted
    if ctx.args.json:
        emit_json(
            {
                "cache_dir": str(cache_dir),
                "lock": str(ctx.project.lockfile),
                "revisions": [dataclasses.asdict(row) for row in rows],
                "unused": [row.commit for row in unused],
                "deleted": deleted,
            }
        )
        return 0
    if not rows:
        ctx.out.print(f"no kernels cached in {cache_dir}")
        return 0
    shown = unused if prune else rows
    table = ctx.table(
        "kernel",
        "type",
        "commit",
        "size",
        "used by the lock",
        title=f"{'not used by' if prune else 'cached for'} {ctx.project.lockfile}, in {cache_dir}",
    )
    for row in shown:
        table.add_row(row.repo, row.repo_type, row.commit[:12], _size(row.size), "yes" if row.locked else "no")
    if shown:
        ctx.show(table)
    total = _size(sum(row.size for row in unused))
    if not prune:
        ctx.out.print(
            f"{count(len(rows), 'revision')}, {_size(sum(row.size for row in rows))}; {len(unused)} not used by "
            f"this project's lock ({total}): `kernelpin cache prune` lists them, `--yes` deletes them"
        )
    elif not unused:
        ctx.out.print("nothing to prune: the lock uses every cached kernel revision")
    elif deleted:
        ctx.out.print(f"deleted {count(len(unused), 'revision')} ({total})")
    else:
        ctx.out.print(
            f"would delete {count(len(unused), 'revision')} ({total}) that this project's lock does not use; other "
            "projects may use them: add --yes to delete"
        )
    return 0
