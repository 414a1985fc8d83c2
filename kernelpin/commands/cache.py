"""`kernelpin cache`: the kernel repositories in the Hub cache (HF_HUB_CACHE), their revisions and sizes, which
revisions the project's lock uses, and pruning the ones it does not.

Read and pruned without following a link anywhere: huggingface_hub's scan_cache_dir and delete_revisions
resolve the snapshot entries (links to blobs/) and delete what they resolve to, wherever that is, so an entry
that someone with write access to a shared cache pointed at another user's file took that file with it. Here
a snapshot entry is read as what it says (`readlink`), counted only when it names a blob of its own
repository, and removing a revision removes its snapshot directory, the refs naming it and the blobs no
remaining revision names, through kernelpin.files.confined: by name inside directories opened without following
links.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from kernelpin.errors import KernelpinError
from kernelpin.files import confined
from kernelpin.files.integrity import GIT_OBJECT_ID_RE
from kernelpin.format import lockfile
from kernelpin.format.spec import REPO_TYPES
from kernelpin.project import Project
from kernelpin.records import record
from kernelpin.store import lockfiles


@record
class CachedRevision:
    repo: str
    repo_type: str
    commit: str
    size: int  # bytes on disk
    refs: list[str]
    locked: bool  # the revision the project's lock pins


@record
class CacheReport:
    cache_dir: Path
    revisions: list[CachedRevision]
    deleted: bool

    @property
    def unused(self) -> list[CachedRevision]:
        return [row for row in self.revisions if not row.locked]


def cache(cache_dir: Path, project: Project | None, prune: bool = False, delete: bool = False) -> CacheReport:
    """The revisions of kernel repositories in `cache_dir` (and of model repositories the project's lock names:
    other model repositories are someone else's weights), each marked with whether the lock uses it. With
    `prune` and `delete`, the unused revisions are deleted. Outside a project (None) nothing is marked used."""
    if prune and project is None:
        raise KernelpinError("pruning needs a project: its kernelpin.lock names the revisions to keep")
    locked = lockfile.Lock()
    if project is not None:
        try:
            locked = lockfiles.read(project.lockfile) or lockfile.Lock()
        except KernelpinError:
            if prune:
                raise  # pruning against a lock that cannot be read would remove what it names
    in_lock = {(k.repo_type, k.repo_id): k.commit for k in locked.kernels}
    snapshots = [
        snapshot
        for snapshot in scan(cache_dir)
        if snapshot.repo_type == "kernel" or (snapshot.repo_type, snapshot.repo_id) in in_lock
    ]
    rows = [
        CachedRevision(
            snapshot.repo_id,
            snapshot.repo_type,
            snapshot.commit,
            snapshot.size,
            list(snapshot.refs),
            in_lock.get((snapshot.repo_type, snapshot.repo_id)) == snapshot.commit,
        )
        for snapshot in snapshots
    ]
    report = CacheReport(cache_dir, rows, deleted=False)
    if prune and delete and report.unused:
        remove(cache_dir, [snapshot for snapshot, row in zip(snapshots, rows, strict=False) if not row.locked])
        report = CacheReport(cache_dir, rows, deleted=True)
    return report


@record
class Snapshot:
    """One revision of a repository in the cache, as its snapshot directory and links say."""

    repo_id: str
    repo_type: str
    commit: str
    size: int  # bytes of the blobs its entries name (each counted once)
    refs: tuple[str, ...]  # the names under refs/ that point at it
    blobs: frozenset[str]


def _entries(directory: Path) -> Iterator[os.DirEntry[str]]:
    """The entries of a real directory (none for a link or a missing one)."""
    if directory.is_symlink() or not directory.is_dir():
        return iter(())
    return iter(sorted(os.scandir(directory), key=lambda entry: entry.name))


def _blob_names(folder: Path, snapshot: Path) -> set[str]:
    """The blobs of `folder` that the links below `snapshot` name, read without following any link."""
    names, todo = set(), [snapshot]
    while todo:
        for entry in _entries(todo.pop()):
            if entry.is_symlink():
                named = os.path.normpath(os.path.join(os.path.dirname(entry.path), os.readlink(entry.path)))
                if os.path.dirname(named) == os.path.normpath(folder / "blobs"):
                    names.add(os.path.basename(named))
            elif entry.is_dir(follow_symlinks=False):
                todo.append(Path(entry.path))
    return names


def _blob_size(folder: Path, name: str) -> int:
    blobs = folder / "blobs"
    if blobs.is_symlink():
        return 0
    try:
        found = os.stat(blobs / name, follow_symlinks=False)
    except OSError:
        return 0
    return found.st_size if stat.S_ISREG(found.st_mode) else 0


def _refs(folder: Path) -> dict[str, str]:
    """refs/<name> -> the commit it records (plain files only, nested names as `a/b`)."""
    found, todo = {}, [(folder / "refs", "")]
    while todo:
        directory, prefix = todo.pop()
        for entry in _entries(directory):
            if entry.is_symlink():
                continue
            if entry.is_dir():
                todo.append((Path(entry.path), f"{prefix}{entry.name}/"))
            elif entry.is_file():
                with open(entry.path, "rb") as ref:
                    found[prefix + entry.name] = ref.read(64).decode("ascii", errors="replace").strip()
    return found


def repo_folder_name(repo_id: str, repo_type: str) -> str:
    return f"{repo_type}s--{repo_id.replace('/', '--')}"


def scan(cache_dir: Path) -> list[Snapshot]:
    """Every revision (snapshots/<40 hex>) of every kernel or model repository in the cache."""
    revisions = []
    top = sorted(os.scandir(cache_dir), key=lambda entry: entry.name) if cache_dir.is_dir() else []  # may be a link
    for entry in top:
        kind, _, rest = entry.name.partition("s--")
        if kind not in REPO_TYPES or "--" not in rest or entry.is_symlink() or not entry.is_dir():
            continue
        folder = Path(entry.path)
        refs = _refs(folder)
        for snapshot in _entries(folder / "snapshots"):
            if not GIT_OBJECT_ID_RE.match(snapshot.name) or snapshot.is_symlink() or not snapshot.is_dir():
                continue
            blobs = frozenset(_blob_names(folder, Path(snapshot.path)))
            revisions.append(
                Snapshot(
                    rest.replace("--", "/", 1),
                    kind,
                    snapshot.name,
                    sum(_blob_size(folder, name) for name in blobs),
                    tuple(sorted(name for name, commit in refs.items() if commit == snapshot.name)),
                    blobs,
                )
            )
    return sorted(revisions, key=lambda r: (r.repo_type, r.repo_id, r.commit))


def remove(cache_dir: Path, revisions: Iterable[Snapshot]) -> None:
    """Remove `revisions` (from `scan`): their snapshots, the refs naming them, the blobs no other revision of
    the repository names; a repository left without revisions goes whole."""
    doomed: dict[tuple[str, str], set[str]] = {}
    for revision in revisions:
        doomed.setdefault((revision.repo_type, revision.repo_id), set()).add(revision.commit)
    kept = scan(cache_dir)
    for (repo_type, repo_id), commits in doomed.items():
        folder = cache_dir / repo_folder_name(repo_id, repo_type)
        what = f"pruning {repo_id}"
        others = [r for r in kept if (r.repo_type, r.repo_id) == (repo_type, repo_id) and r.commit not in commits]
        if not others:
            confined.remove(cache_dir, folder, what)
            continue
        still_named = set().union(*(r.blobs for r in others))
        for revision in (r for r in kept if (r.repo_type, r.repo_id) == (repo_type, repo_id) and r.commit in commits):
            confined.remove(cache_dir, folder / "snapshots" / revision.commit, what)
            for ref in revision.refs:
                confined.remove(cache_dir, folder / "refs" / ref, what)
            for blob in revision.blobs - still_named:
                confined.remove(cache_dir, folder / "blobs" / blob, what)
