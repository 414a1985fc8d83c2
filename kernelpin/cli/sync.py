"""`kernelpin sync`: its options and how its result is shown (kernelpin.commands.sync does the work)."""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import Any

from kernelpin import environment
from kernelpin.cli.context import Context, count, emit_json
from kernelpin.cli.relocking import accept_signer_option, accepted_signers, render_synced, report_changes
from kernelpin.commands import sync as syncing
from kernelpin.relock import Locked, LockMode

EPILOG = """how --locked and --frozen compare:
  uv:    `uv sync --locked` fails on a stale lock, `--frozen` uses the lock without checking it: the same here.
  cargo: `--locked` is the same too, but cargo's `--frozen` also means `--offline`; here `sync --frozen` still
         downloads the locked files that are missing (add --offline, or HF_HUB_OFFLINE=1, to forbid that).
"""


def options(parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--locked",
        action="store_const",
        dest="lock_mode",
        const=LockMode.LOCKED,
        help="fail if the lock is stale instead of updating it (as uv, cargo)",
    )
    mode.add_argument(
        "--frozen",
        action="store_const",
        dest="lock_mode",
        const=LockMode.FROZEN,
        help="use the lock as it is, resolving nothing; may still download (cargo's --frozen implies --offline)",
    )
    parser.add_argument("--all-variants", action="store_true", help="every locked variant, not only this environment's")
    parser.add_argument("--target", metavar="DIR", help="vendor into DIR (DIR/<org>/<name>/<commit>/build/<variant>)")
    accept_signer_option(parser)
    environment.add_arguments(parser)
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="show which variant of each kernel would be installed and what is missing; download and write nothing",
    )
    parser.set_defaults(lock_mode=LockMode.UPDATE)


def run(ctx: Context) -> int:
    args = ctx.args
    project, source = ctx.project, ctx.source
    env = None if args.all_variants else environment.current(vars(args))

    def on_lock(fresh: Locked) -> None:  # the re-lock's changes, shown before anything is installed
        report_changes(ctx, fresh.changes, ctx.progress)
        if env is not None and not args.dry_run:
            ctx.note(f"selecting variants for {env.describe()}")

    chosen: dict[str, Any] = {
        "all_variants": args.all_variants,
        "target": Path(args.target).resolve() if args.target else None,
        "mode": args.lock_mode,
        "note": ctx.note,
        "warn": ctx.warn,
        "on_lock": on_lock,
        "accepted_signers": accepted_signers(args.accept_signer),
    }
    if args.dry_run:
        return _dry_run(ctx, syncing.sync_plan(project, source, env, **chosen), env)
    progress = None
    if not (args.json or args.quiet) and sys.stderr.isatty():  # bars for people; logs get the summary only
        from huggingface_hub.utils import tqdm  # huggingface_hub's bars: HF_HUB_DISABLE_PROGRESS_BARS=1 hides them

        progress = functools.partial(tqdm, unit="B", unit_scale=True, leave=False)
    synced = syncing.sync(project, source, env, progress=progress, **chosen)
    render_synced(ctx, synced, env)
    return 0


def _dry_run(ctx: Context, plan: syncing.SyncPlan, env: Any) -> int:
    rows = plan.variants
    if ctx.args.json:
        emit_json(
            {
                "environment": None if env is None else env.describe(),
                "dry_run": True,
                "would_sync": [
                    {"repo": row.repo, "variant": row.variant, "missing": row.missing, "directory": str(row.directory)}
                    for row in rows
                ],
            }
        )
        return 0
    if env is not None:
        ctx.out.print(f"Environment: {env.describe()}")
    if not rows:
        ctx.out.print(f"nothing to sync: {ctx.project.lockfile.name} locks no kernels")
    for row in rows:
        state = f"{count(len(row.missing), 'file')} to download" if row.missing else "all files present"
        ctx.out.print(f"Would sync {row.repo}: {row.variant}: {state}")
    ctx.out.print("Dry run: nothing was downloaded or changed (files present are verified by a real sync).")
    return 0
