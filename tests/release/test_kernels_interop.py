"""Interop with the `kernels` ecosystem (PyPI kernels 0.17.2, kernels-data 0.16.2): what our tools publish is
what its own code accepts, measured with its own code against the test Hub's kernel repository.

- its parser (`kernels_data.Metadata`) reads every staged variant and its digest validates the files;
- `kernels.get_kernel(repo, version=0)` resolves the branch v0, which publishing moved to v0.2.0, loads our
  binary and its op matches the reference on a real photo;
- `kernels versions` lists our variants; `kernels lock` and kernelpin read one pyproject and pin one commit.

One incompatibility of `kernels` itself stays pinned (it fails the day it is fixed): with
HF_HUB_DISABLE_TELEMETRY=1 it sends a User-Agent ending in "; ", which huggingface_hub 2.4's HTTP client
rejects before any request. Its processes here run with telemetry left on (nothing leaves this machine).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kernelpin import lock as lockfile
from kernelpin.integrity import sha256_file
from testkit.releasing import BUILT_VERSIONS, IMAGE, REPO_ID, Released, consumer_project, hub_env, kernelpin, run

kernels_data = pytest.importorskip("kernels_data")
pytest.importorskip("kernels")

VARIANT = "torch213-cxx11-cpu-x86_64-linux"

GET_KERNEL = """
import json, sys
from pathlib import Path
import numpy as np, torch
from PIL import Image
import kernels
try:
    module = kernels.get_kernel(sys.argv[1], version=int(sys.argv[2]), trust_remote_code=True)
except Exception as error:
    print(json.dumps({"loaded": False, "type": f"{type(error).__module__}.{type(error).__name__}", "message": str(error)}))
    raise SystemExit(0)
rgb = np.asarray(Image.open(sys.argv[3]).convert("RGB"))
r, g, b = (rgb[..., c].astype(np.float32) for c in range(3))
expected = np.rint(np.clip((np.float32(0.299) * r + np.float32(0.587) * g) + np.float32(0.114) * b, 0, 255))
gray = module.img2gray(torch.from_numpy(rgb.copy()), dim=-1, keepdim=False).numpy()
print(json.dumps({"loaded": True, "file": module.__file__, "namespace": module.NAMESPACE,
                  "metadata": module.metadata(), "mismatches": int((gray != expected.astype(np.uint8)).sum())}))
"""

KERNELS_CLI = "import sys; from kernels.cli import main; sys.argv = ['kernels', *sys.argv[1:]]; main()"


def python_json(code: str, args: list[str], env: dict[str, str]) -> dict:
    done = run([sys.executable, "-c", code, *args], env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def kernels_env(released: Released, home: Path) -> dict[str, str]:
    return hub_env(released.hub.endpoint, home, HF_HUB_DISABLE_TELEMETRY="0")


@pytest.mark.parametrize("version", BUILT_VERSIONS)
def test_staged_metadata_parses_and_its_digest_validates_with_kernels_data(released: Released, version: str):
    variant = released.staged[version] / "build" / VARIANT
    metadata = kernels_data.Metadata.read_from_file(variant / "metadata.json")
    assert metadata.version == 0 and str(metadata.name) == "img2gray" and metadata.backend.backend_type == kernels_data.Backend.CPU
    actual = kernels_data.Digest.hash_variant(kernels_data.DigestAlgorithm.SHA256, variant)
    metadata.digest.validate(actual)  # raises DigestValidationError listing each violation
    assert sorted(metadata.digest.files) == sorted(p.name for p in variant.iterdir() if p.name != "metadata.json")
    # Its validation is not a formality: one changed byte is reported as a hash mismatch.
    tampered = variant.parent.parent.parent.with_name(f"tampered-{version}")
    tampered.mkdir()
    for path in variant.iterdir():
        (tampered / path.name).write_bytes(path.read_bytes())
    (tampered / "_ops.py").write_bytes((tampered / "_ops.py").read_bytes() + b"#")
    with pytest.raises(kernels_data.DigestValidationError) as refused:
        metadata.digest.validate(kernels_data.Digest.hash_variant(kernels_data.DigestAlgorithm.SHA256, tampered))
    assert [v.path for v in refused.value.violations] == ["_ops.py"]


def test_get_kernel_version_0_loads_the_newest_release_from_the_kernel_repository(released: Released, tmp_path: Path):
    refs = released.repo.refs()
    assert refs[1]["v0"] == released.commits["0.2.0"]  # publishing moved v0 to 0.2.0, not to 0.2.1-rc.1
    outcome = python_json(GET_KERNEL, [REPO_ID, "0", str(IMAGE)], kernels_env(released, tmp_path / "hf"))
    assert outcome["loaded"] is True, outcome
    assert (outcome["metadata"]["semver"], outcome["metadata"]["variant"]) == ("0.2.0", VARIANT)
    assert outcome["mismatches"] == 0
    # It loaded the published bits, from the kernel repository's cache folder.
    loaded = Path(outcome["file"]).parent
    assert "kernels--acme--img2gray" in str(loaded)
    staged = released.staged["0.2.0"] / "build" / VARIANT
    assert {p.name: sha256_file(p) for p in staged.iterdir()} == {
        name: sha256_file(loaded / name) for name in (p.name for p in staged.iterdir())}


def test_kernels_versions_lists_our_variants(released: Released, tmp_path: Path):
    done = run([sys.executable, "-c", KERNELS_CLI, "versions", REPO_ID], env=kernels_env(released, tmp_path / "hf"))
    assert "Version 0:" in done.stdout and VARIANT in done.stdout
    assert "torch213-cxx11-cpu-x86_64-linux" in done.stdout.split("Version 0:")[1]


def test_kernels_lock_and_kernelpin_lock_read_one_pyproject(released: Released, tmp_path: Path):
    """`"acme/img2gray" = 0` in [tool.kernels.dependencies]: kernels locks the head of branch v0, kernelpin the
    newest 0.x release (>=0.0.0, <1.0.0-0); publishing keeps them the same commit."""
    env = kernels_env(released, tmp_path / "hf")
    project = consumer_project(tmp_path / "app", 0, REPO_ID)
    run([sys.executable, "-c", KERNELS_CLI, "lock", str(project)], env=env)
    (entry,) = json.loads((project / "kernels.lock").read_text())
    assert entry == {"dependency": {"repo-id": REPO_ID, "version": 0}, "lock": {"commit": released.commits["0.2.0"]}}

    kernelpin(["lock"], project, env)
    (kernel,) = lockfile.read(project / "kernelpin.lock").kernels
    assert (kernel.version, kernel.commit, kernel.repo_type) == ("0.2.0", released.commits["0.2.0"], "kernel")
    assert kernel.ref == "refs/tags/v0.2.0"


def test_get_kernel_with_telemetry_disabled_sends_an_illegal_header(released: Released, tmp_path: Path):
    outcome = python_json(GET_KERNEL, [REPO_ID, "0", str(IMAGE)], hub_env(released.hub.endpoint, tmp_path / "hf"))
    assert outcome["loaded"] is False and outcome["type"] == "httpx2.LocalProtocolError"
    assert outcome["message"].startswith("Illegal header value b'kernels/0.17.2; hf_hub/")
    assert outcome["message"].endswith("; '")
