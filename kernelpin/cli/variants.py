"""`kernelpin variants`: its options and how its result is shown (kernelpin.commands.info.variants does the work)."""

from __future__ import annotations

import argparse

from kernelpin import environment
from kernelpin.cli.context import REPO_HELP, Context, emit_json, ref_shown
from kernelpin.commands.info import variants


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("repo", metavar="REPO", help=REPO_HELP)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--all-versions", action="store_true", help="every major version (every branch vN)")
    which.add_argument("--version", metavar="N|latest", help="the major version N (the branch vN); default: latest")
    which.add_argument("--revision", metavar="REV", help="a tag, branch or commit")
    parser.add_argument("--only-compatible", action="store_true", help="only the builds that fit")
    environment.add_arguments(parser)


def run(ctx: Context) -> int:
    env = environment.current(vars(ctx.args))
    found = variants(
        ctx.source,
        ctx.args.repo,
        env,
        version=ctx.args.version,
        revision=ctx.args.revision,
        all_versions=ctx.args.all_versions,
    )
    shown = [[fit for fit in block.variants if fit.fits or not ctx.args.only_compatible] for block in found]
    if ctx.args.json:
        emit_json(  # kernels' keys in its order, then kernelpin's (environment, commit)
            {
                "repo_id": ctx.args.repo,
                "revisions": [
                    {
                        "version": block.version,
                        "revision": block.revision,
                        "variants": [
                            {
                                "variant": fit.name,
                                "compatible": fit.fits,
                                "preferred": fit.chosen,
                                "reason": None if fit.fits else fit.reason,  # as kernels: a fitting build has none
                            }
                            for fit in fits
                        ],
                        "commit": block.commit,
                    }
                    for block, fits in zip(found, shown, strict=False)
                ],
                "environment": env.describe(),
            },
            sort_keys=False,
        )
        return 0
    for index, (block, fits) in enumerate(zip(found, shown, strict=False)):
        label = f"Version {block.version}" if block.version is not None else f"Revision {ref_shown(block.revision)}"
        ctx.out.print(("\n" if index else "") + f"{label}:\n")  # as kernels prints it; --json has the commit
        for fit in fits:
            ctx.out.print(
                f"{fit.name} compatible{', preferred' if fit.chosen else ''} ✅"
                if fit.fits
                else f"{fit.name}: {fit.reason}"
            )
        if not fits:
            ctx.out.print("No compatible variants found." if ctx.args.only_compatible else "No build variants found.")
    ctx.note(f"builds judged for {env.describe()}")
    return 0
