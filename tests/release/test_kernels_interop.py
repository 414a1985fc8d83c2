"""Interop with the `kernels` ecosystem (the installed kernels, 0.17.2 to 0.19.1; kernels-data 0.16.2): what our
tools publish is what its own code accepts, measured with its own code against the test Hub's kernel repository.

- its parser (`kernels_data.Metadata`) reads every staged variant and its digest validates the files;
- `kernels.get_kernel(repo, version=0)` resolves the branch v0, which publishing moved to v0.2.0, loads our
  binary and its op matches the reference on a real photo;
- `kernels versions` lists our variants; `kernels lock` and kernelpin read one pyproject and pin one commit.

One incompatibility of `kernels` 0.17.2 is checked per version: with HF_HUB_DISABLE_TELEMETRY=1 it sends a
User-Agent ending in "; ", which huggingface_hub 2.4's HTTP client rejects before any request; 0.18 fixed it.
Its other processes here run with telemetry left on (nothing leaves this machine), so they run on 0.17.2 too.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kernelpin.files.integrity import sha256_file
from kernelpin.loading import kernels_internals
from kernelpin.store import lockfiles
from testkit.releasing import (
    BUILT_VERSIONS,
    REPO_ID,
    Released,
    consumer_project,
    hub_env,
    kernelpin,
    kernels_cli,
    kernels_get_and_check,
)

kernels_data = pytest.importorskip("kernels_data")
pytest.importorskip("kernels")

VARIANT = "torch213-cxx11-cpu-x86_64-linux"


def kernels_env(released: Released, home: Path) -> dict[str, str]:
    return hub_env(released.hub.endpoint, home, HF_HUB_DISABLE_TELEMETRY="0")


@pytest.mark.parametrize("version", BUILT_VERSIONS)
def test_staged_metadata_parses_and_its_digest_validates_with_kernels_data(released: Released, version: str):
    variant = released.staged[version] / "build" / VARIANT
    metadata = kernels_data.Metadata.read_from_file(variant / "metadata.json")
    assert (
        metadata.version == 0
        and str(metadata.name) == "img2gray"
        and metadata.backend.backend_type == kernels_data.Backend.CPU
    )
    actual = kernels_data.Digest.hash_variant(kernels_data.DigestAlgorithm.SHA256, variant)
    metadata.digest.validate(actual)  # raises DigestValidationError listing each violation
    files = sorted(p.relative_to(variant).as_posix() for p in variant.rglob("*") if p.is_file())
    assert sorted(metadata.digest.files) == [path for path in files if path != "metadata.json"]
    # Its validation is not a formality: one changed byte is reported as a hash mismatch.
    tampered = variant.parent.parent.parent.with_name(f"tampered-{version}")
    shutil.copytree(variant, tampered)
    (tampered / "_ops.py").write_bytes((tampered / "_ops.py").read_bytes() + b"#")
    with pytest.raises(kernels_data.DigestValidationError) as refused:
        metadata.digest.validate(kernels_data.Digest.hash_variant(kernels_data.DigestAlgorithm.SHA256, tampered))
    assert [v.path for v in refused.value.violations] == ["_ops.py"]


def test_get_kernel_version_0_loads_the_newest_release_from_the_kernel_repository(released: Released, tmp_path: Path):
    refs = released.repo.refs()
    assert refs[1]["v0"] == released.commits["0.2.0"]  # publishing moved v0 to 0.2.0, not to 0.2.1-rc.1
    outcome = kernels_get_and_check(REPO_ID, 0, kernels_env(released, tmp_path / "hf"))
    assert outcome["loaded"] is True, outcome
    assert (outcome["metadata"]["semver"], outcome["metadata"]["variant"]) == ("0.2.0", VARIANT)
    assert outcome["mismatches"] == 0
    # It loaded the published bits, from the kernel repository's cache folder.
    loaded = Path(outcome["file"]).parent
    assert "kernels--acme--img2gray" in str(loaded)
    staged = released.staged["0.2.0"] / "build" / VARIANT
    files = [p.relative_to(staged) for p in staged.rglob("*") if p.is_file()]
    assert {path: sha256_file(staged / path) for path in files} == {path: sha256_file(loaded / path) for path in files}


def test_kernels_versions_lists_our_variants(released: Released, tmp_path: Path):
    done = kernels_cli(["versions", REPO_ID], kernels_env(released, tmp_path / "hf"))
    assert "Version 0:" in done.stdout and VARIANT in done.stdout
    assert "torch213-cxx11-cpu-x86_64-linux" in done.stdout.split("Version 0:")[1]


def test_kernels_lock_and_kernelpin_lock_read_one_pyproject(released: Released, tmp_path: Path):
    """`"acme/img2gray" = 0` in [tool.kernels.dependencies]: both lock the head of branch v0, which publishing
    moved to the newest 0.x release; kernelpin records the tag on it too."""
    env = kernels_env(released, tmp_path / "hf")
    project = consumer_project(tmp_path / "app", 0, REPO_ID)
    kernels_cli(["lock", str(project)], env)
    (entry,) = json.loads((project / "kernels.lock").read_text())
    assert entry == {"dependency": {"repo-id": REPO_ID, "version": 0}, "lock": {"commit": released.commits["0.2.0"]}}

    kernelpin(["lock"], project, env)
    (kernel,) = lockfiles.read(project / "kernelpin.lock").kernels
    assert (kernel.version, kernel.commit, kernel.repo_type) == ("0.2.0", released.commits["0.2.0"], "kernel")
    assert (kernel.ref, kernel.tag) == ("refs/heads/v0", "v0.2.0")


def test_get_kernel_with_telemetry_disabled(released: Released, tmp_path: Path):
    """kernels 0.17.2 builds an empty user agent of its own when HF_HUB_DISABLE_TELEMETRY=1 and huggingface_hub
    appends it after "; ": httpx refuses the header before any request. 0.18 passes no user agent then
    (`_get_hf_api`) and loads."""
    version = kernels_internals.installed_version("the test")
    outcome = kernels_get_and_check(REPO_ID, 0, hub_env(released.hub.endpoint, tmp_path / "hf"))  # telemetry off
    if kernels_internals._release(version) >= (0, 18):
        assert outcome["loaded"] is True and outcome["mismatches"] == 0, outcome
        assert (outcome["metadata"]["semver"], outcome["metadata"]["variant"]) == ("0.2.0", VARIANT)
    else:
        assert outcome["loaded"] is False and outcome["type"] == "httpx2.LocalProtocolError", outcome
        assert outcome["message"].startswith(f"Illegal header value b'kernels/{version}; hf_hub/")
        assert outcome["message"].endswith("; '")
