"""Verified-signature receipts (kernelpin.trust.receipts): a lock or sync that reads bundle and metadata.json
bytes this user's kernelpin verified before, under the same trust root, neither starts the signature worker nor
imports sigstore, and still puts the signer to the current policy; anything changed is verified again, and no
receipt that this user's kernelpin did not write after a verification, in a directory only this user can write,
is believed. The test Hub, real locks and the test kit's Sigstore instance throughout."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from kernelpin.files.private_state import PrivateFiles, private_directory
from kernelpin.trust import signature
from kernelpin.trust.checker import ReleaseChecker
from kernelpin.trust.policy import Policy, SignatureError, parse_policy
from kernelpin.trust.receipts import SignatureReceipts
from kernelpin.trust.signature import PUBLIC_GOOD_TUF, trust_root_id
from kernelpin.trust.worker import WORKER
from testkit.fake_kernel import CPU_213, VARIANTS, kernel_files
from testkit.sigstore_root import SigstoreRoot
from tests.kernelpin.helpers import NOBODY, forget_signature_receipts, fresh_interpreter
from tests.kernelpin.trust.test_signature_worker import ACME, BUNDLE, HIJACKER, METADATA, TRUST, signed_app

# A relock as a command runs it, in a fresh interpreter: the status, how many signature workers it started, and
# (from fresh_interpreter) every module it imported.
RELOCK = """
from kernelpin.trust import worker as signature_worker
from kernelpin.cli import main
started = []
start = signature_worker.SignatureWorker.start
signature_worker.SignatureWorker.start = staticmethod(lambda *args: started.append(1) or start(*args))
print('STATUS', main(['lock']), 'WORKERS', len(started))
"""


@pytest.fixture
def verifications(monkeypatch) -> list[str]:
    """The variants sigstore-python verified in this process, one per verification (a spy: the real one runs).
    Verifying in-process (KERNELPIN_SIGNATURE_WORKER=0), so every verification of a command passes here."""
    monkeypatch.setenv(WORKER, "0")
    made: list[str] = []
    real = signature.verify_bundle

    def counting(repo_id, variant, *args):
        made.append(variant)
        return real(repo_id, variant, *args)

    monkeypatch.setattr(signature, "verify_bundle", counting)
    return made


def receipt_files() -> list[Path]:
    directory = private_directory("signatures")
    return sorted(directory.iterdir()) if directory is not None and directory.is_dir() else []


def relock(root: Path) -> tuple[str, int, set[str]]:
    """`kernelpin lock` without a lock file, in a fresh interpreter: (the lock, workers started, modules)."""
    (root / "kernelpin.lock").unlink(missing_ok=True)
    output, modules = fresh_interpreter(RELOCK)
    status, workers = output.split("STATUS ")[1].split(" WORKERS ")
    assert status == "0", output
    return (root / "kernelpin.lock").read_text(), int(workers), modules


@pytest.mark.parametrize("mode", ["1", "0"], ids=["worker", "in-process"])
def test_a_relock_of_unchanged_signed_releases_neither_starts_a_worker_nor_imports_sigstore(
    new_repo, project, sigstore, monkeypatch, mode
) -> None:
    # Failed before: every lock verified every bundle again (in the worker, 0.77 s of CPU; or in-process).
    monkeypatch.setenv(WORKER, mode)
    root = signed_app(new_repo, project, sigstore)
    first, workers, modules = relock(root)
    assert (workers, "sigstore" in modules) == ((1, False) if mode == "1" else (0, True))
    assert len(receipt_files()) == len(VARIANTS)
    again, workers, modules = relock(root)
    assert again == first and workers == 0 and "sigstore" not in modules
    assert not {"cryptography", "tuf"} & {name.split(".")[0] for name in modules}
    forget_signature_receipts()  # the first lock's cost again
    _, workers, modules = relock(root)
    assert (workers, "sigstore" in modules) == ((1, False) if mode == "1" else (0, True))


def checker(sigstore, trusted_root: Path | None = None, trust: dict | None = None) -> ReleaseChecker:
    table = {
        "trusted-root": str(trusted_root or sigstore[1]),
        "publishers": {"acme": {"signers": [{"repository": "acme/kernels"}]}},
        **(trust or {}),
    }
    return ReleaseChecker(
        parse_policy({"tool": {"kernelpin": {"trust": table}}}), Path("/"), receipts=SignatureReceipts.of_user()
    )


def test_a_changed_trust_root_bundle_or_metadata_is_verified_again(sigstore, hf_env, tmp_path, verifications) -> None:
    files = sigstore[0].sign_files(kernel_files("1.0.0"), ACME)
    metadata, bundle = files[METADATA], files[BUNDLE]
    locked = checker(sigstore).check("acme/x", CPU_213, metadata, bundle)
    assert checker(sigstore).check("acme/x", CPU_213, metadata, bundle) == locked
    assert len(verifications) == 1  # the second check took the receipt (failed before: 2)
    # The same root in other bytes: another root for all the receipts know.
    respelled = tmp_path / "respelled.json"
    respelled.write_text(json.dumps(json.loads(sigstore[1].read_text()), indent=4))
    assert checker(sigstore, respelled).check("acme/x", CPU_213, metadata, bundle) == locked
    assert len(verifications) == 2
    # Another instance's root: the receipt of the first does not carry the bundle through it.
    other = SigstoreRoot().write_trusted_root(tmp_path / "other.json")
    with pytest.raises(SignatureError, match="issued by another CA"):
        checker(sigstore, other).check("acme/x", CPU_213, metadata, bundle)
    # The same metadata.json signed again: another bundle, verified (and its own log entry recorded).
    resigned = sigstore[0].sign_files(kernel_files("1.0.0"), ACME)
    assert resigned[METADATA] == metadata and resigned[BUNDLE] != bundle
    assert checker(sigstore).check("acme/x", CPU_213, metadata, resigned[BUNDLE]).log_index != locked.log_index
    # Other metadata.json bytes under the verified bundle: verified, and refused.
    with pytest.raises(SignatureError, match="signs other bytes"):
        checker(sigstore).check("acme/x", CPU_213, metadata.replace(b"Apache-2.0", b"MIT"), bundle)
    assert len(verifications) == 5
    assert len(receipt_files()) == 3  # one per (root, bundle, metadata) that passed; none for a refusal


def forged(sigstore, verifications: list[str]) -> tuple[bytes, bytes, Path]:
    """A hijacker's release and, in this user's receipt directory, a receipt (of the right form, name and key)
    claiming acme's release workflow signed it: (metadata, bundle, the receipt)."""
    hijacked = sigstore[0].sign_files(kernel_files("1.0.0"), HIJACKER)
    genuine = sigstore[0].sign_files(kernel_files("1.0.0"), ACME)
    receipts = SignatureReceipts.of_user()
    claimed = signature.verify_bundle(
        "acme/x",
        CPU_213,
        genuine[METADATA],
        genuine[BUNDLE],
        Policy(),
        signature.verifier(Policy(trusted_root=str(sigstore[1])), Path("/")),
    )
    claimed = signature.Verified(
        claimed.signer,
        hashlib.sha256(hijacked[BUNDLE]).hexdigest(),
        claimed.log_index,
        claimed.log_id,
        claimed.integrated_time,
    )
    root = trust_root_id(Policy(trusted_root=str(sigstore[1])), Path("/"))
    receipts.keep(root, hijacked[METADATA], hijacked[BUNDLE], claimed)
    [receipt] = receipt_files()
    verifications.clear()  # the genuine release's, to take its signer
    return hijacked[METADATA], hijacked[BUNDLE], receipt


def test_the_forged_receipt_would_be_believed_from_this_user(sigstore, hf_env, verifications) -> None:
    # The control for the tests below: the forgery is well made, so what refuses them is a check.
    metadata, bundle, _ = forged(sigstore, verifications)
    assert (
        checker(sigstore)
        .check("acme/x", CPU_213, metadata, bundle)
        .signer.identity.startswith("https://github.com/acme/kernels/")
    )
    assert not verifications


def refused_by_sigstore(sigstore, metadata: bytes, bundle: bytes, verifications: list[str]) -> None:
    with pytest.raises(SignatureError, match="signed by https://github.com/hijacker/kernels"):
        checker(sigstore).check("acme/x", CPU_213, metadata, bundle)
    assert verifications == [CPU_213]


def test_a_receipt_of_another_user_is_not_believed(sigstore, hf_env, verifications) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file to another user")
    metadata, bundle, receipt = forged(sigstore, verifications)
    os.chown(receipt, NOBODY, NOBODY)
    refused_by_sigstore(sigstore, metadata, bundle, verifications)


def test_a_receipt_directory_of_another_user_is_not_believed(sigstore, hf_env, verifications) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file to another user")
    metadata, bundle, receipt = forged(sigstore, verifications)
    os.chown(receipt.parent, NOBODY, NOBODY)
    refused_by_sigstore(sigstore, metadata, bundle, verifications)


def test_a_receipt_directory_others_may_write_is_neither_believed_nor_written(sigstore, hf_env, verifications) -> None:
    metadata, bundle, receipt = forged(sigstore, verifications)
    receipt.parent.chmod(0o777)
    refused_by_sigstore(sigstore, metadata, bundle, verifications)
    receipt.unlink()
    good = sigstore[0].sign_files(kernel_files("1.0.0"), ACME)
    checker(sigstore).check("acme/x", CPU_213, good[METADATA], good[BUNDLE])
    assert not receipt_files()


@pytest.mark.parametrize("linked", ["directory", "receipt", "state directory"])
def test_a_receipt_through_a_link_is_not_believed(sigstore, hf_env, tmp_path, verifications, linked) -> None:
    metadata, bundle, receipt = forged(sigstore, verifications)
    moved = {"directory": receipt.parent, "receipt": receipt, "state directory": receipt.parent.parent}[linked]
    moved.rename(tmp_path / "elsewhere")
    moved.symlink_to(tmp_path / "elsewhere")
    refused_by_sigstore(sigstore, metadata, bundle, verifications)


@pytest.mark.parametrize("content", ["another key", "not json", "another bundle's signer", "huge"])
def test_a_receipt_of_the_wrong_content_is_not_believed(sigstore, hf_env, verifications, content) -> None:
    metadata, bundle, receipt = forged(sigstore, verifications)
    written = json.loads(receipt.read_text())
    if content == "another key":
        written["metadata-sha256"] = hashlib.sha256(b"other").hexdigest()
    elif content == "another bundle's signer":
        written["verified"]["bundle_sha256"] = hashlib.sha256(b"other").hexdigest()
    receipt.write_text(
        {"not json": "{", "huge": json.dumps(written) + " " * (1 << 20)}.get(content, json.dumps(written))
    )
    refused_by_sigstore(sigstore, metadata, bundle, verifications)


def test_a_policy_tightened_after_the_receipt_refuses_the_release(
    new_repo, project, sigstore, cli, verifications
) -> None:
    root = signed_app(new_repo, project, sigstore)
    assert cli("lock")[0] == 0 and len(verifications) == len(VARIANTS)
    pyproject = root / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace(
            TRUST,
            TRUST.replace(
                '{ repository = "acme/kernels" }', '{ repository = "acme/kernels", ref = "refs/heads/main" }'
            ),
        )
    )
    (root / "kernelpin.lock").unlink()
    status, _, by_receipt = cli("lock")
    assert status == 1 and len(verifications) == len(VARIANTS)  # refused from the receipt: nothing verified
    assert f"{min(VARIANTS)}: signed by https://github.com/acme/kernels/" in by_receipt, by_receipt
    assert "does not allow (github.com/acme/kernels any workflow @ refs/heads/main)" in by_receipt
    forget_signature_receipts()
    status, _, by_sigstore = cli("lock")
    assert status == 1 and len(verifications) > len(VARIANTS)
    assert by_receipt == by_sigstore  # the same refusal, word for word
    assert not (root / "kernelpin.lock").exists()


def test_sync_takes_receipts_and_verify_signatures_does_not(new_repo, project, sigstore, cli, verifications) -> None:
    signed_app(new_repo, project, sigstore)
    assert cli("lock")[0] == 0
    locked = len(verifications)
    status, _, err = cli("sync", "--frozen")
    assert status == 0, err
    assert len(verifications) == locked  # failed before: sync verified the installed bundle again
    status, out, err = cli("verify", "--signatures")
    assert status == 0, out + err
    assert len(verifications) == locked + 1  # the full check of the one installed variant, receipts or not


def test_sync_verifies_a_bundle_without_a_receipt_and_keeps_one(
    new_repo, project, sigstore, cli, verifications
) -> None:
    signed_app(new_repo, project, sigstore)
    assert cli("lock")[0] == 0
    forget_signature_receipts()
    locked = len(verifications)
    assert cli("sync", "--frozen")[0] == 0 and len(verifications) == locked + 1
    assert cli("sync", "--frozen")[0] == 0 and len(verifications) == locked + 1


def test_the_public_good_root_is_identified_by_the_bytes_sigstore_loads(tmp_path, monkeypatch) -> None:
    """trust_root_id reads sigstore-python's TUF cache without importing sigstore: the file it names must be
    the one sigstore-python loads (this pins its private layout, which a sigstore upgrade may move)."""
    from sigstore._internal.tuf import DEFAULT_TUF_URL, TrustUpdater

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert PUBLIC_GOOD_TUF == DEFAULT_TUF_URL
    shipped = trust_root_id(Policy(), tmp_path)  # no TUF cache yet: the root sigstore-python ships
    signature.verifier(Policy(), tmp_path)  # which it copies into its cache
    loaded = Path(TrustUpdater(DEFAULT_TUF_URL, offline=True).get_trusted_root_path())
    assert loaded.is_relative_to(tmp_path / "cache")
    assert trust_root_id(Policy(), tmp_path) == shipped
    loaded.write_bytes(loaded.read_bytes() + b"\n")  # what a refresh does: a new root in the cache
    assert trust_root_id(Policy(), tmp_path) not in (shipped, None)


def test_no_receipts_without_a_safe_place_for_them(sigstore, tmp_path, verifications) -> None:
    files = sigstore[0].sign_files(kernel_files("1.0.0"), ACME)
    for _ in range(2):
        ReleaseChecker(
            Policy(trusted_root=str(sigstore[1])), Path("/"), receipts=SignatureReceipts(PrivateFiles(None))
        ).check("acme/x", CPU_213, files[METADATA], files[BUNDLE])
    assert len(verifications) == 2


def test_no_receipt_when_the_trust_root_changed_while_it_loaded(sigstore, hf_env, tmp_path, monkeypatch) -> None:
    # The bytes the verifier loaded are not known for sure: a receipt under the old or the new root could lie.
    root = tmp_path / "trusted_root.json"
    shutil.copy(sigstore[1], root)
    real = signature.verifier

    def edited_meanwhile(*args):
        made = real(*args)
        root.write_bytes(root.read_bytes() + b"\n")
        return made

    monkeypatch.setattr(signature, "verifier", edited_meanwhile)
    files = sigstore[0].sign_files(kernel_files("1.0.0"), ACME)
    checker(sigstore, root).check("acme/x", CPU_213, files[METADATA], files[BUNDLE])
    assert not receipt_files()
    monkeypatch.setattr(signature, "verifier", real)
    checker(sigstore, root).check("acme/x", CPU_213, files[METADATA], files[BUNDLE])
    assert len(receipt_files()) == 1
