"""lock -> sync -> load against a real Hub API (olah), on a pure-Python kernel with several variants."""

from __future__ import annotations

import json

import kernelpin
from kernelpin.store import lockfiles
from testkit.fake_kernel import CPU_213, VARIANTS


def test_lock_sync_load(img2gray, project, cli, hf_env):
    root = project('"acme/img2gray" = "^0.1"\n')
    status, out, err = cli("lock")
    assert status == 0, err
    pinned = lockfiles.read(root / "kernelpin.lock")
    (kernel,) = pinned.kernels
    assert (kernel.version, kernel.ref, kernel.requirement) == ("0.1.1", "refs/tags/v0.1.1", "^0.1")
    assert sorted(v.name for v in kernel.variants) == sorted(VARIANTS)
    cuda = kernel.variant("torch213-cxx11-cu130-x86_64-linux")
    assert cuda.backend == "cuda" and cuda.archs == ("8.0", "9.0", "12.0+PTX")
    assert [f.path for f in cuda.files] == ["__init__.py", "_impl.py", "metadata.json"]

    status, out, err = cli("sync", "--json")
    assert status == 0, err
    (synced,) = json.loads(out)["synced"]
    assert synced["variant"] == CPU_213
    assert sorted(synced["downloaded"] + synced["reused"]) == [
        f"build/{CPU_213}/{p}" for p in ("__init__.py", "_impl.py", "metadata.json")
    ]
    # Locking read only metadata.json of each variant, into memory; sync fetched the chosen variant only.
    snapshot = hf_env / "models--acme--img2gray" / "snapshots" / kernel.commit / "build"
    present = sorted(str(p.relative_to(snapshot)) for p in snapshot.rglob("*") if p.is_file())
    assert present == [f"{CPU_213}/{p}" for p in ("__init__.py", "_impl.py", "metadata.json")]

    module = kernelpin.load("acme/img2gray")
    assert module.VERSION == "0.1.1" and module.VARIANT == CPU_213
    assert module.gray([(255, 255, 255), (0, 0, 0)]) == [255, 0]
    assert kernelpin.load("acme/img2gray") is module
