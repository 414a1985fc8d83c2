"""Issue 30, point 7: Windows and macOS consumers whose cache takes no symbolic links (Windows without developer
mode, FAT/exFAT drives, some network mounts), forced here two ways: huggingface_hub's own switch
HF_HUB_DISABLE_SYMLINKS=1, and a file system that refuses links (os.symlink fails with EPERM, as vfat answers;
Windows' WinError 1314 reads as EINVAL). Snapshots then hold the files themselves, as huggingface_hub keeps them,
and sync, verify, load and the real `kernels` (offline) all work from them."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

import pytest

import kernelpin
from kernelpin.loading.runtime import module_name
from testkit.fake_kernel import CPU_213, publish
from tests.kernelpin.format.test_kernels_compat import kernels_env, kernels_load
from tests.kernelpin.helpers import TRUSTED_ORG, snapshot_dir


@pytest.fixture(params=["HF_HUB_DISABLE_SYMLINKS", "refused"])
def no_links(request, monkeypatch) -> str:
    if request.param == "refused":

        def refuse(*args, **kwargs):
            raise OSError(errno.EPERM, "Operation not permitted (this file system takes no links)")

        monkeypatch.setattr(os, "symlink", refuse)
    else:
        monkeypatch.setenv("HF_HUB_DISABLE_SYMLINKS", "1")
    return request.param


def fresh_load(repo_id: str, commit: str):
    name = module_name(repo_id, commit, CPU_213)
    for loaded in [key for key in sys.modules if key == name or key.startswith(name + ".")]:
        del sys.modules[loaded]
    return kernelpin.load(repo_id)


def links_below(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_symlink()]


def test_sync_load_and_kernels_work_without_symbolic_links(hub, new_repo, project, cli, hf_env, tmp_path, no_links):
    # Failed before: sync died on os.symlink (refused), and with HF_HUB_DISABLE_SYMLINKS=1 made links anyway.
    repo_id, repo = new_repo("no-links", "kernel", TRUSTED_ORG)
    commit = publish(repo, "1.0.0", variants=(CPU_213,), extra={"_lib.so": os.urandom(50_000)})
    repo.branch("v1")
    root = project(f'"{repo_id}" = 1\n')
    (root / "kernels.lock").write_text("[]")  # kept in step by kernelpin lock
    assert cli("lock")[0] == 0
    status, _, err = cli("sync", "--torch", "2.13")
    assert status == 0, err
    snapshot = snapshot_dir(hf_env, repo_id, commit, "kernel") / "build" / CPU_213
    assert links_below(hf_env) == []
    assert sorted(path.name for path in snapshot.iterdir()) == ["__init__.py", "_impl.py", "_lib.so", "metadata.json"]
    assert cli("verify")[0] == 0
    assert fresh_load(repo_id, commit).VERSION == "1.0.0"
    # A modified copy is found and replaced, as a modified blob is.
    (snapshot / "_lib.so").write_bytes(b"changed")
    status, _, err = cli("sync", "--torch", "2.13")
    assert status == 0 and "_lib.so did not match the lock; replaced" in err, err
    assert cli("verify")[0] == 0 and links_below(hf_env) == []
    offline = {
        **kernels_env(hub.endpoint, tmp_path / "kernels-home"),
        "HF_HUB_CACHE": str(hf_env),
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_DISABLE_SYMLINKS": "1",
    }
    loaded = kernels_load(
        {"locked": f"load_kernel({repo_id!r}, lockfile=Path({str(root / 'kernels.lock')!r}))"}, offline
    )
    assert loaded["locked"]["version"] == "1.0.0" and commit in loaded["locked"]["file"]


def test_a_cache_that_once_took_links_is_repaired_into_copies(hub, new_repo, project, cli, hf_env, monkeypatch):
    # A cache moved onto a drive without links (or a switch to HF_HUB_DISABLE_SYMLINKS=1): broken links are
    # missing files, downloaded again as copies.
    repo_id, repo = new_repo("moved", "kernel")
    commit = publish(repo, "1.0.0", variants=(CPU_213,))
    project(f'"{repo_id}" = "^1"\n')
    assert cli("lock")[0] == 0 and cli("sync", "--torch", "2.13")[0] == 0
    assert links_below(hf_env)
    for blob in (hf_env / f"kernels--{repo_id.replace('/', '--')}" / "blobs").iterdir():
        blob.unlink()
    monkeypatch.setenv("HF_HUB_DISABLE_SYMLINKS", "1")
    status, _, err = cli("sync", "--torch", "2.13")
    assert status == 0, err
    assert links_below(snapshot_dir(hf_env, repo_id, commit, "kernel")) == []
    assert cli("verify")[0] == 0 and fresh_load(repo_id, commit).VERSION == "1.0.0"
