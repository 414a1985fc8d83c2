"""`kernelpin download [DIR]`: install what kernelpin.lock names, as `kernels download DIR` installs what kernels.lock
names (kernelpin.commands.sync.download does the work)."""

from __future__ import annotations

import argparse

from kernelpin import environment
from kernelpin.cli.context import Context, directory_argument
from kernelpin.cli.relocking import render_synced
from kernelpin.commands import sync as syncing


def options(parser: argparse.ArgumentParser) -> None:
    directory_argument(parser, "download")
    parser.add_argument(
        "--all-variants",
        action="store_true",
        help="every locked variant, not only this environment's (as `kernels download --all-variants`)",
    )


def run(ctx: Context) -> int:
    all_variants = ctx.args.all_variants
    synced = syncing.download(ctx.project, ctx.source, all_variants=all_variants, note=ctx.note, warn=ctx.warn)
    render_synced(ctx, synced, None if all_variants else environment.current({}))
    return 0
