"""CEP 27 attestations of conda packages: a Sigstore DSSE bundle over an in-toto publication statement that names
the package file and its sha256 (kernelpin.format.conda_attestation reads the statement). Verified offline with
sigstore-python's `Verifier.verify_dsse` against the policy's trust root (kernelpin.trust.signature.verifier), then
the signer is put to the publisher policy through the trust gate (kernelpin.trust.gate, evidence CONDA), as every
Hub path puts the signer of a release's metadata.json.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kernelpin.errors import KernelpinError
from kernelpin.format.conda_attestation import PAYLOAD_TYPE, check_binds, parse_publication_statement
from kernelpin.format.signer import Signer
from kernelpin.trust.gate import Evidence, EvidenceKind, decide, enforce
from kernelpin.trust.policy import Policy, SignatureError
from kernelpin.trust.signature import MAX_BUNDLE_BYTES, SignerRecorder

if TYPE_CHECKING:
    from sigstore.verify import Verifier


def verify_attestation(
    repo_id: str, variant: str, bundle: str, filename: str, sha256: str, channel: str | None, verifier: Verifier
) -> Signer:
    """Who signed `bundle`, a CEP 27 attestation of the package file `filename` with `sha256` (and, given
    `channel`, published to it). SignatureError for a bundle that does not verify or attests something else."""
    from sigstore.errors import Error
    from sigstore.models import Bundle, InvalidBundle

    def refuse(cause: str, fix: str = "do not use this package; tell its publisher") -> SignatureError:
        return SignatureError(repo_id, variant, cause, fix)

    if len(bundle) > MAX_BUNDLE_BYTES:
        raise refuse(f"an attestation of {filename} is {len(bundle)} bytes, over the {MAX_BUNDLE_BYTES} one may be")
    try:
        parsed = Bundle.from_json(bundle)
    except (InvalidBundle, ValueError, KeyError, TypeError, RecursionError) as error:
        raise refuse(
            f"an attestation of {filename} is not a Sigstore bundle ({str(error).splitlines()[0][:160]})"
        ) from None
    recorder = SignerRecorder()
    try:
        payload_type, payload = verifier.verify_dsse(parsed, recorder)
    except Error as error:  # VerificationError, CertValidationError: the chain, the log entry, the signature
        text = " ".join(str(error).split())[:200]
        raise refuse(
            f"the attestation of {filename} does not verify against the Sigstore trust root ({text})"
        ) from None
    if payload_type != PAYLOAD_TYPE:
        raise refuse(f"the attestation of {filename} signs a {payload_type[:80]!r} payload, not an in-toto statement")
    try:
        check_binds(parse_publication_statement(payload), filename, sha256, channel)
    except KernelpinError as error:
        raise refuse(
            str(error).split("; ")[0], "the attestation is not this package's; do not use this package"
        ) from None
    assert recorder.signer is not None  # verify_dsse asks the policy before it succeeds
    return recorder.signer


def admit_conda_package(
    policy: Policy,
    repo_id: str,
    variant: str,
    bundles: Sequence[str],
    filename: str,
    sha256: str,
    channel: str | None,
    verifier: Verifier | None,
) -> Signer | None:
    """The policy's verdict on a conda package of `repo_id`'s `variant`: every attestation must verify and attest
    this file; one whose signer the policy allows admits it. No attestation: admitted (None) only where the policy
    requires no signature. SignatureError (one line) otherwise."""
    if not bundles:
        enforce(policy, repo_id, variant, Evidence(EvidenceKind.CONDA))
        return None
    assert verifier is not None, "attestations need a verifier"
    signers = [verify_attestation(repo_id, variant, bundle, filename, sha256, channel, verifier) for bundle in bundles]
    decisions = [(signer, decide(policy, repo_id, variant, Evidence(EvidenceKind.CONDA, signer))) for signer in signers]
    admitted = next((signer for signer, decision in decisions if decision.admit), None)
    if admitted is None:
        refused = decisions[0][1]
        raise SignatureError(repo_id, variant, refused.cause, refused.fix)
    return admitted
