"""`kernelpin cache`: the kernel repositories in the Hub cache (HF_HUB_CACHE), their revisions and sizes, which
revisions the project's lock uses, and pruning the ones it does not."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kernelpin import lockfile
from kernelpin.errors import KernelpinError
from kernelpin.project import Project


@dataclass(frozen=True)
class CachedRevision:
    repo: str
    repo_type: str
    commit: str
    size: int  # bytes on disk
    refs: list[str]
    locked: bool  # the revision the project's lock pins


@dataclass(frozen=True)
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
    from huggingface_hub import scan_cache_dir

    if prune and project is None:
        raise KernelpinError("pruning needs a project: its kernelpin.lock names the revisions to keep")
    locked = lockfile.Lock()
    if project is not None:
        try:
            locked = lockfile.read(project.lockfile) or lockfile.Lock()
        except KernelpinError:
            if prune:
                raise  # pruning against a lock that cannot be read would remove what it names
    in_lock = {(k.repo_type, k.repo_id): k.commit for k in locked.kernels}
    info = scan_cache_dir(cache_dir) if cache_dir.is_dir() else None
    rows = []
    for repo in sorted(info.repos if info else (), key=lambda r: (r.repo_type, r.repo_id)):
        if repo.repo_type != "kernel" and (repo.repo_type, repo.repo_id) not in in_lock:
            continue
        for revision in sorted(repo.revisions, key=lambda r: r.commit_hash):
            rows.append(CachedRevision(repo.repo_id, repo.repo_type, revision.commit_hash, revision.size_on_disk,
                                       sorted(revision.refs),
                                       in_lock.get((repo.repo_type, repo.repo_id)) == revision.commit_hash))
    report = CacheReport(cache_dir, rows, deleted=False)
    if prune and delete and report.unused and info is not None:
        info.delete_revisions(*(row.commit for row in report.unused)).execute()
        report = CacheReport(cache_dir, rows, deleted=True)
    return report
