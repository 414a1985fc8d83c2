"""`kernelpin describe-api`: its options and how its result is shown (kernelpin.commands.info.describe_api does
the work)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from kernelpin import environment
from kernelpin.cli.context import REPO_HELP, Context, emit_json, ref_shown
from kernelpin.commands.info import describe_api, describe_local_api
from kernelpin.errors import KernelpinError


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "kernel",
        metavar="REPO|DIR",
        help=f"{REPO_HELP}, or a build on disk (build/<variant>/ or one variant directory)",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--version", metavar="N|RANGE", help="a major version (the branch vN) or a range of tags")
    which.add_argument("--revision", metavar="REV", help="a tag, branch or commit")
    environment.add_arguments(parser)


def run(ctx: Context) -> int:
    env = environment.current(vars(ctx.args))
    given = Path(ctx.args.kernel).expanduser()
    if given.is_dir():
        if ctx.args.version or ctx.args.revision:
            raise KernelpinError("--version and --revision name a revision on the Hub, not a directory; drop them")
        found = describe_local_api(given, env)
    else:
        version = ctx.args.version
        found = describe_api(
            ctx.source,
            ctx.args.kernel,
            env,
            project=ctx.project_if_any(),
            revision=ctx.args.revision,
            version=int(version) if version and version.isascii() and version.isdigit() else version,
        )
    api = found.api
    if ctx.args.json:
        where = (
            {"path": found.path}
            if found.path
            else {"repo_id": found.repo, "revision": ref_shown(found.ref) or found.commit}
        )
        emit_json(  # kernels' keys in its order (symbols.json's, then where), then kernelpin's
            {
                "schema_version": 1,
                "functions": [dataclasses.asdict(f) for f in api.functions],
                "layers": [dataclasses.asdict(layer) for layer in api.layers],
                **where,
                "variant": found.variant,
                **({"commit": found.commit} if found.commit else {}),
                "others": api.others,
                "problems": api.problems,
            },
            sort_keys=False,
        )
        return 0
    if found.path:
        ctx.out.print(f"Path: {found.path}")
    else:
        ctx.out.print(f"Repository: {found.repo}")
        ctx.out.print(f"Revision: {ref_shown(found.ref) or found.commit}")  # as kernels shows it
    ctx.out.print(f"Variant: {found.variant}")
    if not found.path:
        ctx.out.print(f"Commit: {found.commit}")  # kernelpin's, after kernels' lines: which commit the revision named
    ctx.out.print("\nFunctions:")
    for function in api.functions:
        ctx.out.print(f"  {function.signature}" + (f"  # {function.summary}" if function.summary else ""))
    if not api.functions:
        ctx.out.print("  (none)")
    ctx.out.print("\nLayers:")
    for layer in api.layers:
        flags = "  ".join(f"{name}={'unknown' if value is None else value}" for name, value in layer.attributes.items())
        ctx.out.print(f"  {layer.name}  {flags}")
    if not api.layers:
        ctx.out.print("  (none)")
    if api.others:
        ctx.out.print(f"\nOther public names: {', '.join(api.others)}")
    for problem in api.problems:
        ctx.warn(problem)
    return 0
