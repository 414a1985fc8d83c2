"""`kernelpin add`: its options and how its result is shown (kernelpin.commands.lock.add does the work)."""

from __future__ import annotations

import argparse
import json

from kernelpin.cli.context import Context, emit_json
from kernelpin.cli.relocking import accept_signer_option, accepted_signers, distinct, kernel_json, report_changes
from kernelpin.commands import lock as locking
from kernelpin.format.spec import check_repo_id
from kernelpin.relock import LockMode


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "specs",
        nargs="+",
        metavar="REPO[@RANGE]",
        help="ORG/NAME, optionally with a version range: acme/img2gray, acme/img2gray@^0.1",
    )
    parser.add_argument("--dry-run", action="store_true", help="show what the lock would become; write nothing")
    accept_signer_option(parser)


def _split_spec(text: str) -> tuple[str, str | None]:
    repo_id, _, range_text = text.partition("@")
    check_repo_id(repo_id)
    return repo_id, range_text or None


def run(ctx: Context) -> int:
    specs = [_split_spec(text) for text in ctx.args.specs]
    distinct([repo_id for repo_id, _ in specs])
    dry_run = ctx.args.dry_run
    added = locking.add(
        source=ctx.source,
        project=ctx.project,
        requirements=dict(specs),
        mode=LockMode.DRY_RUN if dry_run else LockMode.UPDATE,
        note=ctx.note,
        warn=ctx.warn,
        accepted_signers=accepted_signers(ctx.args.accept_signer),
    )
    entries = added.entries
    if ctx.args.json:
        emit_json(
            {
                "added": [
                    {
                        "repo": repo_id,
                        "requirement": entry.value,
                        "kernels_lock_reads": entry.kernels_reads,
                        "note": entry.note,
                    }
                    for repo_id, entry in entries.items()
                ],
                "dry_run": dry_run,
                "pyproject": str(ctx.project.pyproject),
                "changes": added.changes,
                "kernels": [kernel_json(k) for k in added.lock.kernels],
            }
        )
        return 0
    for repo_id, entry in entries.items():
        verb = "Would add" if dry_run else "Added"
        said = f"{verb} {repo_id} = {json.dumps(entry.value)} to {ctx.project.pyproject.name}"
        ctx.out.print(f"{said} ({entry.note})" if entry.kernels_reads else said)
        if not entry.kernels_reads:
            ctx.err.print(f"warning: {repo_id}: {entry.note}", style="yellow")
    report_changes(ctx, added.changes, ctx.out.print, "Would change" if dry_run else "Locked")
    if dry_run:
        ctx.out.print(f"Dry run: {ctx.project.pyproject.name} and {ctx.project.lockfile.name} are unchanged.")
    return 0
