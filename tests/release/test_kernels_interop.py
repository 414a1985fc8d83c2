"""Interop with the `kernels` package (PyPI, 0.17.2): what it can and cannot do with our published release.

`kernels.get_kernel("acme/img2gray", revision="v0.1.0")` cannot load the release from this server, for three
independent reasons, each pinned by a test below with the exact failure (so a test fails, and this note must
be revisited, the day one of them goes away):

1. Repository type: kernels >= 0.14 asks only for `kernel` repositories (`/api/kernels/...`). olah serves
   model, dataset and space repositories, so the request is answered "Repository Not Found" although the
   same repository and tag are served as a model repository. (kernelpin tries `kernel`, then `model`.)
2. Version rule: kernels' metadata.json schema has an integer `version` (its major-version branches `v1`,
   `v2`), ours is the SemVer string the tags carry ("0.1.0"). It also requires `provenance.kernel-builder`,
   naming its own build tool. Our metadata.json fails its parser on both counts.
3. Client: with HF_HUB_DISABLE_TELEMETRY=1 (as CI sets it) kernels builds a User-Agent with a trailing "; "
   that huggingface_hub 2.4's HTTP client rejects before any request is made.

What does interoperate: the layout and the binaries. Given a copy of the release whose metadata.json says
what kernels' schema wants (version 0, a kernel-builder entry), `kernels.get_local_kernel` picks our variant
directory and its op matches the reference.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kernelpin.integrity import sha256_file
from testkit.releasing import IMAGE, REPO_ID, Released, hub_env, run

pytest.importorskip("kernels")

VARIANT = "torch213-cxx11-cpu-x86_64-linux"

GET_KERNEL = """
import json, sys, traceback
import kernels
try:
    kernels.get_kernel(sys.argv[1], revision=sys.argv[2], trust_remote_code=True)
    print(json.dumps({"loaded": True}))
except Exception as error:
    print(json.dumps({"loaded": False, "type": f"{type(error).__module__}.{type(error).__name__}", "message": str(error)}))
"""

LOCAL_KERNEL = """
import json, sys
from pathlib import Path
import numpy as np, torch
from PIL import Image
import kernels
try:
    module = kernels.get_local_kernel(Path(sys.argv[1]), trust_remote_code=True)
except Exception as error:
    print(json.dumps({"loaded": False, "type": type(error).__name__, "message": str(error)}))
    raise SystemExit(0)
rgb = np.asarray(Image.open(sys.argv[2]).convert("RGB"))
r, g, b = (rgb[..., c].astype(np.float32) for c in range(3))
expected = np.rint(np.clip((np.float32(0.299) * r + np.float32(0.587) * g) + np.float32(0.114) * b, 0, 255))
gray = module.img2gray(torch.from_numpy(rgb.copy()), dim=-1, keepdim=False).numpy()
print(json.dumps({"loaded": True, "file": module.__file__, "namespace": module.NAMESPACE,
                  "mismatches": int((gray != expected.astype(np.uint8)).sum())}))
"""


def python_json(code: str, args: list[str], env: dict[str, str]) -> dict:
    done = run([sys.executable, "-c", code, *args], env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_get_kernel_asks_only_for_kernel_repositories(released: Released, tmp_path: Path):
    env = hub_env(released.hub.endpoint, tmp_path / "hf", HF_HUB_DISABLE_TELEMETRY="0")
    outcome = python_json(GET_KERNEL, [REPO_ID, "v0.1.0"], env)
    assert outcome["loaded"] is False
    assert outcome["type"] == "huggingface_hub.errors.RepositoryNotFoundError"
    assert f"Repository Not Found for url: {released.hub.endpoint}/api/kernels/acme/img2gray/tree/v0.1.0/build" in outcome["message"]
    # ... while the very same repository and tag are served as a model repository.
    from huggingface_hub import HfApi

    tags = HfApi(endpoint=released.hub.endpoint).list_repo_refs(REPO_ID, repo_type="model").tags
    assert {t.name: t.target_commit for t in tags}["v0.1.0"] == released.commits["0.1.0"]


def test_get_kernel_with_telemetry_disabled_sends_an_illegal_header(released: Released, tmp_path: Path):
    outcome = python_json(GET_KERNEL, [REPO_ID, "v0.1.0"], hub_env(released.hub.endpoint, tmp_path / "hf"))
    assert outcome["loaded"] is False and outcome["type"] == "httpx2.LocalProtocolError"
    assert outcome["message"].startswith("Illegal header value b'kernels/0.17.2; hf_hub/")
    assert outcome["message"].endswith("; '")


def test_kernels_loads_our_layout_only_with_its_own_metadata_schema(released: Released, tmp_path: Path):
    from huggingface_hub import snapshot_download

    env = hub_env(released.hub.endpoint, tmp_path / "hf")
    snapshot = Path(snapshot_download(REPO_ID, revision="v0.1.0", endpoint=released.hub.endpoint,
                                      cache_dir=tmp_path / "hf" / "hub"))
    outcome = python_json(LOCAL_KERNEL, [str(snapshot), str(IMAGE)], env)
    assert outcome["loaded"] is False and "missing field `kernel-builder`" in outcome["message"]

    # The same release with the two fields kernels' schema demands: it then loads our binary as it is.
    adapted = tmp_path / "adapted"
    (adapted / "build").mkdir(parents=True)
    variant = adapted / "build" / VARIANT
    variant.mkdir()
    for path in (snapshot / "build" / VARIANT).iterdir():
        variant.joinpath(path.name).write_bytes(path.read_bytes())
    metadata = json.loads((variant / "metadata.json").read_text())
    metadata["provenance"]["kernel-builder"] = {"version": "none (tools/build_op.py)"}
    (variant / "metadata.json").write_text(json.dumps(metadata))
    outcome = python_json(LOCAL_KERNEL, [str(adapted), str(IMAGE)], env)
    assert outcome["loaded"] is False
    assert 'invalid type: string "0.1.0", expected usize' in outcome["message"]  # the version rule

    metadata["version"] = 0
    (variant / "metadata.json").write_text(json.dumps(metadata))
    outcome = python_json(LOCAL_KERNEL, [str(adapted), str(IMAGE)], env)
    assert outcome["loaded"] is True, outcome
    assert Path(outcome["file"]).parent == variant and outcome["namespace"] == metadata["id"]
    assert outcome["mismatches"] == 0
    library = f"{metadata['id']}.abi3.so"
    assert sha256_file(variant / library) == sha256_file(released.staged["0.1.0"] / "build" / VARIANT / library)
