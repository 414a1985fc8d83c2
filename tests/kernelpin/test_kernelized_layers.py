"""kernelpin.kernelized_layers(model) (issue 45): which layers kernelize replaced through kernelpin, from which
repository, with what kernelpin verified beside each (commit, build; for a locked one the lock, release and
signer). `kernels.get_kernelized_layers` (0.18+) is the judge where installed: the same layer names and the same
repository objects; kernels 0.17.2 records nothing, and kernelpin answers there too."""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")
kernels = pytest.importorskip("kernels")

import kernelpin  # noqa: E402
from kernelpin.loading.get_kernel import UnpinnedKernelWarning  # noqa: E402
from testkit.fake_kernel import CPU_213, kernel_files  # noqa: E402
from tests.kernelpin.helpers import TRUSTED_ORG  # noqa: E402

LAYERS = b"""\
import torch
from torch import nn


class Gray(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.full(x.shape[:-1], 42.0)
"""
EXTRA = {"__init__.py": b"from . import layers\nfrom ._impl import VARIANT\n", "layers.py": LAYERS}


@kernels.use_kernel_forward_from_hub("Gray")
class Gray(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.float().mean(-1)


@pytest.fixture
def layer_kernel(new_repo, hf_env, tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELPIN_STATE_DIR", str(tmp_path / "state"))
    repo_id, repo = new_repo("kernelized", "kernel", TRUSTED_ORG)
    repo.write(kernel_files("1.0.0", variants=(CPU_213,), extra=EXTRA), clear=True)
    commit = repo.commit("release")
    repo.tag("v1.0.0")
    repo.branch("v1")
    yield repo_id, commit
    cache = getattr(getattr(kernels, "layer", None), "layer", None) or sys.modules.get("kernels._internals.layer.layer")
    cache._CACHED_LAYER.clear()  # kernels caches layers per repository, across tests
    for name in [name for name in sys.modules if name.startswith("_kernelpin_")]:
        del sys.modules[name]


def kernelized(repository) -> torch.nn.Module:
    model = torch.nn.Sequential(torch.nn.Identity(), Gray())
    with kernels.use_kernel_mapping({"Gray": {"cpu": repository}}, inherit_mapping=False):
        return kernels.kernelize(model, mode=kernels.Mode.INFERENCE, device="cpu", use_fallback=False)


def _judged(model, found) -> None:
    if hasattr(kernels, "get_kernelized_layers"):  # kernels 0.18+
        theirs = kernels.get_kernelized_layers(model).layers
        assert set(theirs) == {layer.name for layer in found}
        assert all(theirs[layer.name].repo is layer.repository for layer in found)


def test_a_hub_layer_with_its_commit_and_build(layer_kernel):
    repo_id, commit = layer_kernel
    repository = kernels.LayerRepository(repo_id, layer_name="Gray", version=1)
    with kernelpin.integrated_kernels():
        with pytest.warns(UnpinnedKernelWarning):
            model = kernelized(repository)
    assert model(torch.ones(1, 3)).tolist() == [42.0]
    [layer] = kernelpin.kernelized_layers(model)
    assert (layer.name, layer.func, layer.repo_id, layer.asked, layer.commit, layer.variant, layer.lock) == (
        "1", None, repo_id, "version 1", commit, CPU_213, None)
    assert layer.repository is repository
    _judged(model, [layer])


def test_a_locked_layer_with_the_locks_facts(layer_kernel, project, cli):
    repo_id, commit = layer_kernel
    root = project(f'"{repo_id}" = 1\n')
    (root / "kernels.lock").write_text("[]")
    assert cli("lock")[0] == 0
    repository = kernels.LockedLayerRepository(repo_id, lockfile=root / "kernels.lock", layer_name="Gray")
    with kernelpin.integrated_kernels():
        model = kernelized(repository)
    [layer] = kernelpin.kernelized_layers(model)
    assert (layer.asked, layer.commit, layer.variant, layer.lock, layer.version, layer.signer) == (
        "locked", commit, CPU_213, root / "kernelpin.lock", "1.0.0", None)  # the test release is unsigned
    _judged(model, [layer])


def test_a_model_kernelize_did_not_touch_through_kernelpin_has_none(layer_kernel):
    model = torch.nn.Sequential(Gray())
    assert kernelpin.kernelized_layers(model) == []
    with kernelpin.integrated_kernels():
        with kernels.use_kernel_mapping({}, inherit_mapping=False):
            model = kernels.kernelize(model, mode=kernels.Mode.INFERENCE, device="cpu")  # the model's own forward
    assert kernelpin.kernelized_layers(model) == []
