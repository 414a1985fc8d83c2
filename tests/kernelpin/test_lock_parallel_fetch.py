"""A first lock reads a kernel's small files (every variant's metadata.json and signature bundle) at once, within
the source's bound on downloads in flight, shared by the kernels resolved in parallel. Counted at a test Hub whose
answers start late, as over a real network (so requests sent together overlap there); no times are asserted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelpin import lockfile
from testkit.fake_kernel import VARIANTS, kernel_files, publish
from testkit.hub import HubServer
from testkit.sigstore_root import Identity, SigstoreRoot

SIGNER = Identity(repository="acme/kernels")  # the default workflow of the test kit; the policy names the repository


@pytest.fixture(scope="module")
def sigstore(tmp_path_factory: pytest.TempPathFactory) -> tuple[SigstoreRoot, Path]:
    root = SigstoreRoot()
    return root, root.write_trusted_root(tmp_path_factory.mktemp("sigstore") / "trusted_root.json")


@pytest.fixture(scope="module")
def slow_hub(tmp_path_factory: pytest.TempPathFactory, sigstore) -> Iterator[HubServer]:
    """acme/signed-{0,1,2} (signed) and acme/plain (unsigned), 5 variants each, behind 0.2 s per answer."""
    server = HubServer(tmp_path_factory.mktemp("slow-hub"), trusted_publishers=("acme",), latency=0.2)
    for name in ("signed-0", "signed-1", "signed-2"):
        repo = server.repo(f"acme/{name}", "kernel")
        repo.write(sigstore[0].sign_files(kernel_files("1.0.0"), SIGNER), clear=True)
        repo.commit("release 1.0.0")
        repo.tag("v1.0.0")
    publish(server.repo("acme/plain", "kernel"), "1.0.0")
    with server:
        yield server


@pytest.fixture
def lock_at_slow_hub(slow_hub, project, sigstore, cli, monkeypatch):
    """lock(repo_ids) with an empty Hub cache -> (the lock, the most requests and file downloads at once)."""
    monkeypatch.setenv("HF_ENDPOINT", slow_hub.endpoint)

    def lock(*repo_ids: str) -> tuple[lockfile.Lock, dict[str, int]]:
        root = project("".join(f'"{repo_id}" = "^1"\n' for repo_id in repo_ids))
        with open(root / "pyproject.toml", "a") as stream:
            stream.write(f'\n[tool.kernelpin.trust]\ntrusted-root = "{sigstore[1]}"\n'
                         '[tool.kernelpin.trust.publishers.acme]\nsigners = [{ repository = "acme/kernels" }]\n')
        slow_hub.most_in_flight()  # counting starts now
        status, _, err = cli("lock")
        assert status == 0, err
        return lockfile.read(root / "kernelpin.lock"), slow_hub.most_in_flight()

    return lock


def test_a_signed_kernels_bundles_and_metadata_are_fetched_at_once(lock_at_slow_hub) -> None:
    lock, most = lock_at_slow_hub("acme/signed-0")
    # Failed before: 1 (bundle, metadata.json, next variant's bundle, ... one after another).
    assert most["files"] >= 4, most
    assert all(variant.signature is not None and variant.signature.signer is not None
               for variant in lock.kernels[0].variants)
    assert len(lock.kernels[0].variants) == len(VARIANTS)


def test_an_unsigned_kernels_metadata_files_are_fetched_at_once(lock_at_slow_hub) -> None:
    lock, most = lock_at_slow_hub("acme/plain")
    assert most["files"] >= 3, most  # failed before: 1
    assert {variant.name for variant in lock.kernels[0].variants} == set(VARIANTS)


def test_kernels_locked_in_parallel_share_one_bound_on_downloads(lock_at_slow_hub, monkeypatch) -> None:
    monkeypatch.setenv("KERNELPIN_DOWNLOADS", "3")
    lock, most = lock_at_slow_hub("acme/signed-0", "acme/signed-1", "acme/signed-2")
    # Three kernels of 10 small files each, 30 wanted at once: never more than the bound (not 3 x 3).
    assert 2 <= most["files"] <= 3, most
    assert [kernel.repo_id for kernel in lock.kernels] == ["acme/signed-0", "acme/signed-1", "acme/signed-2"]


def test_failures_are_reported_in_the_order_of_the_variants_as_before(new_repo, project, cli, sigstore) -> None:
    """The first variant's bundle signs other bytes (found when it is verified, after every file is read); the
    last variant's metadata.json is too big (found before reading it): the first variant's refusal is the error,
    as when the variants were read and verified one after another."""
    first, last = sorted(VARIANTS)[0], sorted(VARIANTS)[-1]
    good = sigstore[0].sign_files(kernel_files("1.0.0"), SIGNER)
    repo_id, repo = new_repo("two-faults", "kernel")
    repo.write({**good, f"build/{first}/metadata.json.sigstore": good[f"build/{last}/metadata.json.sigstore"],
                f"build/{last}/metadata.json": b" " * ((1 << 20) + 1)}, clear=True)
    repo.commit("release 1.0.0")
    repo.tag("v1.0.0")
    root = project(f'"{repo_id}" = "^1"\n')
    with open(root / "pyproject.toml", "a") as stream:
        stream.write(f'\n[tool.kernelpin.trust]\ntrusted-root = "{sigstore[1]}"\n'
                     '[tool.kernelpin.trust.publishers.acme]\nsigners = [{ repository = "acme/kernels" }]\n')
    status, _, err = cli("lock")
    # Failed with the parallel fetch raising at once: the last variant's metadata.json was the error.
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert status == 1 and line.startswith(f"error: {repo_id} {first}: ") and "signs other bytes" in line, err
