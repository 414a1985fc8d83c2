"""Per-capability builds in a release (issue 51): staged beside build/ as capabilities/<variant>/sm_XY/, checked against
the variant's metadata.json listing, and invisible to `kernels` (0.17.2 to 0.19.1): its parser reads the variant
with the new key and validates its digest, `kernels download` fetches build/* only, and `kernels.get_kernel` loads
the release as before."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kernelpin.errors import KernelpinError
from kernelpin.publisher.release import check_release
from testkit.fake_kernel import CPU_213, capability_release_files, kernel_files
from testkit.hub import HubServer
from testkit.releasing import consumer_project, hub_env, kernels_cli, run
from tools.builder import capability_builds
from tools.release.stage import stage

CUDA = "torch213-cxx11-cu130-x86_64-linux"
ARCHS = ("8.0", "9.0", "12.0+PTX")


def _write(tree: dict[str, bytes], into: Path) -> None:
    for path, data in tree.items():
        (into / path).parent.mkdir(parents=True, exist_ok=True)
        (into / path).write_bytes(data)


@pytest.fixture
def built(tmp_path: Path) -> Path:
    """A CUDA variant directory as `tools.builder.op --capability-builds` leaves it: the variant, and its builds
    beside it in <dir>.capabilities/."""
    tree = capability_release_files("1.0.0", CUDA, ARCHS)
    variant = tmp_path / "out" / "img2gray"
    _write({p.split("/", 2)[2]: d for p, d in tree.items() if p.startswith(f"build/{CUDA}/")}, variant)
    _write(
        {p.split("/", 2)[2]: d for p, d in tree.items() if p.startswith(f"capabilities/{CUDA}/")},
        capability_builds.beside(variant),
    )
    return variant


def test_stage_brings_the_builds_along_and_checks_them(built: Path, tmp_path: Path):
    release = stage([built], tmp_path / "release", "acme/img2gray")
    paths = {f.path for f in release.files}
    assert {f"capabilities/{CUDA}/{name}/_device.bin" for name in ("sm_80", "sm_90", "sm_120")} <= paths
    assert f"build/{CUDA}/_device.bin" in paths


def test_a_changed_unlisted_or_missing_build_is_refused(built: Path, tmp_path: Path):
    release = stage([built], tmp_path / "release", "acme/img2gray").root
    device = release / "capabilities" / CUDA / "sm_90" / "_device.bin"
    device.write_bytes(device.read_bytes()[:-1] + b"!")
    with pytest.raises(KernelpinError, match=r"sm_90: the files do not match metadata\.json:\n  _device\.bin: sha256"):
        check_release(release)
    release = stage([built], tmp_path / "release", "acme/img2gray").root
    (release / "capabilities" / CUDA / "sm_75").mkdir()
    (release / "capabilities" / CUDA / "sm_75" / "x.so").write_bytes(b"planted")
    with pytest.raises(KernelpinError, match=f"{CUDA}/sm_75 listed by no variant's metadata.json"):
        check_release(release)
    release = stage([built], tmp_path / "release", "acme/img2gray").root
    for path in (release / "capabilities" / CUDA / "sm_80").iterdir():
        path.unlink()
    (release / "capabilities" / CUDA / "sm_80").rmdir()
    with pytest.raises(KernelpinError, match=r"sm_80: missing"):
        check_release(release)
    capability_builds.beside(built).rename(tmp_path / "elsewhere")
    with pytest.raises(KernelpinError, match=r"lists per-capability builds, but .*img2gray\.capabilities is not there"):
        stage([built], tmp_path / "release", "acme/img2gray")


def test_kernels_data_reads_the_variant_and_validates_its_digest(built: Path):
    kernels_data = pytest.importorskip("kernels_data")
    for directory in (built, *sorted(capability_builds.beside(built).iterdir())):
        metadata = kernels_data.Metadata.read_from_file(directory / "metadata.json")
        metadata.digest.validate(kernels_data.Digest.hash_variant(kernels_data.DigestAlgorithm.SHA256, directory))
    assert "capability-builds" in json.loads((built / "metadata.json").read_text())


def test_kernels_downloads_and_loads_the_release_as_before(tmp_path: Path):
    pytest.importorskip("kernels")
    tree = {**kernel_files("1.0.0", variants=(CPU_213,)), **capability_release_files("1.0.0", CUDA, ARCHS)}
    with HubServer(tmp_path / "hub", trusted_publishers=("acme",)) as hub:
        repo = hub.repo("acme/slim", "kernel")
        repo.write(tree, clear=True)
        commit = repo.commit("release 1.0.0")
        repo.tag("v1.0.0")
        repo.branch("v1")
        env = hub_env(hub.endpoint, tmp_path / "hf", HF_HUB_DISABLE_TELEMETRY="0")  # kernels 0.17.2: see interop
        project = consumer_project(tmp_path / "app", 1, "acme/slim")
        kernels_cli(["lock", str(project)], env)
        kernels_cli(["download", str(project)], env)
        snapshot = next((tmp_path / "hf" / "hub").glob(f"kernels--acme--slim/snapshots/{commit}"))
        downloaded = sorted(p.relative_to(snapshot).as_posix() for p in snapshot.rglob("*") if p.is_file())
        assert downloaded and all(path.startswith("build/") for path in downloaded), downloaded
        assert f"build/{CPU_213}/_impl.py" in downloaded
        code = "import kernels; m = kernels.get_kernel('acme/slim', version=1); print(m.VARIANT)"
        loaded = run([sys.executable, "-c", code], env={**env, "HF_HUB_CACHE": str(tmp_path / "fresh")})
        assert loaded.stdout.strip().splitlines()[-1] == CPU_213
        fresh = sorted(p.as_posix() for p in (tmp_path / "fresh").rglob("*") if p.is_file())
        assert not [path for path in fresh if "/capabilities/" in path]
