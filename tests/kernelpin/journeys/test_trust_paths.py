"""Issue 41 through every path, against the test Hub and the test kit's Sigstore: one test per finding a path
settled on its own (each failed on 9c8fb3a), and the list of paths that reach the one decision
(kernelpin.trust.gate.decide)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import kernelpin
from kernelpin.errors import KernelpinError
from kernelpin.format.signer import LockedSignature
from kernelpin.front.hub import UnpinnedKernelWarning
from kernelpin.loading.local_override import LocalKernelOverrideWarning
from kernelpin.store import lockfiles
from kernelpin.trust.policy import Policy, SignatureError
from testkit.fake_kernel import CPU_213, kernel_files, write_variant
from testkit.sigstore_root import Identity
from tests.kernelpin.front.test_get_kernel import forget_kernels, fresh_modules, state  # noqa: F401 (fixtures)
from tests.kernelpin.helpers import UNTRUSTED_ORG
from tests.kernelpin.journeys.test_lock_signatures import ACME, ACME_SIGNERS, app, one_line, release  # noqa: F401

REPO = Path(__file__).resolve().parents[3]
NAMED = f"[tool.kernelpin.trust.publishers.acme]\nsigners = {ACME_SIGNERS}\n"


def edit_lock(root: Path, signature: LockedSignature | None) -> None:
    """The lock with every variant's signature record replaced by `signature` (None: dropped)."""
    path = root / "kernelpin.lock"
    lock = lockfiles.read(path)
    kernels = tuple(
        dataclasses.replace(
            kernel, variants=tuple(dataclasses.replace(variant, signature=signature) for variant in kernel.variants)
        )
        for kernel in lock.kernels
    )
    lockfiles.write(path, dataclasses.replace(lock, kernels=kernels))


def test_a_lock_without_its_signature_record_is_refused_by_sync_and_verify(new_repo, app, cli, sigstore) -> None:
    """Finding 1: the signature records dropped from a lock, with `require-signatures = true`: `sync --frozen`
    installed ("all verified") and `verify --signatures` exited 0 on 9c8fb3a."""
    repo_id, repo = new_repo("recordless", "kernel")
    release(repo, sigstore, "1.0.0", ACME)
    root = app(f'"{repo_id}" = "^1"\n', "require-signatures = true\n")
    assert cli("lock")[0] == 0
    edit_lock(root, None)
    status, out, err = cli("sync", "--frozen")
    assert (
        status == 1
        and "the lock records no signature check of this variant, but [tool.kernelpin.trust] "
        "require-signatures requires a signature"
        in one_line(err)
    ), out + err
    status, out, err = cli("verify", "--signatures")
    assert status == 1 and "records no signature check" in err
    status, _, err = cli("lock")  # a relock keeps nothing it cannot vouch for
    assert status == 1 and f"run `kernelpin lock --upgrade-package {repo_id}`" in one_line(err)
    assert cli("lock", "--upgrade")[0] == 0  # verified and recorded again
    assert cli("sync", "--frozen")[0] == 0


def test_named_signers_refuse_an_unsigned_release_and_a_lock_edited_to_unsigned(new_repo, app, cli, sigstore) -> None:
    """Finding 2: an entry naming signers without require-signatures (docs/kernelpin.md's "acme/img2gray"): an
    unsigned release locked with a warning, and a lock edited to `unsigned = true` passed sync and verify on
    9c8fb3a."""
    repo_id, repo = new_repo("named", "kernel")
    release(repo, sigstore, "1.0.0", None)
    root = app(f'"{repo_id}" = "^1"\n', NAMED)
    status, _, err = cli("lock")
    assert status == 1 and '[tool.kernelpin.trust.publishers."acme"] (it names signers) requires one' in one_line(err)
    release(repo, sigstore, "1.0.1", ACME)
    assert cli("lock")[0] == 0
    assert cli("sync", "--frozen")[0] == 0
    edit_lock(root, LockedSignature(None))
    status, _, err = cli("sync", "--frozen")
    assert status == 1 and "locked unsigned, but" in one_line(err)
    status, _, err = cli("verify", "--signatures")
    assert status == 1 and "locked unsigned, but" in err


def test_a_signed_release_served_as_another_version_is_refused(new_repo, app, cli, sigstore) -> None:
    """Finding 5: a signed 1.0.0 served as tag v2.0.0 (a rollback) locked silently on 9c8fb3a."""
    repo_id, repo = new_repo("rollback", "kernel")
    repo.write(sigstore[0].sign_files(kernel_files("1.0.0"), ACME), clear=True)
    repo.commit("1.0.0 again")
    repo.tag("v2.0.0")
    app(f'"{repo_id}" = "^2"\n', NAMED)
    status, _, err = cli("lock")
    assert status == 1 and "the signed metadata.json is version 1.0.0, served as 2.0.0" in one_line(err), err


def test_verify_signatures_adds_no_signed_row_for_an_unsigned_variant(new_repo, app, cli, sigstore) -> None:
    """As a new user found: `verify --signatures` on a variant locked `unsigned = true` reported a
    `metadata.json.sigstore: "signed"` row (one file more than plain verify) on 9c8fb3a."""
    repo_id, repo = new_repo("plain", "kernel")
    release(repo, sigstore, "1.0.0", None)
    app(f'"{repo_id}" = "^1"\n')
    assert cli("lock")[0] == 0 and cli("sync", "--frozen")[0] == 0
    plain = json.loads(cli("verify", "--json")[1])["files"]
    status, out, err = cli("verify", "--signatures", "--json")
    assert status == 0, err
    assert json.loads(out)["files"] == plain


@pytest.fixture
def untrusted_line(new_repo, project):
    """An unsigned kernel of an organization the Hub does not trust, v1.0.0 on branch v1, and a project."""
    project("")
    repo_id, repo = new_repo("untrusted-offline", "kernel", UNTRUSTED_ORG)
    release(repo, None, "1.0.0", None)
    repo.branch("v1")
    return repo_id


def test_offline_get_kernel_asks_trust_remote_code_as_online(
    untrusted_line,
    state,
    monkeypatch,
    fresh_modules,
) -> None:
    """Finding 7: once a call had loaded the untrusted publisher with trust_remote_code=True, an offline call
    without it loaded too on 9c8fb3a (online it is refused); and the lockless refusal names no lock."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnpinnedKernelWarning)
        assert kernelpin.get_kernel(untrusted_line, version=1, trust_remote_code=True).VERSION == "1.0.0"
        forget_kernels()
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        with pytest.raises(
            KernelpinError,
            match=rf"{UNTRUSTED_ORG} is not a trusted kernel publisher .*"
            r"trust_remote_code=True",
        ):
            kernelpin.get_kernel(untrusted_line, version=1)
        with pytest.raises(KernelpinError, match="not a trusted kernel publisher"):
            kernelpin.has_kernel(untrusted_line, version=1)
        assert kernelpin.get_kernel(untrusted_line, version=1, trust_remote_code=[untrusted_line]).VERSION == "1.0.0"
        # The policy now requires signatures: the remembered unsigned resolution is refused in get_kernel's words.
        forget_kernels()
        Path("pyproject.toml").write_text(
            Path("pyproject.toml").read_text() + "\n[tool.kernelpin.trust]\nrequire-signatures = true\n"
        )
        with pytest.raises(SignatureError) as refused:
            kernelpin.get_kernel(untrusted_line, version=1, trust_remote_code=True)
        assert "resolved unsigned before (get_kernel remembers it)" in str(refused.value)
        assert "lock" not in str(refused.value)


def test_the_signature_worker_keeps_the_interpreters_isolation(tmp_path) -> None:
    """Finding 8: under `python -I` the worker imported a sitecustomize.py found on PYTHONPATH on 9c8fb3a; the
    worker still starts and answers."""
    planted, marker = tmp_path / "planted", tmp_path / "sitecustomize-ran"
    planted.mkdir()
    (planted / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    script = (
        f"import sys; sys.path.insert(0, {str(REPO)!r})\n"
        "from pathlib import Path\n"
        "from kernelpin.trust.policy import Policy\n"
        "from kernelpin.trust.worker import SignatureWorker\n"
        "worker = SignatureWorker.start(Policy(), Path.cwd())\n"
        "verified, root = worker.verify('acme/x', 'v', b'{}', b'{')\n"
        "print(verified, root)\n"
        "worker.close()\n"
    )
    environ = {**os.environ, "PYTHONPATH": str(planted)}
    isolated = subprocess.run(
        [sys.executable, "-I", "-c", script], env=environ, capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert not marker.exists(), isolated.stderr
    assert isolated.returncode == 1 and "is not a Sigstore bundle" in isolated.stderr  # the worker's answer
    plain = subprocess.run(
        [sys.executable, "-c", script], env=environ, capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert marker.exists() and plain.returncode == 1  # without -I, PYTHONPATH's sitecustomize runs: as asked


def test_a_trust_root_another_user_planted_in_the_cache_is_not_used(tmp_path, monkeypatch, sigstore) -> None:
    """Finding 9: sigstore-python's offline mode read `$XDG_CACHE_HOME/sigstore-python/tuf/.../trusted_root.json`
    unverified: one planted by another user verified a forged kernels-community signature on 9c8fb3a."""
    from kernelpin.trust import signature

    cache = tmp_path / "shared-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    planted = cache / "sigstore-python" / "tuf" / "https%3A%2F%2Ftuf-repo-cdn.sigstore.dev" / "trusted_root.json"
    planted.parent.mkdir(parents=True)
    planted.write_bytes(sigstore[1].read_bytes())  # the test kit's root: it signs whatever it is asked to
    for directory in (cache, *list(planted.parents)[:4]):
        directory.chmod(0o755)
    files = sigstore[0].sign_files(
        kernel_files("1.0.0"),
        Identity(
            repository="huggingface/kernels-community",
            workflow=".github/workflows/build.yaml",
            ref="refs/heads/main",
            commit="d" * 40,
        ),
    )
    metadata, bundle = files[f"build/{CPU_213}/metadata.json"], files[f"build/{CPU_213}/metadata.json.sigstore"]

    def verify() -> object:
        made = signature.verifier(Policy(), tmp_path)
        return signature.verify_bundle("kernels-community/x", CPU_213, metadata, bundle, Policy(), made)

    assert signature.public_good_root() == planted  # this user's own cache: used (a refresh writes it)
    assert verify().signer.identity.startswith("https://github.com/huggingface/kernels-community/")
    if os.geteuid() == 0:
        os.chown(planted, 65534, 65534)  # planted by another user
        assert signature.public_good_root() != planted
        with pytest.raises(SignatureError, match="does not verify against the Sigstore trust root"):
            verify()
        os.chown(planted, 0, 0)
    for writable in (planted, planted.parent, cache / "sigstore-python"):
        writable.chmod(0o777 if writable.is_dir() else 0o666)  # others can write (or replace) it
        assert signature.public_good_root() != planted, writable
        with pytest.raises(SignatureError, match="does not verify against the Sigstore trust root"):
            verify()
        writable.chmod(0o755 if writable.is_dir() else 0o644)
    cache.chmod(0o777)  # a shared parent others may write...
    assert signature.public_good_root() != planted
    cache.chmod(0o1777)  # ...unless sticky: they cannot rename what is this user's
    assert signature.public_good_root() == planted
    planted.unlink()
    planted.symlink_to(sigstore[1])
    assert signature.public_good_root() != planted  # a link is not a file of the cache's own


def test_has_kernel_from_local_kernels_warns(tmp_path, monkeypatch) -> None:
    """Finding 10: has_kernel answered from LOCAL_KERNELS without the warning the docs promise (9c8fb3a)."""
    root = tmp_path / "checkout"
    write_variant(root / "build" / CPU_213, "9.9.9", CPU_213)
    monkeypatch.setenv("LOCAL_KERNELS", f"acme/local={root}")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    with pytest.warns(
        LocalKernelOverrideWarning,
        match=rf"LOCAL_KERNELS overrides acme/local: answering from the "
        rf"local build {root / 'build' / CPU_213} instead of the Hub",
    ) as caught:
        assert kernelpin.has_kernel("acme/local", version=9)
    assert caught[0].filename == __file__  # pointing at the caller


def test_every_path_reaches_the_one_decision(
    new_repo,
    app,
    cli,
    sigstore,
    state,
    monkeypatch,
    tmp_path,
    fresh_modules,
) -> None:
    """Lock, relock, sync, verify, load, get_kernel online and offline, has_kernel, LOCAL_KERNELS and kernelize's
    two loaders each call kernelpin.trust.gate.decide, with the evidence the path has (none: NO_RECORD)."""
    from types import SimpleNamespace

    from kernelpin.front import kernelize
    from kernelpin.trust import gate

    calls: list[tuple[str, str]] = []
    real = gate.decide

    def recording(policy, repo_id, variant, evidence, *args, **kwargs):
        calls.append((repo_id, evidence.kind))
        return real(policy, repo_id, variant, evidence, *args, **kwargs)

    monkeypatch.setattr(gate, "decide", recording)
    repo_id, repo = new_repo("paths", "kernel")
    release(repo, sigstore, "1.0.0", ACME)
    repo.branch("v1")
    root = app(f'"{repo_id}" = "^1"\n', NAMED)
    lock = root / "kernelpin.lock"

    def reached(step, *args, **kwargs) -> set[gate.EvidenceKind]:
        calls.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            step(*args, **kwargs)
        assert calls, step
        return {source for _, source in calls}

    assert reached(lambda: cli("lock")) == {gate.EvidenceKind.RELEASE}
    assert reached(lambda: cli("lock")) == {gate.EvidenceKind.LOCK}  # relock: kept entries
    assert gate.EvidenceKind.RELEASE in reached(lambda: cli("sync", "--frozen"))
    assert gate.EvidenceKind.RELEASE in reached(lambda: cli("verify", "--signatures"))
    assert reached(kernelpin.load, repo_id, lock=lock) == {gate.EvidenceKind.LOCK}
    forget_kernels()
    assert reached(
        kernelize._locked_kernel,
        SimpleNamespace(
            _repo_id=repo_id,
            _lockfile=None,
            kernel_dep="d",
            kernel_locks={"d": SimpleNamespace(commit=lockfiles.read(lock).kernels[0].commit)},
        ),
    ) == {gate.EvidenceKind.LOCK}
    assert reached(kernelpin.get_kernel, repo_id, version=1) == {gate.EvidenceKind.RELEASE}
    forget_kernels()
    assert reached(
        kernelize._hub_kernel, SimpleNamespace(_repo_id=repo_id, _revision=None, _version=1, _trust_remote_code=False)
    ) == {gate.EvidenceKind.REMEMBERED}
    assert reached(kernelpin.has_kernel, repo_id, version=1) == {gate.EvidenceKind.REMEMBERED}
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    forget_kernels()
    assert reached(kernelpin.get_kernel, repo_id, version=1) == {gate.EvidenceKind.REMEMBERED}
    assert reached(kernelpin.has_kernel, repo_id, version=1) == {gate.EvidenceKind.REMEMBERED}
    edit_lock(root, None)
    forget_kernels()

    def load_refused() -> None:
        with pytest.raises(SignatureError):
            kernelpin.load(repo_id, lock=lock)

    assert reached(load_refused) == {gate.EvidenceKind.NO_RECORD}
    local = tmp_path / "local"
    write_variant(local / "build" / CPU_213, "9.9.9", CPU_213)
    monkeypatch.setenv("LOCAL_KERNELS", f"{repo_id}={local}")
    assert reached(kernelpin.get_kernel, repo_id, version=9) == {gate.EvidenceKind.LOCAL}
    assert reached(kernelpin.has_kernel, repo_id, version=9) == {gate.EvidenceKind.LOCAL}
    monkeypatch.setenv("KERNELPIN_ALLOW_LOCAL_KERNELS", "1")
    assert reached(kernelpin.load, repo_id, lock=lock) == {gate.EvidenceKind.LOCAL}
