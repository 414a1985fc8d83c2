"""transformers' path, `kernels.kernelize` with LayerRepository / LockedLayerRepository /
use_kernel_forward_from_hub (and the function repositories), loading through kernelpin after one line,
kernelpin.integrate_kernels(): the real `kernels` kernelize on a small torch module on CPU against the test Hub.
Failed before: kernelpin had no integration, and kernels loaded a tampered cached file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
kernels = pytest.importorskip("kernels")

import kernelpin
from kernelpin.errors import IntegrityError, KernelpinError
from kernelpin.front.hub import UnpinnedKernelWarning
from kernelpin.loading import kernels_internals
from kernelpin.loading.local_override import LocalKernelOverrideWarning
from kernelpin.loading.local_override import module_name as local_module_name
from kernelpin.loading.runtime import module_name as load_module_name
from testkit.fake_kernel import CPU_213, kernel_files, write_variant
from tests.kernelpin.helpers import TRUSTED_ORG, snapshot_dir

KERNEL_INIT = b"from . import layers\nfrom ._impl import VARIANT\nVERSION = '1.0.0'\n"
LAYERS = b"""\
import torch
from torch import nn


class Gray(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.full(x.shape[:-1], 42.0)  # not the reference: shows the kernel ran
"""
EXTRA = {"__init__.py": KERNEL_INIT, "layers.py": LAYERS}
LAYER = kernels_internals.module(
    "layer", "tests/kernelpin/front/test_kernelize.py"
)  # kernels' layer module, any version


@kernels.use_kernel_forward_from_hub("Gray")
class Gray(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.float().mean(-1)


@pytest.fixture
def layer_kernel(new_repo, hf_env, tmp_path, monkeypatch) -> tuple[str, str]:
    """A trusted kernel with layers (Gray) on branch v1: (repo_id, commit)."""
    monkeypatch.setenv("KERNELPIN_STATE_DIR", str(tmp_path / "state"))
    repo_id, repo = new_repo("layers", "kernel", TRUSTED_ORG)
    repo.write(kernel_files("1.0.0", variants=(CPU_213,), extra=EXTRA), clear=True)
    commit = repo.commit("release")
    repo.tag("v1.0.0")
    repo.branch("v1")
    yield repo_id, commit
    LAYER._CACHED_LAYER.clear()  # kernels caches layers per repository, across tests
    for name in [name for name in sys.modules if name.startswith("_kernelpin_")]:
        del sys.modules[name]


def kernelized(mapping: dict) -> torch.nn.Module:
    model = torch.nn.Sequential(Gray())
    with kernels.use_kernel_mapping(mapping, inherit_mapping=False):
        return kernels.kernelize(model, mode=kernels.Mode.INFERENCE, device="cpu", use_fallback=False)


def layer_mapping(repository) -> dict:
    return {"Gray": {"cpu": repository}}


def test_layer_repository_loads_verified_through_kernelpin(layer_kernel, hf_env):
    repo_id, commit = layer_kernel
    with kernelpin.integrated_kernels():
        with pytest.warns(UnpinnedKernelWarning):
            model = kernelized(layer_mapping(kernels.LayerRepository(repo_id, layer_name="Gray", version=1)))
        assert model(torch.ones(2, 3, 3)).tolist() == [[42.0] * 3] * 2
        # The cached file changed: kernelpin refuses it (kernels alone would run it, below).
        impl = snapshot_dir(hf_env, repo_id, commit, "kernel") / "build" / CPU_213 / "layers.py"
        impl.resolve().write_bytes(LAYERS.replace(b"42.0", b"666.0"))
        LAYER._CACHED_LAYER.clear()
        for name in [name for name in sys.modules if name.startswith("_kernelpin_")]:
            del sys.modules[name]
        with pytest.raises(IntegrityError, match="layers.py"):
            kernelized(layer_mapping(kernels.LayerRepository(repo_id, layer_name="Gray", version=1)))


def test_without_the_integration_kernels_runs_the_changed_file(hub, layer_kernel, tmp_path):
    """The peer alone, for contrast, in a process of its own (kernels reads HF_* at import)."""
    from testkit.releasing import hub_env, run

    repo_id, _ = layer_kernel
    env = hub_env(hub.endpoint, tmp_path / "kernels-home", HF_HUB_DISABLE_TELEMETRY="0")  # ANCHORS §8
    code = (
        f"import kernels; k = kernels.get_kernel({repo_id!r}, version=1); import inspect; "
        "print(inspect.getsourcefile(k.layers.Gray))"
    )
    path = Path(run([sys.executable, "-c", code], env=env).stdout.strip())
    path.resolve().write_bytes(LAYERS.replace(b"42.0", b"666.0"))
    code = f"import kernels, torch; k = kernels.get_kernel({repo_id!r}, version=1); print(k.layers.Gray()(torch.ones(1, 3)).item())"
    assert run([sys.executable, "-c", code], env=env).stdout.strip() == "666.0"


def test_locked_layer_repository_loads_the_kernelpin_lock_and_refuses_disagreeing_locks(layer_kernel, project, cli):
    repo_id, commit = layer_kernel
    root = project(f'"{repo_id}" = 1\n')
    (root / "kernels.lock").write_text("[]")  # kernelpin keeps an existing kernels.lock in step
    assert cli("lock")[0] == 0
    assert json.loads((root / "kernels.lock").read_text())[0]["lock"]["commit"] == commit
    with kernelpin.integrated_kernels():
        assert kernelpin.integrate_kernels() == {}  # already on: nothing replaced twice
        repository = kernels.LockedLayerRepository(repo_id, lockfile=root / "kernels.lock", layer_name="Gray")
        model = kernelized(layer_mapping(repository))
        assert model(torch.ones(1, 3)).tolist() == [42.0]
        (loaded,) = LAYER._CACHED_LAYER.values()  # the layer class kernelize took, imported by kernelpin
        assert loaded.__module__ == f"{load_module_name(repo_id, commit, CPU_213)}.layers"
        # A kernels.lock edited to another commit: kernelpin will not guess which one is meant.
        lock = json.loads((root / "kernels.lock").read_text())
        lock[0]["lock"]["commit"] = "0" * 40
        (root / "kernels.lock").write_text(json.dumps(lock))
        repository = kernels.LockedLayerRepository(repo_id, lockfile=root / "kernels.lock", layer_name="Gray")
        with pytest.raises(
            KernelpinError, match=rf"kernels.lock pins 000000000000 but .*kernelpin.lock pins {commit[:12]}"
        ):
            kernelized(layer_mapping(repository))


def test_local_kernels_under_a_locked_layer_is_refused_unless_allowed(
    layer_kernel, project, cli, tmp_path, monkeypatch
):
    repo_id, _ = layer_kernel
    root = project(f'"{repo_id}" = 1\n')
    (root / "kernels.lock").write_text("[]")
    assert cli("lock")[0] == 0
    write_variant(
        tmp_path / "local" / "build" / CPU_213,
        "1.0.0",
        CPU_213,
        extra={**EXTRA, "layers.py": LAYERS.replace(b"42.0", b"7.0")},
    )
    monkeypatch.setenv("LOCAL_KERNELS", f"{repo_id}={tmp_path / 'local'}")
    with kernelpin.integrated_kernels():
        repository = kernels.LockedLayerRepository(repo_id, lockfile=root / "kernels.lock", layer_name="Gray")
        with pytest.raises(KernelpinError, match="KERNELPIN_ALLOW_LOCAL_KERNELS=1"):
            kernelized(layer_mapping(repository))
        monkeypatch.setenv("KERNELPIN_ALLOW_LOCAL_KERNELS", "1")
        with pytest.warns(LocalKernelOverrideWarning):
            assert kernelized(layer_mapping(repository))(torch.ones(1, 3)).tolist() == [7.0]


def test_the_context_manager_puts_kernels_own_loading_back():
    """In a fresh interpreter: taking one of kernels' names from kernelpin (kernelpin.LayerRepository, ...) integrates
    for good, and another test of this process may have done so, leaving the block nothing to put back."""
    code = (
        "import kernelpin\n"
        "from kernelpin.loading import kernels_internals\n"
        "layer = kernels_internals.module('layer', 'the test')\n"
        "before = layer.LayerRepository.load\n"
        "with kernelpin.integrated_kernels():\n"
        "    assert layer.LayerRepository.load is not before\n"
        "assert layer.LayerRepository.load is before\n"
    )
    from testkit.releasing import run

    done = run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[3], check=False)
    assert done.returncode == 0, done.stderr


LOCAL_LAYERS = LAYERS.replace(b"42.0", b"7.0") + (
    b"\n\ndef gray(x: torch.Tensor) -> torch.Tensor:\n    return torch.full(x.shape[:-1], 5.0)  # the local function ran\n"
)
LOCAL_EXTRA = {"__init__.py": KERNEL_INIT + b"from .layers import gray\n", "layers.py": LOCAL_LAYERS}


@kernels.use_kernel_func_from_hub("gray")  # kernels' function form (0.17.2 to 0.19.1)
def gray(x: torch.Tensor) -> torch.Tensor:
    return x.float().mean(-1)


class UsesGray(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fn = gray

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)


@pytest.fixture
def local_layer_kernel(tmp_path, monkeypatch) -> tuple[Path, Path]:
    """A build on disk as the builder leaves it (build/<variant>/ with its metadata.json and digests) with a Gray
    layer (7.0) and a gray function (5.0): (its directory, the variant directory)."""
    monkeypatch.setenv("KERNELPIN_STATE_DIR", str(tmp_path / "state"))
    root = tmp_path / "checkout"
    variant = write_variant(root / "build" / CPU_213, "1.0.0", CPU_213, extra=LOCAL_EXTRA)
    yield root, variant
    LAYER._CACHED_LAYER.clear()
    for name in [name for name in sys.modules if name.startswith("_kernelpin_")]:
        del sys.modules[name]


def test_local_layer_and_func_repositories_kernelize_the_build_on_disk_verified(local_layer_kernel):
    """LocalLayerRepository and LocalFuncRepository under kernelize, through kernelpin.get_local_kernel: the forward
    runs the local build's code, imported by kernelpin (its module, its record), and a file of the build that no
    longer matches its metadata.json is refused where kernels would run it. Failed before: kernelized_layers raised
    AttributeError on a local repository (it has no _repo_id)."""
    root, variant = local_layer_kernel
    with kernelpin.integrated_kernels():
        repository = kernels.LocalLayerRepository(root, layer_name="Gray")
        model = kernelized(layer_mapping(repository))
        assert model(torch.ones(2, 3)).tolist() == [7.0, 7.0]  # the local layer's forward, not the model's mean
        (taken,) = LAYER._CACHED_LAYER.values()
        name = local_module_name(str(root), variant)
        assert taken.__module__ == f"{name}.layers" and sys.modules[name].__file__.startswith(str(variant))
        (record,) = [k for k in kernelpin.loaded_kernels() if k.module == name]
        assert (record.commit, record.directory, record.variant) == (None, variant, CPU_213)
        [layer] = kernelpin.kernelized_layers(model)
        assert (layer.name, layer.repo_id, layer.asked, layer.variant, layer.repository) == (
            "0",
            str(root),
            f"local {root}",
            CPU_213,
            repository,
        )
        if hasattr(kernels, "get_kernelized_layers"):  # kernels 0.18+: the judge
            assert kernels.get_kernelized_layers(model).layers["0"].repo is repository

        functions = torch.nn.Sequential(UsesGray())
        with kernels.use_kernel_mapping({"gray": {"cpu": kernels.LocalFuncRepository(root, func_name="gray")}}):
            functions = kernels.kernelize(functions, mode=kernels.Mode.INFERENCE, device="cpu", use_fallback=False)
        assert functions(torch.ones(1, 3)).tolist() == [5.0]  # the local function ran
        [func] = kernelpin.kernelized_layers(functions)
        assert (func.repo_id, func.asked, func.variant) == (str(root), f"local {root}", CPU_213)

        # The build changed after its metadata was written: refused (kernels' own loader would run it).
        (variant / "layers.py").write_bytes(LOCAL_LAYERS.replace(b"7.0", b"666.0"))
        LAYER._CACHED_LAYER.clear()
        for loaded in [loaded for loaded in sys.modules if loaded.startswith("_kernelpin_")]:
            del sys.modules[loaded]
        with pytest.raises(IntegrityError, match="layers.py.*rebuild it"):
            kernelized(layer_mapping(kernels.LocalLayerRepository(root, layer_name="Gray")))


def kernelized_func(repository) -> torch.nn.Module:
    model = torch.nn.Sequential(UsesGray())
    with kernels.use_kernel_mapping({"gray": {"cpu": repository}}, inherit_mapping=False):
        return kernels.kernelize(model, mode=kernels.Mode.INFERENCE, device="cpu", use_fallback=False)


def test_func_and_locked_func_repositories_load_through_kernelpin(
    new_repo, hf_env, project, cli, tmp_path, monkeypatch
):
    """The Hub forms of kernels' function repositories (deprecated in 0.19, still in kernels.__all__):
    FuncRepository through kernelpin.get_kernel, LockedFuncRepository through kernelpin.load from the kernelpin.lock
    beside its kernels.lock; the forward runs the kernel's function, imported by kernelpin (no test held this
    before: the repositories were wired, never kernelized)."""
    monkeypatch.setenv("KERNELPIN_STATE_DIR", str(tmp_path / "state"))
    repo_id, repo = new_repo("funcs", "kernel", TRUSTED_ORG)
    repo.write(kernel_files("1.0.0", variants=(CPU_213,), extra=LOCAL_EXTRA), clear=True)
    commit = repo.commit("release")
    repo.tag("v1.0.0")
    repo.branch("v1")
    try:
        with kernelpin.integrated_kernels():
            with pytest.warns(UnpinnedKernelWarning):
                model = kernelized_func(kernels.FuncRepository(repo_id, func_name="gray", version=1))
            assert model(torch.ones(1, 3)).tolist() == [5.0]  # the kernel's function, not the model's mean
            [func] = kernelpin.kernelized_layers(model)
            assert (func.repo_id, func.asked, func.commit, func.variant, func.lock) == (
                repo_id,
                "version 1",
                commit,
                CPU_213,
                None,
            )
            root = project(f'"{repo_id}" = 1\n')
            (root / "kernels.lock").write_text("[]")
            assert cli("lock")[0] == 0
            repository = kernels.LockedFuncRepository(repo_id, lockfile=root / "kernels.lock", func_name="gray")
            model = kernelized_func(repository)
            assert model(torch.ones(1, 3)).tolist() == [5.0]
            [func] = kernelpin.kernelized_layers(model)
            assert (func.asked, func.commit, func.lock, func.version) == (
                "locked",
                commit,
                root / "kernelpin.lock",
                "1.0.0",
            )
            assert func.repository is repository
    finally:
        LAYER._CACHED_LAYER.clear()
        for name in [name for name in sys.modules if name.startswith("_kernelpin_")]:
            del sys.modules[name]
