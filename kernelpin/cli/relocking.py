"""What the commands that re-lock (lock, add, remove, sync) share: --accept-signer, the lock's changes as they are
reported, a locked kernel as JSON, and the check that each kernel is named once; and what sync and download (which
install what a lock names) show of the installed variants."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from kernelpin.cli.context import Context, emit_json
from kernelpin.commands.sync import Synced
from kernelpin.errors import KernelpinError
from kernelpin.format import lockfile
from kernelpin.format.spec import check_repo_id
from kernelpin.store.install import SyncedVariant
from kernelpin.trust.policy import UNSIGNED


def accept_signer_option(parser: argparse.ArgumentParser) -> None:
    """--accept-signer, on every command that re-locks (lock, add, sync)."""
    parser.add_argument(
        "--accept-signer",
        action="append",
        metavar="REPO=IDENTITY",
        help=f"accept a new signer of REPO's release (the identity the refusal names, or {UNSIGNED}); repeatable",
    )


def accepted_signers(given: Sequence[str] | None) -> dict[str, set[str]]:
    """`--accept-signer REPO=IDENTITY` (repeatable): new signers the user accepts, by repository."""
    accepted: dict[str, set[str]] = {}
    for item in given or ():
        repo_id, equals, identity = item.partition("=")
        if not equals or not identity:
            raise KernelpinError(
                f"--accept-signer {item}: write REPO=IDENTITY (the identity the refusal named) or REPO={UNSIGNED}"
            )
        check_repo_id(repo_id)
        accepted.setdefault(repo_id, set()).add(identity)
    return accepted


def report_changes(ctx: Context, changed: list[str], say: Callable[[str], None], verb: str = "Locked") -> None:
    """Each change of the lock, then a warning for each release tag that now names another commit."""
    for line in changed:
        say(f"{verb}: {line}")
    for line in changed:
        if line.startswith("!"):
            ctx.err.print(f"warning: {line[2:]}", style="bold yellow")


def kernel_json(kernel: lockfile.LockedKernel) -> dict[str, Any]:
    return {
        "repo": kernel.repo_id,
        "version": kernel.version,
        "ref": kernel.ref,
        "commit": kernel.commit,
        "variants": [v.name for v in kernel.variants],
    }


def distinct(repo_ids: list[str]) -> list[str]:
    repeated = sorted({r for r in repo_ids if repo_ids.count(r) > 1})
    if repeated:
        raise KernelpinError(f"{', '.join(repeated)} given more than once; name each kernel once")
    return repo_ids


def render_synced(ctx: Context, synced: Synced, env: Any) -> None:
    """The variants `sync` or `download` installed, verified: one line each (or --json), warnings for repairs."""
    results = synced.variants
    for result in results:
        for path in result.downloaded:
            ctx.note(f"{result.repo_id}: downloaded and verified {path}")
    if ctx.args.json:
        emit_json(
            {"environment": None if env is None else env.describe(), "synced": [_synced_json(r) for r in results]}
        )
        return
    if env is not None:
        ctx.out.print(f"Environment: {env.describe()}")
    if not synced.lock.lock.kernels:
        ctx.out.print(
            f"nothing to sync: {ctx.project.lockfile.name} locks no kernels; add one with `kernelpin add ORG/NAME`"
        )
    for result in results:
        parts = [f"{len(result.downloaded)} downloaded", f"{len(result.reused)} already present"]
        if result.repaired:
            parts.append(f"{len(result.repaired)} replaced (modified in the cache)")
        ctx.out.print(f"{result.label}: {result.variant}: {', '.join(parts)}, all verified")
        if result.build is not None:
            ctx.out.print(f"  build: {result.build.describe()}")
        ctx.out.print(f"  {result.directory}", style="dim")
        for path in result.repaired:
            ctx.err.print(f"warning: {result.repo_id}: {path} did not match the lock; replaced", style="yellow")
        for path in result.removed:
            ctx.err.print(f"warning: {result.repo_id}: {path} is not in the lock; removed", style="yellow")


def _synced_json(result: SyncedVariant) -> dict[str, Any]:
    return {
        "repo": result.repo_id,
        "variant": result.variant,
        "directory": str(result.directory),
        "downloaded": result.downloaded,
        "reused": result.reused,
        "repaired": result.repaired,
        "removed": result.removed,
        "capability-build": None if result.build is None else result.build.build,
    }
