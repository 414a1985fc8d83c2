"""kernelpin sync: variant choice per environment, --locked/--frozen, --target vendoring, offline use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kernelpin
from kernelpin.errors import KernelpinError, NoVariantError
from kernelpin.format import lockfile
from kernelpin.store import lockfiles
from testkit.fake_kernel import CPU_213, publish


@pytest.mark.parametrize(
    ("flags", "variant"),
    [
        (["--torch", "2.13"], CPU_213),
        (["--torch", "2.13", "--cuda", "13.2"], "torch213-cxx11-cu130-x86_64-linux"),
        (["--torch", "2.13", "--cuda", "12.9", "--gpu-capability", "9.0"], "torch213-cxx11-cu128-x86_64-linux"),
        (["--torch", "2.12", "--cuda", "12.9"], "torch212-cxx11-cu129-x86_64-linux"),
    ],
)
def test_sync_selects_for_the_environment(img2gray, project, cli, flags, variant):
    project('"acme/img2gray" = "^0.1"\n')
    status, out, err = cli("sync", "--json", *flags)
    assert status == 0, err
    assert [s["variant"] for s in json.loads(out)["synced"]] == [variant]


def test_no_fitting_variant_lists_every_variant_and_why(img2gray, project, cli):
    project('"acme/img2gray" = "^0.1"\n')
    status, _, err = cli("sync", "--torch", "2.13", "--cuda", "13.0", "--gpu-capability", "7.5")
    # The CUDA build kernels would choose does not cover sm_75: refused, as kernels refuses it (no CPU fallback).
    assert status == 1
    assert "torch213-cxx11-cu130-x86_64-linux: compute capabilities 8.0;9.0;12.0+PTX do not cover this GPU's 7.5" in err
    assert "A CPU build fits (torch213-cxx11-cpu-x86_64-linux): ask for it with `kernelpin sync --backend cpu`" in err
    assert cli("sync", "--torch", "2.13", "--backend", "cpu")[0] == 0
    status, _, err = cli("sync", "--torch", "2.11")
    assert status == 1
    assert "acme/img2gray 0.1.1: no build variant fits this environment (linux/x86_64, torch 2.11" in err
    assert "torch213-cxx11-cu130-x86_64-linux: torch 2.13 != 2.11" in err
    assert "torch212-cxx11-cpu-x86_64-linux: torch 2.12 != 2.11" in err


def test_locked_and_frozen(new_repo, project, cli):
    repo_id, repo = new_repo()
    publish(repo, "1.0.0", variants=(CPU_213,))
    root = project(f'"{repo_id}" = "^1"\n')
    status, _, err = cli("sync", "--locked", "--torch", "2.13")
    assert status == 1 and "--locked" in err and "no kernelpin.lock yet" in err
    status, _, err = cli("sync", "--frozen", "--torch", "2.13")
    assert status == 1 and "--frozen needs" in err
    assert cli("sync", "--torch", "2.13")[0] == 0  # plain sync locks first
    assert lockfiles.read(root / "kernelpin.lock").kernels[0].version == "1.0.0"
    publish(repo, "2.0.0", variants=(CPU_213,))
    project(f'"{repo_id}" = "^2"\n')
    status, _, err = cli("sync", "--locked", "--torch", "2.13")
    assert status == 1 and "locked version 1.0.0 does not satisfy ^2" in err
    # --frozen installs the lock as it is, without looking at pyproject.toml or the server's tags.
    status, out, err = cli("sync", "--frozen", "--torch", "2.13", "--json")
    assert status == 0, err
    assert lockfiles.read(root / "kernelpin.lock").kernels[0].version == "1.0.0"
    # A second sync is a no-op that re-verifies.
    status, out, _ = cli("sync", "--frozen", "--torch", "2.13", "--json")
    (synced,) = json.loads(out)["synced"]
    assert synced["downloaded"] == [] and len(synced["reused"]) == 3


def test_target_vendoring_and_offline_load(img2gray, project, cli, tmp_path, monkeypatch):
    root = project('"acme/img2gray" = "^0.1"\n')
    vendor = tmp_path / "vendor"
    status, out, err = cli("sync", "--target", str(vendor), "--all-variants", "--json")
    assert status == 0, err
    assert len(json.loads(out)["synced"]) == 5
    commit = lockfiles.read(root / "kernelpin.lock").kernels[0].commit
    assert (vendor / "acme" / "img2gray" / commit / "build" / CPU_213 / "_impl.py").is_file()
    assert cli("verify", "--target", str(vendor))[0] == 0
    # In the image: no server, no Hub cache, offline.
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("KERNELPIN_TARGET", str(vendor))
    module = kernelpin.load("acme/img2gray", lock=root)
    assert module.VARIANT == CPU_213 and module.VERSION == "0.1.1"


def test_offline_sync_uses_the_cache_and_says_what_is_missing(img2gray, project, cli, monkeypatch):
    project('"acme/img2gray" = "^0.1"\n')
    assert cli("sync", "--torch", "2.13")[0] == 0
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    assert cli("sync", "--frozen", "--torch", "2.13")[0] == 0
    assert cli("sync", "--torch", "2.13")[0] == 0  # the lock is fresh: nothing to resolve
    status, _, err = cli("sync", "--frozen", "--torch", "2.12", "--cuda", "12.9")
    assert status == 1
    # __init__.py is the CPU build's, already in the cache (blobs are shared by content): _impl.py is missing.
    assert (
        "torch212-cxx11-cu129-x86_64-linux/_impl.py at" in err
        and "offline mode is on (--offline or HF_HUB_OFFLINE=1)" in err
    )
    project('"acme/img2gray" = "^0.2"\n')
    status, _, err = cli("lock")
    assert status == 1 and "resolving acme/img2gray needs the Hub, but offline mode is on" in err


def test_load_errors(img2gray, project, cli, tmp_path):
    root = project('"acme/img2gray" = "^0.1"\n')
    with pytest.raises(KernelpinError, match="no kernelpin.lock found above"):
        kernelpin.load("acme/img2gray")
    assert cli("lock")[0] == 0
    with pytest.raises(KernelpinError, match=r"acme/other is not in .*locked: acme/img2gray.*kernelpin add acme/other"):
        kernelpin.load("acme/other", lock=root)
    # A lock whose only variants are CUDA builds: this CPU torch gets the list of variants and reasons.
    pinned = lockfiles.read(root / "kernelpin.lock")
    kernel = pinned.kernels[0]
    cuda_only = type(kernel)(**{**kernel.__dict__, "variants": tuple(v for v in kernel.variants if "cu" in v.name)})
    lockfiles.write(root / "kernelpin.lock", lockfile.Lock((cuda_only,)))
    with pytest.raises(NoVariantError) as caught:
        kernelpin.load("acme/img2gray", lock=root)
    assert "torch213-cxx11-cu130-x86_64-linux: CUDA 13.0 build, this machine's backend is CPU" in str(caught.value)


def test_the_hub_cache_layout_is_huggingface_hubs_and_refs_can_name_a_snapshot(
    img2gray, project, cli, hf_env, tmp_path
):
    """kernelpin's downloads are found where huggingface_hub (and so `kernels`) looks offline: by commit after
    a sync, by name (e.g. `v0`, what `kernels.get_kernel(version=0)` asks for) once Store.write_ref records it."""
    from huggingface_hub import snapshot_download, try_to_load_from_cache

    from kernelpin.files.integrity import sha256_file
    from kernelpin.hub.source import HubSettings, HubSource
    from kernelpin.store.content import Store

    root = project('"acme/img2gray" = "^0.1"\n')
    assert cli("sync", "--torch", "2.13")[0] == 0
    (kernel,) = lockfiles.read(root / "kernelpin.lock").kernels
    impl = kernel.variant(CPU_213).file("_impl.py")
    found = try_to_load_from_cache(
        kernel.repo_id,
        f"build/{CPU_213}/_impl.py",
        cache_dir=hf_env,
        revision=kernel.commit,
        repo_type=kernel.repo_type,
    )
    assert isinstance(found, str) and sha256_file(Path(found)) == impl.sha256
    assert Path(found).resolve().name == impl.sha256  # the blob is named by the lock's sha256
    store = Store(HubSource(HubSettings.from_env()))
    ref = store.write_ref(kernel.repo_id, kernel.repo_type, "v0", kernel.commit)
    assert ref.read_text() == kernel.commit
    snapshot = snapshot_download(
        kernel.repo_id, revision="v0", repo_type=kernel.repo_type, cache_dir=hf_env, local_files_only=True
    )
    assert (Path(snapshot) / "build" / CPU_213 / "_impl.py").is_file()
    # Names and commits are checked; an existing ref that is a link is replaced, never written through.
    for name, commit in (("../../x", kernel.commit), ("v0", kernel.commit.upper()), ("v 0", kernel.commit)):
        with pytest.raises(KernelpinError):
            store.write_ref(kernel.repo_id, kernel.repo_type, name, commit)
    victim = tmp_path / "victim"
    victim.write_text("keep")
    ref.unlink()
    ref.symlink_to(victim)
    store.write_ref(kernel.repo_id, kernel.repo_type, "v0", kernel.commit)
    assert victim.read_text() == "keep" and not ref.is_symlink() and ref.read_text() == kernel.commit
