"""`kernelpin lock`: its options and how its result is shown (kernelpin.commands.lock does the work)."""

from __future__ import annotations

import argparse

from kernelpin.cli.context import Context, count, directory_argument, emit_json
from kernelpin.cli.relocking import accept_signer_option, accepted_signers, kernel_json, report_changes
from kernelpin.commands import lock as locking
from kernelpin.relock import LockMode


def options(parser: argparse.ArgumentParser) -> None:
    directory_argument(parser, "lock")
    parser.add_argument("--check", action="store_true", help="exit 1 if the lock is stale; write nothing")
    upgrade = parser.add_mutually_exclusive_group()
    upgrade.add_argument(
        "--upgrade", action="store_true", help="re-resolve every kernel to its newest satisfying version"
    )
    upgrade.add_argument("--upgrade-package", action="append", metavar="REPO", help="re-resolve only REPO (repeatable)")
    parser.add_argument("--dry-run", action="store_true", help="show what would change; write nothing")
    accept_signer_option(parser)
    parser.add_argument(
        "--refresh-trust-root",
        action="store_true",
        help="update Sigstore's trust root through TUF first (online); default: the one sigstore ships",
    )


def run(ctx: Context) -> int:
    args = ctx.args
    if args.check:
        reasons = locking.check_lock(ctx.project)
        if args.json:
            emit_json({"fresh": not reasons, "reasons": reasons})
        elif reasons:
            ctx.err.print(f"{ctx.project.lockfile.name} is stale:")
            for reason in reasons:
                ctx.err.print(f"  {reason}")
            ctx.err.print("Run `kernelpin lock` to update it.")
        else:
            ctx.out.print(f"{ctx.project.lockfile.name} is up to date")
        return 1 if reasons else 0
    done = locking.lock(
        source=ctx.source,
        project=ctx.project,
        upgrade=args.upgrade_package or (),
        upgrade_all=args.upgrade,
        mode=LockMode.DRY_RUN if args.dry_run else LockMode.UPDATE,
        note=ctx.note,
        warn=ctx.warn,
        accepted_signers=accepted_signers(args.accept_signer),
        refresh_trust_root=args.refresh_trust_root,
    )
    new, changed = done.lock, done.changes
    for kernel in new.kernels:
        ctx.note(
            f"{kernel.repo_id}: {kernel.version or '-'} at {kernel.ref or 'a pinned revision'} "
            f"({kernel.commit[:12]}), {len(kernel.variants)} variants, "
            f"{sum(len(v.files) for v in kernel.variants)} files"
        )
    if args.json:
        emit_json(
            {
                "changes": changed,
                "written": not args.dry_run and bool(changed),
                "kernels": [kernel_json(k) for k in new.kernels],
            }
        )
        return 0
    report_changes(ctx, changed, ctx.out.print, "Would change" if args.dry_run else "Locked")
    if not new.kernels:
        ctx.out.print(
            f"nothing to lock: {ctx.project.pyproject.name} has no [tool.kernels.dependencies]; add a "
            "kernel with `kernelpin add ORG/NAME` (see `kernelpin help add`)"
        )
    elif not changed:
        ctx.out.print(f"{ctx.project.lockfile.name} is up to date ({count(len(new.kernels), 'kernel')})")
    return 0
