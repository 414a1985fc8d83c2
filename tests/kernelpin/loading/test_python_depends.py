"""A kernel's `python-depends` and `kernels-minver`, checked before its binaries are downloaded (get_kernel) or
its code runs (load), with the pip command that fixes it, as `kernels` says it. Failed before: kernelpin loaded
the kernel and it failed at first use (or never, for kernels-minver)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import kernelpin
from kernelpin.format import metadata as kernel_metadata
from kernelpin.front.hub import UnpinnedKernelWarning
from kernelpin.loading.python_depends import DependencyError, dependency_table, missing_packages
from testkit.fake_kernel import CPU_213, kernel_files
from tests.kernelpin.helpers import TRUSTED_ORG


def with_metadata(files: dict[str, bytes], **keys) -> dict[str, bytes]:
    """`files` with every variant's metadata.json carrying `keys` (e.g. python-depends)."""
    for path in [path for path in files if path.endswith("/metadata.json")]:
        document = json.loads(files[path])
        document.update({key.replace("_", "-"): value for key, value in keys.items()})
        files[path] = kernel_metadata.render(document).encode()
    return files


@pytest.fixture
def publish_with(new_repo, hf_env, tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELPIN_STATE_DIR", str(tmp_path / "state"))

    def make(**keys) -> str:
        repo_id, repo = new_repo("depends", "kernel", TRUSTED_ORG)
        repo.write(with_metadata(kernel_files("1.0.0", variants=(CPU_213,)), **keys), clear=True)
        repo.commit("release")
        repo.tag("v1.0.0")
        repo.branch("v1")
        return repo_id

    yield make
    for name in [name for name in sys.modules if name.startswith("_kernelpin_")]:
        del sys.modules[name]


def test_a_missing_python_dependency_is_named_with_its_pip_command_before_downloading(publish_with, hf_env):
    repo_id = publish_with(python_depends=["einops"])
    with pytest.raises(
        DependencyError,
        match=r"requires the Python package\(s\) einops, which are not installed; "
        r"install them with: pip install einops",
    ):
        kernelpin.get_kernel(repo_id, version=1)
    assert not (hf_env / f"kernels--{repo_id.replace('/', '--')}" / "snapshots").exists()  # nothing downloaded


def test_a_dependency_no_one_knows_is_refused(publish_with):
    repo_id = publish_with(python_depends=["left-pad"])
    with pytest.raises(
        DependencyError,
        match=r"python-depends names 'left-pad', which is no dependency the kernels "
        r"ecosystem knows for the cpu backend \(known: einops, helion, tvm-ffi\)",
    ):
        kernelpin.get_kernel(repo_id, version=1)


def test_a_kernel_needing_a_newer_kernels_says_how_to_upgrade(publish_with):
    import importlib.metadata

    repo_id = publish_with(kernels_minver="99.0.0")
    installed = importlib.metadata.version("kernels")
    with pytest.raises(
        DependencyError,
        match=rf"requires kernels>=99.0.0, but kernels {installed} is installed; "
        r"upgrade it with: pip install --upgrade 'kernels>=99.0.0'",
    ):
        kernelpin.get_kernel(repo_id, version=1)


def test_load_from_a_lock_checks_before_the_kernel_runs(publish_with, project, cli):
    repo_id = publish_with(python_depends=["tvm-ffi"])
    root = project(f'"{repo_id}" = 1\n')
    assert cli("lock")[0] == 0
    with pytest.raises(DependencyError, match=r"pip install apache-tvm-ffi"):
        kernelpin.load(repo_id, lock=root)


def test_the_offline_call_checks_from_the_verified_cache(publish_with, monkeypatch):
    import importlib.machinery
    import importlib.util

    repo_id = publish_with(python_depends=["einops"])
    real = importlib.util.find_spec

    def einops_installed(name, *args):
        return importlib.machinery.ModuleSpec("einops", None) if name == "einops" else real(name, *args)

    with monkeypatch.context() as patched:  # einops importable for the online call only
        patched.setattr(importlib.util, "find_spec", einops_installed)
        with pytest.warns(UnpinnedKernelWarning, match="was loaded without a lock"):
            assert kernelpin.get_kernel(repo_id, version=1).VERSION == "1.0.0"
    for name in [name for name in sys.modules if name.startswith("_kernelpin_")]:
        del sys.modules[name]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DependencyError, match="pip install einops"):
        kernelpin.get_kernel(repo_id, version=1)


def test_an_installed_dependency_passes():
    table = {"general": {"numeric": {"python": [{"pkg": "numpy", "import": "numpy"}, {"pkg": "no-python-code"}]}}}
    assert missing_packages(("numeric",), "cpu", "k", table) == []


def test_the_table_is_the_one_kernels_ships():
    from kernelpin.loading import kernels_internals

    # Beside kernels' deps module: kernels/python_depends.json until 0.18, kernels/_internals/ since 0.19.
    shipped = Path(kernels_internals.module("deps", "the test").__file__).parent / "python_depends.json"
    assert dependency_table() == json.loads(shipped.read_text())
