"""LOCAL_KERNELS: a build on disk in place of the Hub, as `kernels` reads the variable; visible (a warning names
the override), verified against the build's own metadata.json, and refused where a lock decides what runs unless
allowed explicitly. Every test failed before: kernelpin ignored LOCAL_KERNELS (get_kernel did not exist, and
load() silently loaded the locked build)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import kernelpin
from kernelpin.errors import IntegrityError, KernelpinError, NoVariantError
from kernelpin.loading.local_kernels import parse
from kernelpin.loading.local_override import LocalKernelOverrideWarning
from testkit.fake_kernel import CPU_213, write_variant
from testkit.releasing import hub_env, run

REPO = "acme/local-build"
CUDA = "torch213-cxx11-cu130-x86_64-linux"


@pytest.fixture
def local_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A kernel author's checkout with build/<variant>/ for this machine and a CUDA one, named by LOCAL_KERNELS."""
    root = tmp_path / "checkout"
    write_variant(root / "build" / CPU_213, "9.9.9", CPU_213)
    write_variant(root / "build" / CUDA, "9.9.9", CUDA)
    monkeypatch.setenv("LOCAL_KERNELS", f"acme/elsewhere=/nonexistent:{REPO}={root}")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the Hub is never asked
    monkeypatch.setenv("KERNELPIN_STATE_DIR", str(tmp_path / "state"))
    yield root
    for name in [name for name in sys.modules if name.startswith("_kernelpin_local_")]:
        del sys.modules[name]


def test_get_kernel_loads_the_build_on_disk_and_warns_naming_it(local_build):
    with pytest.warns(
        LocalKernelOverrideWarning,
        match=rf"LOCAL_KERNELS overrides {REPO}: loading the local build "
        rf"{local_build / 'build' / CPU_213} instead of the Hub",
    ):
        module = kernelpin.get_kernel(REPO, version=9)
    assert (module.VERSION, module.VARIANT) == ("9.9.9", CPU_213)
    assert module.__file__ == str(local_build / "build" / CPU_213 / "__init__.py")
    with pytest.warns(
        LocalKernelOverrideWarning, match=f"LOCAL_KERNELS overrides {REPO}: answering from the local build"
    ):
        assert kernelpin.has_kernel(REPO, version=9)


def test_kernels_loads_the_same_directory_from_the_same_variable(local_build, tmp_path):
    env = hub_env(
        "http://127.0.0.1:9",
        tmp_path / "kernels-home",
        LOCAL_KERNELS=f"{REPO}={local_build}",
        HF_HUB_OFFLINE="1",
        HF_HUB_DISABLE_TELEMETRY="0",
    )
    code = f"import kernels; m = kernels.get_kernel({REPO!r}, version=9); print(m.VARIANT)"
    assert run([sys.executable, "-c", code], env=env).stdout.strip() == CPU_213


def test_a_local_file_that_differs_from_its_metadata_is_refused(local_build):
    (local_build / "build" / CPU_213 / "_impl.py").write_text("VARIANT = 'edited after the build'\n")
    with (
        pytest.raises(
            IntegrityError,
            match=r"_impl.py has sha256 .* the build changed after its metadata was "
            "written: rebuild it",
        ),
        pytest.warns(LocalKernelOverrideWarning),
    ):
        kernelpin.get_kernel(REPO, version=9)


def test_a_local_build_without_a_fitting_variant_says_so(local_build):
    (local_build / "build" / CPU_213 / "metadata.json").unlink()
    for path in (local_build / "build" / CPU_213).iterdir():
        path.unlink()
    (local_build / "build" / CPU_213).rmdir()
    with pytest.raises(NoVariantError, match=rf"LOCAL_KERNELS {REPO}=.*no build variant fits .*\n  {CUDA}: "):
        kernelpin.get_kernel(REPO, version=9)
    assert kernelpin.has_kernel(REPO, version=9) is False


def test_load_from_a_lock_refuses_the_override_unless_allowed(local_build, tmp_path, monkeypatch):
    from kernelpin.store import lockfiles
    from tests.kernelpin.loading.test_loader import vendor

    lock, target, _ = vendor(tmp_path / "app", repo_id=REPO)
    with pytest.raises(
        KernelpinError,
        match=rf"LOCAL_KERNELS overrides {REPO} with {local_build}, but this load "
        rf"follows {lock}.* KERNELPIN_ALLOW_LOCAL_KERNELS=1",
    ):
        kernelpin.load(REPO, lock=lock, target=target)
    monkeypatch.setenv("KERNELPIN_ALLOW_LOCAL_KERNELS", "1")
    with pytest.warns(LocalKernelOverrideWarning):
        assert kernelpin.load(REPO, lock=lock, target=target).VERSION == "9.9.9"
    monkeypatch.delenv("LOCAL_KERNELS")
    assert kernelpin.load(REPO, lock=lock, target=target).VERSION == "1.0.0"
    assert lockfiles.read(lock) is not None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("acme/a", "entry 'acme/a' is not REPO=PATH"),
        ("acme/a=", "entry 'acme/a=' is not REPO=PATH"),
        ("../x=/p", "is not a Hub repository id"),
        # pathlib's RuntimeError before (found by the property test of untrusted parsers): a user that is not there
        ("acme/a=~no-such-user-here/x", "'~no-such-user-here' names no home directory here; write the path out"),
        ("acme/a=/a:acme/b=~\n/b=c", r"'~\\n' names no home directory here"),
    ],
)
def test_a_malformed_variable_is_one_clear_error(text, problem):
    with pytest.raises(KernelpinError, match=problem):
        parse(text)


def test_paths_may_hold_equals_signs_as_kernels_reads_them():
    assert parse("acme/a=/p/x=y:acme/b=/q") == {"acme/a": Path("/p/x=y"), "acme/b": Path("/q")}


def test_a_path_to_one_variant_directory_is_used_as_it_is(tmp_path, monkeypatch):
    """As kernels does for a path holding metadata.json (e.g. build/dev/img2gray, whose name is no variant's)."""
    directory = write_variant(tmp_path / "dev" / "img2gray", "9.9.9", CPU_213)
    monkeypatch.setenv("LOCAL_KERNELS", f"{REPO}={directory}")
    try:
        with pytest.warns(LocalKernelOverrideWarning):
            assert kernelpin.get_kernel(REPO, version=9).VARIANT == CPU_213
    finally:
        for name in [name for name in sys.modules if name.startswith("_kernelpin_local_")]:
            del sys.modules[name]
