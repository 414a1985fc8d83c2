"""`kernelpin verify`: its options and how its result is shown (kernelpin.commands.verify does the work)."""

from __future__ import annotations

import argparse
from pathlib import Path

from kernelpin.cli.context import Context, count, emit_json
from kernelpin.commands.verify import verify


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", metavar="DIR", help="check a `sync --target` directory instead of the Hub cache")
    parser.add_argument(
        "--signatures",
        action="store_true",
        help="also verify each installed variant's Sigstore bundle and files against the policy",
    )


def run(ctx: Context) -> int:
    target = Path(ctx.args.target).resolve() if ctx.args.target else None
    found = verify(project=ctx.project, source=ctx.source, target=target, signatures=ctx.args.signatures)
    report, bad = found.files, found.problems
    if ctx.args.json:
        emit_json({"ok": found.ok, "files": [row.as_json() for row in report]})
        return 1 if bad else 0
    for row in bad:
        if row.status == "signature":
            ctx.err.print(f"signature: {row.error}", style="red")
            continue
        if row.status == "link":
            ctx.err.print(
                f"link: {row.repo} {row.variant}: {row.path} is a symbolic link, not a directory "
                "kernelpin installed; remove the link (it is not kernelpin's), then run `kernelpin sync`",
                style="red",
            )
            continue
        ctx.err.print(f"{row.status}: {row.repo} {row.variant}/{row.path}", style="red")
    if not found.locked_kernels:
        ctx.out.print(f"nothing to verify: {ctx.project.lockfile.name} locks no kernels")
    elif not report:
        ctx.out.print("nothing installed yet; run `kernelpin sync`")
    else:
        ctx.out.print(
            f"verified {count(len(report), 'installed file')}: {len(report) - len(bad)} match the lock"
            + ("" if not bad else f", {len(bad)} modified, missing or not in the lock; run `kernelpin sync` to repair")
        )
    return 1 if bad else 0
