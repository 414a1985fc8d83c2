"""`kernelpin verify-conda`: its options and how its result is shown (kernelpin.commands.verify_conda does the
work)."""

from __future__ import annotations

import argparse
from pathlib import Path

from kernelpin.cli.context import Context, emit_json
from kernelpin.commands.verify_conda import CondaVerification, verify_conda
from kernelpin.format.spec import check_repo_id


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "prefix",
        nargs="?",
        metavar="PREFIX",
        help="the conda environment (default: $CONDA_PREFIX, else the project's .pixi/envs/default)",
    )
    parser.add_argument(
        "--repo", metavar="ORG/NAME", help="the Hub repository of the kernel (default: each kernel of the lock)"
    )
    parser.add_argument("--package", metavar="NAME", help="its conda package name (default: the repository's name)")
    parser.add_argument(
        "--attestation",
        metavar="FILE",
        help="the package's CEP 27 attestation (a .sigs sidecar or one bundle) instead of the channel's",
    )
    parser.add_argument(
        "--channel", metavar="URL", help="fetch the attestation from this channel instead of the one conda-meta records"
    )
    parser.add_argument(
        "--no-lock",
        action="store_true",
        help="compare with the Hub release's signed metadata.json even where kernelpin.lock pins the kernel",
    )


def run(ctx: Context) -> int:
    args = ctx.args
    if args.repo is not None:
        check_repo_id(args.repo)
    found = verify_conda(
        Path(args.prefix) if args.prefix else None,
        repo_id=args.repo,
        package=args.package,
        attestation=Path(args.attestation) if args.attestation else None,
        channel=args.channel,
        project=ctx.project,
        source=ctx.source,
        use_lock=not args.no_lock,
    )
    return render(ctx, found)


def render(ctx: Context, found: CondaVerification) -> int:
    """One line per kernel checked; each failed check (signature, bytes) on stderr, saying which it is."""
    if ctx.args.json:
        emit_json({"ok": found.ok, "prefix": str(found.prefix), "packages": [c.as_json() for c in found.packages]})
        return 0 if found.ok else 1
    for check in found.packages:
        for problem in (check.signature_error, check.bytes_error):
            if problem is not None:
                ctx.err.print(problem, style="red")
        if check.ok:
            signed = f"signed by {check.signer.describe()}" if check.signer else "unsigned (the policy allows it)"
            ctx.out.print(
                f"ok: {check.repo_id} {check.variant}: {check.package} is {signed} and is the Hub build byte for "
                f"byte ({check.files} files against {check.build_source})"
            )
    return 0 if found.ok else 1
