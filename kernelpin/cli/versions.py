"""`kernelpin versions`: its options and how its result is shown (kernelpin.commands.outdated.versions does
the work)."""

from __future__ import annotations

import argparse
import dataclasses

from kernelpin import environment
from kernelpin.cli.context import REPO_HELP, Context, emit_json
from kernelpin.commands.outdated import versions


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("repo", metavar="REPO", help=REPO_HELP)
    parser.add_argument(
        "--variants",
        action="store_true",
        help="also judge every build of each version for this machine (or the one described below)",
    )
    environment.add_arguments(parser)


def run(ctx: Context) -> int:
    env = environment.current(vars(ctx.args)) if ctx.args.variants else None
    found = versions(ctx.project, ctx.source, ctx.args.repo, env)
    requirement = found.requirement
    if ctx.args.json:
        rows = [
            {key: value for key, value in dataclasses.asdict(row).items() if key != "variants" or env is not None}
            for row in found.versions
        ]
        emit_json(
            {
                "repo": found.repo,
                "repo_type": found.repo_type,
                "requirement": requirement.value if requirement else None,
                "environment": None if env is None else env.describe(),
                "versions": rows,
                "ignored_tags": found.ignored_tags,
            }
        )
        return 0
    title = f"{found.repo} ({found.repo_type} repo)" + (f", requirement {requirement.text}" if requirement else "")
    columns = ("version", "tag", "commit", "satisfies", "locked") + (("build here", "builds") if env else ())
    table = ctx.table(*columns, title=title)
    for row in found.versions:
        satisfies = {None: "", True: "yes", False: "no"}[row.satisfies]
        cells = [row.version, row.tag, row.commit[:12], satisfies, "*" if row.locked else ""]
        if row.variants is not None:
            chosen = next((fit.name for fit in row.variants if fit.chosen), "none")
            cells += [chosen, f"{sum(fit.fits for fit in row.variants)} of {len(row.variants)} fit"]
        table.add_row(*cells)
    ctx.show(table)
    if env is not None:
        ctx.note(f"builds judged for {env.describe()}")
    if found.ignored_tags:
        ctx.note(f"ignored tags (not versions): {', '.join(found.ignored_tags)}")
    return 0
