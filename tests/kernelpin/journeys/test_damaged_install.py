"""Issue 28 (7): a directory where the lock lists a file is repaired by `sync` (removed, the file downloaded in
its place) and refused by `load` with an error that says so, in the Hub cache and in a `--target` directory."""

from __future__ import annotations

import sys

import pytest

import kernelpin
from kernelpin.errors import IntegrityError
from kernelpin.format import lockfile
from kernelpin.loading.runtime import module_name
from kernelpin.store import lockfiles
from testkit.fake_kernel import CPU_213
from tests.kernelpin.helpers import snapshot_dir


def fresh_load(kernel: lockfile.LockedKernel, **kwargs):
    name = module_name(kernel.repo_id, kernel.commit, CPU_213)
    for loaded in [key for key in sys.modules if key == name or key.startswith(name + ".")]:
        del sys.modules[loaded]
    return kernelpin.load(kernel.repo_id, **kwargs)


@pytest.mark.parametrize("vendored", [False, True])
def test_a_directory_where_a_file_belongs_is_repaired_by_sync_and_refused_by_load(
    img2gray, project, cli, hf_env, tmp_path, vendored
):
    # Failed before: every sync failed ("check that path's permissions and free space"), load raised a raw
    # IsADirectoryError.
    root = project('"acme/img2gray" = "^0.1"\n')
    where = ("--target", str(tmp_path / "vendor")) if vendored else ()
    assert cli("sync", "--torch", "2.13", *where)[0] == 0
    (kernel,) = lockfiles.read(root / "kernelpin.lock").kernels
    base = (
        tmp_path / "vendor" / kernel.repo_id / kernel.commit
        if vendored
        else snapshot_dir(hf_env, kernel.repo_id, kernel.commit)
    )
    impl = base / "build" / CPU_213 / "_impl.py"
    impl.unlink()
    (impl / "inside").mkdir(parents=True)
    (impl / "inside" / "x.py").write_text("planted\n")
    target = {"target": tmp_path / "vendor"} if vendored else {}
    with pytest.raises(IntegrityError, match=f"build/{CPU_213}/_impl.py is a directory .*run `kernelpin sync`"):
        fresh_load(kernel, **target)
    status, out, err = cli("sync", "--torch", "2.13", *where)
    assert status == 0 and "1 replaced" in out, out + err
    assert impl.is_file() and cli("verify", *where)[0] == 0
    assert fresh_load(kernel, **target).VARIANT == CPU_213
