"""The `kernelpin` command line. Commands that need no torch never import it."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from rich.table import Table

from kernelpin import environment, kernels_lock, lockfile
from kernelpin.errors import KernelpinError
from kernelpin.integrity import write_atomic
from kernelpin.project import (
    PYPROJECT, NewEntry, Project, entry_to_add, find_project, read_requirements, remove_requirement, set_requirement,
)
from kernelpin.ranges import Version
from kernelpin.resolve import resolve, tag_versions
from kernelpin.source import HubSettings, HubSource, Refs
from kernelpin.spec import Requirement, check_repo_id, describe_value
from kernelpin.sync import Installer, SyncedVariant, choose_variant, sync, unlisted_entries
from kernelpin.terminal import SafeConsole


UNBOUNDED_WIDTH = 1 << 16  # columns, for output that is not a terminal


def _emit_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True))


class Context:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        # markup=False: messages quote TOML like [tool.kernels], which rich would take for style tags. Colour as
        # --color says; "auto" is rich's own rule (a terminal, and NO_COLOR unset).
        colour: dict[str, Any] = {"always": {"force_terminal": True}, "never": {"no_color": True}}.get(args.color, {})
        self.out = SafeConsole(highlight=False, soft_wrap=True, markup=False, quiet=args.quiet, **colour,
                           **({} if sys.stdout.isatty() else {"width": UNBOUNDED_WIDTH}))
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
            raise KernelpinError(f"--project {given}: the directory {problem}; give the directory of the project's "
                                 "pyproject.toml")
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

    @functools.cached_property
    def editing(self) -> Any:
        """The project's edit lock (re-entrant: relock runs inside edit_and_relock), see Project.edit_lock."""
        return self.project.edit_lock()

    def requirements(self) -> list[Requirement]:
        return read_requirements(self.project)

    def lock(self) -> lockfile.Lock | None:
        return lockfile.read(self.project.lockfile)

    def edit_and_relock(self, edit: Callable[[Project], None], dry_run: bool = False) -> tuple[lockfile.Lock, list[str]]:
        """Change pyproject.toml with `edit`, then re-lock. When locking fails, pyproject.toml is put back
        byte for byte (as `uv add` does): a requirement that cannot be locked is never left behind. With
        `dry_run` it is put back in any case and the lock is not written."""
        with self.editing:
            with open(self.project.pyproject, encoding="utf-8", newline="") as stream:
                original = stream.read()
            edit(self.project)
            try:
                result = self.relock(dry_run=dry_run)
            except BaseException:
                write_atomic(self.project.pyproject, original)
                raise
            if dry_run:
                write_atomic(self.project.pyproject, original)
            return result

    def relock(self, upgrade: set[str] | None = None, upgrade_all: bool = False, dry_run: bool = False) -> tuple[lockfile.Lock, list[str]]:
        """Resolve and (unless dry_run) write the lock; return it with the list of changes."""
        with self.editing:
            return self._relock(upgrade or set(), upgrade_all, dry_run)

    def _relock(self, upgrade: set[str], upgrade_all: bool, dry_run: bool) -> tuple[lockfile.Lock, list[str]]:
        requirements = self.requirements()
        path = self.project.lockfile
        if path.is_symlink() and not path.exists():
            raise KernelpinError(
                f"{path} is a symbolic link to {os.path.realpath(path)}, which does not exist; refusing to "
                "create a file there: remove the link (or point it at a lock) and re-run"
            )
        try:
            previous = self.lock()
        except KernelpinError as error:
            if path.is_symlink():
                # A link is kept as a link (a lock shared between checkouts); what it points at is not a lock,
                # so it is someone else's file: never overwrite it.
                raise KernelpinError(
                    f"{path} is a symbolic link to {os.path.realpath(path)}, which is not a kernelpin lock "
                    f"({error}); refusing to overwrite it: remove the link (or point it at a lock) and re-run"
                ) from None
            # A damaged or hand-edited lock: its error says "run `kernelpin lock`", so that has to work.
            self.err.print(f"warning: {error}; it is regenerated from pyproject.toml", style="yellow")
            previous = None
        dependencies = {k.repo_id for k in previous.kernels if k.required_by} if previous else set()
        unknown = upgrade - {r.repo_id for r in requirements} - dependencies
        if unknown:
            raise KernelpinError(
                f"--upgrade-package {', '.join(sorted(unknown))}: not in [tool.kernels.dependencies] "
                f"(present: {', '.join(r.repo_id for r in requirements) or 'none'})"
            )
        new = resolve(self.source, requirements, previous,
                      upgrade=lambda repo_id: upgrade_all or repo_id in upgrade, note=self.note)
        changed = lockfile.changes(previous, new)
        if previous is not None and previous.schema != lockfile.SCHEMA_VERSION:
            changed.append(f"~ {self.project.lockfile.name}: schema version {previous.schema} -> "
                           f"{lockfile.SCHEMA_VERSION}")
        if not dry_run and (previous is None or changed):
            lockfile.write(self.project.lockfile, new)
        changed += kernels_lock.keep(self.project.root / kernels_lock.KERNELS_LOCK, new, dry_run)
        return new, changed


def cmd_lock(ctx: Context) -> int:
    args = ctx.args
    if args.check:
        locked = ctx.lock()
        reasons = lockfile.staleness(ctx.requirements(), locked)
        if locked is not None and not reasons:
            reasons += filter(None, [kernels_lock.out_of_step(ctx.project.root / kernels_lock.KERNELS_LOCK, locked)])
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
    if ctx.source.settings.offline and not ctx.project.lockfile.exists() and ctx.requirements():
        raise KernelpinError(f"offline, and {ctx.project.lockfile.name} "
                             "does not exist yet: the first lock resolves against the Hub, so run `kernelpin lock` "
                             "once with network access (without --offline and HF_HUB_OFFLINE) and commit the lock")
    new, changed = ctx.relock(set(args.upgrade_package or ()), args.upgrade, dry_run=args.dry_run)
    for kernel in new.kernels:
        ctx.note(f"{kernel.repo_id}: {kernel.version or '-'} at {kernel.ref or 'a pinned revision'} "
                 f"({kernel.commit[:12]}), {len(kernel.variants)} variants, "
                 f"{sum(len(v.files) for v in kernel.variants)} files")
    if args.json:
        _emit_json({"changes": changed, "written": not args.dry_run and bool(changed), "kernels": [_kernel_json(k) for k in new.kernels]})
        return 0
    _report_changes(ctx, changed, ctx.out.print, "Would change" if args.dry_run else "Locked")
    if not new.kernels:
        ctx.out.print(f"nothing to lock: {ctx.project.pyproject.name} has no [tool.kernels.dependencies]; add a "
                      "kernel with `kernelpin add ORG/NAME` (see `kernelpin help add`)")
    elif not changed:
        kernels = f"{len(new.kernels)} kernel" + ("" if len(new.kernels) == 1 else "s")
        ctx.out.print(f"{ctx.project.lockfile.name} is up to date ({kernels})")
    return 0


def _report_changes(ctx: Context, changed: list[str], say: Callable[[str], None], verb: str = "Locked") -> None:
    """Each change of the lock, then a warning for each release tag that now names another commit."""
    for line in changed:
        say(f"{verb}: {line}")
    for line in changed:
        if line.startswith("!"):
            ctx.err.print(f"warning: {line[2:]}", style="bold yellow")


def _kernel_json(kernel: lockfile.LockedKernel) -> dict[str, Any]:
    return {"repo": kernel.repo_id, "version": kernel.version, "ref": kernel.ref, "commit": kernel.commit,
            "variants": [v.name for v in kernel.variants]}


def _locked_for_sync(ctx: Context) -> lockfile.Lock:
    args = ctx.args
    existing = ctx.lock()
    if args.frozen:
        if existing is None:
            raise KernelpinError(f"--frozen needs {ctx.project.lockfile}; run `kernelpin lock` first (with network "
                                 "access: it resolves against the Hub)")
        return existing
    reasons = lockfile.staleness(ctx.requirements(), existing)
    if not reasons:
        return existing or lockfile.Lock()  # no lock and nothing required: nothing to sync
    if args.locked:
        raise KernelpinError(
            f"{ctx.project.lockfile.name} is stale and --locked forbids updating it:\n  "
            + "\n  ".join(reasons) + "\nRun `kernelpin lock` and commit the result."
        )
    new, changed = ctx.relock()
    _report_changes(ctx, changed, ctx.progress)
    return new


def cmd_sync(ctx: Context) -> int:
    args = ctx.args
    locked = _locked_for_sync(ctx)
    env = None if args.all_variants else environment.current(vars(args))
    target = Path(args.target).resolve() if args.target else None
    progress = None
    if not (args.json or args.quiet or args.dry_run) and sys.stderr.isatty():  # bars for people; logs get the summary only
        from huggingface_hub.utils import tqdm  # huggingface_hub's bars: HF_HUB_DISABLE_PROGRESS_BARS=1 hides them

        progress = functools.partial(tqdm, unit="B", unit_scale=True, leave=False)
    installer = Installer(ctx.source, target, progress)
    if args.dry_run:
        return _sync_dry_run(ctx, locked, installer, env)
    if env is not None:
        ctx.note(f"selecting variants for {env.describe()}")
    results = sync(locked, installer, env, all_variants=args.all_variants)
    for result in results:
        for path in result.downloaded:
            ctx.note(f"{result.repo_id}: downloaded and verified {path}")
    if args.json:
        _emit_json({"environment": None if env is None else env.describe(), "synced": [_synced_json(r) for r in results]})
        return 0
    if env is not None:
        ctx.out.print(f"Environment: {env.describe()}")
    if not locked.kernels:
        ctx.out.print(f"nothing to sync: {ctx.project.lockfile.name} locks no kernels; add one with "
                      "`kernelpin add ORG/NAME`")
    for result in results:
        parts = [f"{len(result.downloaded)} downloaded", f"{len(result.reused)} already present"]
        if result.repaired:
            parts.append(f"{len(result.repaired)} replaced (modified in the cache)")
        ctx.out.print(f"{result.label}: {result.variant}: {', '.join(parts)}, all verified")
        ctx.out.print(f"  {result.directory}", style="dim")
        for path in result.repaired:
            ctx.err.print(f"warning: {result.repo_id}: {path} did not match the lock; replaced", style="yellow")
        for path in result.removed:
            ctx.err.print(f"warning: {result.repo_id}: {path} is not in the lock; removed", style="yellow")
    return 0


def _sync_dry_run(ctx: Context, locked: lockfile.Lock, installer: Installer, env: Any) -> int:
    """What `sync` would install: per kernel the chosen variant(s) and the files not yet present and verified."""
    rows = []
    for kernel in locked.kernels:
        names = [v.name for v in kernel.variants] if env is None else [choose_variant(kernel, env)]
        for name in names:
            variant = kernel.variant(name)
            assert variant is not None
            missing = [f.path for f in variant.files if installer.present(kernel, name, f) is None]
            rows.append({"repo": kernel.repo_id, "variant": name, "missing": missing,
                         "directory": str(installer.variant_directory(kernel, name))})
    if ctx.args.json:
        _emit_json({"environment": None if env is None else env.describe(), "dry_run": True, "would_sync": rows})
        return 0
    if env is not None:
        ctx.out.print(f"Environment: {env.describe()}")
    if not rows:
        ctx.out.print(f"nothing to sync: {ctx.project.lockfile.name} locks no kernels")
    for row in rows:
        state = f"{len(row['missing'])} files to download" if row["missing"] else "all files present"
        ctx.out.print(f"Would sync {row['repo']}: {row['variant']}: {state}")
    ctx.out.print("Dry run: nothing was downloaded or changed (files present are verified by a real sync).")
    return 0


def _synced_json(result: SyncedVariant) -> dict[str, Any]:
    return {"repo": result.repo_id, "variant": result.variant, "directory": str(result.directory),
            "downloaded": result.downloaded, "reused": result.reused, "repaired": result.repaired,
            "removed": result.removed}


def _split_spec(text: str) -> tuple[str, str | None]:
    repo_id, _, range_text = text.partition("@")
    check_repo_id(repo_id)
    return repo_id, range_text or None


def _entry_to_add(ctx: Context, repo_id: str, range_text: str | None) -> NewEntry:
    """What `add` writes (project.entry_to_add) from the repository's tags and branches; offline, from what the lock
    already holds for it (its version, and its branch when it is locked as `= N`), since the Hub cannot be asked."""
    if not ctx.source.settings.offline:
        refs = ctx.source.refs(repo_id, None)
        versions, _ = tag_versions(refs.tags)
        return entry_to_add(repo_id, range_text, list(versions), set(refs.branches))
    locked = ctx.lock()
    kernel = locked.kernel(repo_id) if locked else None
    if kernel is None or (kernel.version is None and range_text is None):
        raise KernelpinError(f"{repo_id}: offline, its versions cannot be looked up and {ctx.project.lockfile.name} "
                             f"does not lock a version of it; go online to add it")
    branch = (kernel.ref or "").removeprefix("refs/heads/") if (kernel.ref or "").startswith("refs/heads/") else None
    versions = [Version.parse(kernel.version)] if kernel.version else []
    return entry_to_add(repo_id, range_text, versions, {branch} if branch else set())


def _distinct(repo_ids: list[str]) -> list[str]:
    repeated = sorted({r for r in repo_ids if repo_ids.count(r) > 1})
    if repeated:
        raise KernelpinError(f"{', '.join(repeated)} given more than once; name each kernel once")
    return repo_ids


def cmd_add(ctx: Context) -> int:
    specs = [_split_spec(text) for text in ctx.args.specs]
    _distinct([repo_id for repo_id, _ in specs])
    entries = {repo_id: _entry_to_add(ctx, repo_id, range_text) for repo_id, range_text in specs}

    def edit(project: Project) -> None:
        for repo_id, entry in entries.items():
            set_requirement(project, repo_id, entry.value)

    dry_run = ctx.args.dry_run
    new, changed = ctx.edit_and_relock(edit, dry_run=dry_run)
    if ctx.args.json:
        _emit_json({"added": [{"repo": repo_id, "requirement": entry.value, "kernels_lock_reads": entry.kernels_reads,
                               "note": entry.note} for repo_id, entry in entries.items()],
                    "dry_run": dry_run, "pyproject": str(ctx.project.pyproject), "changes": changed,
                    "kernels": [_kernel_json(k) for k in new.kernels]})
        return 0
    for repo_id, entry in entries.items():
        said = f"{'Would add' if dry_run else 'Added'} {repo_id} = {json.dumps(entry.value)} to {ctx.project.pyproject.name}"
        ctx.out.print(f"{said} ({entry.note})" if entry.kernels_reads else said)
        if not entry.kernels_reads:
            ctx.err.print(f"warning: {repo_id}: {entry.note}", style="yellow")
    _report_changes(ctx, changed, ctx.out.print, "Would change" if dry_run else "Locked")
    if dry_run:
        ctx.out.print(f"Dry run: {ctx.project.pyproject.name} and {ctx.project.lockfile.name} are unchanged.")
    return 0


def cmd_remove(ctx: Context) -> int:
    repo_ids = _distinct([check_repo_id(repo) for repo in ctx.args.repos])

    def edit(project: Project) -> None:
        for repo_id in repo_ids:
            remove_requirement(project, repo_id)

    new, changed = ctx.edit_and_relock(edit)
    if ctx.args.json:
        _emit_json({"removed": repo_ids, "pyproject": str(ctx.project.pyproject), "changes": changed,
                    "kernels": [_kernel_json(k) for k in new.kernels]})
        return 0
    for repo_id in repo_ids:
        ctx.out.print(f"Removed {repo_id} from {ctx.project.pyproject.name}")
    _report_changes(ctx, changed, ctx.out.print)
    return 0


def cmd_outdated(ctx: Context) -> int:
    locked = ctx.lock()
    rows = []
    for requirement in ctx.requirements():
        current = locked.kernel(requirement.repo_id) if locked else None
        refs = ctx.source.refs(requirement.repo_id, requirement.repo_type)
        versions, _ = tag_versions(refs.tags)
        releases = [v for v in versions if not v.is_prerelease]
        row = {
            "repo": requirement.repo_id, "requirement": requirement.value,
            "locked": None if current is None else current.version or _short_pin(current.ref, current.commit),
            "newest_satisfying": None, "newest": str(max(releases)) if releases else None,
        }
        if requirement.branch is not None:  # `= N`: the newest is the branch head, which moves without a tag
            head = refs.branches.get(requirement.branch)
            at_head = [v for v, tag in versions.items() if refs.tags[tag] == head]
            if head is not None:
                row["newest_satisfying"] = str(max(at_head)) if at_head else _short_pin(f"refs/heads/{requirement.branch}", head)
            row["branch_moved"] = current is not None and head is not None and head != current.commit
        elif requirement.range is not None and (satisfying := requirement.range.best(versions)) is not None:
            row["newest_satisfying"] = str(satisfying)
        rows.append(row)
    if ctx.args.json:
        _emit_json(rows)
        return 0
    if not rows:
        ctx.out.print(f"nothing to check: {ctx.project.pyproject.name} has no [tool.kernels.dependencies]")
        return 0
    table = ctx.table("kernel", "requirement", "locked", "newest satisfying", "newest")
    for row in rows:
        newest_satisfying = row["newest_satisfying"] or "-"
        if row.get("branch_moved"):
            newest_satisfying += " (branch moved: `kernelpin lock --upgrade-package` follows it)"
        table.add_row(row["repo"], describe_value(row["requirement"]), row["locked"] or "-",
                      newest_satisfying, row["newest"] or "-")
    ctx.show(table)
    return 0


def _short_pin(ref: str | None, commit: str) -> str:
    """`v1@0123456789ab`: a branch (or commit) pin that no release tag names."""
    return f"{ref.rpartition('/')[2]}@{commit[:12]}" if ref else commit[:12]


def cmd_versions(ctx: Context) -> int:
    repo_id = check_repo_id(ctx.args.repo)
    requirement = next((r for r in ctx.requirements() if r.repo_id == repo_id), None)
    refs = ctx.source.refs(repo_id, requirement.repo_type if requirement else None)
    versions, ignored = tag_versions(refs.tags)
    locked = ctx.lock()
    locked_kernel = locked.kernel(repo_id) if locked else None
    rows = [{"version": str(v), "tag": versions[v], "commit": refs.tags[versions[v]],
             "satisfies": _satisfies(requirement, refs, v, versions[v]),
             "locked": locked_kernel is not None and locked_kernel.version == str(v)}
            for v in sorted(versions, reverse=True)]
    if ctx.args.json:
        _emit_json({"repo": repo_id, "repo_type": refs.repo_type, "requirement": requirement.value if requirement else None,
                    "versions": rows, "ignored_tags": ignored})
        return 0
    title = f"{repo_id} ({refs.repo_type} repo)" + (f", requirement {requirement.text}" if requirement else "")
    table = ctx.table("version", "tag", "commit", "satisfies", "locked", title=title)
    for row in rows:
        satisfies = {None: "", True: "yes", False: "no"}[row["satisfies"]]
        table.add_row(row["version"], row["tag"], row["commit"][:12], satisfies, "*" if row["locked"] else "")
    ctx.show(table)
    if ignored:
        ctx.note(f"ignored tags (not versions): {', '.join(ignored)}")
    return 0


def _satisfies(requirement: Requirement | None, refs: Refs, version: Version, tag: str) -> bool | None:
    """Whether a tagged version meets the requirement: in its range, or (`= N`) at the head of branch vN."""
    if requirement is None:
        return None
    if requirement.branch is not None:
        return refs.tags[tag] == refs.branches.get(requirement.branch)
    return None if requirement.range is None else requirement.range.contains(version)


def cmd_verify(ctx: Context) -> int:
    from kernelpin.integrity import verify_file

    locked = ctx.lock()
    if locked is None:
        raise KernelpinError(f"no {ctx.project.lockfile.name}; run `kernelpin lock`")
    target = Path(ctx.args.target).resolve() if ctx.args.target else None
    installer = Installer(ctx.source, target)
    report = []
    for kernel in locked.kernels:
        for variant in kernel.variants:
            linked = installer.linked_directory(kernel, variant.name)
            if linked is not None:  # what it points to is not kernelpin's: never listed nor hashed
                report.append({"repo": kernel.repo_id, "variant": variant.name, "path": str(linked), "status": "link"})
                continue
            found = {f.path: installer.present(kernel, variant.name, f) for f in variant.files}
            # Sync installs one variant per environment: one not installed at all is no problem, a missing file
            # of an installed one is (load would need the network for it).
            installed = any(path is not None for path in found.values())
            for locked_file in variant.files:
                path = found[locked_file.path]
                if path is None:
                    if installed:
                        report.append({"repo": kernel.repo_id, "variant": variant.name, "path": locked_file.path,
                                       "status": "missing"})
                    continue
                try:
                    verify_file(path, locked_file.size, locked_file.sha256, locked_file.path)
                    status = "ok"
                except KernelpinError:
                    status = "modified"
                report.append({"repo": kernel.repo_id, "variant": variant.name, "path": locked_file.path,
                               "status": status})
            # Never imported (load runs listed, verified files only), but not what was installed either.
            for extra in unlisted_entries(installer.variant_directory(kernel, variant.name), variant):
                report.append({"repo": kernel.repo_id, "variant": variant.name, "path": extra, "status": "unlisted"})
    bad = [row for row in report if row["status"] != "ok"]
    if ctx.args.json:
        _emit_json({"ok": not bad, "files": report})
        return 1 if bad else 0
    for row in bad:
        if row["status"] == "link":
            ctx.err.print(f"link: {row['repo']} {row['variant']}: {row['path']} is a symbolic link, not a directory "
                          "kernelpin installed; remove the link (it is not kernelpin's), then run `kernelpin sync`",
                          style="red")
            continue
        ctx.err.print(f"{row['status']}: {row['repo']} {row['variant']}/{row['path']}", style="red")
    if not locked.kernels:
        ctx.out.print(f"nothing to verify: {ctx.project.lockfile.name} locks no kernels")
    elif not report:
        ctx.out.print("nothing installed yet; run `kernelpin sync`")
    else:
        ctx.out.print(f"verified {len(report)} installed files: {len(report) - len(bad)} match the lock"
                      + ("" if not bad else f", {len(bad)} modified, missing or not in the lock; "
                                            "run `kernelpin sync` to repair"))
    return 1 if bad else 0


def cmd_publish(ctx: Context) -> int:
    from kernelpin.publish import check_release, publish

    args = ctx.args
    check_repo_id(args.repo)
    release = check_release(Path(args.directory), args.version)
    branch = None if release.version.is_prerelease else f"v{release.version.major}"
    variants = f"{len(release.variants)} variant" + ("" if len(release.variants) == 1 else "s")
    summary = f"{len(release.files)} files ({release.size / 1e6:.1f} MB), {variants}, to {args.repo} tagged {release.tag}"
    if release.without_compat_package:  # HF's kernel requirements still ask for it (kernels before the flat layout)
        ctx.err.print(f"warning: no build/<variant>/<name>/ package in {', '.join(release.without_compat_package)}: "
                      "`kernels` releases older than the flat layout cannot load them (kernelpin.metadata."
                      "compat_package gives the files; tools/build/op.py writes them)", style="yellow")
    if args.dry_run:
        if args.json:
            _emit_json({"repo": args.repo, "tag": release.tag, "branch": branch, "version": str(release.version),
                        "variants": sorted(release.variants), "size": release.size,
                        "without_compat_package": release.without_compat_package,
                        "files": [{"path": f.path, "size": f.size, "sha256": f.sha256} for f in release.files]})
            return 0
        ctx.out.print(f"Dry run: would upload {summary}")
        if branch is None:
            ctx.out.print(f"  {release.version} is a prerelease: no major-version branch is moved")
        else:
            ctx.out.print(f"  and move branch {branch} to it, unless {branch} holds a newer release (it never moves back)")
        for item in release.files:  # sha256sum's layout, with the size: complete lines at any terminal width
            ctx.out.print(f"{item.sha256}  {item.size:>10}  {item.path}")
        ctx.out.print("Nothing was uploaded; the Hub was not contacted.")
        return 0
    published = publish(ctx.source.api, release, args.repo, args.repo_type)
    if args.json:
        _emit_json({"repo": published.repo_id, "repo_type": published.repo_type, "tag": published.tag,
                    "commit": published.commit, "url": published.url,
                    "branch": {"name": published.branch.branch, "moved": published.branch.move,
                               "note": published.branch.note}})
        return 0
    ctx.out.print(f"Published {summary} ({published.repo_type} repo), commit {published.commit[:12]}")
    ctx.out.print(f"  {published.branch.note}")
    ctx.out.print(f"  {published.url}", style="dim")
    return 0


def cmd_cache(ctx: Context) -> int:
    """The kernel repositories in the Hub cache (kernel repositories, and model repositories this project's lock
    names: other model repositories are someone else's weights), with the revisions the lock uses marked."""
    from kernelpin import cache

    cache_dir = ctx.source.settings.cache_dir
    try:
        locked = ctx.lock() or lockfile.Lock()
    except KernelpinError:
        if ctx.args.action == "prune":
            raise  # pruning against a lock that cannot be read would remove what it names
        locked = lockfile.Lock()
    in_lock = {(k.repo_type, k.repo_id): k.commit for k in locked.kernels}
    revisions = [revision for revision in cache.scan(cache_dir)
                 if revision.repo_type == "kernel" or (revision.repo_type, revision.repo_id) in in_lock]
    rows = [{"repo": r.repo_id, "repo_type": r.repo_type, "commit": r.commit, "size": r.size, "refs": list(r.refs),
             "locked": in_lock.get((r.repo_type, r.repo_id)) == r.commit} for r in revisions]
    prune = ctx.args.action == "prune"
    unused = [row for row in rows if not row["locked"]]
    deleted = False
    if prune and ctx.args.yes and unused:
        cache.prune(cache_dir, [revision for revision, row in zip(revisions, rows) if not row["locked"]])
        deleted = True
    if ctx.args.json:
        _emit_json({"cache_dir": str(cache_dir), "lock": str(ctx.project.lockfile), "revisions": rows,
                    "unused": [row["commit"] for row in unused], "deleted": deleted})
        return 0
    if not rows:
        ctx.out.print(f"no kernels cached in {cache_dir}")
        return 0
    shown = unused if prune else rows
    table = ctx.table("kernel", "type", "commit", "size", "used by the lock",
                      title=f"{'not used by' if prune else 'cached for'} {ctx.project.lockfile}, in {cache_dir}")
    for row in shown:
        table.add_row(row["repo"], row["repo_type"], row["commit"][:12], _size(row["size"]),
                      "yes" if row["locked"] else "no")
    if shown:
        ctx.show(table)
    total = _size(sum(row["size"] for row in unused))
    if not prune:
        ctx.out.print(f"{len(rows)} revisions, {_size(sum(row['size'] for row in rows))}; {len(unused)} not used by "
                      f"this project's lock ({total}): `kernelpin cache prune` lists them, `--yes` deletes them")
    elif not unused:
        ctx.out.print("nothing to prune: the lock uses every cached kernel revision")
    elif deleted:
        ctx.out.print(f"deleted {len(unused)} revisions ({total})")
    else:
        ctx.out.print(f"would delete {len(unused)} revisions ({total}) that this project's lock does not use; other "
                      "projects may use them: add --yes to delete")
    return 0


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
LOCK_MODES = """how --locked and --frozen compare:
  uv:    `uv sync --locked` fails on a stale lock, `--frozen` uses the lock without checking it: the same here.
  cargo: `--locked` is the same too, but cargo's `--frozen` also means `--offline`; here `sync --frozen` still
         downloads the locked files that are missing (add --offline, or HF_HUB_OFFLINE=1, to forbid that).
"""
JSON_HELP = "print machine-readable JSON on stdout (an error too: {\"error\": MESSAGE}, exit 1)"
REPO_HELP = "a Hub repository id, ORG/NAME (e.g. acme/img2gray)"

# Each command's --help opens with what it does and what it reads and writes (as `uv help lock` does).
DESCRIPTIONS = {
    "lock": "Resolve every requirement of [tool.kernels.dependencies] in pyproject.toml against the Hub's version "
            "tags and write kernelpin.lock: the commit, and the size and sha256 of every file of every variant. "
            "A requirement the lock already satisfies keeps its locked version unless --upgrade or "
            "--upgrade-package asks for the newest.",
    "sync": "Download the locked variant that fits this environment (torch, CUDA, GPU capability) into the Hub "
            "cache (or --target DIR) and verify every byte against kernelpin.lock. A stale lock is re-locked first "
            "unless --locked or --frozen says otherwise.",
    "add": "Add one or more kernels to [tool.kernels.dependencies] and re-lock. Without @RANGE the requirement is "
           "^NEWEST (the newest release tag). When the lock cannot be written, pyproject.toml is put back as it was.",
    "remove": "Remove one or more kernels from [tool.kernels.dependencies] and re-lock.",
    "outdated": "For each requirement: the locked version, the newest version the requirement allows, and the "
                "newest release. Upgrade with `kernelpin lock --upgrade` (or --upgrade-package REPO).",
    "versions": "List a kernel repository's version tags, newest first, with which satisfy this project's "
                "requirement and which is locked.",
    "verify": "Re-hash the installed files of every locked kernel against kernelpin.lock (the Hub cache, or a "
              "`sync --target` directory). Exit 1 when a file was modified or an unlisted one was added; "
              "`kernelpin sync` repairs them.",
    "publish": "Upload a release layout (build/<variant>/..., each variant with its metadata.json) to a kernel "
               "repository, tag the commit v<version> and move the branch v<major> to it (what "
               "`kernels.get_kernel(repo, version=MAJOR)` loads). A checkout of this repository stages one with "
               "`python -m tools.release stage`; any directory in that layout works.",
    "cache": "Show what kernelpin keeps in the Hub cache (HF_HUB_CACHE): the kernel repositories, their revisions "
             "and sizes, and which revisions this project's kernelpin.lock uses. `kernelpin cache prune` lists the "
             "revisions of those repositories that the lock does not use; add --yes to delete them.",
    "help": "Describe kernelpin or one of its commands.",
}


class _Parser(argparse.ArgumentParser):
    """argparse with a "did you mean" on a mistyped command (as cargo and uv have)."""

    def error(self, message: str) -> NoReturn:
        choice = re.match(r"argument COMMAND: invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if choice:
            commands = re.findall(r"'([^']*)'", choice[2])
            close = difflib.get_close_matches(choice[1], commands, n=1)
            message = f"unknown command '{choice[1]}'" + (f"; did you mean '{close[0]}'?" if close else "") + \
                      f" (commands: {', '.join(commands)})"
        super().error(message)


def _global_options(defaults: bool) -> argparse.ArgumentParser:
    """-v, -q, --project, --offline, --color: accepted before the command and after it (`kernelpin lock -v`).

    The copy on each command has no defaults (SUPPRESS), so an option given before the command survives.
    """
    default = (lambda value: value) if defaults else (lambda value: argparse.SUPPRESS)
    options = _Parser(add_help=False)
    group = options.add_argument_group("global options")
    group.add_argument("--project", metavar="DIR", default=default(None),
                       help="the project (default: nearest pyproject.toml above the cwd)")
    group.add_argument("-v", "--verbose", action="store_true", default=default(False),
                       help="explain more (what lock resolved, what sync fetched, tags that are not versions)")
    group.add_argument("-q", "--quiet", action="store_true", default=default(False),
                       help="print only errors, warnings and --json output")
    group.add_argument("--offline", action="store_true", default=default(False),
                       help="never contact the Hub: use the lock and the cache (as HF_HUB_OFFLINE=1)")
    group.add_argument("--color", choices=["auto", "always", "never"], default=default("auto"),
                       help="colored output (auto: on a terminal, unless NO_COLOR is set)")
    return options


class _PrintVersion(argparse.Action):
    """--version, reading the package metadata only when asked (importlib.metadata costs ~30 ms per start)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0,
                         help="print kernelpin's version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"kernelpin {version('kernelpin')}")
        except PackageNotFoundError:
            print("kernelpin (version unknown: not installed, no package metadata)")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kernelpin", description="Pin, install and load Hub kernels for this project.",
                     parents=[_global_options(defaults=True)], epilog=EXIT_CODES,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-V", "--version", action=_PrintVersion)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    global_options = _global_options(defaults=False)

    def command(name: str, help: str, **kwargs: Any) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, parents=[global_options], help=help, description=DESCRIPTIONS[name],
                                  **kwargs)
        sub.set_defaults(command_parser=sub)
        return sub

    def json_option(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--json", action="store_true", help=JSON_HELP)

    lock = command("lock", help="resolve [tool.kernels] and write kernelpin.lock")
    lock.add_argument("--check", action="store_true", help="exit 1 if the lock is stale; write nothing")
    upgrade = lock.add_mutually_exclusive_group()
    upgrade.add_argument("--upgrade", action="store_true", help="re-resolve every kernel to its newest satisfying version")
    upgrade.add_argument("--upgrade-package", action="append", metavar="REPO", help="re-resolve only REPO (repeatable)")
    lock.add_argument("--dry-run", action="store_true", help="show what would change; write nothing")
    json_option(lock)
    lock.set_defaults(run=cmd_lock)

    sync_parser = command("sync", help="download and verify the locked variant for this environment",
                          epilog=LOCK_MODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = sync_parser.add_mutually_exclusive_group()
    mode.add_argument("--locked", action="store_true", help="fail if the lock is stale instead of updating it (as uv, cargo)")
    mode.add_argument("--frozen", action="store_true",
                      help="use the lock as it is, resolving nothing; may still download (cargo's --frozen implies --offline)")
    sync_parser.add_argument("--all-variants", action="store_true", help="every locked variant, not only this environment's")
    sync_parser.add_argument("--target", metavar="DIR", help="vendor into DIR (DIR/<org>/<name>/<commit>/build/<variant>)")
    environment.add_arguments(sync_parser)
    sync_parser.add_argument("--dry-run", action="store_true",
                             help="show which variant of each kernel would be installed and what is missing; "
                                  "download and write nothing")
    json_option(sync_parser)
    sync_parser.set_defaults(run=cmd_sync)

    add = command("add", help="add kernels to pyproject.toml and re-lock")
    add.add_argument("specs", nargs="+", metavar="REPO[@RANGE]",
                     help="ORG/NAME, optionally with a version range: acme/img2gray, acme/img2gray@^0.1")
    add.add_argument("--dry-run", action="store_true", help="show what the lock would become; write nothing")
    json_option(add)
    add.set_defaults(run=cmd_add)

    remove = command("remove", help="remove kernels from pyproject.toml and re-lock")
    remove.add_argument("repos", nargs="+", metavar="REPO", help=REPO_HELP)
    json_option(remove)
    remove.set_defaults(run=cmd_remove)

    outdated = command("outdated", help="locked vs newest satisfying vs newest version")
    json_option(outdated)
    outdated.set_defaults(run=cmd_outdated)

    versions = command("versions", help="list a kernel's versions and which satisfy the requirement")
    versions.add_argument("repo", metavar="REPO", help=REPO_HELP)
    json_option(versions)
    versions.set_defaults(run=cmd_versions)

    verify = command("verify", help="re-hash installed kernel files against the lock")
    verify.add_argument("--target", metavar="DIR", help="check a `sync --target` directory instead of the Hub cache")
    json_option(verify)
    verify.set_defaults(run=cmd_verify)

    publish = command("publish", help="upload a release layout (build/<variant>/), tag it v<version>, "
                                      "move branch v<major> to it")
    publish.add_argument("directory", metavar="DIR",
                         help="the release layout: DIR/build/<variant>/ with each variant's metadata.json")
    publish.add_argument("--repo", required=True, metavar="ORG/NAME", help="the Hub repository")
    publish.add_argument("--version", help="fail unless the release is this version")
    publish.add_argument("--repo-type", choices=["kernel", "model"],
                         help="default: the existing repository's type, else a new kernel repository")
    publish.add_argument("--dry-run", action="store_true", help="check and list the files; upload nothing")
    json_option(publish)
    publish.set_defaults(run=cmd_publish)

    cache = command("cache", help="show the cached kernels; prune revisions the lock does not use")
    cache.add_argument("action", nargs="?", choices=["show", "prune"], default="show",
                       help="show (default): what is cached; prune: remove revisions the lock does not use")
    cache.add_argument("--yes", action="store_true", help="with prune: delete (without it prune only lists)")
    json_option(cache)
    cache.set_defaults(run=cmd_cache)

    help_parser = command("help", help="describe kernelpin or a command")
    help_parser.add_argument("topic", nargs="?", metavar="COMMAND", help="the command to describe")
    help_parser.set_defaults(run=lambda ctx: _print_help(parser, commands.choices, ctx.args.topic))
    return parser


def _print_help(parser: argparse.ArgumentParser, subparsers: dict[str, argparse.ArgumentParser], topic: str | None) -> int:
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
        return ctx.fail(f"{where}{error.strerror or error}; check that path's permissions and free space "
                        "(the Hub cache is HF_HUB_CACHE or HF_HOME/hub)")
    except KeyboardInterrupt:
        ctx.err.print("interrupted; files already verified are kept, re-run to finish")
        return 130


if __name__ == "__main__":
    sys.exit(main())
