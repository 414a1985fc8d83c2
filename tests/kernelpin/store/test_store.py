"""kernelpin.store.content writes only into directories of its own: a directory on the way that is a symbolic link
(planted by a local attacker, or left by a confused user) is refused, never written or repaired through."""

from __future__ import annotations

import shutil

from kernelpin.store import lockfiles
from testkit.fake_kernel import CPU_213
from tests.kernelpin.helpers import snapshot_dir


def test_a_variant_directory_that_is_a_link_is_neither_repaired_nor_filled_through(
    img2gray, project, cli, hf_env, tmp_path
):
    root = project('"acme/img2gray" = "^0.1"\n')
    assert cli("sync", "--torch", "2.13")[0] == 0
    (kernel,) = lockfiles.read(root / "kernelpin.lock").kernels
    variant = snapshot_dir(hf_env, kernel.repo_id, kernel.commit) / "build" / CPU_213
    users = tmp_path / "users-files"
    users.mkdir()
    (users / "_impl.py").write_text("the user's own file\n")  # same name as a locked file, other content
    shutil.rmtree(variant)
    variant.symlink_to(users)
    status, _, err = cli("sync", "--torch", "2.13")
    assert status == 1 and f"{variant} is a symbolic link" in err and "Traceback" not in err
    assert sorted(p.name for p in users.iterdir()) == ["_impl.py"]
    assert (users / "_impl.py").read_text() == "the user's own file\n"


def test_a_link_inside_a_vendoring_target_is_not_written_through(img2gray, project, cli, tmp_path):
    project('"acme/img2gray" = "^0.1"\n')
    vendor, elsewhere = tmp_path / "vendor", tmp_path / "elsewhere"
    vendor.mkdir()
    elsewhere.mkdir()
    (vendor / "acme").symlink_to(elsewhere)
    status, _, err = cli("sync", "--torch", "2.13", "--target", str(vendor))
    assert status == 1 and f"{vendor / 'acme'} is a symbolic link" in err
    assert list(elsewhere.iterdir()) == []
