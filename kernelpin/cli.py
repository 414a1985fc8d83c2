"""The `kernelpin` command line: parsing and rendering only. Each command is one library function
(kernelpin.commands: lock, sync, verify, outdated, info, cache; kernelpin.publisher.release) registered once below
with @command; commands that need no torch never import it."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from rich.table import Table

from kernelpin import environment
from kernelpin.commands import lock as locking
from kernelpin.commands import sync as syncing
from kernelpin.commands.cache import cache
from kernelpin.commands.info import DependencyNode, describe_api, describe_local_api, info, variants
from kernelpin.commands.outdated import outdated, versions
from kernelpin.commands.verify import verify
from kernelpin.errors import KernelpinError
from kernelpin.format import lockfile
from kernelpin.format.spec import check_repo_id, describe_value
from kernelpin.hub.source import HubSettings, HubSource
from kernelpin.project import PYPROJECT, Project, find_project
from kernelpin.relock import Locked
from kernelpin.store.install import SyncedVariant
from kernelpin.terminal import SafeConsole
from kernelpin.trust.policy import UNSIGNED

UNBOUNDED_WIDTH = 1 << 16  # columns, for output that is not a terminal


def _emit_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True))


class Context:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        # markup=False: messages quote TOML like [tool.kernels], which rich would take for style tags. Colour as
        # --color says; "auto" is rich's own rule (a terminal, and NO_COLOR unset).
        colour: dict[str, Any] = {"always": {"force_terminal": True}, "never": {"no_color": True}}.get(args.color, {})
        self.out = SafeConsole(
            highlight=False,
            soft_wrap=True,
            markup=False,
            quiet=args.quiet,
            **colour,
            **({} if sys.stdout.isatty() else {"width": UNBOUNDED_WIDTH}),
        )
        self.err = SafeConsole(stderr=True, highlight=False, soft_wrap=True, markup=False, **colour)  # never quiet

    def table(self, *columns: str, title: str | None = None) -> Table:
        """A bordered table on a terminal; into a pipe or a file, plain columns that `cut`/`awk` can split
        (no box characters, no cell cut short at 80 columns)."""
        if self.out.is_terminal:
            return Table(*columns, title=title)
        return Table(*columns, title=title, box=None, show_edge=False, pad_edge=False, title_justify="left")

    def show(self, table: Table) -> None:
        if self.out.is_terminal:
            self.out.print(table)
            return
        with self.out.capture() as captured:  # rich pads every cell to the column width; a pipe gets no trailing blanks
            self.out.print(table)
        self.out.print("\n".join(line.rstrip() for line in captured.get().splitlines()))

    def fail(self, message: str) -> int:
        """An error: one line on stderr, and with --json also {"error": message} on stdout (exit 1)."""
        if getattr(self.args, "json", False):
            _emit_json({"error": message})
        self.err.print(f"error: {message}", style="red")
        return 1

    @functools.cached_property
    def source(self) -> HubSource:
        # Built on first use, inside main's error handling: the settings can be invalid (KERNELPIN_HTTP_TIMEOUT).
        settings = HubSettings.from_env()
        return HubSource(dataclasses.replace(settings, offline=True) if self.args.offline else settings)

    @functools.cached_property
    def project(self) -> Project:
        # Looked up on first use: `publish` works outside any project.
        if self.args.project is None:
            return find_project(Path.cwd())
        given = Path(self.args.project)
        if not given.is_dir():
            problem = "is not a directory" if given.exists() else "does not exist"
            raise KernelpinError(
                f"--project {given}: the directory {problem}; give the directory of the project's pyproject.toml"
            )
        if (given / PYPROJECT).is_file():
            return Project(given.resolve())  # named by the user: trusted whoever owns it (as load(lock=PATH))
        return find_project(given)

    def note(self, message: str) -> None:
        """Detail for -v."""
        if self.args.verbose:
            self.err.print(message, style="dim")

    def progress(self, message: str) -> None:
        """What a command did on the way, on stderr (stdout stays parseable with --json); silenced by -q."""
        if not self.args.quiet:
            self.err.print(message)

    def warn(self, message: str) -> None:
        self.err.print(f"warning: {message}", style="yellow")


@dataclasses.dataclass(frozen=True)
class Command:
    name: str
    help: str  # one line, in `kernelpin --help`'s list
    description: str  # what it does and what it reads and writes, opening its --help (as `uv help lock` does)
    options: Callable[[argparse.ArgumentParser], object]
    run: Callable[[Context], int]
    epilog: str | None = None
    json: bool = True  # takes --json


COMMANDS: dict[str, Command] = {}


def command(
    name: str,
    help: str,
    description: str,
    options: Callable[[argparse.ArgumentParser], object] = lambda _: None,
    epilog: str | None = None,
    json: bool = True,
) -> Callable[[Callable[[Context], int]], Callable[[Context], int]]:
    """Register the decorated function as the command `name`; `options` adds its arguments to its parser."""

    def register(run: Callable[[Context], int]) -> Callable[[Context], int]:
        COMMANDS[name] = Command(name, help, description, options, run, epilog, json)
        return run

    return register


def _lock_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true", help="exit 1 if the lock is stale; write nothing")
    upgrade = parser.add_mutually_exclusive_group()
    upgrade.add_argument(
        "--upgrade", action="store_true", help="re-resolve every kernel to its newest satisfying version"
    )
    upgrade.add_argument("--upgrade-package", action="append", metavar="REPO", help="re-resolve only REPO (repeatable)")
    parser.add_argument("--dry-run", action="store_true", help="show what would change; write nothing")
    _accept_signer_option(parser)
    parser.add_argument(
        "--refresh-trust-root",
        action="store_true",
        help="update Sigstore's trust root through TUF first (online); default: the one sigstore ships",
    )


def _accept_signer_option(parser: argparse.ArgumentParser) -> None:
    """--accept-signer, on every command that re-locks (lock, add, sync)."""
    parser.add_argument(
        "--accept-signer",
        action="append",
        metavar="REPO=IDENTITY",
        help=f"accept a new signer of REPO's release (the identity the refusal names, or {UNSIGNED}); repeatable",
    )


def _accepted_signers(given: Sequence[str] | None) -> dict[str, set[str]]:
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


@command(
    "lock",
    help="resolve [tool.kernels] and write kernelpin.lock",
    options=_lock_options,
    description="Resolve every requirement of [tool.kernels.dependencies] in pyproject.toml against the Hub's "
    "version tags and write kernelpin.lock: the commit, and the size and sha256 of every file of every "
    "variant. A requirement the lock already satisfies keeps its locked version unless --upgrade or "
    "--upgrade-package asks for the newest. Each release resolved passes the publisher policy of "
    "[tool.kernelpin.trust]: a trusted publisher, a Sigstore signature that verifies (offline), the "
    "signer recorded in the lock and kept across upgrades unless --accept-signer names the new one.",
)
def cmd_lock(ctx: Context) -> int:
    args = ctx.args
    if args.check:
        reasons = locking.check_lock(ctx.project)
        if args.json:
            _emit_json({"fresh": not reasons, "reasons": reasons})
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
        dry_run=args.dry_run,
        note=ctx.note,
        warn=ctx.warn,
        accepted_signers=_accepted_signers(args.accept_signer),
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
        _emit_json(
            {
                "changes": changed,
                "written": not args.dry_run and bool(changed),
                "kernels": [_kernel_json(k) for k in new.kernels],
            }
        )
        return 0
    _report_changes(ctx, changed, ctx.out.print, "Would change" if args.dry_run else "Locked")
    if not new.kernels:
        ctx.out.print(
            f"nothing to lock: {ctx.project.pyproject.name} has no [tool.kernels.dependencies]; add a "
            "kernel with `kernelpin add ORG/NAME` (see `kernelpin help add`)"
        )
    elif not changed:
        ctx.out.print(f"{ctx.project.lockfile.name} is up to date ({_count(len(new.kernels), 'kernel')})")
    return 0


def _report_changes(ctx: Context, changed: list[str], say: Callable[[str], None], verb: str = "Locked") -> None:
    """Each change of the lock, then a warning for each release tag that now names another commit."""
    for line in changed:
        say(f"{verb}: {line}")
    for line in changed:
        if line.startswith("!"):
            ctx.err.print(f"warning: {line[2:]}", style="bold yellow")


def _kernel_json(kernel: lockfile.LockedKernel) -> dict[str, Any]:
    return {
        "repo": kernel.repo_id,
        "version": kernel.version,
        "ref": kernel.ref,
        "commit": kernel.commit,
        "variants": [v.name for v in kernel.variants],
    }


def _sync_options(parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--locked", action="store_true", help="fail if the lock is stale instead of updating it (as uv, cargo)"
    )
    mode.add_argument(
        "--frozen",
        action="store_true",
        help="use the lock as it is, resolving nothing; may still download (cargo's --frozen implies --offline)",
    )
    parser.add_argument("--all-variants", action="store_true", help="every locked variant, not only this environment's")
    parser.add_argument("--target", metavar="DIR", help="vendor into DIR (DIR/<org>/<name>/<commit>/build/<variant>)")
    _accept_signer_option(parser)
    environment.add_arguments(parser)
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="show which variant of each kernel would be installed and what is missing; download and write nothing",
    )


LOCK_MODES = """how --locked and --frozen compare:
  uv:    `uv sync --locked` fails on a stale lock, `--frozen` uses the lock without checking it: the same here.
  cargo: `--locked` is the same too, but cargo's `--frozen` also means `--offline`; here `sync --frozen` still
         downloads the locked files that are missing (add --offline, or HF_HUB_OFFLINE=1, to forbid that).
"""


@command(
    "sync",
    help="download and verify the locked variant for this environment",
    options=_sync_options,
    epilog=LOCK_MODES,
    description="Download the locked variant that fits this environment (torch, CUDA, GPU capability) into the "
    "Hub cache (or --target DIR) and verify every byte against kernelpin.lock. A stale lock is "
    "re-locked first unless --locked or --frozen says otherwise.",
)
def cmd_sync(ctx: Context) -> int:
    args = ctx.args
    project, source = ctx.project, ctx.source
    env = None if args.all_variants else environment.current(vars(args))

    def on_lock(fresh: Locked) -> None:  # the re-lock's changes, shown before anything is installed
        _report_changes(ctx, fresh.changes, ctx.progress)
        if env is not None and not args.dry_run:
            ctx.note(f"selecting variants for {env.describe()}")

    options: dict[str, Any] = {
        "all_variants": args.all_variants,
        "target": Path(args.target).resolve() if args.target else None,
        "locked": args.locked,
        "frozen": args.frozen,
        "note": ctx.note,
        "warn": ctx.warn,
        "on_lock": on_lock,
        "accepted_signers": _accepted_signers(args.accept_signer),
    }
    if args.dry_run:
        return _sync_dry_run(ctx, syncing.sync_plan(project, source, env, **options), env)
    progress = None
    if not (args.json or args.quiet) and sys.stderr.isatty():  # bars for people; logs get the summary only
        from huggingface_hub.utils import tqdm  # huggingface_hub's bars: HF_HUB_DISABLE_PROGRESS_BARS=1 hides them

        progress = functools.partial(tqdm, unit="B", unit_scale=True, leave=False)
    synced = syncing.sync(project, source, env, progress=progress, **options)
    _render_synced(ctx, synced, env)
    return 0


def _render_synced(ctx: Context, synced: syncing.Synced, env: Any) -> None:
    results = synced.variants
    for result in results:
        for path in result.downloaded:
            ctx.note(f"{result.repo_id}: downloaded and verified {path}")
    if ctx.args.json:
        _emit_json(
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


def _sync_dry_run(ctx: Context, plan: syncing.SyncPlan, env: Any) -> int:
    rows = plan.variants
    if ctx.args.json:
        _emit_json(
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
        state = f"{_count(len(row.missing), 'file')} to download" if row.missing else "all files present"
        ctx.out.print(f"Would sync {row.repo}: {row.variant}: {state}")
    ctx.out.print("Dry run: nothing was downloaded or changed (files present are verified by a real sync).")
    return 0


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


def _split_spec(text: str) -> tuple[str, str | None]:
    repo_id, _, range_text = text.partition("@")
    check_repo_id(repo_id)
    return repo_id, range_text or None


def _distinct(repo_ids: list[str]) -> list[str]:
    repeated = sorted({r for r in repo_ids if repo_ids.count(r) > 1})
    if repeated:
        raise KernelpinError(f"{', '.join(repeated)} given more than once; name each kernel once")
    return repo_ids


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "specs",
        nargs="+",
        metavar="REPO[@RANGE]",
        help="ORG/NAME, optionally with a version range: acme/img2gray, acme/img2gray@^0.1",
    )
    parser.add_argument("--dry-run", action="store_true", help="show what the lock would become; write nothing")
    _accept_signer_option(parser)


@command(
    "add",
    help="add kernels to pyproject.toml and re-lock",
    options=_add_options,
    description="Add one or more kernels to [tool.kernels.dependencies] and re-lock. Without @RANGE the "
    "requirement is ^NEWEST (the newest release tag). When the lock cannot be written, "
    "pyproject.toml is put back as it was.",
)
def cmd_add(ctx: Context) -> int:
    specs = [_split_spec(text) for text in ctx.args.specs]
    _distinct([repo_id for repo_id, _ in specs])
    dry_run = ctx.args.dry_run
    added = locking.add(
        source=ctx.source,
        project=ctx.project,
        requirements=dict(specs),
        dry_run=dry_run,
        note=ctx.note,
        warn=ctx.warn,
        accepted_signers=_accepted_signers(ctx.args.accept_signer),
    )
    entries = added.entries
    if ctx.args.json:
        _emit_json(
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
                "kernels": [_kernel_json(k) for k in added.lock.kernels],
            }
        )
        return 0
    for repo_id, entry in entries.items():
        said = f"{'Would add' if dry_run else 'Added'} {repo_id} = {json.dumps(entry.value)} to {ctx.project.pyproject.name}"
        ctx.out.print(f"{said} ({entry.note})" if entry.kernels_reads else said)
        if not entry.kernels_reads:
            ctx.err.print(f"warning: {repo_id}: {entry.note}", style="yellow")
    _report_changes(ctx, added.changes, ctx.out.print, "Would change" if dry_run else "Locked")
    if dry_run:
        ctx.out.print(f"Dry run: {ctx.project.pyproject.name} and {ctx.project.lockfile.name} are unchanged.")
    return 0


REPO_HELP = "a Hub repository id, ORG/NAME (e.g. acme/img2gray)"


@command(
    "remove",
    help="remove kernels from pyproject.toml and re-lock",
    options=lambda parser: parser.add_argument("repos", nargs="+", metavar="REPO", help=REPO_HELP),
    description="Remove one or more kernels from [tool.kernels.dependencies] and re-lock.",
)
def cmd_remove(ctx: Context) -> int:
    repo_ids = _distinct([check_repo_id(repo) for repo in ctx.args.repos])
    removed = locking.remove(ctx.project, ctx.source, repo_ids, note=ctx.note, warn=ctx.warn)
    if ctx.args.json:
        _emit_json(
            {
                "removed": repo_ids,
                "pyproject": str(ctx.project.pyproject),
                "changes": removed.changes,
                "kernels": [_kernel_json(k) for k in removed.lock.kernels],
            }
        )
        return 0
    for repo_id in repo_ids:
        ctx.out.print(f"Removed {repo_id} from {ctx.project.pyproject.name}")
    _report_changes(ctx, removed.changes, ctx.out.print)
    return 0


@command(
    "outdated",
    help="locked vs newest satisfying vs newest version",
    description="For each requirement: the locked version, the newest version the requirement allows, and the "
    "newest release. Upgrade with `kernelpin lock --upgrade` (or --upgrade-package REPO).",
)
def cmd_outdated(ctx: Context) -> int:
    rows = outdated(ctx.project, ctx.source)
    if ctx.args.json:
        _emit_json([row.as_json() for row in rows])
        return 0
    if not rows:
        ctx.out.print(f"nothing to check: {ctx.project.pyproject.name} has no [tool.kernels.dependencies]")
        return 0
    table = ctx.table("kernel", "requirement", "locked", "newest satisfying", "newest")
    for row in rows:
        newest_satisfying = row.newest_satisfying or "-"
        if row.branch_moved:
            newest_satisfying += " (branch moved: `kernelpin lock --upgrade-package` follows it)"
        table.add_row(
            row.repo, describe_value(row.requirement), row.locked or "-", newest_satisfying, row.newest or "-"
        )
    ctx.show(table)
    return 0


def _versions_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("repo", metavar="REPO", help=REPO_HELP)
    parser.add_argument(
        "--variants",
        action="store_true",
        help="also judge every build of each version for this machine (or the one described below)",
    )
    environment.add_arguments(parser)


@command(
    "versions",
    help="list a kernel's versions and which satisfy the requirement",
    options=_versions_options,
    description="List a kernel repository's version tags, newest first, with which satisfy this project's "
    "requirement and which is locked; with --variants, which build of each version this machine "
    "(or another, described with --torch ...) would use.",
)
def cmd_versions(ctx: Context) -> int:
    env = environment.current(vars(ctx.args)) if ctx.args.variants else None
    found = versions(ctx.project, ctx.source, ctx.args.repo, env)
    requirement = found.requirement
    if ctx.args.json:
        rows = [
            {key: value for key, value in dataclasses.asdict(row).items() if key != "variants" or env is not None}
            for row in found.versions
        ]
        _emit_json(
            {
                "repo": found.repo,
                "repo_type": found.repo_type,
                "requirement": requirement.value if requirement else None,
                "environment": None if env is None else env.describe(),
                "versions": rows,
                "ignored_tags": found.ignored_tags,
            }
        )
        return 0
    title = f"{found.repo} ({found.repo_type} repo)" + (f", requirement {requirement.text}" if requirement else "")
    columns = ("version", "tag", "commit", "satisfies", "locked") + (("build here", "builds") if env else ())
    table = ctx.table(*columns, title=title)
    for row in found.versions:
        satisfies = {None: "", True: "yes", False: "no"}[row.satisfies]
        cells = [row.version, row.tag, row.commit[:12], satisfies, "*" if row.locked else ""]
        if row.variants is not None:
            chosen = next((fit.name for fit in row.variants if fit.chosen), "none")
            cells += [chosen, f"{sum(fit.fits for fit in row.variants)} of {len(row.variants)} fit"]
        table.add_row(*cells)
    ctx.show(table)
    if env is not None:
        ctx.note(f"builds judged for {env.describe()}")
    if found.ignored_tags:
        ctx.note(f"ignored tags (not versions): {', '.join(found.ignored_tags)}")
    return 0


def _variants_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("repo", metavar="REPO", help=REPO_HELP)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--all-versions", action="store_true", help="every major version (every branch vN)")
    which.add_argument("--version", metavar="N|latest", help="the major version N (the branch vN); default: latest")
    which.add_argument("--revision", metavar="REV", help="a tag, branch or commit")
    parser.add_argument("--only-compatible", action="store_true", help="only the builds that fit")
    environment.add_arguments(parser)


@command(
    "variants",
    help="judge a kernel's builds for this machine (as `kernels variants`)",
    options=_variants_options,
    description="List every build variant of a kernel's newest major version (or --version N, --all-versions, "
    "--revision REV) and whether it fits this machine (or the one --torch ... describes): the one "
    "`load` and `get_kernel` would choose first, then the other builds that fit, then those that "
    "do not, each with the reason. `kernels variants` (0.18+) shows the same; `kernels versions`, "
    "which 0.19 deprecates, is `kernelpin variants --all-versions`.",
)
def cmd_variants(ctx: Context) -> int:
    env = environment.current(vars(ctx.args))
    found = variants(
        ctx.source,
        ctx.args.repo,
        env,
        version=ctx.args.version,
        revision=ctx.args.revision,
        all_versions=ctx.args.all_versions,
    )
    shown = [[fit for fit in block.variants if fit.fits or not ctx.args.only_compatible] for block in found]
    if ctx.args.json:
        _emit_json(
            {
                "repo_id": ctx.args.repo,
                "environment": env.describe(),
                "revisions": [
                    {
                        "version": block.version,
                        "revision": block.revision,
                        "commit": block.commit,
                        "variants": [
                            {"variant": fit.name, "compatible": fit.fits, "preferred": fit.chosen, "reason": fit.reason}
                            for fit in fits
                        ],
                    }
                    for block, fits in zip(found, shown, strict=False)
                ],
            }
        )
        return 0
    for index, (block, fits) in enumerate(zip(found, shown, strict=False)):
        label = f"Version {block.version}" if block.version is not None else f"Revision {block.revision}"
        ctx.out.print(("\n" if index else "") + f"{label} ({block.commit[:12]}):\n")
        for fit in fits:
            ctx.out.print(
                f"{fit.name} compatible{', preferred' if fit.chosen else ''} ✅"
                if fit.fits
                else f"{fit.name}: {fit.reason}"
            )
        if not fits:
            ctx.out.print("No compatible variants found." if ctx.args.only_compatible else "No build variants found.")
    ctx.note(f"builds judged for {env.describe()}")
    return 0


def _info_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("repo", metavar="REPO", help=REPO_HELP)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--version", metavar="N|RANGE", help="a major version (the branch vN) or a range of tags")
    which.add_argument("--revision", metavar="REV", help="a tag, branch or commit")
    parser.add_argument(
        "--dep-tree",
        action="store_true",
        help="show the whole kernel-depends tree: each kernel's release and the build this machine "
        "(or the one --torch ... describes) takes",
    )
    environment.add_arguments(parser)


@command(
    "info",
    help="show a kernel's license, upstream, backends and dependencies",
    options=_info_options,
    description="Show what a kernel is, from its metadata.json at a revision (as `kernels info`): name, "
    "license, upstream, source, Python and kernel dependencies, the oldest kernels it needs, its "
    "backends and build variants. The revision is --version or --revision, else this project's "
    "requirement, else the newest major-version branch.",
)
def cmd_info(ctx: Context) -> int:
    version = ctx.args.version
    try:
        project: Project | None = ctx.project
    except KernelpinError:  # outside a project: no requirement to default to
        project = None
    found = info(
        ctx.source,
        ctx.args.repo,
        version=int(version) if version and version.isdigit() else version,
        revision=ctx.args.revision,
        project=project,
        dep_tree=environment.current(vars(ctx.args)) if ctx.args.dep_tree else None,
    )
    if ctx.args.json:
        _emit_json(dataclasses.asdict(found))
        return 0

    def shown(value: object) -> str:
        return "-" if value in (None, []) else ", ".join(map(str, value)) if isinstance(value, list) else str(value)

    at = f"{found.ref or found.commit} ({found.commit[:12]})"
    for label, value in (
        ("Repository", f"{found.repo} ({found.repo_type} repo)"),
        ("Revision", at),
        ("Name", found.name),
        ("Version", found.version or found.major),
        ("Minimum kernels version", found.kernels_minver),
        ("License", found.license),
        ("Upstream", found.upstream),
        ("Source", found.source),
        ("Python dependencies", found.python_depends),
        ("Kernel dependencies", [f"{d['repo']} {describe_value(d['requirement'])}" for d in found.kernel_depends]),
        ("Backends", found.backends),
        ("Variants", found.variants),
    ):
        ctx.out.print(f"{label}: {shown(value)}")
    if found.dependency_tree is not None:
        ctx.out.print("Dependency tree:")
        for line in _tree_lines(found.dependency_tree):
            ctx.out.print(line)
    return 0


def _tree_lines(node: DependencyNode, prefix: str = "", last: bool = True, top: bool = True) -> list[str]:
    """`kernels info --dep-tree`'s drawing (`|-- `, `` `-- ``), each kernel with its release and build."""
    release = node.version or f"{(node.ref or '').rpartition('/')[2] or 'commit'}@{node.commit[:12]}"
    asked = "" if node.requirement is None else f" {describe_value(node.requirement)} ->"
    label = f"{node.repo}{asked} {release} ({node.variant or 'no build'})" + (f": {node.note}" if node.note else "")
    lines = [label if top else f"{prefix}{'`-- ' if last else '|-- '}{label}"]
    below = prefix if top else prefix + ("    " if last else "|   ")
    for index, child in enumerate(node.depends):
        lines += _tree_lines(child, below, index == len(node.depends) - 1, top=False)
    return lines


def _describe_api_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "kernel",
        metavar="REPO|DIR",
        help=f"{REPO_HELP}, or a build on disk (build/<variant>/ or one variant directory)",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--version", metavar="N|RANGE", help="a major version (the branch vN) or a range of tags")
    which.add_argument("--revision", metavar="REV", help="a tag, branch or commit")
    environment.add_arguments(parser)


@command(
    "describe-api",
    help="list a kernel's public functions and layers from its Python sources",
    options=_describe_api_options,
    description="List a kernel's public functions (with their signatures) and its layers (with has_backward "
    "and can_torch_compile), read with Python's ast from the Python sources of the build this "
    "machine (or --torch ...) would load: only metadata.json and those sources are downloaded, "
    "into memory and checked against the listing and the metadata's digests; no binary is fetched "
    "and nothing is imported or run. `kernels describe-api` (0.18+) shows the same from a "
    "symbols.json that only recent builds carry.",
)
def cmd_describe_api(ctx: Context) -> int:
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
            project=_project_if_any(ctx),
            revision=ctx.args.revision,
            version=int(version) if version and version.isdigit() else version,
        )
    api = found.api
    if ctx.args.json:
        where = (
            {"path": found.path}
            if found.path
            else {"repo_id": found.repo, "revision": found.ref or found.commit, "commit": found.commit}
        )
        _emit_json(
            {
                "schema_version": 1,
                **where,
                "variant": found.variant,
                "functions": [dataclasses.asdict(f) for f in api.functions],
                "layers": [dataclasses.asdict(layer) for layer in api.layers],
                "others": api.others,
                "problems": api.problems,
            }
        )
        return 0
    if found.path:
        ctx.out.print(f"Path: {found.path}")
    else:
        ctx.out.print(f"Repository: {found.repo}")
        ctx.out.print(f"Revision: {found.ref or found.commit} ({(found.commit or '')[:12]})")
    ctx.out.print(f"Variant: {found.variant}")
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


def _verify_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", metavar="DIR", help="check a `sync --target` directory instead of the Hub cache")
    parser.add_argument(
        "--signatures",
        action="store_true",
        help="also verify each installed variant's Sigstore bundle and files against the policy",
    )


@command(
    "verify",
    help="re-hash installed kernel files against the lock",
    options=_verify_options,
    description="Re-hash the installed files of every locked kernel against kernelpin.lock (the Hub cache, or a "
    "`sync --target` directory). Exit 1 when a file was modified or an unlisted one was added; "
    "`kernelpin sync` repairs them. --signatures also verifies each installed variant's Sigstore "
    "bundle and files against the policy and the signer the lock recorded.",
)
def cmd_verify(ctx: Context) -> int:
    target = Path(ctx.args.target).resolve() if ctx.args.target else None
    found = verify(project=ctx.project, source=ctx.source, target=target, signatures=ctx.args.signatures)
    report, bad = found.files, found.problems
    if ctx.args.json:
        _emit_json({"ok": found.ok, "files": [row.as_json() for row in report]})
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
            f"verified {_count(len(report), 'installed file')}: {len(report) - len(bad)} match the lock"
            + ("" if not bad else f", {len(bad)} modified, missing or not in the lock; run `kernelpin sync` to repair")
        )
    return 1 if bad else 0


def _publish_options(parser: argparse.ArgumentParser) -> None:
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
    parser.add_argument("--dry-run", action="store_true", help="check and list the files; upload nothing")


@command(
    "publish",
    help="upload a release layout (build/<variant>/), tag it v<version>, move branch v<major> to it",
    options=_publish_options,
    description="Upload a release layout (build/<variant>/..., each variant with its metadata.json) to a kernel "
    "repository, tag the commit v<version> and move the branch v<major> to it (what "
    "`kernels.get_kernel(repo, version=MAJOR)` loads). A checkout of this repository stages one with "
    "`python -m tools.release stage`; any directory in that layout works.",
)
def cmd_publish(ctx: Context) -> int:
    from kernelpin.publisher.release import check_release, check_signatures, publish

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
        f"{_count(len(release.files), 'file')} ({release.size / 1e6:.1f} MB), "
        f"{_count(len(release.variants), 'variant')}, to {args.repo} tagged {release.tag}"
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
            _emit_json(
                {
                    "repo": args.repo,
                    "tag": release.tag,
                    "branch": branch,
                    "version": str(release.version),
                    "variants": sorted(release.variants),
                    "size": release.size,
                    "without_compat_package": release.without_compat_package,
                    "files": [{"path": f.path, "size": f.size, "sha256": f.sha256} for f in release.files],
                }
            )
            return 0
        ctx.out.print(f"Dry run: would upload {summary}")
        if branch is None:
            ctx.out.print(f"  {release.version} is a prerelease: no major-version branch is moved")
        else:
            ctx.out.print(
                f"  and move branch {branch} to it, unless {branch} holds a newer release (it never moves back)"
            )
        for item in release.files:  # sha256sum's layout, with the size: complete lines at any terminal width
            ctx.out.print(f"{item.sha256}  {item.size:>10}  {item.path}")
        ctx.out.print("Nothing was uploaded; the Hub was not contacted.")
        return 0
    published = publish(ctx.source.api, release, args.repo, args.repo_type)
    if args.json:
        _emit_json(
            {
                "repo": published.repo_id,
                "repo_type": published.repo_type,
                "tag": published.tag,
                "commit": published.commit,
                "url": published.url,
                "branch": {
                    "name": published.branch.branch,
                    "moved": published.branch.move,
                    "note": published.branch.note,
                },
            }
        )
        return 0
    ctx.out.print(f"Published {summary} ({published.repo_type} repo), commit {published.commit[:12]}")
    ctx.out.print(f"  {published.branch.note}")
    ctx.out.print(f"  {published.url}", style="dim")
    return 0


@command(
    "cache",
    help="show the cached kernels; prune revisions the lock does not use",
    options=lambda parser: (
        parser.add_argument(
            "action",
            nargs="?",
            choices=["show", "prune"],
            default="show",
            help="show (default): what is cached; prune: remove revisions the lock does not use",
        ),
        parser.add_argument("--yes", action="store_true", help="with prune: delete (without it prune only lists)"),
    ),
    description="Show what kernelpin keeps in the Hub cache (HF_HUB_CACHE): the kernel repositories, their "
    "revisions and sizes, and which revisions this project's kernelpin.lock uses. `kernelpin cache "
    "prune` lists the revisions of those repositories that the lock does not use; add --yes to "
    "delete them.",
)
def cmd_cache(ctx: Context) -> int:
    prune = ctx.args.action == "prune"
    cache_dir = ctx.source.settings.cache_dir
    # Outside a project `cache` still shows the Hub cache; pruning needs the project's lock (its error says so).
    found = cache(cache_dir, ctx.project if prune else _project_if_any(ctx), prune=prune, delete=ctx.args.yes)
    cache_dir, rows, unused, deleted = found.cache_dir, found.revisions, found.unused, found.deleted
    if ctx.args.json:
        _emit_json(
            {
                "cache_dir": str(cache_dir),
                "lock": str(ctx.project.lockfile),
                "revisions": [dataclasses.asdict(row) for row in rows],
                "unused": [row.commit for row in unused],
                "deleted": deleted,
            }
        )
        return 0
    if not rows:
        ctx.out.print(f"no kernels cached in {cache_dir}")
        return 0
    shown = unused if prune else rows
    table = ctx.table(
        "kernel",
        "type",
        "commit",
        "size",
        "used by the lock",
        title=f"{'not used by' if prune else 'cached for'} {ctx.project.lockfile}, in {cache_dir}",
    )
    for row in shown:
        table.add_row(row.repo, row.repo_type, row.commit[:12], _size(row.size), "yes" if row.locked else "no")
    if shown:
        ctx.show(table)
    total = _size(sum(row.size for row in unused))
    if not prune:
        ctx.out.print(
            f"{_count(len(rows), 'revision')}, {_size(sum(row.size for row in rows))}; {len(unused)} not used by "
            f"this project's lock ({total}): `kernelpin cache prune` lists them, `--yes` deletes them"
        )
    elif not unused:
        ctx.out.print("nothing to prune: the lock uses every cached kernel revision")
    elif deleted:
        ctx.out.print(f"deleted {_count(len(unused), 'revision')} ({total})")
    else:
        ctx.out.print(
            f"would delete {_count(len(unused), 'revision')} ({total}) that this project's lock does not use; other "
            "projects may use them: add --yes to delete"
        )
    return 0


def _project_if_any(ctx: Context) -> Project | None:
    try:
        return ctx.project
    except KernelpinError:
        return None


def _count(count: int, noun: str) -> str:
    """`1 revision`, `2 revisions`: a count with its noun."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _size(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{size / 1e3:.1f} kB"


EXIT_CODES = """exit status:
  0    success
  1    failure the message explains: a stale lock under `lock --check` or `sync --locked`, files modified
       since they were verified (`verify`), a Hub or network error, a release that breaks a rule, ...
  2    usage error: unknown command or option, missing argument
  130  interrupted (Ctrl-C); files already verified are kept

`kernelpin help COMMAND` (or `kernelpin COMMAND --help`) describes a command.
"""
JSON_HELP = 'print machine-readable JSON on stdout (an error too: {"error": MESSAGE}, exit 1)'


class _Parser(argparse.ArgumentParser):
    """argparse with a "did you mean" on a mistyped command or option (as cargo and uv have)."""

    def error(self, message: str) -> NoReturn:
        choice = re.match(r"argument COMMAND: invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if choice:
            commands = re.findall(r"'([^']*)'", choice[2])
            close = difflib.get_close_matches(choice[1], commands, n=1)
            message = (
                f"unknown command '{choice[1]}'"
                + (f"; did you mean '{close[0]}'?" if close else "")
                + f" (commands: {', '.join(commands)})"
            )
        unknown = re.match(r"unrecognized arguments: (.*)$", message)
        if unknown:
            message = "; ".join(self._unknown_argument(given) for given in unknown[1].split(" "))
        super().error(message)

    def _unknown_argument(self, given: str) -> str:
        """`--upgade`: unknown option '--upgade'; did you mean '--upgrade'? (this command's options only)."""
        if not given.startswith("-"):
            return f"unexpected argument '{given}'"
        name = given.partition("=")[0]
        options = sorted(option for option in self._option_string_actions if option.startswith("--"))
        close = difflib.get_close_matches(name, options, n=1, cutoff=0.7)
        return f"unknown option '{name}'" + (
            f"; did you mean '{close[0]}'?" if close else f" (`{self.prog} --help` lists its options)"
        )


def _global_options(defaults: bool) -> argparse.ArgumentParser:
    """-v, -q, --project, --offline, --color: accepted before the command and after it (`kernelpin lock -v`).

    The copy on each command has no defaults (SUPPRESS), so an option given before the command survives.
    """
    default = (lambda value: value) if defaults else (lambda value: argparse.SUPPRESS)
    options = _Parser(add_help=False)
    group = options.add_argument_group("global options")
    group.add_argument(
        "--project",
        metavar="DIR",
        default=default(None),
        help="the project (default: nearest pyproject.toml above the cwd)",
    )
    group.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=default(False),
        help="explain more (what lock resolved, what sync fetched, tags that are not versions)",
    )
    group.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=default(False),
        help="print only errors, warnings and --json output",
    )
    group.add_argument(
        "--offline",
        action="store_true",
        default=default(False),
        help="never contact the Hub: use the lock and the cache (as HF_HUB_OFFLINE=1)",
    )
    group.add_argument(
        "--color",
        choices=["auto", "always", "never"],
        default=default("auto"),
        help="colored output (auto: on a terminal, unless NO_COLOR is set)",
    )
    return options


class _PrintVersion(argparse.Action):
    """--version, reading the package metadata only when asked (importlib.metadata costs ~30 ms per start)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(
            option_strings,
            dest=argparse.SUPPRESS,
            default=argparse.SUPPRESS,
            nargs=0,
            help="print kernelpin's version and exit",
        )

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"kernelpin {version('kernelpin')}")
        except PackageNotFoundError:
            print("kernelpin (version unknown: not installed, no package metadata)")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kernelpin",
        description="Pin, install and load Hub kernels for this project.",
        parents=[_global_options(defaults=True)],
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-V", "--version", action=_PrintVersion)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    parser.set_defaults(top_parser=parser, subparsers=commands.choices)  # for `kernelpin help`
    global_options = _global_options(defaults=False)
    for spec in COMMANDS.values():
        extra: dict[str, Any] = (
            {"epilog": spec.epilog, "formatter_class": argparse.RawDescriptionHelpFormatter} if spec.epilog else {}
        )
        sub = commands.add_parser(
            spec.name, parents=[global_options], help=spec.help, description=spec.description, **extra
        )
        sub.set_defaults(command_parser=sub, run=spec.run)
        spec.options(sub)
        if spec.json:
            sub.add_argument("--json", action="store_true", help=JSON_HELP)
    return parser


@command(
    "help",
    help="describe kernelpin or a command",
    json=False,
    options=lambda parser: parser.add_argument("topic", nargs="?", metavar="COMMAND", help="the command to describe"),
    description="Describe kernelpin or one of its commands.",
)
def cmd_help(ctx: Context) -> int:
    return _print_help(ctx.args.top_parser, ctx.args.subparsers, ctx.args.topic)


# What each command does, as registered above (the docs' checks read it).
DESCRIPTIONS = {name: spec.description for name, spec in COMMANDS.items()}


def _print_help(
    parser: argparse.ArgumentParser, subparsers: dict[str, argparse.ArgumentParser], topic: str | None
) -> int:
    if topic is None:
        parser.print_help()
        return 0
    if topic not in subparsers:
        parser.error(f"argument COMMAND: invalid choice: '{topic}' (choose from {', '.join(map(repr, subparsers))})")
    subparsers[topic].print_help()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if args.command is None:
        parser.print_help()  # `kernelpin` alone: what it can do, as cargo and uv print
        return 0
    # A usage error after the command gets that command's usage, not the top-level one.
    if unknown:
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.quiet and args.verbose:
        args.command_parser.error("-q/--quiet and -v/--verbose contradict each other; give one")
    ctx = Context(args)
    try:
        return args.run(ctx)
    except KernelpinError as error:
        return ctx.fail(str(error))
    except OSError as error:  # a read-only checkout or Hub cache, a full disk: the path and the cause, no traceback
        where = f"{error.filename}: " if error.filename else ""
        return ctx.fail(
            f"{where}{error.strerror or error}; check that path's permissions and free space "
            "(the Hub cache is HF_HUB_CACHE or HF_HOME/hub)"
        )
    except KeyboardInterrupt:
        ctx.err.print("interrupted; files already verified are kept, re-run to finish")
        return 130


if __name__ == "__main__":
    sys.exit(main())
