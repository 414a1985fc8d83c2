"""kernelpin.trust.signature and trust.checker without a Hub: the signature receipts through ReleaseChecker, whose files decide which
trust root is believed (owned_by_user, public_good_root, trust_root_id), who a certificate names (signer_of, with
certificates carrying only one of Fulcio's issuer extensions, or no alternative name), and the exact words of
each refusal (verify_bundle, verifier). Real bundles of testkit's Sigstore instance, real sigstore-python."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from kernelpin.files.private_state import PrivateFiles
from kernelpin.format.signer import GITHUB_ISSUER, Signer
from kernelpin.trust.checker import ReleaseChecker
from kernelpin.trust.policy import SignatureError
from kernelpin.trust.receipts import SignatureReceipts
from kernelpin.trust.signature import (
    PUBLIC_GOOD_TUF,
    TrustRootError,
    owned_by_user,
    public_good_root,
    signer_of,
    trust_root_id,
    verifier,
    verify_bundle,
)
from testkit.fake_kernel import CPU_213, write_variant
from testkit.sigstore_root import Identity, SigstoreRoot
from tests.kernelpin.helpers import policy_of

REPO = "kernels-community/x"
OTHER = Identity(repository="kernels-community/fork")  # its build workflow, as the default identity's
AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
ELSEWHERE = 4242  # a uid that is not this user's


@pytest.fixture
def release(sigstore, tmp_path: Path) -> tuple[bytes, bytes]:
    """A kernels-community variant's metadata.json and its bundle, signed by its build workflow."""
    variant = write_variant(tmp_path / "v1" / CPU_213, "1.0.0", CPU_213)
    sigstore[0].sign_variant(variant)
    return (variant / "metadata.json").read_bytes(), (variant / "metadata.json.sigstore").read_bytes()


@pytest.fixture
def receipts(tmp_path: Path) -> SignatureReceipts:
    directory = tmp_path / "state" / "kernelpin" / "signatures"
    directory.mkdir(parents=True, mode=0o700)
    return SignatureReceipts(PrivateFiles(directory))


def refusal(call) -> str:
    with pytest.raises(SignatureError) as caught:
        call()
    return str(caught.value)


# Receipts through ReleaseChecker -------------------------------------------------------------------------------


def test_a_verification_leaves_a_receipt_that_a_later_command_believes(sigstore, release, receipts) -> None:
    """The first check verifies and keeps a receipt under the trust root's id; a later checker takes the signer
    from it (shown by a receipt this user rewrote to name another signer: believed, as this user's own state is),
    reads it once per command, and still puts its signer to the policy, refusing word for word as a verification
    would."""
    metadata, bundle = release
    policy = policy_of({}, sigstore[1])
    root = trust_root_id(policy, Path("/"))
    with ReleaseChecker(policy, Path("/"), receipts=receipts) as first:
        record = first.check(REPO, CPU_213, metadata, bundle)
    kept = receipts.recall(root, metadata, bundle)
    assert kept is not None and kept.signer == record.signer and kept.bundle_sha256 == record.bundle_sha256
    assert (kept.log_index, kept.log_id, kept.integrated_time) == (
        record.log_index,
        record.log_id,
        record.integrated_time,
    )

    # The same bytes under the same root, recalled: rewrite the receipt's signer (to another the policy allows)
    # to see that it is what is read.
    forged = Signer(
        GITHUB_ISSUER,
        record.signer.identity.replace("build.yaml", "build-mac.yaml"),
        record.signer.source_repository,
        record.signer.source_commit,
        record.signer.source_ref,
    )
    (name,) = list(receipts.files.directory.iterdir())
    receipt = json.loads(name.read_bytes())
    receipt["verified"]["signer"] = vars(forged)
    name.write_text(json.dumps(receipt))
    with ReleaseChecker(policy, Path("/"), receipts=receipts) as later:
        assert later.check(REPO, CPU_213, metadata, bundle).signer == forged
        name.unlink()  # read once per command: the second ask of the same bytes does not read the file again
        assert later.check(REPO, CPU_213, metadata, bundle).signer == forged
    with ReleaseChecker(policy, Path("/"), receipts=receipts) as fresh:  # the receipt is gone: verified again
        assert fresh.check(REPO, CPU_213, metadata, bundle).signer == record.signer

    # A policy that refuses the recorded signer refuses the recalled one in the same words.
    strict = policy_of(
        {
            "publishers": {
                "kernels-community": {
                    "require-signatures": True,
                    "signers": [{"repository": "kernels-community/fork", "workflow": "build.yaml"}],
                }
            }
        },
        sigstore[1],
    )
    with ReleaseChecker(strict, Path("/")) as verifying:
        verified_words = refusal(lambda: verifying.check(REPO, CPU_213, metadata, bundle))
    assert verified_words.startswith(f"{REPO} {CPU_213}: ") and "kernels-community/fork" in verified_words
    with ReleaseChecker(strict, Path("/"), receipts=receipts) as recalling:
        assert refusal(lambda: recalling.check(REPO, CPU_213, metadata, bundle)) == verified_words
        assert refusal(lambda: recalling.check(REPO, CPU_213, metadata, bundle)) == verified_words


def test_changed_bytes_or_root_are_verified_again_and_refusals_leave_no_receipt(
    sigstore, release, receipts, tmp_path: Path
) -> None:
    metadata, bundle = release
    policy = policy_of({}, sigstore[1])
    with ReleaseChecker(policy, Path("/"), receipts=receipts) as checker:
        checker.check(REPO, CPU_213, metadata, bundle)
        tampered = metadata.replace(b"1.0.0", b"6.6.6")
        assert "signs other bytes" in refusal(lambda: checker.check(REPO, CPU_213, tampered, bundle))
    root = trust_root_id(policy, Path("/"))
    assert receipts.recall(root, tampered, bundle) is None
    assert len(list(receipts.files.directory.iterdir())) == 1
    # Another bundle over the same metadata by another signer: its own verification, its own receipt.
    other = sigstore[0].sign(metadata, OTHER).encode()
    with ReleaseChecker(policy, Path("/"), receipts=receipts) as checker:
        assert checker.check("other/x", CPU_213, metadata, other).signer.source_repository == (
            "https://github.com/kernels-community/fork"
        )
    assert (
        receipts.recall(root, metadata, other).signer.source_repository == "https://github.com/kernels-community/fork"
    )
    # A receipt of another trust root is not believed: an edited trusted_root.json is another root.
    moved = tmp_path / "moved_root.json"
    moved.write_text(sigstore[1].read_text() + "\n")
    assert trust_root_id(policy_of({}, moved), Path("/")) != root
    assert receipts.recall(trust_root_id(policy_of({}, moved), Path("/")), metadata, bundle) is None


def test_no_receipt_is_kept_without_a_root_id_or_without_a_receipt_directory(sigstore, release, tmp_path: Path) -> None:
    metadata, bundle = release
    nowhere = SignatureReceipts(PrivateFiles(None))
    with ReleaseChecker(policy_of({}, sigstore[1]), Path("/"), receipts=nowhere) as checker:
        assert checker.check(REPO, CPU_213, metadata, bundle).signer is not None


# Who a certificate names ----------------------------------------------------------------------------------------


def _certificate(sigstore, identity: Identity):
    return sigstore[0].certificate(identity, ec.generate_private_key(ec.SECP256R1()), datetime.now(UTC))


@pytest.mark.parametrize("extensions", [("v1", "v2"), ("v1",), ("v2",)])
def test_signer_of_reads_either_issuer_extension(sigstore, extensions) -> None:
    """Fulcio writes the issuer in two extensions (the old raw string, 1.1, and a DER UTF8String, 1.8); older
    certificates carry only the first. Either alone names the issuer."""
    signer = signer_of(_certificate(sigstore, Identity(issuer_extensions=extensions)))
    identity = Identity()
    assert signer == Signer(
        GITHUB_ISSUER, identity.san, "https://github.com/huggingface/kernels-community", "1" * 40, "refs/heads/main"
    )


def test_signer_of_a_certificate_without_issuer_or_alternative_name(sigstore) -> None:
    """No issuer extension: issuer "" (no policy names it); no SubjectAlternativeName: identity "", not a crash."""
    assert signer_of(_certificate(sigstore, Identity(issuer_extensions=()))).issuer == ""
    bare = signer_of(_certificate(sigstore, Identity(alternative_name=False, issuer_extensions=())))
    assert (bare.issuer, bare.identity) == ("", "")
    by_mail = signer_of(_certificate(sigstore, Identity(email="dev@example.org", issuer="https://accounts.example")))
    assert (by_mail.issuer, by_mail.identity, by_mail.source_repository) == (
        "https://accounts.example",
        "dev@example.org",
        None,
    )


# Ownership of the trust root's files -----------------------------------------------------------------------------


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    """top/a/b/file, all this user's and 0755 / 0644, under a 0755 directory of this user's."""
    above = tmp_path / "above"
    top = above / "top"
    (top / "a" / "b").mkdir(parents=True)
    file = top / "a" / "b" / "file"
    file.write_text("{}")
    for directory in (above, top, top / "a", top / "a" / "b"):
        directory.chmod(0o755)
    file.chmod(0o644)
    return file, top


def test_owned_by_user_accepts_only_a_private_chain(tmp_path: Path, monkeypatch) -> None:
    file, top = _tree(tmp_path)
    assert owned_by_user(file, top)
    file.chmod(0o755)  # executable is not writable by others
    assert owned_by_user(file, top)
    for mode in (0o664, 0o646):
        file.chmod(mode)
        assert not owned_by_user(file, top), oct(mode)
    file.chmod(0o644)
    for directory in (file.parent, top / "a", top):
        for mode in (0o775, 0o757):
            directory.chmod(mode)
            assert not owned_by_user(file, top), (directory, oct(mode))
        directory.chmod(0o755)
    assert owned_by_user(file, top)
    # The directory above top: others may not rename top away, unless it is sticky.
    top.parent.chmod(0o777)
    assert not owned_by_user(file, top)
    top.parent.chmod(0o1777)
    assert owned_by_user(file, top)
    top.parent.chmod(0o755)
    # A link is not a file of this user's, nor is a directory, nor a file that is not there.
    link = file.parent / "link"
    link.symlink_to(file)
    assert not owned_by_user(link, top)
    assert not owned_by_user(file.parent, top)
    assert not owned_by_user(file.parent / "missing", top)
    # A path that is not below top is not judged by top's chain.
    monkeypatch.chdir(top)
    assert not owned_by_user(Path("a/b/file"), top)
    assert not owned_by_user(file, top / "a" / "b" / "c")


@AS_ROOT
def test_owned_by_user_refuses_what_another_user_owns(tmp_path: Path) -> None:
    file, top = _tree(tmp_path)
    for path in (file, file.parent, top / "a", top, top.parent):
        os.chown(path, ELSEWHERE, -1)
        assert not owned_by_user(file, top), path
        os.chown(path, os.geteuid(), -1)
    assert owned_by_user(file, top)
    os.chown(top.parent, 1, -1)  # root's (uid 0) is fine above top, any other user's is not
    assert not owned_by_user(file, top)


def _cached_root(cache_home: Path) -> Path:
    directory = cache_home / "sigstore-python" / "tuf" / quote(PUBLIC_GOOD_TUF, safe="")
    directory.mkdir(parents=True)
    for each in (cache_home, cache_home / "sigstore-python", cache_home / "sigstore-python" / "tuf", directory):
        each.chmod(0o755)
    return directory / "trusted_root.json"


def test_the_tuf_cache_copy_is_used_only_when_it_is_this_users(tmp_path: Path, monkeypatch) -> None:
    """sigstore-python reads its TUF cache's trusted_root.json unverified offline: kernelpin uses it (and a damaged one
    is an error that says how to fetch it again) only when this user alone can have written it."""
    import sigstore

    shipped = Path(sigstore.__file__).parent / "_store" / quote(PUBLIC_GOOD_TUF, safe="") / "trusted_root.json"
    cache_home = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_home))
    assert public_good_root() == shipped
    cached = _cached_root(cache_home)
    cached.write_bytes(shipped.read_bytes())
    cached.chmod(0o644)
    assert public_good_root() == cached
    policy = policy_of({})
    version = importlib.metadata.version("sigstore")
    assert (
        trust_root_id(policy, Path("/"))
        == hashlib.sha256(f"sigstore-python {version}\0".encode() + shipped.read_bytes()).hexdigest()
    )
    cached.write_text("not a trusted root")
    with pytest.raises(TrustRootError) as caught:
        verifier(policy, Path("/"))
    found = re.fullmatch(
        rf"cannot load Sigstore's trust root from {re.escape(str(cached))} \((.+)\); run with "
        r"--refresh-trust-root \(online\) to fetch it again",
        str(caught.value),
    )
    assert found and found.group(1) != "None" and "\n" not in str(caught.value)
    cached.chmod(0o666)  # writable by others: passed over, the shipped root verifies
    assert public_good_root() == shipped
    verifier(policy, Path("/"))


def test_a_trusted_root_that_cannot_be_read(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.json"
    policy = policy_of({}, missing)
    assert trust_root_id(policy, Path("/")) is None
    with pytest.raises(TrustRootError) as caught:
        verifier(policy, Path("/"))
    assert str(caught.value) == (
        f"{missing} (trusted-root in [tool.kernelpin.trust]): not a Sigstore trusted root "
        f"([Errno 2] No such file or directory: '{missing}'); point it at a trusted_root.json"
    )
    relative = policy_of({"trusted-root": "roots/root.json"})
    (tmp_path / "roots").mkdir()
    (tmp_path / "roots" / "root.json").write_text("{}")
    assert (
        trust_root_id(relative, tmp_path)
        == hashlib.sha256(f"sigstore-python {importlib.metadata.version('sigstore')}\0{{}}".encode()).hexdigest()
    )
    with pytest.raises(
        TrustRootError,
        match=r"roots/root.json \(trusted-root in \[tool.kernelpin.trust\]\): not a "
        r"Sigstore trusted root \(.*validation error",
    ):
        verifier(relative, tmp_path)


# The words of each refusal ----------------------------------------------------------------------------------------

FIX_AGAIN = "do not use this release; ask the publisher to sign it again"


def test_each_refusal_word_for_word(sigstore, release) -> None:
    metadata, bundle = release
    policy = policy_of({}, sigstore[1])
    made = verifier(policy, Path("/"))

    def words(data: bytes, signed: bytes | str) -> str:
        signed = signed.encode() if isinstance(signed, str) else signed
        return refusal(lambda: verify_bundle(REPO, CPU_213, data, signed, policy, made))

    start = f"{REPO} {CPU_213}: "
    assert words(metadata + b" ", bundle) == (
        f"{start}metadata.json.sigstore signs other bytes than this metadata.json (tampered metadata, or the "
        "signature of another release); do not use this release; tell the publisher"
    )
    # A log entry of another signature: sigstore says "inconsistent with other materials", kernelpin says whose.
    spliced = json.loads(bundle)
    spliced["verificationMaterial"]["tlogEntries"] = json.loads(sigstore[0].sign(metadata + b" "))[
        "verificationMaterial"
    ]["tlogEntries"]
    assert words(metadata, json.dumps(spliced)) == words(metadata + b" ", bundle)
    not_bundle = words(metadata, b"[1]")
    found = re.fullmatch(
        rf"{re.escape(start)}metadata.json.sigstore is not a Sigstore bundle \((.+)\); the release "
        r"is broken or hostile; ask the publisher to sign it again",
        not_bundle,
    )
    assert found and found.group(1) != "None"
    stranger = SigstoreRoot().sign(metadata)
    found = re.fullmatch(
        rf"{re.escape(start)}the certificate does not verify against the Sigstore trust root "
        rf"\((.+)\): issued by another CA; {FIX_AGAIN}",
        words(metadata, stranger),
    )
    assert found and found.group(1) != "None"
    # sigstore's cause is cut at 160 characters: a certificate without SubjectAlternativeName gets a longer one.
    nameless = sigstore[0].sign(metadata, Identity(alternative_name=False))
    found = re.fullmatch(
        rf"{re.escape(start)}the certificate does not verify against the Sigstore trust root "
        rf"\((.+)\): issued by another CA; {FIX_AGAIN}",
        words(metadata, nameless),
    )
    assert found and len(found.group(1)) == 160 and "subjectAltName" in found.group(1)
    expired = sigstore[0].sign(metadata, logged_after=timedelta(minutes=11))
    assert words(metadata, expired) == (
        f"{start}the certificate had expired (or was not yet valid) when the log recorded the signature; {FIX_AGAIN}"
    )
    broken = json.loads(bundle)
    broken["verificationMaterial"]["tlogEntries"][0]["inclusionPromise"]["signedEntryTimestamp"] = (
        broken["verificationMaterial"]["tlogEntries"][0]["inclusionPromise"]["signedEntryTimestamp"][:-8] + "AAAAAAA="
    )
    found = re.fullmatch(
        rf"{re.escape(start)}the signature does not verify \((.+)\); {FIX_AGAIN}", words(metadata, json.dumps(broken))
    )
    assert found and found.group(1) != "None"
    untimed = json.loads(bundle)
    del untimed["verificationMaterial"]["tlogEntries"][0]["integratedTime"]
    assert words(metadata, json.dumps(untimed)) == (
        f"{start}the signature does not verify (not enough sources of verified time); {FIX_AGAIN}"
    )
    strict = policy_of(
        {
            "publishers": {
                "kernels-community": {
                    "require-signatures": True,
                    "signers": [{"repository": "kernels-community/fork", "workflow": "build.yaml"}],
                }
            }
        },
        sigstore[1],
    )
    by_release = refusal(lambda: verify_bundle(REPO, CPU_213, metadata, bundle, strict, made))
    with ReleaseChecker(strict, Path("/")) as checker:
        assert refusal(lambda: checker.check(REPO, CPU_213, metadata, bundle)) == by_release
    assert by_release.startswith(start) and "by https://github.com/huggingface/kernels-community/" in by_release


def test_recheck_of_a_variant_whose_bundle_is_gone(sigstore, tmp_path: Path) -> None:
    """The lock records a signer, the installed variant has no bundle any more: `recheck` refuses, with or without
    `files`, in one line that says the bundle is unsigned (not a crash); where signatures are required the
    refusal is that none is there."""
    variant = write_variant(tmp_path / "v1" / CPU_213, "1.0.0", CPU_213)
    sigstore[0].sign_variant(variant)
    policy = policy_of({}, sigstore[1])
    with ReleaseChecker(policy, Path("/")) as checker:
        record = checker.check(
            "other/x",
            CPU_213,
            (variant / "metadata.json").read_bytes(),
            (variant / "metadata.json.sigstore").read_bytes(),
        )
        (variant / "_extra.py").write_text("not in the digest\n")
        assert checker.recheck("other/x", CPU_213, variant, record) == record.signer  # files: off by default
        (variant / "_extra.py").unlink()
        (variant / "metadata.json.sigstore").unlink()
        for files in (False, True):
            assert refusal(lambda files=files: checker.recheck("other/x", CPU_213, variant, record, files)) == (
                f"other/x {CPU_213}: the lock records a signature by {record.signer.describe()}, but the bundle is "
                "unsigned; the lock was edited: regenerate it with `kernelpin lock --upgrade-package other/x` and "
                "review the change"
            )
            required = refusal(lambda files=files: checker.recheck(REPO, CPU_213, variant, record, files))
            assert required.startswith(f"{REPO} {CPU_213}: no signature")
        assert refusal(lambda: checker.recheck(REPO, CPU_213, variant, None)).startswith(f"{REPO} {CPU_213}: ")


def test_the_signature_worker_verifies_and_its_verification_leaves_a_receipt(sigstore, release, receipts) -> None:
    """With `worker`, the check is the worker's (the parent never makes a verifier of its own), under the root the
    worker names, and leaves a receipt as an in-process one does; a worker that died is verified for in-process."""
    import signal

    metadata, bundle = release
    policy = policy_of({}, sigstore[1])
    with ReleaseChecker(policy, Path("/"), worker=True, receipts=receipts) as checker:
        checker.warm_up()
        record = checker.check(REPO, CPU_213, metadata, bundle)
        assert checker._verifier is None  # answered by the worker
        assert receipts.recall(trust_root_id(policy, Path("/")), metadata, bundle).signer == record.signer
        other = sigstore[0].sign(metadata).encode()
        os.kill(checker._worker.pid, signal.SIGKILL)
        checker._worker._process.wait()
        assert checker.check(REPO, CPU_213, metadata, other).signer == record.signer
        assert checker._verifier is not None


def test_warm_up_makes_the_verifier_in_the_background_without_a_worker(sigstore) -> None:
    """Without `worker`, warm_up starts no process: it makes the verifier in a thread, so that sigstore's import
    overlaps the downloads; once made, the check uses it."""
    import time

    with ReleaseChecker(policy_of({}, sigstore[1]), Path("/")) as checker:
        checker.warm_up()
        assert checker._worker is None
        deadline = time.monotonic() + 30
        while checker._verifier is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert checker._verifier is not None


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda receipt: receipt["verified"].update(log_index="7"),
        lambda receipt: receipt["verified"].update(integrated_time=1.5),
        lambda receipt: receipt["verified"].update(log_index=True),
        lambda receipt: receipt["verified"]["signer"].update(issuer=None),
        lambda receipt: receipt["verified"]["signer"].update(source_ref=7),
        lambda receipt: receipt["verified"].update(signer="https://github.com/x"),
        lambda receipt: receipt.update(verified=["signer"]),
        lambda receipt: receipt["verified"].update(bundle_sha256="0" * 64),
        lambda receipt: receipt.update({"metadata-sha256": "0" * 64}),
    ],
    ids=[
        "index-text",
        "time-fraction",
        "index-bool",
        "issuer-null",
        "ref-number",
        "signer-text",
        "verified-list",
        "other-bundle",
        "other-metadata",
    ],
)
def test_a_corrupt_receipt_is_not_believed(sigstore, release, receipts, corrupt) -> None:
    """A receipt that is not what `keep` writes (wrong types, another bundle or metadata.json) is not recalled:
    the bundle is verified again, and names its real signer."""
    metadata, bundle = release
    policy = policy_of({}, sigstore[1])
    root = trust_root_id(policy, Path("/"))
    with ReleaseChecker(policy, Path("/"), receipts=receipts) as checker:
        record = checker.check(REPO, CPU_213, metadata, bundle)
    (name,) = list(receipts.files.directory.iterdir())
    receipt = json.loads(name.read_bytes())
    receipt["verified"]["signer"]["identity"] = record.signer.identity.replace("build.yaml", "build-mac.yaml")
    corrupt(receipt)
    name.write_text(json.dumps(receipt))
    assert receipts.recall(root, metadata, bundle) is None
    with ReleaseChecker(policy, Path("/"), receipts=receipts) as checker:
        assert checker.check(REPO, CPU_213, metadata, bundle).signer == record.signer


def test_a_receipt_of_a_signer_without_source_fields_round_trips(tmp_path: Path, receipts) -> None:
    """A person's signature (an e-mail identity) has no source repository, commit or ref: its receipt keeps None."""
    from kernelpin.trust.signature import Verified

    verified = Verified(Signer("https://accounts.example", "dev@example.org"), "b" * 64, 3, "c" * 64, 1700000000)
    assert Verified.from_fields(json.loads(json.dumps(verified.fields()))) == verified
