"""CEP 27 publication attestations of conda packages: the statement (kernelpin.format.conda_attestation) signed with
Sigstore as a DSSE bundle, by whoever holds the OIDC token (in the release workflow: GitHub Actions' token for the
release job, the identity that signs the Hub release too).

rattler-build's `upload prefix --generate-attestation` makes the same statement, but only for prefix.dev uploads and
through GitHub's attestation API; here it is built the way conda-sigstore builds it and signed with sigstore-python,
so that any channel (tools/conda/publish.py) can serve it.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from pathlib import Path

from kernelpin.format.conda_attestation import PAYLOAD_TYPE, PublicationStatement, publication_statement

# Signs an in-toto statement's bytes and returns the Sigstore bundle (JSON) whose DSSE envelope carries them.
Signer = Callable[[bytes], str]


class AttestationFailed(RuntimeError):
    """Signing failed or returned a bundle that does not carry the statement."""


def attest(filename: str, sha256: str, channel_url: str, sign: Signer) -> str:
    """The signed CEP 27 statement that `filename` with `sha256` is published to `channel_url`: a Sigstore bundle,
    checked to carry exactly that statement before anyone serves it."""
    statement = publication_statement(filename, sha256, channel_url)
    bundle = sign(statement.payload())
    _check_carries(bundle, statement)
    return bundle


def _check_carries(bundle: str, statement: PublicationStatement) -> None:
    try:
        envelope = json.loads(bundle)["dsseEnvelope"]
        payload = base64.b64decode(envelope["payload"], validate=True)
        payload_type = envelope["payloadType"]
    except (json.JSONDecodeError, KeyError, TypeError, binascii.Error) as error:
        raise AttestationFailed(
            f"the signer returned no DSSE bundle for {statement.filename} ({error!r}); it must sign with sign_dsse"
        ) from error
    if payload_type != PAYLOAD_TYPE or payload != statement.payload():
        raise AttestationFailed(f"the signer's bundle for {statement.filename} carries another statement than asked")


def sigstore_signer(trust_config: Path | None = None, identity_token: str | None = None) -> Signer:
    """Keyless signing with sigstore-python: `identity_token`, else the ambient OIDC token (GitHub Actions with
    `id-token: write`), against the public-good instance, or against the instance `trust_config` (a
    ClientTrustConfig JSON: staging, a private deployment) describes. Without a token it refuses rather than open
    a browser: a release is signed by its workflow, not by a person at a terminal."""
    from sigstore.errors import Error
    from sigstore.models import ClientTrustConfig
    from sigstore.oidc import IdentityError, IdentityToken, detect_credential
    from sigstore.sign import SigningContext

    try:
        raw = identity_token or detect_credential()
        if not raw:
            raise AttestationFailed(
                "no OIDC token for signing: run in GitHub Actions with `permissions: id-token: write` (the release "
                "job) or set SIGSTORE_IDENTITY_TOKEN (sigstore's own variable)"
            )
        token = IdentityToken(raw)
    except IdentityError as error:
        raise AttestationFailed(f"no usable OIDC token for signing: {error}") from error
    # After the token: the public-good configuration comes over TUF (network), pointless without one.
    try:
        config = (
            ClientTrustConfig.from_json(trust_config.read_text())
            if trust_config is not None
            else ClientTrustConfig.production()
        )
    except (OSError, ValueError, Error) as error:
        where = trust_config or "the public-good instance (over TUF)"
        raise AttestationFailed(f"cannot load the Sigstore configuration of {where}: {error}") from error
    context = SigningContext.from_trust_config(config)

    def sign(payload: bytes) -> str:
        from sigstore.dsse import Statement

        with context.signer(token) as signer:
            return signer.sign_dsse(Statement(payload)).to_json()

    return sign
