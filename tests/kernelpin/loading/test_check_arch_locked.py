"""`check_arch=` on a locked load (issue 45): kernels 0.19 added it to get_locked_kernel and load_kernel, for
kernels with a Triton fallback whose declared archs miss a GPU they run on; kernelpin.load takes it too, and its
refusal says so. Every file is still verified against the lock."""

from __future__ import annotations

import inspect
import sys
from importlib.metadata import version

import pytest
from packaging.version import Version

import kernelpin
from kernelpin.errors import IntegrityError, NoVariantError
from kernelpin.format.variant import Environment
from kernelpin.loading import runtime
from testkit.fake_kernel import kernel_files

CUDA_213 = "torch213-cxx11-cu130-x86_64-linux"
KERNELS = Version(version("kernels"))


@pytest.fixture
def locked_cuda(new_repo, project, cli, monkeypatch):
    """A lock of a kernel whose only build is CUDA 13.0 with archs 8.0 and 9.0, on a machine with a 12.0 GPU."""
    repo_id, repo = new_repo("triton-fallback", "kernel")
    repo.write(kernel_files("1.0.0", variants=(CUDA_213,)), clear=True)  # archs 8.0, 9.0, 12.0+PTX
    repo.commit("release")
    repo.branch("v1")
    root = project(f'"{repo_id}" = 1\n')
    assert cli("lock")[0] == 0
    monkeypatch.setattr(
        runtime, "_environment", lambda: Environment(torch=(2, 13), cuda=(13, 0), gpu_capability=(7, 5))
    )
    for name in [name for name in sys.modules if name.startswith("_kernelpin_")]:
        del sys.modules[name]
    return repo_id, root


def test_check_arch_false_loads_a_build_whose_archs_miss_the_gpu(hf_env, locked_cuda):
    # Failed before: load() had no check_arch (TypeError), so such a kernel could not be loaded from a lock.
    repo_id, root = locked_cuda
    with pytest.raises(NoVariantError) as error:
        kernelpin.load(repo_id, lock=root)
    assert "do not cover this GPU's 7.5" in str(error.value)
    assert str(error.value).endswith("load(..., check_arch=False) skips their check.")
    module = kernelpin.load(repo_id, lock=root, check_arch=False)
    assert module.VARIANT == CUDA_213


def test_check_arch_false_still_verifies_every_file(hf_env, locked_cuda):
    repo_id, root = locked_cuda
    kernelpin.load(repo_id, lock=root, check_arch=False)
    for name in [name for name in sys.modules if name.startswith("_kernelpin_")]:
        del sys.modules[name]
    [impl] = [p for p in hf_env.rglob("_impl.py") if CUDA_213 in str(p)]
    impl.resolve().write_text("VARIANT = 'planted'\n")
    with pytest.raises(IntegrityError):
        kernelpin.load(repo_id, lock=root, check_arch=False)


def test_the_same_keyword_and_default_as_kernels_locked_loaders():
    import kernels

    ours = inspect.signature(kernelpin.load).parameters["check_arch"]
    assert ours.kind is inspect.Parameter.KEYWORD_ONLY and ours.default is True
    for loader in (kernels.get_locked_kernel, kernels.load_kernel):
        theirs = inspect.signature(loader).parameters.get("check_arch")
        # kernels 0.19 has it on both; 0.17.2 and 0.18 only on get_kernel (their locked loaders never checked archs)
        assert (theirs is not None) == (Version("0.19") <= KERNELS), (KERNELS, loader.__name__)
        if theirs is not None:
            assert (theirs.kind, theirs.default) == (ours.kind, ours.default)
