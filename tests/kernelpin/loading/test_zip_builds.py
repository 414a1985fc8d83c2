"""kernel-builder's ZIP builds (`"build-layout": "zip"`, `<id>.zip` beside metadata.json), which kernels 0.19 loads:
published to the test Hub, locked, synced and loaded by kernelpin (and by the installed kernels where it reads
them), the archive hash-checked as one file and its members confined. Failed before: kernelpin refused every ZIP
build ("the lock lists no __init__.py")."""

from __future__ import annotations

import json
import sys

import pytest

import kernelpin
from kernelpin.errors import IntegrityError, KernelpinError
from kernelpin.loading import kernels_internals
from kernelpin.loading.archive import ArchiveError, read_members
from kernelpin.store import lockfiles
from testkit.fake_kernel import CPU_213, kernel_files, write_variant, zip_archive
from testkit.releasing import hub_env, run
from tests.kernelpin.helpers import TRUSTED_ORG, snapshot_dir

EXTRA = {"sub/__init__.py": b"NAME = 'sub'\n", "sub/deep.py": b"from .. import _impl\nVARIANT = _impl.VARIANT\n"}
RELEASE = kernel_files("1.0.0", variants=(CPU_213,), extra=EXTRA, layout="zip")
ARCHIVE = f"{json.loads(RELEASE[f'build/{CPU_213}/metadata.json'])['id']}.zip"  # <metadata id>.zip


@pytest.fixture
def zip_release(new_repo) -> tuple[str, str]:
    repo_id, repo = new_repo("zipped", "kernel", TRUSTED_ORG)
    repo.write(RELEASE, clear=True)
    commit = repo.commit("release 1.0.0")
    repo.tag("v1.0.0")
    repo.branch("v1")
    return repo_id, commit


@pytest.fixture
def forget_modules():
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        del sys.modules[name]


def test_a_zip_build_is_locked_synced_and_loaded(zip_release, hub, project, cli, hf_env, tmp_path, forget_modules):
    repo_id, _commit = zip_release
    root = project(f'"{repo_id}" = 1\n')
    assert cli("lock")[0] == 0 and cli("sync", "--torch", "2.13")[0] == 0
    (kernel,) = lockfiles.read(root / "kernelpin.lock").kernels
    assert sorted(f.path for f in kernel.variant(CPU_213).files) == [ARCHIVE, "metadata.json"]
    module = kernelpin.load(repo_id, lock=root)
    assert (module.VERSION, module.VARIANT) == ("1.0.0", CPU_213)
    assert module.__file__.endswith(f"build/{CPU_213}/{ARCHIVE}/__init__.py")
    deep = __import__(f"{module.__name__}.sub.deep", fromlist=["VARIANT"])
    assert deep.VARIANT == CPU_213 and sys.modules[f"{module.__name__}.sub"].NAME == "sub"
    # The installed kernels, where it reads ZIP builds (0.19 on), loads the same build from the same Hub.
    if kernels_internals._release(kernels_internals.installed_version("the test")) >= (0, 19):
        env = hub_env(hub.endpoint, tmp_path / "kernels-home")
        code = f"import kernels; m = kernels.get_kernel({repo_id!r}, version=1); print(m.VARIANT, m.VERSION)"
        assert run([sys.executable, "-c", code], env=env).stdout.split()[-2:] == [CPU_213, "1.0.0"]


def test_a_changed_archive_is_not_imported(zip_release, project, cli, hf_env, forget_modules):
    repo_id, commit = zip_release
    root = project(f'"{repo_id}" = 1\n')
    assert cli("lock")[0] == 0 and cli("sync", "--torch", "2.13")[0] == 0
    archive = snapshot_dir(hf_env, repo_id, commit, "kernel") / "build" / CPU_213 / ARCHIVE
    planted = zip_archive({"__init__.py": b"VERSION = 'planted'\n"})
    archive.resolve().write_bytes(planted)
    with pytest.raises(IntegrityError, match=f"{ARCHIVE}: size [0-9]+ != [0-9]+ pinned in the lock"):
        kernelpin.load(repo_id, lock=root)


@pytest.mark.parametrize(
    ("members", "links", "problem"),
    [
        ({"../evil.py": b""}, {}, "contains '..'"),
        ({"/abs.py": b""}, {}, "is absolute"),
        ({"a\\b.py": b""}, {}, "backslash"),
        ({"__init__.py": b""}, {"link.py": "/etc/passwd"}, "symbolic link"),
    ],
)
def test_unsafe_members_are_refused(members, links, problem):
    with pytest.raises(KernelpinError, match=problem):
        read_members(zip_archive(members, links), "k: x.zip")


def test_a_member_twice_and_a_damaged_archive_are_refused():
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("__init__.py", b"A = 1\n")
        with pytest.warns(UserWarning, match="Duplicate name"):
            archive.writestr("__init__.py", b"A = 2\n")
    with pytest.raises(ArchiveError, match="appears twice"):
        read_members(buffer.getvalue(), "k: x.zip")
    with pytest.raises(ArchiveError, match="not a readable ZIP archive"):
        read_members(b"PK\x03\x04 not really", "k: x.zip")


def test_local_kernels_loads_a_zip_build_directory(tmp_path, monkeypatch, forget_modules, hf_env):
    from kernelpin.loading.local_override import LocalKernelOverrideWarning

    write_variant(tmp_path / "local" / "build" / CPU_213, "7.0.0", CPU_213, extra=EXTRA, layout="zip")
    monkeypatch.setenv("LOCAL_KERNELS", f"acme/zipped-local={tmp_path / 'local'}")
    monkeypatch.setenv("KERNELPIN_TORCH", "2.13")
    with pytest.warns(LocalKernelOverrideWarning):
        module = kernelpin.get_kernel("acme/zipped-local", version=7)
    assert (module.VERSION, module.VARIANT) == ("7.0.0", CPU_213)
