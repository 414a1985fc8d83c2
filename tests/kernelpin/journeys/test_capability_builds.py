"""Download only what the GPU runs (issue 51): a release whose CUDA variant carries per-capability builds is
locked with them, and `sync`, `load` and `get_kernel` on a machine of known GPU capability fetch only the build for
it (its own capability, else an earlier minor of its major, else the PTX one; the fat build where none is known),
say which they took, and refuse a GPU no build runs on in one line before any download."""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import kernelpin
from kernelpin.errors import KernelpinError
from kernelpin.format import lockfile
from kernelpin.format.lockfile import LockedCapabilityBuild, LockedFile
from kernelpin.format.variant import Environment
from kernelpin.loading import runtime
from kernelpin.store import lockfiles
from testkit.fake_kernel import CPU_213, capability_release_files, kernel_files
from testkit.sigstore_root import Identity

CUDA = "torch213-cxx11-cu130-x86_64-linux"
ARCHS = ("8.0", "9.0", "12.0+PTX")
DEVICE = 50_000  # bytes of stand-in device code per capability


SIGNER = Identity(repository="acme-corp/kernels", workflow=".github/workflows/release.yaml", commit="a" * 40)
SIGNERS = '[{ repository = "acme-corp/kernels", workflow = ".github/workflows/release.yaml" }]'


@pytest.fixture(params=["unsigned", "signed"])
def released(request, new_repo, project, cli, sigstore):
    """A kernel release with a CPU variant and a CUDA one with per-capability builds, locked by a project; signed
    (its metadata.json files, which list the builds, by the test kit's Sigstore; the project requires that signer)
    or not."""
    repo_id, repo = new_repo("slim", "kernel")
    tree = {**kernel_files("1.0.0", variants=(CPU_213,)), **capability_release_files("1.0.0", CUDA, ARCHS, DEVICE)}
    signed = request.param == "signed"
    repo.write(sigstore[0].sign_files(tree, SIGNER) if signed else tree)
    repo.commit("release 1.0.0")
    repo.tag("v1.0.0")
    root = project(f'"{repo_id}" = "^1"\n')
    if signed:
        with open(root / "pyproject.toml", "a") as stream:
            stream.write(
                f'\n[tool.kernelpin.trust]\ntrusted-root = "{sigstore[1]}"\nrequire-signatures = true\n'
                f"[tool.kernelpin.trust.publishers.acme]\nsigners = {SIGNERS}\n"
            )
    status, _, err = cli("lock")
    assert status == 0, err
    if signed:
        [variant] = [v for v in lockfiles.read(root / "kernelpin.lock").kernel(repo_id).variants if v.name == CUDA]
        assert variant.signature is not None and variant.signature.signer is not None
    return repo_id, root


def _downloaded(cache: Path) -> dict[str, int]:
    """Every file in the cache's snapshots, by repository path, with its size."""
    return {
        "/".join(path.relative_to(snapshot).parts): path.stat().st_size
        for snapshot in cache.glob("*/snapshots/*")
        for path in snapshot.rglob("*")
        if path.is_file()
    }


def test_the_lock_records_every_per_capability_build_machine_independently(released):
    repo_id, root = released
    text = (root / "kernelpin.lock").read_text()
    assert "\nversion = 4\n" in text
    [variant] = [v for v in lockfiles.read(root / "kernelpin.lock").kernel(repo_id).variants if v.name == CUDA]
    assert {b.name: b.archs for b in variant.capability_builds} == {
        "sm_80": ("8.0",),
        "sm_90": ("9.0",),
        "sm_120": ("12.0+PTX",),
    }
    [sm_90] = [b for b in variant.capability_builds if b.name == "sm_90"]
    assert sm_90.files and {f.path for f in sm_90.files} >= {"_device.bin", "metadata.json"}
    assert next(f for f in sm_90.files if f.path == "_device.bin").size == DEVICE
    assert lockfile.parse(text, "x") == lockfiles.read(root / "kernelpin.lock")  # round trip


@pytest.mark.parametrize(
    ("capability", "build", "how"),
    [("9.0", "sm_90", "its own code"), ("8.6", "sm_80", "code of an earlier minor"), ("13.0", "sm_120", "PTX")],
)
def test_sync_downloads_only_the_build_the_gpu_runs(released, cli, hf_env, capability, build, how):
    flags = ("--torch", "2.13", "--cuda", "13.0", "--gpu-capability", capability)
    status, out, err = cli("sync", "--dry-run", "--json", *flags)
    assert status == 0, err
    [planned] = json.loads(out)["would_sync"]
    assert planned["directory"].endswith(f"capabilities/{CUDA}/{build}") and "_device.bin" in planned["missing"]
    status, out, err = cli("sync", *flags)
    assert status == 0, err
    assert f"build: {CUDA} {build} (this GPU runs {how}" in out
    files = _downloaded(hf_env)
    assert f"capabilities/{CUDA}/{build}/_device.bin" in files
    # Of the fat build only what is signed and lists the build (metadata.json); no other capability's code.
    assert {path for path in files if path.startswith(f"build/{CUDA}/")} <= {
        f"build/{CUDA}/metadata.json",
        f"build/{CUDA}/metadata.json.sigstore",
    }
    assert sum(files.values()) < 2 * DEVICE
    assert not [path for path in files if path.startswith("capabilities/") and f"/{build}/" not in path]
    # verify: the build's files and the variant's signed metadata.json, nothing reported missing.
    status, out, err = cli("verify", "--signatures", "--json")
    assert status == 0, out + err
    rows = json.loads(out)["files"]
    assert {(row["variant"], row["path"], row["status"]) for row in rows} >= {
        (f"{CUDA} {build}", "_device.bin", "ok"),
        (f"{CUDA}", "metadata.json", "ok"),
    }
    assert not [row for row in rows if row["status"] not in ("ok", "signed")], rows
    [snapshot] = hf_env.glob("*/snapshots/*")
    device = snapshot / "capabilities" / CUDA / build / "_device.bin"
    device.unlink()
    device.write_bytes(b"planted")
    status, out, _ = cli("verify", "--json")
    assert status == 1 and {(r["variant"], r["path"], r["status"]) for r in json.loads(out)["files"]} >= {
        (f"{CUDA} {build}", "_device.bin", "modified")
    }


def test_sync_without_a_known_gpu_takes_the_fat_build(released, cli, hf_env):
    status, out, err = cli("sync", "--json", "--torch", "2.13", "--cuda", "13.0")
    assert status == 0, err
    [synced] = json.loads(out)["synced"]
    assert synced["capability-build"] is None
    files = _downloaded(hf_env)
    assert files[f"build/{CUDA}/_device.bin"] == len(ARCHS) * DEVICE
    assert not [path for path in files if path.startswith("capabilities/")]


def test_a_gpu_no_build_runs_on_gets_one_line_before_any_download(released, cli, hf_env):
    status, _, err = cli("sync", "--torch", "2.13", "--cuda", "13.0", "--gpu-capability", "7.0")
    assert status == 1
    first = err.strip().splitlines()[0]
    assert "this GPU (compute capability 7.0) is not a compiled target of " + CUDA in first
    assert "compiled for 8.0;9.0;12.0+PTX" in first
    assert _downloaded(hf_env) == {}


def test_load_and_get_kernel_take_the_build_for_the_gpu(released, cli, hf_env, monkeypatch):
    repo_id, root = released
    monkeypatch.setattr(
        runtime, "_environment", lambda: Environment(torch=(2, 13), cuda=(13, 0), gpu_capability=(9, 0))
    )
    for name in [name for name in sys.modules if name.startswith("_kernelpin_")]:
        del sys.modules[name]
    module = kernelpin.load(repo_id, lock=root)
    assert module.VARIANT == CUDA
    assert "sm_90" in module.__kernelpin_build__
    assert Path(module.__file__).parent.name == "sm_90"
    assert f"build/{CUDA}/_device.bin" not in _downloaded(hf_env)
    for name in [name for name in sys.modules if name.startswith("_kernelpin_")]:
        del sys.modules[name]
    with pytest.warns(kernelpin.UnpinnedKernelWarning):
        loaded = kernelpin.get_kernel(repo_id, version="^1")
    assert "sm_90" in loaded.__kernelpin_build__ and Path(loaded.__file__).parent.name == "sm_90"
    assert f"build/{CUDA}/_device.bin" not in _downloaded(hf_env)
    # Offline, from what get_kernel resolved and remembered (the per-capability builds with it).
    for name in [name for name in sys.modules if name.startswith("_kernelpin_")]:
        del sys.modules[name]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.warns(kernelpin.UnpinnedKernelWarning):
        offline = kernelpin.get_kernel(repo_id, version="^1")
    assert Path(offline.__file__).parent.name == "sm_90"


def test_a_lock_whose_build_is_another_capabilitys_is_refused(released, cli, hf_env):
    """The lock's sm_80 entry edited to list sm_90's files, and those files planted where sm_80's go: every byte
    matches the lock, and the trust gate refuses the build against the signed listing."""
    repo_id, root = released
    lock = lockfiles.read(root / "kernelpin.lock")
    kernel = lock.kernel(repo_id)
    [variant] = [v for v in kernel.variants if v.name == CUDA]
    builds = {b.name: b for b in variant.capability_builds}
    swapped = LockedCapabilityBuild("sm_80", ("8.0",), builds["sm_90"].files)
    assert cli("sync", "--torch", "2.13", "--cuda", "13.0", "--gpu-capability", "9.0")[0] == 0  # sm_90's files
    _plant(hf_env, CUDA, "sm_90", "sm_80")
    _replace_build(root, lock, repo_id, swapped)
    status, _, err = cli("sync", "--frozen", "--torch", "2.13", "--cuda", "13.0", "--gpu-capability", "8.0")
    assert status == 1
    assert "does not match the signed metadata.json" in err and "is the sm_90 build's, not sm_80's" in err


def test_a_lock_whose_build_is_another_releases_is_refused(released, cli, hf_env):
    """The lock's sm_90 entry edited to list release 1.0.1's sm_90 build, whose files are planted in the cache."""
    repo_id, root = released
    lock = lockfiles.read(root / "kernelpin.lock")
    other = capability_release_files("1.0.1", CUDA, ARCHS, DEVICE)
    prefix = f"capabilities/{CUDA}/sm_90/"
    files = tuple(
        LockedFile(path[len(prefix) :], len(data), hashlib.sha256(data).hexdigest())
        for path, data in sorted(other.items())
        if path.startswith(prefix)
    )
    assert cli("sync", "--torch", "2.13", "--cuda", "13.0", "--gpu-capability", "9.0")[0] == 0
    [snapshot] = hf_env.glob("*/snapshots/*")
    for path, data in other.items():
        if path.startswith(prefix):
            target = snapshot / path
            target.unlink()
            target.write_bytes(data)
    _replace_build(root, lock, repo_id, LockedCapabilityBuild("sm_90", ("9.0",), files))
    status, _, err = cli("sync", "--frozen", "--torch", "2.13", "--cuda", "13.0", "--gpu-capability", "9.0")
    assert status == 1
    assert "is in no build of this release's signed metadata.json (another release's, or altered)" in err


def _plant(cache: Path, variant: str, source: str, destination: str) -> None:
    [snapshot] = cache.glob("*/snapshots/*")
    into = snapshot / "capabilities" / variant / destination
    into.mkdir(parents=True, exist_ok=True)
    for path in (snapshot / "capabilities" / variant / source).iterdir():
        (into / path.name).write_bytes(path.read_bytes())


def _replace_build(root: Path, lock: lockfile.Lock, repo_id: str, build: LockedCapabilityBuild) -> None:
    kernel = lock.kernel(repo_id)
    variants = tuple(
        replace(v, capability_builds=tuple(build if b.name == build.name else b for b in v.capability_builds))
        for v in kernel.variants
    )
    lockfiles.write(root / "kernelpin.lock", replace(lock, kernels=(replace(kernel, variants=variants),)))


def test_a_lock_without_per_capability_builds_stays_schema_3(new_repo, project, cli):
    """Older kernelpin releases read schema 3 only: a lock that needs nothing newer is still written as 3."""
    repo_id, repo = new_repo("fat", "kernel")
    repo.write(kernel_files("1.0.0", variants=(CPU_213, CUDA)), clear=True)
    repo.commit("release")
    repo.tag("v1.0.0")
    root = project(f'"{repo_id}" = "^1"\n')
    assert cli("lock")[0] == 0
    assert "\nversion = 3\n" in (root / "kernelpin.lock").read_text()
    with pytest.raises(KernelpinError, match="lock schema version '5'"):
        lockfile.parse((root / "kernelpin.lock").read_text().replace("\nversion = 3\n", "\nversion = 5\n"), "x")
