"""Issue 28 (1, 2, 13): a shared Hub cache is not a weapon. Whoever else can write the cache can swap any
directory in it for a symbolic link; `sync`'s repairs, `cache prune` and the writers' file locks must then
remove and create nothing outside the cache (kernelpin.files.confined), and say what they refused."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from kernelpin.commands import cache as hub_cache
from kernelpin.files import confined
from kernelpin.files.confined import LinkRefused
from kernelpin.files.integrity import GIT_OBJECT_ID_RE
from kernelpin.format import lockfile
from kernelpin.format.layout import LOCKS_DIR
from kernelpin.store import lockfiles
from testkit.fake_kernel import CPU_213
from tests.kernelpin.helpers import snapshot_dir


def victim(tmp_path: Path) -> tuple[Path, dict[Path, bytes]]:
    """Another user's directory, with a file named like a kernel's; and its contents, to compare after."""
    home = tmp_path / "victim"
    home.mkdir()
    (home / "_impl.py").write_bytes(b"# the victim's own file\n")
    (home / "thesis.tex").write_bytes(b"years of work\n")
    return home, contents(home)


def contents(directory: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in sorted(directory.rglob("*")) if path.is_file()}


def synced(project, cli, hf_env) -> tuple[lockfile.LockedKernel, Path]:
    root = project('"acme/img2gray" = "^0.1"\n')
    assert cli("sync", "--torch", "2.13")[0] == 0
    (kernel,) = lockfiles.read(root / "kernelpin.lock").kernels
    return kernel, hf_env / f"models--{kernel.repo_id.replace('/', '--')}"


def test_repairing_a_modified_entry_never_deletes_through_a_linked_blobs_directory(
    img2gray, project, cli, hf_env, tmp_path
):
    # Failed before: the repair deleted victim/_impl.py, the entry's target, because it lay in blobs.resolve().
    kernel, folder = synced(project, cli, hf_env)
    home, before = victim(tmp_path)
    entry = snapshot_dir(hf_env, kernel.repo_id, kernel.commit) / "build" / CPU_213 / "_impl.py"
    (folder / "blobs").rename(tmp_path / "moved-blobs")
    (folder / "blobs").symlink_to(home)
    entry.unlink()
    entry.symlink_to(home / "_impl.py")
    status, _, err = cli("sync", "--torch", "2.13")
    assert contents(home) == before
    assert status == 1 and f"{folder / 'blobs'} is a symbolic link (to {home})" in err, err
    assert err.count("\n") == 1 and "Remove it (it is not kernelpin's)" in err
    (folder / "blobs").unlink()  # what the error says to do
    assert cli("sync", "--torch", "2.13")[0] == 0 and cli("verify")[0] == 0
    assert contents(home) == before


def test_a_download_never_writes_through_a_linked_blobs_directory(img2gray, project, cli, hf_env, tmp_path):
    kernel, folder = synced(project, cli, hf_env)
    home, before = victim(tmp_path)
    snapshot = snapshot_dir(hf_env, kernel.repo_id, kernel.commit)
    (snapshot / "build" / CPU_213 / "_impl.py").unlink()
    (folder / "blobs").rename(tmp_path / "moved-blobs")
    (folder / "blobs").symlink_to(home)
    status, _, err = cli("sync", "--torch", "2.13")
    assert status == 1 and "is a symbolic link" in err and contents(home) == before


def test_cache_prune_removes_a_planted_revision_never_what_its_links_point_to(img2gray, project, cli, hf_env, tmp_path):
    # Failed before: huggingface_hub's delete_revisions deleted victim/thesis.tex, the planted entry's target.
    _kernel, folder = synced(project, cli, hf_env)
    home, before = victim(tmp_path)
    planted = folder / "snapshots" / ("f" * 40)
    planted.mkdir()
    (planted / "x").symlink_to(home / "thesis.tex")
    (planted / "y").symlink_to("../../blobs/../../../victim/_impl.py")
    (folder / "refs").mkdir(exist_ok=True)
    (folder / "refs" / "planted").write_text("f" * 40)
    status, out, err = cli("cache", "prune")
    assert status == 0 and "would delete 1 revision (0.0 kB)" in out, out + err  # a link elsewhere is no blob
    status, out, err = cli("cache", "prune", "--yes")
    assert status == 0 and "deleted 1 revision (" in out, err
    assert contents(home) == before
    assert not planted.exists() and not (folder / "refs" / "planted").exists()
    assert cli("verify")[0] == 0


def test_cache_prune_removes_a_revision_and_only_the_blobs_no_other_revision_names(img2gray, project, cli, hf_env):
    project('"acme/img2gray" = { revision = "v0.1.0" }\n')
    assert cli("sync", "--torch", "2.13")[0] == 0
    root = project('"acme/img2gray" = "^0.1"\n')  # 0.1.1: its _impl.py is 0.1.0's
    assert cli("lock", "--upgrade")[0] == 0 and cli("sync", "--torch", "2.13")[0] == 0
    (kernel,) = lockfiles.read(root / "kernelpin.lock").kernels
    folder = hf_env / "models--acme--img2gray"
    revisions = hub_cache.scan(hf_env)
    old = next(r for r in revisions if r.commit != kernel.commit)
    new = next(r for r in revisions if r.commit == kernel.commit)
    assert old.blobs & new.blobs and old.blobs - new.blobs and new.refs == ()
    assert new.size == sum((folder / "blobs" / name).stat().st_size for name in new.blobs)
    hub_cache.remove(hf_env, [old])
    left = {p.name for p in (folder / "blobs").iterdir()}
    # Beside new's blobs only what `lock` kept of metadata.json, named by git blob id (Store.keep_blob).
    assert new.blobs <= left and not left & (old.blobs - new.blobs)
    assert all(GIT_OBJECT_ID_RE.match(name) for name in left - new.blobs)
    assert [r.commit for r in hub_cache.scan(hf_env)] == [kernel.commit] and cli("verify")[0] == 0
    hub_cache.remove(hf_env, hub_cache.scan(hf_env))  # the last revision: the repository goes whole
    assert not folder.exists()


def test_cache_scan_reads_no_link_as_a_repository_revision_or_blob(tmp_path):
    cache_dir = tmp_path / "cache"
    folder = cache_dir / "kernels--acme--k"
    (folder / "snapshots" / ("a" * 40)).mkdir(parents=True)
    (folder / "blobs").symlink_to(tmp_path)  # sizes would be the victim's
    (folder / "snapshots" / ("a" * 40) / "f").symlink_to("../../blobs/victim")
    (tmp_path / "victim").write_bytes(b"x" * 1000)
    (folder / "snapshots" / ("b" * 40)).symlink_to(tmp_path)
    (folder / "snapshots" / "not-a-commit").mkdir()
    (cache_dir / "kernels--acme--linked").symlink_to(folder)
    (cache_dir / "weights--acme--k").mkdir()
    (cache_dir / "kernels--nodashes").mkdir()
    (folder / "refs").mkdir()
    (folder / "refs" / "main").symlink_to(tmp_path / "victim")
    (revision,) = hub_cache.scan(cache_dir)
    assert (revision.repo_id, revision.repo_type, revision.commit) == ("acme/k", "kernel", "a" * 40)
    assert revision.size == 0 and revision.blobs == {"victim"} and revision.refs == ()
    linked_root = tmp_path / "cache-link"
    linked_root.symlink_to(cache_dir)  # HF_HUB_CACHE itself may be a link (to another disk)
    assert [r.commit for r in hub_cache.scan(linked_root)] == ["a" * 40]


def test_the_writers_lock_is_never_created_through_a_linked_locks_directory(img2gray, project, cli, hf_env, tmp_path):
    # Failed before: sync created its lock file in the directory .kernelpin-locks pointed to.
    project('"acme/img2gray" = "^0.1"\n')
    assert cli("lock")[0] == 0
    home, before = victim(tmp_path)
    shutil.rmtree(hf_env / LOCKS_DIR, ignore_errors=True)  # `lock` made it, keeping metadata.json blobs
    hf_env.mkdir(exist_ok=True)
    (hf_env / LOCKS_DIR).symlink_to(home)
    status, _, err = cli("sync", "--torch", "2.13")
    assert status == 1 and f"{hf_env / LOCKS_DIR} is a symbolic link (to {home})" in err, err
    assert contents(home) == before and sorted(home.iterdir()) == sorted(before)
    (hf_env / LOCKS_DIR).unlink()
    (hf_env / LOCKS_DIR).mkdir()
    (hf_env / LOCKS_DIR / "models--acme--img2gray.lock").symlink_to(home / "thesis.tex")
    status, _, err = cli("sync", "--torch", "2.13")
    assert status == 1 and "models--acme--img2gray.lock is a symbolic link" in err, err
    assert contents(home) == before


# --- kernelpin.files.confined directly ------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """A root with a/b/c/file and a/b/c/link -> the victim; and the victim's directory."""
    root, home = tmp_path / "root", tmp_path / "home"
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "a" / "b" / "c" / "file").write_text("mine")
    home.mkdir()
    (home / "file").write_text("theirs")
    (root / "a" / "b" / "c" / "link").symlink_to(home / "file")
    return root, home


def test_remove_takes_a_link_never_its_target_and_trees_without_following(tree):
    root, home = tree
    (root / "a" / "b" / "c" / "dirlink").symlink_to(home)
    confined.remove(root, root / "a" / "b" / "c" / "link", "test")
    assert not (root / "a" / "b" / "c" / "link").is_symlink() and (home / "file").read_text() == "theirs"
    confined.remove(root, root / "a", "test")
    assert os.listdir(root) == [] and (home / "file").read_text() == "theirs"
    confined.remove(root, root / "a" / "gone", "test")  # missing: nothing to do
    confined.remove(root, root / "gone", "test")


@pytest.mark.parametrize("level", ["a", "a/b", "a/b/c"])
def test_a_link_at_any_level_is_refused_for_removal_and_creation(tree, level):
    root, home = tree
    (home / "c").mkdir()
    (home / "c" / "file").write_text("theirs too")
    (home / "b" / "c").mkdir(parents=True)
    (home / "b" / "c" / "file").write_text("theirs three")
    (home / "a" / "b" / "c").mkdir(parents=True)
    (home / "a" / "b" / "c" / "file").write_text("theirs four")
    linked = root / level
    os.rename(linked, root.parent / "moved")
    linked.symlink_to(home / Path(level).name)  # to a directory holding the same names
    before = contents(home)
    with pytest.raises(LinkRefused, match=f"test: {linked} is a symbolic link"):
        confined.remove(root, root / "a" / "b" / "c" / "file", "test")
    with pytest.raises(LinkRefused), confined.directory(root, root / "a" / "b" / "c" / "new", "test", create=True):
        pass
    assert contents(home) == before


def test_a_file_where_a_directory_belongs_is_refused(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "a").write_text("a file")
    with pytest.raises(LinkRefused, match="is not a directory"):
        confined.remove(root, root / "a" / "b", "test")
    with pytest.raises(FileNotFoundError), confined.directory(root, root / "missing", "test"):
        pass


def test_new_files_are_readable_by_others_whatever_the_umask(tmp_path):
    old = os.umask(0o077)
    try:
        with confined.directory(tmp_path, tmp_path / "made" / "here", "test", create=True) as fd:
            created, name = confined.new_file(fd, tmp_path / "made" / "here", ".x.", ".part")
            os.close(created)
    finally:
        os.umask(old)
    made = tmp_path / "made" / "here" / name
    assert name.startswith(".x.") and name.endswith(".part") and made.stat().st_mode & 0o777 == 0o644
