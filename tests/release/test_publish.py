"""The release rules: what `python -m tools.release stage` and kernelpin publish refuse, and how they say it."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelpin.format.metadata import compat_package
from kernelpin.publisher.release import PublishError, check_release
from testkit.fake_kernel import write_variant
from testkit.hub import HubServer
from testkit.releasing import ROOT, hub_env, release_into_mirror, run, stage

CPU = "torch213-cxx11-cpu-x86_64-linux"
CUDA = "torch213-cxx11-cu130-x86_64-linux"


def release_tool(*args: str | Path) -> tuple[int, str]:
    done = run([sys.executable, "-m", "tools.release", *map(str, args)], cwd=ROOT, check=False)
    return done.returncode, done.stdout + done.stderr


@pytest.fixture
def builds(tmp_path: Path) -> dict[str, Path]:
    return {
        "cpu": write_variant(tmp_path / "cpu", "1.0.0", CPU),
        "cuda": write_variant(tmp_path / "cuda", "1.0.0", CUDA, ("8.0", "9.0", "12.0+PTX")),
    }


def test_stage_lays_out_every_variant(builds, tmp_path):
    status, output = release_tool(
        "stage", builds["cpu"], builds["cuda"], "--repo", "acme/gray", "--out", tmp_path / "r"
    )
    assert status == 0, output
    assert "staged v1.0.0 (torch213-cxx11-cpu-x86_64-linux, torch213-cxx11-cu130-x86_64-linux)" in output
    release = check_release(tmp_path / "r")
    assert sorted(release.variants) == [CPU, CUDA] and str(release.version) == "1.0.0"
    assert sorted(f.path for f in release.files) == sorted(
        ["README.md"] + [f"build/{v}/{n}" for v in (CPU, CUDA) for n in ("__init__.py", "_impl.py", "metadata.json")]
    )
    readme = (tmp_path / "r" / "README.md").read_text()
    assert "| `torch213-cxx11-cu130-x86_64-linux` | cuda 13.0 | 8.0, 9.0, 12.0+PTX |" in readme
    assert '"acme/gray" = 1\n' in readme and '`"^1.0.0"` resolves against the version tags' in readme


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: (d / "_impl.py").write_text("def gray(r, g, b):\n    return 0\n"), "_impl.py: sha256 "),
        (lambda d: (d / "extra.py").write_text("import os\n"), "extra.py: present but not in the digest"),
        (lambda d: (d / "_impl.py").unlink(), "_impl.py: listed in the digest but missing"),
        (
            lambda d: (d / "_impl.py").unlink() or (d / "_impl.py").symlink_to("/etc/hostname"),
            "_impl.py is a symbolic link",
        ),
        (lambda d: (d / "metadata.json").write_text("{"), "metadata.json: not valid kernel metadata (Expecting"),
    ],
    ids=["modified", "extra", "missing", "symlink", "bad-json"],
)
def test_stage_refuses_a_build_that_does_not_match_its_digest(builds, tmp_path, damage, message):
    damage(builds["cpu"])
    status, output = release_tool("stage", builds["cpu"], "--repo", "acme/gray", "--out", tmp_path / "r")
    assert status == 1 and message in output
    assert not (tmp_path / "r").exists()


def test_stage_refuses_mixed_versions_and_duplicate_variants(builds, tmp_path):
    newer = write_variant(tmp_path / "newer", "1.1.0", CUDA, ("9.0",))
    status, output = release_tool("stage", builds["cpu"], newer, "--repo", "acme/gray", "--out", tmp_path / "r")
    assert status == 1 and "the sources are of different versions (1.0.0, 1.1.0)" in output
    status, output = release_tool("stage", builds["cuda"], newer, "--repo", "acme/gray", "--out", tmp_path / "r")
    assert status == 1 and f"two builds of variant {CUDA}" in output
    status, output = release_tool("stage", tmp_path / "nowhere", "--repo", "acme/gray", "--out", tmp_path / "r")
    assert status == 1 and "neither a variant directory (with metadata.json), nor a .conda package" in output


def test_check_release_refuses_what_publish_must_not_upload(builds, tmp_path):
    root = stage([builds["cpu"], builds["cuda"]], tmp_path / "r", "acme/gray")
    assert str(check_release(root, "v1.0.0").version) == "1.0.0"
    with pytest.raises(PublishError, match=r"--version 1.0.1 but the variants are version 1.0.0"):
        check_release(root, "1.0.1")
    cuda_metadata = root / "build" / CUDA / "metadata.json"
    document = json.loads(cuda_metadata.read_text())
    cuda_metadata.write_text(json.dumps({**document, "semver": "1.1.0"}))
    with pytest.raises(
        PublishError, match=r"variants of different versions \(torch213-cxx11-cpu-x86_64-linux: 1.0.0, "
    ):
        check_release(root)
    cuda_metadata.write_text(json.dumps({**document, "variant": CPU}))
    with pytest.raises(
        PublishError, match=r"says variant 'torch213-cxx11-cpu-x86_64-linux' but lies in build/torch213"
    ):
        check_release(root)
    cuda_metadata.write_text(json.dumps(document))
    os.rename(root / "build" / CUDA, root / "build" / "cuda-13")
    with pytest.raises(
        PublishError, match=r"build/cuda-13: not a kernel variant name: 'cuda-13' \(unknown framework; expected e.g."
    ):
        check_release(root)
    with pytest.raises(PublishError, match=r"no build/ directory"):
        check_release(tmp_path)


def test_a_release_carries_the_package_folder_older_kernels_import(tmp_path):
    """HF's kernel requirements still ask every variant for build/<variant>/<name>/ (kernels releases before
    the flat layout import it by path): tools/builder/op.py writes kernelpin.format.metadata.compat_package into every
    build, the digest covers it, and imported as those releases import it, it exports the variant's names.
    Failed before: releases had no such folder (and publish did not say so)."""
    import importlib.util

    kernels_data = pytest.importorskip("kernels_data")
    with_compat = write_variant(tmp_path / "with", "1.0.0", CPU, extra=compat_package("img2gray"))
    root = stage([with_compat], tmp_path / "r", "acme/img2gray")
    release = check_release(root)
    assert f"build/{CPU}/img2gray/__init__.py" in {f.path for f in release.files}
    assert release.without_compat_package == []
    variant = root / "build" / CPU
    metadata = kernels_data.Metadata.read_from_file(variant / "metadata.json")
    metadata.digest.validate(kernels_data.Digest.hash_variant(kernels_data.DigestAlgorithm.SHA256, variant))
    # As an older kernels imports it: the compat package's __init__.py by file path, under a name of its own.
    spec = importlib.util.spec_from_file_location("img2gray_0123abcd", variant / "img2gray" / "__init__.py")
    old_style = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = old_style
    try:
        spec.loader.exec_module(old_style)
    finally:
        for name in [n for n in sys.modules if n.startswith(spec.name)]:
            del sys.modules[name]
    assert (old_style.VERSION, old_style.VARIANT) == ("1.0.0", CPU)
    assert old_style.gray([(255, 0, 0), (10, 20, 30)]) == [76, 18]
    assert Path(old_style._variant.__file__) == (variant / "__init__.py").resolve()  # the variant's own code ran

    # A release without it is published with a warning that names the variants.
    root = stage([write_variant(tmp_path / "without", "1.0.0", CPU)], tmp_path / "r2", "acme/img2gray")
    assert check_release(root).without_compat_package == [CPU]
    done = run(
        [sys.executable, "-m", "kernelpin", "publish", str(root), "--repo", "acme/img2gray", "--dry-run"],
        cwd=ROOT,
        env=hub_env("http://127.0.0.1:9", tmp_path / "hf"),
    )
    assert (
        f"warning: no build/<variant>/<name>/ package in {CPU}: `kernels` releases older than the flat" in done.stderr
    )


@pytest.fixture(scope="module")
def read_only_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HubServer, Path]]:
    """acme/gray v1.0.0 on olah, and the staged layout of v1.1.0."""
    root = tmp_path_factory.mktemp("hub")
    hub = HubServer(root)
    release_into_mirror(
        hub.repo("acme/gray"), stage([write_variant(root / "b1", "1.0.0", CPU)], root / "v1.0.0", "acme/gray"), "v1.0.0"
    )
    staged = stage([write_variant(root / "b2", "1.1.0", CPU)], root / "v1.1.0", "acme/gray")
    with hub:
        yield hub, staged


def test_publish_to_a_server_that_takes_no_uploads(read_only_hub, tmp_path):
    """olah serves repositories but accepts no writes: publish says so instead of a bare HTTP error."""
    hub, staged = read_only_hub
    repo = hub.repo("acme/gray")
    before = repo.git("show-ref")
    env = hub_env(hub.endpoint, tmp_path / "hf")
    for repo_id in ("acme/gray", "acme/new"):  # an existing repository, and one publish would create
        done = run([sys.executable, "-m", "kernelpin", "publish", str(staged), "--repo", repo_id], env=env, check=False)
        assert done.returncode == 1
        assert f"{hub.endpoint} does not accept uploads to {repo_id} (40" in done.stderr
        assert "is HF_ENDPOINT a read-only mirror?" in done.stderr
    assert repo.git("show-ref") == before


def test_publish_checks_before_contacting_the_hub(read_only_hub, tmp_path):
    hub, staged = read_only_hub
    env = hub_env(hub.endpoint, tmp_path / "hf")
    done = run(
        [sys.executable, "-m", "kernelpin", "publish", str(staged), "--repo", "acme/gray", "--version", "2.0.0"],
        env=env,
        check=False,
    )
    assert done.returncode == 1 and "--version 2.0.0 but the variants are version 1.1.0" in done.stderr
    done = run(
        [sys.executable, "-m", "kernelpin", "publish", str(staged), "--repo", "not a repo", "--dry-run"],
        env=env,
        check=False,
    )
    assert done.returncode == 1 and "'not a repo' is not a Hub repository id" in done.stderr
