"""`kernelpin publish`: its options and how its result is shown (kernelpin.publisher.release does the work)."""

from __future__ import annotations

import argparse
from pathlib import Path

from kernelpin.cli.context import Context, count, emit_json
from kernelpin.format.spec import check_repo_id
from kernelpin.publisher.release import Published, check_release, check_signatures, publish


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "directory", metavar="DIR", help="the release layout: DIR/build/<variant>/ with each variant's metadata.json"
    )
    parser.add_argument("--repo", required=True, metavar="ORG/NAME", help="the Hub repository")
    parser.add_argument("--version", help="fail unless the release is this version")
    parser.add_argument(
        "--repo-type",
        choices=["kernel", "model"],
        help="default: the existing repository's type, else a new kernel repository",
    )
    parser.add_argument(
        "--require-signatures",
        action="store_true",
        help="refuse a variant without metadata.json.sigstore (a bad one is always refused)",
    )
    parser.add_argument(
        "--trusted-root",
        metavar="FILE",
        help="verify signatures against this Sigstore trusted_root.json (default: Sigstore's own)",
    )
    parser.add_argument(
        "--create-pr",
        action="store_true",
        help="open a pull request with the release instead of pushing it; tag it by publishing again after the merge",
    )
    parser.add_argument(
        "--private",
        action="store_true",
        help="create the repository private; an existing repository must already be private",
    )
    parser.add_argument("--dry-run", action="store_true", help="check and list the files; upload nothing")


def run(ctx: Context) -> int:
    args = ctx.args
    check_repo_id(args.repo)
    release = check_release(Path(args.directory), args.version)
    signers = check_signatures(
        release.root, release.variants, args.require_signatures, Path(args.trusted_root) if args.trusted_root else None
    )
    for name, signer in sorted(signers.items()):
        ctx.note(f"{name}: {'signed by ' + signer.describe() if signer else 'unsigned'}")
    branch = None if release.version.is_prerelease else f"v{release.version.major}"
    summary = (
        f"{count(len(release.files), 'file')} ({release.size / 1e6:.1f} MB), "
        f"{count(len(release.variants), 'variant')}, to {args.repo}"
        + ("" if args.create_pr else f" tagged {release.tag}")
    )
    if release.without_compat_package:  # HF's kernel requirements still ask for it (kernels before the flat layout)
        ctx.err.print(
            f"warning: no build/<variant>/<name>/ package in {', '.join(release.without_compat_package)}: "
            "`kernels` releases older than the flat layout cannot load them (kernelpin.format.metadata."
            "compat_package gives the files; tools/builder/op.py writes them)",
            style="yellow",
        )
    if args.dry_run:
        if args.json:
            emit_json(
                {
                    "repo": args.repo,
                    "tag": release.tag,
                    "branch": None if args.create_pr else branch,
                    "create_pr": args.create_pr,
                    "private": args.private,
                    "version": str(release.version),
                    "variants": sorted(release.variants),
                    "size": release.size,
                    "without_compat_package": release.without_compat_package,
                    "files": [{"path": f.path, "size": f.size, "sha256": f.sha256} for f in release.files],
                }
            )
            return 0
        ctx.out.print(f"Dry run: would upload {summary}" + (" as a pull request" if args.create_pr else ""))
        if args.private:
            ctx.out.print(f"  into a private repository (created private if {args.repo} does not exist)")
        if args.create_pr:
            ctx.out.print(f"  tagging nothing: after the merge, publish again without --create-pr to tag {release.tag}")
        elif branch is None:
            ctx.out.print(f"  {release.version} is a prerelease: no major-version branch is moved")
        else:
            ctx.out.print(
                f"  and move branch {branch} to it, unless {branch} holds a newer release (it never moves back)"
            )
        for item in release.files:  # sha256sum's layout, with the size: complete lines at any terminal width
            ctx.out.print(f"{item.sha256}  {item.size:>10}  {item.path}")
        ctx.out.print("Nothing was uploaded; the Hub was not contacted.")
        return 0
    published = publish(
        ctx.source.api, release, args.repo, args.repo_type, create_pr=args.create_pr, private=args.private
    )
    render_published(ctx, summary, published)
    return 0


def render_published(ctx: Context, summary: str, published: Published) -> None:
    """What `publish` did: the tag and branch, or the pull request it opened instead."""
    if ctx.args.json:
        emit_json(
            {
                "repo": published.repo_id,
                "repo_type": published.repo_type,
                "tag": published.tag,
                "commit": published.commit,
                "url": published.url,
                "created": published.created,
                "private": published.private,
                "pull_request": None
                if published.pull_request is None
                else {"number": published.pull_request.number, "url": published.pull_request.url},
                "branch": {
                    "name": published.branch.branch,
                    "moved": published.branch.move,
                    "note": published.branch.note,
                },
            }
        )
        return
    where = f"{published.repo_type} repo" + (", created private" if published.created and published.private else "")
    if published.pull_request is not None:
        ctx.out.print(f"Proposed {summary} as a pull request ({where}), commit {published.commit[:12]}")
        ctx.out.print(f"  {published.branch.note}")
        ctx.out.print(f"  {published.pull_request.url}", style="dim")
        return
    ctx.out.print(f"Published {summary} ({where}), commit {published.commit[:12]}")
    ctx.out.print(f"  {published.branch.note}")
    ctx.out.print(f"  {published.url}", style="dim")
