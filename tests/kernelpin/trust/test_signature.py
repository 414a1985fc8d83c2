"""Signed releases, verified with sigstore-python's own Verifier against the test kit's Sigstore instance
(testkit/sigstore_root.py: a CA as Fulcio, a CT log, a Rekor-like log), so the production code path is the one
under test: every attack of issue 29, and `kernels`' own verify_variant agreeing with kernelpin on each."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kernelpin.format.signer import GITHUB_ISSUER, Signer
from kernelpin.trust.policy import KERNELS_COMMUNITY, PolicyError, SignatureError, parse_policy
from kernelpin.trust.signature import MAX_BUNDLE_BYTES, verifier, verify_bundle, verify_variant
from testkit.fake_kernel import CPU_213, write_variant
from testkit.sigstore_root import Identity, SigstoreRoot
from tests.kernelpin.helpers import policy_of

COMMUNITY = Identity()  # huggingface/kernels-community's build.yaml on main
ACME = Identity(
    repository="acme-corp/kernels", workflow=".github/workflows/release.yaml", ref="refs/tags/v1.0.0", commit="a" * 40
)
ACME_POLICY = {
    "publishers": {
        "acme": {
            "require-signatures": True,
            "signers": [{"repository": "acme-corp/kernels", "workflow": ".github/workflows/release.yaml"}],
        }
    }
}


@pytest.fixture
def signed(sigstore: tuple[SigstoreRoot, Path], tmp_path: Path) -> Path:
    """A kernels-community variant signed by its build workflow."""
    variant = write_variant(tmp_path / "v1" / CPU_213, "1.0.0", CPU_213)
    sigstore[0].sign_variant(variant, COMMUNITY)
    return variant


def check(sigstore: tuple[SigstoreRoot, Path], variant: Path, repo_id: str, trust: dict | None = None):
    policy = policy_of(trust or {}, sigstore[1])
    return verify_variant(variant, repo_id, policy, verifier(policy, Path("/")))


def refused(sigstore, variant: Path, repo_id: str, trust: dict | None = None) -> str:
    with pytest.raises(SignatureError) as caught:
        check(sigstore, variant, repo_id, trust)
    message = str(caught.value)
    assert message.startswith(f"{repo_id} {variant.name}: ") and "\n" not in message  # one line, repo and variant
    assert "; " in message  # and the fix
    return message


def test_a_signed_release_verifies_and_names_its_signer(sigstore, signed: Path) -> None:
    verified = check(sigstore, signed, "kernels-community/img2gray")
    assert verified.signer == Signer(
        issuer=GITHUB_ISSUER,
        identity="https://github.com/huggingface/kernels-community/.github/workflows/build.yaml@refs/heads/main",
        source_repository="https://github.com/huggingface/kernels-community",
        source_commit="1" * 40,
        source_ref="refs/heads/main",
    )
    assert len(verified.bundle_sha256) == 64 and verified.log_index >= 1 and verified.integrated_time > 0
    assert len(verified.log_id) == 64


def test_an_own_organization_policy(sigstore, tmp_path: Path) -> None:
    variant = write_variant(tmp_path / CPU_213, "1.0.0", CPU_213)
    sigstore[0].sign_variant(variant, ACME)
    assert check(sigstore, variant, "acme/img2gray", ACME_POLICY).signer.source_commit == "a" * 40
    # The organization's rule does not allow kernels-community's workflow, nor does the built-in entry allow acme's.
    sigstore[0].sign_variant(variant, COMMUNITY)
    assert "signed by https://github.com/huggingface/kernels-community/" in refused(
        sigstore, variant, "acme/x", ACME_POLICY
    )
    sigstore[0].sign_variant(variant, ACME)
    assert "kernelpin's built-in policy does not allow" in refused(sigstore, variant, "kernels-community/x")


def test_a_repository_entry_replaces_its_organization(sigstore, tmp_path: Path) -> None:
    variant = write_variant(tmp_path / CPU_213, "1.0.0", CPU_213)
    person = Identity(email="release@acme.dev", issuer="https://accounts.google.com")
    sigstore[0].sign_variant(variant, person)
    trust = {
        **ACME_POLICY,
        "publishers": {
            **ACME_POLICY["publishers"],
            "acme/one": {"signers": [{"issuer": "https://accounts.google.com", "identity": "release@acme.dev"}]},
        },
    }
    assert check(sigstore, variant, "acme/one", trust).signer.identity == "release@acme.dev"
    assert "signed through issuer https://accounts.google.com" in refused(sigstore, variant, "acme/two", trust)


def test_wrong_identity_and_wrong_issuer(sigstore, tmp_path: Path) -> None:
    variant = write_variant(tmp_path / CPU_213, "1.0.0", CPU_213)
    for identity, says in (
        (
            Identity(workflow=".github/workflows/pr.yaml"),
            "signed by https://github.com/huggingface/kernels-community/.github/workflows/pr.yaml",
        ),
        (Identity(ref="refs/heads/attacker"), "@refs/heads/attacker"),
        (Identity(repository="evil/kernels-community"), "signed by https://github.com/evil/kernels-community"),
        (
            Identity(issuer="https://token.actions.evil.example"),
            "signed through issuer https://token.actions.evil.example",
        ),
    ):
        sigstore[0].sign_variant(variant, identity)
        assert says in refused(sigstore, variant, "kernels-community/img2gray")


def test_tampered_metadata_and_bundles_of_other_bytes(sigstore, signed: Path, tmp_path: Path) -> None:
    good = (signed / "metadata.json").read_bytes()
    (signed / "metadata.json").write_bytes(good.replace(b'"license": "Apache-2.0"', b'"license": "Apache-2.1"'))
    assert "signs other bytes than this metadata.json" in refused(sigstore, signed, "kernels-community/img2gray")
    # Downgrade/replay: the valid bundle of an older release, or of another variant, beside this metadata.json.
    newer = write_variant(tmp_path / "v1.1" / CPU_213, "1.1.0", CPU_213)
    shutil.copyfile(signed / "metadata.json.sigstore", newer / "metadata.json.sigstore")
    assert "signs other bytes" in refused(sigstore, newer, "kernels-community/img2gray")
    other = write_variant(
        tmp_path / "other" / "torch212-cxx11-cpu-x86_64-linux", "1.1.0", "torch212-cxx11-cpu-x86_64-linux"
    )
    sigstore[0].sign_variant(other, COMMUNITY)
    shutil.copyfile(other / "metadata.json.sigstore", newer / "metadata.json.sigstore")
    assert "signs other bytes" in refused(sigstore, newer, "kernels-community/img2gray")
    # A bundle whose recorded digest was edited to match: the signature itself no longer verifies.
    bundle = json.loads((other / "metadata.json.sigstore").read_text())
    bundle["messageSignature"]["messageDigest"]["digest"] = base64.b64encode(
        hashlib.sha256((newer / "metadata.json").read_bytes()).digest()
    ).decode()
    (newer / "metadata.json.sigstore").write_text(json.dumps(bundle))
    assert "signs other bytes" in refused(sigstore, newer, "kernels-community/img2gray")


def test_a_tampered_file_under_a_valid_signature(sigstore, signed: Path) -> None:
    (signed / "_impl.py").write_bytes(b"import os; os.system('id')\n")
    assert "do not match the signed metadata.json digest (_impl.py)" in refused(sigstore, signed, "kernels-community/x")
    (signed / "_impl.py").unlink()
    (signed / "planted.py").write_text("")
    assert "(_impl.py, planted.py)" in refused(sigstore, signed, "kernels-community/x")


def test_a_missing_bundle_where_one_is_required(sigstore, signed: Path) -> None:
    (signed / "metadata.json.sigstore").unlink()
    assert "no signature (metadata.json.sigstore), but kernelpin's built-in policy requires one" in refused(
        sigstore, signed, "kernels-community/img2gray"
    )
    assert 'but [tool.kernelpin.trust.publishers."acme"] requires one' in refused(
        sigstore, signed, "acme/img2gray", ACME_POLICY
    )
    assert "[tool.kernelpin.trust] require-signatures requires one" in refused(
        sigstore, signed, "other/img2gray", {"require-signatures": True}
    )
    # Another publisher's unsigned release passes unless a policy requires signatures; the caller records it.
    assert check(sigstore, signed, "other/img2gray") is None


def test_malformed_and_huge_bundles(sigstore, signed: Path) -> None:
    bundle = signed / "metadata.json.sigstore"
    good = json.loads(bundle.read_text())
    for bad in (
        b"",
        b"not json",
        b"[]",
        b'{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json"}',
        json.dumps({**good, "mediaType": "x"}).encode(),
        b"[" * 100_000,
        json.dumps({**good, "verificationMaterial": {**good["verificationMaterial"], "tlogEntries": []}}).encode(),
    ):
        bundle.write_bytes(bad)
        assert "metadata.json.sigstore is not a Sigstore bundle" in refused(sigstore, signed, "kernels-community/x")
    bundle.write_bytes(b" " * (MAX_BUNDLE_BYTES + 1))
    assert f"is {MAX_BUNDLE_BYTES + 1} bytes, over the {MAX_BUNDLE_BYTES}" in refused(
        sigstore, signed, "kernels-community/x"
    )


def test_log_entries_and_certificates_that_do_not_verify(sigstore, signed: Path, tmp_path: Path) -> None:
    bundle = signed / "metadata.json.sigstore"
    good = json.loads(bundle.read_text())
    entry = good["verificationMaterial"]["tlogEntries"][0]
    for key, value in (
        ("integratedTime", str(int(entry["integratedTime"]) + 1)),
        ("logIndex", str(int(entry["logIndex"]) + 1)),
    ):
        bundle.write_text(
            json.dumps(
                {
                    **good,
                    "verificationMaterial": {**good["verificationMaterial"], "tlogEntries": [{**entry, key: value}]},
                }
            )
        )
        assert "does not verify" in refused(sigstore, signed, "kernels-community/x")
    # A certificate that expired before the log recorded the signature.
    sigstore[0].sign_variant(signed, COMMUNITY, logged_after=timedelta(minutes=11))
    assert "the certificate had expired (or was not yet valid) when the log recorded the signature" in refused(
        sigstore, signed, "kernels-community/x"
    )
    # Signed by another Sigstore instance (another CA and log): not ours to trust.
    SigstoreRoot().sign_variant(signed, COMMUNITY)
    assert "issued by another CA" in refused(sigstore, signed, "kernels-community/x")


def test_an_old_signature_verifies_offline_long_after_the_certificate_expired(sigstore, tmp_path: Path) -> None:
    variant = write_variant(tmp_path / CPU_213, "1.0.0", CPU_213)
    sigstore[0].sign_variant(variant, COMMUNITY, at=datetime.now(UTC) - timedelta(days=20))
    assert check(sigstore, variant, "kernels-community/x").signer.issuer == GITHUB_ISSUER


def test_the_public_good_root_works_offline_and_refuses_test_bundles(signed: Path) -> None:
    policy = parse_policy({})
    production = verifier(policy, Path("/"))  # sigstore-python's shipped root: no network
    with pytest.raises(SignatureError, match="issued by another CA"):
        verify_variant(signed, "kernels-community/img2gray", policy, production)


def test_the_policy_parser_names_each_mistake() -> None:
    assert parse_policy({}).publisher("kernels-community/x") is KERNELS_COMMUNITY
    assert parse_policy({}).publisher("acme/x") is None
    for trust, says in (
        ({"require-signatures": "yes"}, "require-signatures must be true or false"),
        ({"publishers": []}, "publishers must be a table"),
        ({"publishers": {"acme": {"signers": [{"workflow": "x.yaml"}]}}}, "names a GitHub repository"),
        ({"publishers": {"acme": {"signers": [{"repository": "https://github.com/a/b"}]}}}, "GitHub owner/name"),
        ({"publishers": {"acme": {"signers": [{"identity": "a@b.c", "workflow": "x"}]}}}, "need the repository"),
        ({"publishers": {"acme": {"signer": []}}}, "unknown key 'signer'"),
        ({"publishers": {"a/b/c": {}}}, "an organization"),
        ({"publisher": {}}, "unknown key 'publisher'"),
    ):
        with pytest.raises(PolicyError, match=says):
            policy_of(trust)
    # Naming kernels-community replaces the built-in entry (e.g. to accept a fork's workflow).
    replaced = policy_of({"publishers": {"kernels-community": {"signers": [{"repository": "me/fork"}]}}})
    assert replaced.publisher("kernels-community/x").signers[0].repository == "me/fork"


# The differential test: kernels' own verifier (verify_variant until 0.17, verify_signature since 0.18; its policies
# given from Python, our trust root) agrees.


def _kernels_verdict(variant: Path, sigstore, repository: str, workflows: list[str], ref: str, monkeypatch) -> bool:
    from sigstore.models import TrustedRoot
    from sigstore.verify import Verifier

    from kernelpin.loading import kernels_internals

    kernels_verify = kernels_internals.module("verify", "the signature differential")
    monkeypatch.setattr(
        kernels_verify.Verifier,
        "production",
        classmethod(lambda cls, offline=False: Verifier(trusted_root=TrustedRoot.from_file(str(sigstore[1])))),
    )
    policy = kernels_verify.GitHubWorkflowPolicy(
        repo_id=repository, signer_uris=[f"https://github.com/{repository}/{w}@{ref}" for w in workflows]
    )
    if hasattr(kernels_verify, "verify_variant"):  # kernels 0.17: a list of policies
        result = kernels_verify.verify_variant(variant, [policy])
        return isinstance(result, kernels_verify.VerificationResult.Success)
    # kernels 0.18+: one policy, a location (for its receipts, not used here: cache=False)
    from kernels._rust import KernelLocation, Oid

    location = KernelLocation.remote(repository, Oid.from_str("0" * 40), variant.name)
    result = kernels_verify.verify_signature(variant, location=location, policy=policy, cache=False)
    if not isinstance(result, kernels_verify.SignatureVerificationResult.Success):
        return False
    # ... and the files against the signed digest, as `kernels verify-signature` does next (0.17 in one call).
    from kernels._rust import Metadata

    digest = kernels_internals.module("digest", "the signature differential")
    metadata = Metadata.from_bytes((variant / "metadata.json").read_bytes())
    checked = digest.verify_digest(variant, metadata=metadata, location=None, cache=False)
    return isinstance(checked, digest.DigestVerificationResult.Success)


def test_kernels_verify_variant_agrees_on_every_release(sigstore, tmp_path: Path, monkeypatch) -> None:
    root = sigstore[0]
    cases: dict[str, Path] = {}

    def case(name: str, identity: Identity | None = COMMUNITY, **options) -> Path:
        variant = write_variant(tmp_path / name / CPU_213, "1.0.0", CPU_213)
        if identity is not None:
            root.sign_variant(variant, identity, **options)
        cases[name] = variant
        return variant

    case("signed")
    case("old-signature", at=datetime.now(UTC) - timedelta(days=10))
    case("mac-workflow", Identity(workflow=".github/workflows/build-mac.yaml"))
    case("unsigned", None)
    case("wrong-workflow", Identity(workflow=".github/workflows/other.yaml"))
    case("wrong-ref", Identity(ref="refs/heads/dev"))
    case("wrong-repository", Identity(repository="huggingface/kernels-community-fork"))
    case("wrong-issuer", Identity(issuer="https://gitlab.com"))
    case("expired", logged_after=timedelta(hours=1))
    (case("tampered-metadata") / "metadata.json").write_bytes(
        (cases["tampered-metadata"] / "metadata.json").read_bytes().replace(b"Apache", b"apache")
    )
    (case("tampered-file") / "_impl.py").write_text("x = 1\n")
    (case("planted-file") / "extra.py").write_text("")
    (case("garbage-bundle") / "metadata.json.sigstore").write_text("{}")
    shutil.copyfile(
        cases["signed"] / "metadata.json.sigstore",
        write_variant(tmp_path / "replayed" / CPU_213, "1.0.1", CPU_213) / "metadata.json.sigstore",
    )
    cases["replayed"] = tmp_path / "replayed" / CPU_213
    other = SigstoreRoot()
    cases["other-instance"] = write_variant(tmp_path / "other-instance" / CPU_213, "1.0.0", CPU_213)
    other.sign_variant(cases["other-instance"], COMMUNITY)
    bundle = json.loads((case("edited-log-index") / "metadata.json.sigstore").read_text())
    entry = bundle["verificationMaterial"]["tlogEntries"][0]
    entry["logIndex"] = str(int(entry["logIndex"]) + 1)
    (cases["edited-log-index"] / "metadata.json.sigstore").write_text(json.dumps(bundle))

    workflows = [".github/workflows/build.yaml", ".github/workflows/build-mac.yaml"]
    trust = {
        "publishers": {
            "kernels-community": {
                "require-signatures": True,
                "signers": [
                    {"repository": "huggingface/kernels-community", "workflow": workflows, "ref": "refs/heads/main"}
                ],
            }
        }
    }
    verdicts = {}
    for name, variant in cases.items():
        theirs = _kernels_verdict(
            variant, sigstore, "huggingface/kernels-community", workflows, "refs/heads/main", monkeypatch
        )
        try:
            check(sigstore, variant, "kernels-community/img2gray", trust)
            ours = True
        except SignatureError:
            ours = False
        verdicts[name] = (ours, theirs)
    assert {name for name, (ours, _) in verdicts.items() if ours} == {"signed", "old-signature", "mac-workflow"}
    assert all(ours == theirs for ours, theirs in verdicts.values()), verdicts


def test_what_lock_records_and_sync_rechecks(sigstore, signed: Path, tmp_path: Path) -> None:
    """ReleaseChecker in-process (no worker, no receipts): `check` records the verified signer, bundle and log entry;
    `recheck` verifies an installed variant again and refuses a lock edited to claim another signer or bundle, or
    to record no signature where one is required."""
    from kernelpin.format.signer import LockedSignature
    from kernelpin.trust.checker import ReleaseChecker

    policy = policy_of({}, sigstore[1])
    metadata, bundle = (signed / "metadata.json").read_bytes(), (signed / "metadata.json.sigstore").read_bytes()
    with ReleaseChecker(policy, Path("/")) as checker:
        record = checker.check("kernels-community/x", CPU_213, metadata, bundle)
        verified = verify_bundle("kernels-community/x", CPU_213, metadata, bundle, policy, verifier(policy, Path("/")))
        assert record == LockedSignature(
            verified.signer, verified.bundle_sha256, verified.log_index, verified.log_id, verified.integrated_time
        )
        assert record.bundle_sha256 == hashlib.sha256(bundle).hexdigest()
        assert checker.check("other/x", CPU_213, metadata, None) == LockedSignature(None)
        with pytest.raises(SignatureError, match=f"^kernels-community/x {CPU_213}: no signature"):
            checker.check("kernels-community/x", CPU_213, None, None)
        with pytest.raises(SignatureError) as refused_:
            checker.check("kernels-community/x", CPU_213, None, bundle)
        assert str(refused_.value) == (
            f"kernels-community/x {CPU_213}: metadata.json.sigstore without a metadata.json "
            "to sign; the release is broken; ask the publisher to fix it"
        )
        for files in (False, True):
            assert checker.recheck("kernels-community/x", CPU_213, signed, record, files) == record.signer
        impostor = Signer(GITHUB_ISSUER, record.signer.identity.replace("build.yaml", "other.yaml"))
        for edited, says in (
            (LockedSignature(impostor, record.bundle_sha256), "a signature by " + impostor.identity),
            (LockedSignature(record.signer, "0" * 64), "a signature by " + record.signer.identity),
        ):
            with pytest.raises(SignatureError) as refused_:
                checker.recheck("kernels-community/x", CPU_213, signed, edited)
            assert str(refused_.value) == (
                f"kernels-community/x {CPU_213}: the lock records {says}, but the bundle is by "
                f"{record.signer.identity}; the lock was edited: regenerate it with `kernelpin lock "
                "--upgrade-package kernels-community/x` and review the change"
            )
        with pytest.raises(SignatureError, match="the lock records no signature check of this variant"):
            checker.recheck("kernels-community/x", CPU_213, signed, None)
        with pytest.raises(SignatureError, match="locked unsigned, but kernelpin's built-in policy requires"):
            checker.recheck("kernels-community/x", CPU_213, signed, LockedSignature(None))
        assert checker.recheck("other/x", CPU_213, signed, LockedSignature(None)) is None
        (signed / "metadata.json.sigstore").unlink()
        with pytest.raises(SignatureError, match="but the bundle is unsigned; the lock was edited"):
            checker.recheck("other/x", CPU_213, signed, record)
        (signed / "_impl.py").write_text("planted = True\n")
        with pytest.raises(SignatureError, match=r"do not match the signed metadata.json digest \(_impl.py\)"):
            checker.recheck("other/x", CPU_213, signed, record, files=True)


def test_verify_variant_names_each_broken_variant(sigstore, signed: Path, tmp_path: Path) -> None:
    """Each way an installed variant is broken is its own one-line refusal naming the repository and variant."""

    def message(variant: Path) -> str:
        with pytest.raises(SignatureError) as caught:
            check(sigstore, variant, "other/x")
        return str(caught.value)

    empty = tmp_path / "empty" / CPU_213
    empty.mkdir(parents=True)
    assert message(empty) == (
        f"other/x {CPU_213}: no readable metadata.json (No such file or directory); sync the kernel again"
    )
    (empty / "metadata.json").write_text("{")
    assert message(empty).startswith(f"other/x {CPU_213}: {empty / 'metadata.json'}")
    assert message(empty).endswith("; do not use this build")
    (empty / "metadata.json").write_text('{"version": 1}')
    assert message(empty) == (
        f"other/x {CPU_213}: the files do not match the signed metadata.json digest (no "
        "digest); do not use this build; sync it again"
    )
    for name in "abcdefg":
        (signed / f"{name}.py").write_text("")
    assert message(signed).endswith(" digest (a.py, b.py, c.py, d.py, e.py); do not use this build; sync it again")
    # A bundle of exactly the largest size is read (and is no bundle); one byte more is refused unread.
    (signed / "metadata.json.sigstore").write_bytes(b" " * MAX_BUNDLE_BYTES)
    assert "metadata.json.sigstore is not a Sigstore bundle" in message(signed)
    with pytest.raises(SignatureError) as caught:
        verify_bundle("other/x", CPU_213, b"{}", b" " * (MAX_BUNDLE_BYTES + 1), parse_policy({}), None)
    assert str(caught.value) == (
        f"other/x {CPU_213}: metadata.json.sigstore is {MAX_BUNDLE_BYTES + 1} bytes, over the "
        f"{MAX_BUNDLE_BYTES} a Sigstore bundle may be; the release is broken or hostile; ask "
        "the publisher to sign it again"
    )
    with pytest.raises(SignatureError, match="not a Sigstore bundle"):
        verify_bundle("other/x", CPU_213, b"{}", b" " * MAX_BUNDLE_BYTES, parse_policy({}), None)
