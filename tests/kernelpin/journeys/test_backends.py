"""A kernel repository with builds for every backend and variant kind kernel-builder makes (legacy and new names,
SDKs, MLX), on the test Hub: kernelpin locks it (ROCm's gfx archs included), and `sync --target` for a described
machine installs the variant the installed `kernels` chooses for that machine from the same Hub listing (its own
get_variants + resolver, through tests/kernelpin/variant_judge.py; kernels before 0.19 only where its DEVIATIONS
allow a comparison)."""

from __future__ import annotations

import json
import sys

import pytest
from huggingface_hub import HfApi

import kernelpin
from kernelpin.environment import describe
from kernelpin.errors import KernelpinError, NoVariantError
from kernelpin.format.metadata import MetadataError, parse_metadata
from kernelpin.format.variant import Environment
from kernelpin.loading import runtime
from kernelpin.store import lockfiles
from testkit.fake_kernel import ROCM_ARCHS, publish
from testkit.releasing import hub_env, run
from tests.kernelpin.variant_judge import JUDGE_0_19, compared, compared_names, kernels_accepted, kernels_variants

EVERY_KIND = (
    "torch213-cxx11-cpu-x86_64-linux",
    "torch213-cxx98-cpu-x86_64-linux",
    "torch213-cxx11-cu128-x86_64-linux",
    "torch213-cxx11-cu130-x86_64-linux",
    "torch-stable-abi210-cu130-x86_64-linux",
    "torch213-cxx11-rocm71-x86_64-linux",
    "torch-stable-abi210-rocm71-x86_64-linux",
    "torch213-cxx11-xpu20253-x86_64-linux",
    "torch213-metal-aarch64-darwin",
    "torch213-cpu-aarch64-darwin",
    "torch213-cu130-x86_64-windows",
    "torch213-cpu-x86_64-windows",
    "tvm-ffi01-cu130-x86_64-linux",
    "torch213-cann81-aarch64-linux",
    "torch-universal",
    "torch-cpu",
    "torch-cuda",
    "torch-rocm",
    "torch-metal",
    "torch-xpu",
    "torch-npu",
    "torch-cann",
    # kernel-builder's new names (read by kernels 0.19)
    "torch-2.13-cxx11-cpu-cpython-3.10-abi3-x86_64-linux",
    "torch-2.13-cxx11-cuda-13.0-cpython-3.10-abi3-x86_64-linux",
    "torch-stable-abi-2.11-cpu-cpython-3.15-abi3t-x86_64-linux",
    "tvm-ffi-0.1-cuda-13.0-cpython-3.9-abi3-x86_64-linux",
    "sdk-cpython-3.12-abi3-x86_64-linux",
    "sdk",
    "mlx-metal",
)

# sync flags describing a machine (also given to kernels' resolver, as facts, through the judge)
MACHINES = {
    "linux-cpu": ["--torch", "2.13", "--python", "3.11"],
    "linux-cxx98": ["--torch", "2.13", "--cxx-abi", "cxx98", "--python", "3.11"],
    "linux-cuda": ["--torch", "2.13", "--cuda", "13.0", "--gpu-capability", "9.0", "--python", "3.11"],
    "linux-cuda-129": ["--torch", "2.13", "--backend", "cu129", "--python", "3.11"],
    "linux-rocm": ["--torch", "2.13", "--backend", "rocm71", "--gpu-arch", "gfx942", "--python", "3.11"],
    "linux-rocm-torch212": ["--torch", "2.12", "--backend", "rocm71", "--python", "3.11"],
    "linux-xpu": [
        "--torch",
        "2.13",
        "--backend",
        "xpu20253",
        "--os",
        "linux",
        "--cpu-arch",
        "x86_64",
        "--python",
        "3.11",
    ],
    "linux-cann": ["--torch", "2.13", "--backend", "cann81", "--cpu-arch", "aarch64", "--python", "3.11"],
    "mac26": [
        "--torch",
        "2.13",
        "--backend",
        "metal",
        "--os",
        "darwin",
        "--cpu-arch",
        "arm64",
        "--macos",
        "26.0",
        "--python",
        "3.11",
    ],
    "mac26-mlx": [
        "--torch",
        "none",
        "--backend",
        "metal",
        "--os",
        "darwin",
        "--cpu-arch",
        "arm64",
        "--macos",
        "26.0",
        "--mlx",
        "yes",
        "--python",
        "3.11",
    ],
    "mac15": [
        "--torch",
        "2.13",
        "--backend",
        "metal",
        "--os",
        "darwin",
        "--cpu-arch",
        "aarch64",
        "--macos",
        "15.5",
        "--python",
        "3.11",
    ],
    "windows-cuda": ["--torch", "2.13", "--cuda", "13.0", "--os", "windows", "--cpu-arch", "AMD64", "--python", "3.11"],
    "tvm-ffi": ["--torch", "none", "--cuda", "13.0", "--tvm-ffi", "0.1", "--python", "3.11"],
    "no-framework": ["--torch", "none", "--python", "3.12"],
    "free-threaded": ["--torch", "2.13", "--free-threaded", "yes", "--python", "3.15"],
    "python-3.15": ["--torch", "2.13", "--python", "3.15"],
}


def machine(flags: list[str]) -> Environment:
    """The machine `flags` describe, as kernelpin reads them (the judge gets the same facts)."""
    values = dict(zip((flag.removeprefix("--").replace("-", "_") for flag in flags[::2]), flags[1::2], strict=False))
    return describe(values)


@pytest.fixture(scope="module")
def every_kind(hub) -> tuple[str, str]:
    repo_id = "acme/every-kind"
    commit = publish(hub.repo(repo_id, "kernel"), "1.0.0", variants=EVERY_KIND)
    return repo_id, commit


def kernels_choice(hub, repo_id: str, commit: str, env: Environment) -> str | None:
    """What kernels chooses from the Hub's listing (read by kernels' own get_variants) for the machine `env`."""
    listed = kernels_variants.get_variants(HfApi(endpoint=hub.endpoint), repo_id=repo_id, revision=commit)
    accepted = kernels_accepted(compared_names(sorted(variant.variant_str for variant in listed)), env)
    return accepted[0] if accepted else None


def test_a_repository_with_every_backend_locks(every_kind, project, cli):
    repo_id, commit = every_kind
    root = project(f'"{repo_id}" = "^1"\n')
    status, _, err = cli("lock")
    assert status == 0, err
    (kernel,) = lockfiles.read(root / "kernelpin.lock").kernels
    assert kernel.commit == commit
    assert sorted(v.name for v in kernel.variants) == sorted(EVERY_KIND)
    rocm = kernel.variant("torch213-cxx11-rocm71-x86_64-linux")
    assert (rocm.backend, rocm.archs) == ("rocm", ROCM_ARCHS)


@pytest.mark.parametrize("name", MACHINES)
def test_sync_target_installs_what_kernels_chooses(every_kind, hub, project, cli, tmp_path, name):
    repo_id, commit = every_kind
    project(f'"{repo_id}" = "^1"\n')
    env = machine(MACHINES[name])
    status, out, err = cli("sync", "--json", "--target", str(tmp_path / "vendor"), *MACHINES[name])
    chosen = json.loads(out)["synced"][0]["variant"] if status == 0 else None
    assert status == 0 or "no build variant fits" in err, err
    if chosen is not None:
        installed = tmp_path / "vendor" / repo_id / commit / "build" / chosen / "_impl.py"
        assert f'VARIANT = "{chosen}"' in installed.read_text()
    if JUDGE_0_19 or (compared(env) and chosen in compared_names([chosen])):
        assert chosen == kernels_choice(hub, repo_id, commit, env)


def test_the_machines_cover_every_backend_and_kind(every_kind, hub):
    """The table above is not trivial: kernels picks a different build on most machines, every kind among them."""
    repo_id, commit = every_kind
    chosen = {name: kernels_choice(hub, repo_id, commit, machine(flags)) for name, flags in MACHINES.items()}
    assert len(set(chosen.values())) >= 10, chosen
    assert {
        "torch-stable-abi210-rocm71-x86_64-linux",
        "torch-metal",
        "torch213-cu130-x86_64-windows",
        "torch213-metal-aarch64-darwin",
    } <= set(chosen.values())
    if JUDGE_0_19:
        assert {
            "torch-2.13-cxx11-cpu-cpython-3.10-abi3-x86_64-linux",
            "tvm-ffi-0.1-cuda-13.0-cpython-3.9-abi3-x86_64-linux",
            "torch-stable-abi-2.11-cpu-cpython-3.15-abi3t-x86_64-linux",
            "sdk-cpython-3.12-abi3-x86_64-linux",
            "mlx-metal",
            "torch213-cann81-aarch64-linux",
        } <= set(chosen.values()), chosen


def test_a_cpu_build_on_a_cuda_machine_only_when_asked(new_repo, project, cli):
    """kernels never takes a CPU build on a CUDA machine unless backend="cpu" is asked; nor does kernelpin,
    and its error says how to ask."""
    repo_id, repo = new_repo()
    publish(repo, "1.0.0")  # CPU and CUDA 12/13 builds, no CUDA 11
    project(f'"{repo_id}" = "^1"\n')
    status, _, err = cli("sync", "--torch", "2.13", "--cuda", "11.8")
    assert status == 1
    assert "torch213-cxx11-cpu-x86_64-linux: CPU build, this machine's backend is CUDA 11.8" in err
    assert "kernelpin sync --backend cpu" in err
    status, out, err = cli("sync", "--json", "--torch", "2.13", "--backend", "cpu")
    assert status == 0, err
    assert json.loads(out)["synced"][0]["variant"] == "torch213-cxx11-cpu-x86_64-linux"


def test_load_takes_a_cpu_build_on_a_cuda_machine_only_when_asked(new_repo, project, cli, monkeypatch):
    """load() detects the machine from the running torch; a CUDA 11.8 machine is simulated at that edge."""
    repo_id, repo = new_repo()
    publish(repo, "1.0.0")
    root = project(f'"{repo_id}" = "^1"\n')
    assert cli("lock")[0] == 0
    monkeypatch.setattr(
        runtime, "_environment", lambda: Environment(torch=(2, 13), cuda=(11, 8), gpu_capability=(9, 0))
    )
    with pytest.raises(NoVariantError, match='kernelpin.load\\(..., backend="cpu"\\)'):
        kernelpin.load(repo_id, lock=root)
    assert kernelpin.load(repo_id, lock=root, backend="cpu").VARIANT == "torch213-cxx11-cpu-x86_64-linux"
    with pytest.raises(KernelpinError, match="backend 'rocm71' is not this machine's"):
        kernelpin.load(repo_id, lock=root, backend="rocm71")


@pytest.mark.parametrize(
    ("archs", "valid"),
    [
        (["gfx90a", "gfx942"], True),
        (["8.0", "9.0a", "10.0f+PTX", "sm_120"], True),
        (["gfx942:sramecc+"], True),
        (["../x"], False),
        (["a b"], False),
        (["x" * 65], False),
        ([9.0], False),
        ([""], False),
    ],
)
def test_archs_in_metadata_and_lock(archs, valid, tmp_path):
    """ROCm's gfx names and forms a newer kernel-builder may write are read (kernels assumes those fit);
    what cannot be an arch name is refused, in metadata.json and in the lock alike."""
    document = json.dumps({"version": 1, "backend": {"type": "rocm", "archs": archs}})
    lock = tmp_path / "kernelpin.lock"
    lock.write_text(
        f'version = 2\n[[kernel]]\nrepo = "acme/k"\nrepo-type = "kernel"\nrequirement = 1\ncommit = "{"a" * 40}"\n'
        f'[[kernel.variant]]\nname = "torch-rocm"\narchs = {json.dumps(archs)}\nfiles = []\n'
    )
    if valid:
        assert parse_metadata(document, "m").archs == tuple(archs)
        assert lockfiles.read(lock).kernels[0].variants[0].archs == tuple(archs)
    else:
        with pytest.raises(MetadataError, match="backend.archs must list GPU archs"):
            parse_metadata(document, "m")
        with pytest.raises(KernelpinError, match="archs: must list GPU archs|archs.*must list GPU archs"):
            lockfiles.read(lock)


def test_load_imports_the_build_kernels_get_kernel_imports(every_kind, hub, project, cli, tmp_path):
    """On this machine (detected: its torch, OS and CPU), kernels.get_kernel in its own process and
    kernelpin.load import the same build of the every-kind repository."""
    repo_id, commit = every_kind
    root = project(f'"{repo_id}" = "^1"\n')
    assert cli("lock")[0] == 0
    env = hub_env(hub.endpoint, tmp_path / "kernels-home")
    del env["HF_HUB_DISABLE_TELEMETRY"]  # kernels 0.17.2 then sends a User-Agent httpx rejects (fixed in 0.18)
    code = (
        f"import kernels; module = kernels.get_kernel({repo_id!r}, revision={commit!r}, trust_remote_code=True); "
        "print(module.VARIANT)"
    )
    theirs = run([sys.executable, "-c", code], env=env).stdout.split()[-1]
    ours = kernelpin.load(repo_id, lock=root).VARIANT
    # On CI's machine (CPU, torch 2.13, Python 3.11+): the new-format build, whose Python floor 3.10 is higher
    # than the legacy twin's implicit 3.9; kernels before 0.19 cannot read that name (DEVIATIONS NEW_NAMES).
    assert ours == "torch-2.13-cxx11-cpu-cpython-3.10-abi3-x86_64-linux"
    assert theirs == (ours if JUDGE_0_19 else "torch213-cxx11-cpu-x86_64-linux")
