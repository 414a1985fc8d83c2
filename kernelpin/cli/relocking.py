"""What the commands that re-lock (lock, add, remove, sync) share: --accept-signer, the lock's changes as they are
reported, a locked kernel as JSON, and the check that each kernel is named once."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from kernelpin.cli.context import Context
from kernelpin.errors import KernelpinError
from kernelpin.format import lockfile
from kernelpin.format.spec import check_repo_id
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
