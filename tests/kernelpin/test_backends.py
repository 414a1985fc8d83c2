"""A kernel repository with builds for every backend and variant kind kernel-builder makes, on the test Hub:
kernelpin locks it (ROCm's gfx archs included), and `sync --target` for a described machine installs the
variant `kernels` chooses for that machine from the same Hub listing (its own get_variants + resolver)."""

from __future__ import annotations

import json
import sys

import pytest
from huggingface_hub import HfApi
from packaging.version import Version

import kernelpin
from kernelpin.format import lockfile
from kernelpin.loading import runtime
from kernelpin.errors import KernelpinError, NoVariantError
from kernelpin.format.metadata import MetadataError, parse_metadata
from kernelpin.format.variant import Environment
from testkit.fake_kernel import ROCM_ARCHS, publish
from testkit.releasing import hub_env, run

variants = pytest.importorskip("kernels.variants")
from kernels.backends import CPU, CUDA, XPU, Metal, ROCm  # noqa: E402

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
)

# (sync flags describing a machine, the same machine's facts as kernels' resolver takes them)
MACHINES = {
    "linux-cpu": (["--torch", "2.13"], dict(backend=CPU(), cpu="x86_64", os="linux", torch="2.13", cxx11=True)),
    "linux-cxx98": (["--torch", "2.13", "--cxx-abi", "cxx98"],
                    dict(backend=CPU(), cpu="x86_64", os="linux", torch="2.13", cxx11=False)),
    "linux-cuda": (["--torch", "2.13", "--cuda", "13.0", "--gpu-capability", "9.0"],
                   dict(backend=CUDA(version=Version("13.0")), cpu="x86_64", os="linux", torch="2.13", cxx11=True)),
    "linux-cuda-129": (["--torch", "2.13", "--backend", "cu129"],
                       dict(backend=CUDA(version=Version("12.9")), cpu="x86_64", os="linux", torch="2.13", cxx11=True)),
    "linux-rocm": (["--torch", "2.13", "--backend", "rocm71", "--gpu-arch", "gfx942"],
                   dict(backend=ROCm(version=Version("7.1")), cpu="x86_64", os="linux", torch="2.13", cxx11=True)),
    "linux-rocm-torch212": (["--torch", "2.12", "--backend", "rocm71"],
                            dict(backend=ROCm(version=Version("7.1")), cpu="x86_64", os="linux", torch="2.12",
                                 cxx11=True)),
    "linux-xpu": (["--torch", "2.13", "--backend", "xpu20253", "--os", "linux", "--cpu-arch", "x86_64"],
                  dict(backend=XPU(version=Version("2025.3")), cpu="x86_64", os="linux", torch="2.13", cxx11=True)),
    "mac26": (["--torch", "2.13", "--backend", "metal", "--os", "darwin", "--cpu-arch", "arm64", "--macos", "26.0"],
              dict(backend=Metal(), cpu="aarch64", os="darwin", torch="2.13", macos="26.0")),
    "mac15": (["--torch", "2.13", "--backend", "metal", "--os", "darwin", "--cpu-arch", "aarch64", "--macos", "15.5"],
              dict(backend=Metal(), cpu="aarch64", os="darwin", torch="2.13", macos="15.5")),
    "windows-cuda": (["--torch", "2.13", "--cuda", "13.0", "--os", "windows", "--cpu-arch", "AMD64"],
                     dict(backend=CUDA(version=Version("13.0")), cpu="x86_64", os="windows", torch="2.13")),
    "tvm-ffi": (["--torch", "none", "--cuda", "13.0", "--tvm-ffi", "0.1"],
                dict(backend=CUDA(version=Version("13.0")), cpu="x86_64", os="linux", tvm_ffi="0.1", cxx11=True)),
    "free-threaded": (["--torch", "2.13", "--free-threaded", "yes"],
                      dict(backend=CPU(), cpu="x86_64", os="linux", torch="2.13", cxx11=True, free_threaded=True)),
}


@pytest.fixture(scope="module")
def every_kind(hub) -> tuple[str, str]:
    repo_id = "acme/every-kind"
    commit = publish(hub.repo(repo_id, "kernel"), "1.0.0", variants=EVERY_KIND)
    return repo_id, commit


def tie_order(variant) -> tuple[bool, str]:
    """kernels keeps its listing's order where its sort keys tie (a tvm-ffi and a Python-only build); kernelpin
    puts tvm-ffi first (test_variant_vs_kernels.py, DEVIATIONS): list them to kernels in that order."""
    return isinstance(variant, variants.NoarchVariant), variant.variant_str


def kernels_choice(hub, repo_id: str, commit: str, facts: dict, monkeypatch) -> str | None:
    """What kernels chooses from the Hub's listing (read by kernels itself) for a machine with `facts`."""
    listed = variants.get_variants(HfApi(endpoint=hub.endpoint), repo_id=repo_id, revision=commit)
    monkeypatch.setattr(variants, "_is_unsupported_free_threaded_build", lambda: facts.get("free_threaded", False))
    version = {key: Version(facts[key]) if facts.get(key) else None for key in ("torch", "tvm_ffi", "macos")}
    accepted, _ = variants._resolve_variant_for_system(
        sorted(listed, key=tie_order), facts["backend"], facts["cpu"], facts["os"], version["torch"],
        facts.get("cxx11"), version["tvm_ffi"], version["macos"])
    return accepted[0].variant_str if accepted else None


def test_a_repository_with_every_backend_locks(every_kind, project, cli):
    repo_id, commit = every_kind
    root = project(f'"{repo_id}" = "^1"\n')
    status, _, err = cli("lock")
    assert status == 0, err
    (kernel,) = lockfile.read(root / "kernelpin.lock").kernels
    assert kernel.commit == commit
    assert sorted(v.name for v in kernel.variants) == sorted(EVERY_KIND)
    rocm = kernel.variant("torch213-cxx11-rocm71-x86_64-linux")
    assert (rocm.backend, rocm.archs) == ("rocm", ROCM_ARCHS)


@pytest.mark.parametrize("machine", MACHINES)
def test_sync_target_installs_what_kernels_chooses(every_kind, hub, project, cli, tmp_path, monkeypatch, machine):
    repo_id, commit = every_kind
    project(f'"{repo_id}" = "^1"\n')
    flags, facts = MACHINES[machine]
    expected = kernels_choice(hub, repo_id, commit, facts, monkeypatch)
    status, out, err = cli("sync", "--json", "--target", str(tmp_path / "vendor"), *flags)
    if expected is None:
        assert status == 1 and "no build variant fits" in err
        return
    assert status == 0, err
    (synced,) = json.loads(out)["synced"]
    assert synced["variant"] == expected
    installed = tmp_path / "vendor" / repo_id / commit / "build" / expected / "_impl.py"
    assert f'VARIANT = "{expected}"' in installed.read_text()


def test_the_machines_cover_every_backend_and_kind(every_kind, hub, monkeypatch):
    """The table above is not trivial: kernels picks a different build on most machines, every kind among them."""
    repo_id, commit = every_kind
    chosen = {machine: kernels_choice(hub, repo_id, commit, facts, monkeypatch) for machine, (_, facts) in MACHINES.items()}
    assert len(set(chosen.values())) >= 10, chosen
    assert {"torch-stable-abi210-rocm71-x86_64-linux", "torch-metal", "tvm-ffi01-cu130-x86_64-linux",
            "torch213-cu130-x86_64-windows", "torch213-metal-aarch64-darwin", "torch-cpu"} <= set(chosen.values())


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
    monkeypatch.setattr(runtime, "_environment", lambda: Environment(torch=(2, 13), cuda=(11, 8), gpu_capability=(9, 0)))
    with pytest.raises(NoVariantError, match='kernelpin.load\\(..., backend="cpu"\\)'):
        kernelpin.load(repo_id, lock=root)
    assert kernelpin.load(repo_id, lock=root, backend="cpu").VARIANT == "torch213-cxx11-cpu-x86_64-linux"
    with pytest.raises(KernelpinError, match="backend 'rocm71' is not this machine's"):
        kernelpin.load(repo_id, lock=root, backend="rocm71")


@pytest.mark.parametrize(
    ("archs", "valid"),
    [(["gfx90a", "gfx942"], True), (["8.0", "9.0a", "10.0f+PTX", "sm_120"], True), (["gfx942:sramecc+"], True),
     (["../x"], False), (["a b"], False), (["x" * 65], False), ([9.0], False), ([""], False)],
)
def test_archs_in_metadata_and_lock(archs, valid, tmp_path):
    """ROCm's gfx names and forms a newer kernel-builder may write are read (kernels assumes those fit);
    what cannot be an arch name is refused, in metadata.json and in the lock alike."""
    document = json.dumps({"version": 1, "backend": {"type": "rocm", "archs": archs}})
    lock = tmp_path / "kernelpin.lock"
    lock.write_text(
        f'version = 2\n[[kernel]]\nrepo = "acme/k"\nrepo-type = "kernel"\nrequirement = 1\ncommit = "{"a" * 40}"\n'
        f'[[kernel.variant]]\nname = "torch-rocm"\narchs = {json.dumps(archs)}\nfiles = []\n')
    if valid:
        assert parse_metadata(document, "m").archs == tuple(archs)
        assert lockfile.read(lock).kernels[0].variants[0].archs == tuple(archs)
    else:
        with pytest.raises(MetadataError, match="backend.archs must list GPU archs"):
            parse_metadata(document, "m")
        with pytest.raises(KernelpinError, match="archs: must list GPU archs|archs.*must list GPU archs"):
            lockfile.read(lock)


def test_load_imports_the_build_kernels_get_kernel_imports(every_kind, hub, project, cli, tmp_path):
    """On this machine (detected: its torch, OS and CPU), kernels.get_kernel in its own process and
    kernelpin.load import the same build of the every-kind repository."""
    repo_id, commit = every_kind
    root = project(f'"{repo_id}" = "^1"\n')
    assert cli("lock")[0] == 0
    env = hub_env(hub.endpoint, tmp_path / "kernels-home")
    del env["HF_HUB_DISABLE_TELEMETRY"]  # kernels 0.17.2 then sends a User-Agent httpx rejects
    code = ("import kernels; module = kernels.get_kernel(%r, revision=%r, trust_remote_code=True); "
            "print(module.VARIANT)" % (repo_id, commit))
    theirs = run([sys.executable, "-c", code], env=env).stdout.split()[-1]
    assert theirs in EVERY_KIND  # torch213-cxx11-cpu-x86_64-linux on CI's machine
    assert kernelpin.load(repo_id, lock=root).VARIANT == theirs
