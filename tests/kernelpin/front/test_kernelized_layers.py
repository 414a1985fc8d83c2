"""kernelpin.kernelized_layers(model) (issue 45): which layers kernelize replaced through kernelpin, from which
repository, with what kernelpin verified beside each (commit, build; for a locked one the lock, release and
signer). `kernels.get_kernelized_layers` (0.18+) is the judge where installed: the same layer names and the same
repository objects; kernels 0.17.2 records nothing, and kernelpin answers there too."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
kernels = pytest.importorskip("kernels")

import kernelpin
from kernelpin.front.hub import UnpinnedKernelWarning
from testkit.fake_kernel import CPU_213

# The kernel with a Gray layer on the test Hub, and the model's Gray that kernelize replaces: test_kernelize's.
from tests.kernelpin.front.test_kernelize import Gray, layer_kernel  # noqa: F401


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
    with kernelpin.integrated_kernels(), pytest.warns(UnpinnedKernelWarning):
        model = kernelized(repository)
    assert model(torch.ones(1, 3)).tolist() == [42.0]
    [layer] = kernelpin.kernelized_layers(model)
    assert (layer.name, layer.func, layer.repo_id, layer.asked, layer.commit, layer.variant, layer.lock) == (
        "1",
        None,
        repo_id,
        "version 1",
        commit,
        CPU_213,
        None,
    )
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
        "locked",
        commit,
        CPU_213,
        root / "kernelpin.lock",
        "1.0.0",
        None,
    )  # the test release is unsigned
    _judged(model, [layer])


def test_a_model_kernelize_did_not_touch_through_kernelpin_has_none(layer_kernel):
    model = torch.nn.Sequential(Gray())
    assert kernelpin.kernelized_layers(model) == []
    with kernelpin.integrated_kernels(), kernels.use_kernel_mapping({}, inherit_mapping=False):
        model = kernels.kernelize(model, mode=kernels.Mode.INFERENCE, device="cpu")  # the model's own forward
    assert kernelpin.kernelized_layers(model) == []
