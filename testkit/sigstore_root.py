"""A Sigstore instance of our own, offline: what Fulcio, the CT log and Rekor do for a keyless signature, so
that tests verify real bundles with sigstore-python's `Verifier` given this instance's trusted root.

- a certificate authority acting as Fulcio: it issues short-lived code-signing certificates whose identity is
  a GitHub Actions (or any other) OIDC identity, in Fulcio's X.509 extensions (issuer, build signer URI, source
  repository, its commit and ref: https://github.com/sigstore/fulcio/blob/main/docs/oid-info.md);
- a certificate-transparency log key: each certificate embeds a signed certificate timestamp (RFC 6962,
  a precertificate entry over the certificate without its SCT list);
- a transparency log (Rekor v1, hashedrekord 0.0.1 entries): an RFC 6962 Merkle tree in memory, each entry
  returned with its inclusion proof, a signed checkpoint of the tree (a signed note) and the signed entry
  timestamp (the inclusion promise).

`SigstoreRoot.sign(data, identity)` returns the JSON bundle `cosign sign-blob --bundle` writes (bundle v0.3);
`trusted_root_json()` is the `trusted_root.json` to verify them with. Everything is signed with fresh keys, so
two instances never trust each other's bundles.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import rfc8785
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID, ObjectIdentifier

GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"

# Fulcio's extensions (https://github.com/sigstore/fulcio/blob/main/docs/oid-info.md); the first is the old
# raw-string issuer, the rest are DER UTF8Strings.
_ISSUER_V1 = ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
_ISSUER = ObjectIdentifier("1.3.6.1.4.1.57264.1.8")
_BUILD_SIGNER_URI = ObjectIdentifier("1.3.6.1.4.1.57264.1.9")
_BUILD_SIGNER_DIGEST = ObjectIdentifier("1.3.6.1.4.1.57264.1.10")
_SOURCE_REPOSITORY_URI = ObjectIdentifier("1.3.6.1.4.1.57264.1.12")
_SOURCE_REPOSITORY_DIGEST = ObjectIdentifier("1.3.6.1.4.1.57264.1.13")
_SOURCE_REPOSITORY_REF = ObjectIdentifier("1.3.6.1.4.1.57264.1.14")
_BUILD_CONFIG_URI = ObjectIdentifier("1.3.6.1.4.1.57264.1.18")
_SCT_LIST = ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")


@dataclass(frozen=True)
class Identity:
    """Who signs: a GitHub Actions workflow run (the claims Fulcio copies from its OIDC token), or, with
    `email`, a person signing by hand through another OIDC issuer."""

    repository: str = "huggingface/kernels-community"
    workflow: str = ".github/workflows/build.yaml"
    ref: str = "refs/heads/main"
    commit: str = "1" * 40
    issuer: str = GITHUB_ISSUER
    email: str | None = None
    # Which of Fulcio's issuer extensions the certificate carries (v1: the old raw string, v2: DER UTF8String;
    # Fulcio writes both), and whether it names the identity in a SubjectAlternativeName at all.
    issuer_extensions: tuple[str, ...] = ("v1", "v2")
    alternative_name: bool = True

    @property
    def san(self) -> str:
        return self.email or f"https://github.com/{self.repository}/{self.workflow}@{self.ref}"


def _der_utf8(text: str) -> bytes:
    body = text.encode()
    if len(body) < 0x80:
        return bytes([0x0C, len(body)]) + body
    size = len(body).to_bytes((len(body).bit_length() + 7) // 8, "big")
    return bytes([0x0C, 0x80 | len(size)]) + size + body


def _der_octets(body: bytes) -> bytes:
    if len(body) < 0x80:
        return bytes([0x04, len(body)]) + body
    size = len(body).to_bytes((len(body).bit_length() + 7) // 8, "big")
    return bytes([0x04, 0x80 | len(size)]) + size + body


def _spki(key: ec.EllipticCurvePublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _key_id(key: ec.EllipticCurvePublicKey) -> bytes:
    return hashlib.sha256(_spki(key)).digest()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _leaf_hash(entry: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + entry).digest()


def _node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _tree_hash(leaves: list[bytes]) -> bytes:
    """RFC 6962 Merkle tree hash of leaf hashes (section 2.1)."""
    if len(leaves) == 1:
        return leaves[0]
    split = 1 << ((len(leaves) - 1).bit_length() - 1)
    return _node_hash(_tree_hash(leaves[:split]), _tree_hash(leaves[split:]))


def _inclusion_path(index: int, leaves: list[bytes]) -> list[bytes]:
    """RFC 6962 audit path of leaf `index` (section 2.1.1), lowest level first."""
    if len(leaves) == 1:
        return []
    split = 1 << ((len(leaves) - 1).bit_length() - 1)
    if index < split:
        return [*_inclusion_path(index, leaves[:split]), _tree_hash(leaves[split:])]
    return [*_inclusion_path(index - split, leaves[split:]), _tree_hash(leaves[:split])]


@dataclass
class SigstoreRoot:
    """A CA, a CT log and a transparency log with fresh keys, valid from `start` for ten years."""

    start: datetime = field(default_factory=lambda: datetime.now(UTC) - timedelta(days=30))
    origin: str = "rekor.kernelpin.test - 2605736670972794746"

    def __post_init__(self) -> None:
        self.ca_key = ec.generate_private_key(ec.SECP384R1())
        self.ct_key = ec.generate_private_key(ec.SECP256R1())
        self.log_key = ec.generate_private_key(ec.SECP256R1())
        self._leaves: list[bytes] = [_leaf_hash(b"genesis")]  # a log is never empty of others' entries
        name = x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kernelpin.test"),
                x509.NameAttribute(NameOID.COMMON_NAME, "fulcio.kernelpin.test"),
            ]
        )
        public = self.ca_key.public_key()
        self.ca_cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(self.start)
            .not_valid_after(self.start + timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=1), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
            .sign(self.ca_key, hashes.SHA384())
        )

    # The trust root -----------------------------------------------------------------------------------------

    def trusted_root_json(self) -> str:
        """This instance's `trusted_root.json` (the format sigstore-python's `TrustedRoot.from_file` reads)."""

        def log(url: str, key: ec.EllipticCurvePrivateKey) -> dict[str, object]:
            return {
                "baseUrl": url,
                "hashAlgorithm": "SHA2_256",
                "publicKey": {
                    "rawBytes": _b64(_spki(key.public_key())),
                    "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                    "validFor": {"start": _rfc3339(self.start)},
                },
                "logId": {"keyId": _b64(_key_id(key.public_key()))},
            }

        return json.dumps(
            {
                "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
                "tlogs": [log("https://rekor.kernelpin.test", self.log_key)],
                "certificateAuthorities": [
                    {
                        "subject": {"organization": "kernelpin.test", "commonName": "fulcio.kernelpin.test"},
                        "uri": "https://fulcio.kernelpin.test",
                        "certChain": {
                            "certificates": [{"rawBytes": _b64(self.ca_cert.public_bytes(serialization.Encoding.DER))}]
                        },
                        "validFor": {"start": _rfc3339(self.start)},
                    }
                ],
                "ctlogs": [log("https://ctfe.kernelpin.test", self.ct_key)],
                "timestampAuthorities": [],
            },
            indent=2,
        )

    def write_trusted_root(self, path: Path) -> Path:
        path.write_text(self.trusted_root_json())
        return path

    # Fulcio and the CT log ------------------------------------------------------------------------------------

    def certificate(
        self,
        identity: Identity,
        key: ec.EllipticCurvePrivateKey,
        issued: datetime,
        lifetime: timedelta = timedelta(minutes=10),
    ) -> x509.Certificate:
        """A Fulcio-style leaf for `identity`, with an embedded SCT from the CT log."""
        public = key.public_key()
        san: x509.GeneralName = (
            x509.RFC822Name(identity.email) if identity.email else x509.UniformResourceIdentifier(identity.san)
        )
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([]))
            .issuer_name(self.ca_cert.subject)
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(issued)
            .not_valid_after(issued + lifetime)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.ca_key.public_key()), critical=False)
        )
        if identity.alternative_name:
            builder = builder.add_extension(x509.SubjectAlternativeName([san]), critical=True)
        if "v1" in identity.issuer_extensions:
            builder = builder.add_extension(
                x509.UnrecognizedExtension(_ISSUER_V1, identity.issuer.encode()), critical=False
            )
        if "v2" in identity.issuer_extensions:
            builder = builder.add_extension(
                x509.UnrecognizedExtension(_ISSUER, _der_utf8(identity.issuer)), critical=False
            )
        if identity.email is None:
            workflow = f"https://github.com/{identity.repository}/{identity.workflow}@{identity.ref}"
            for oid, value in (
                (_BUILD_SIGNER_URI, workflow),
                (_BUILD_SIGNER_DIGEST, identity.commit),
                (_SOURCE_REPOSITORY_URI, f"https://github.com/{identity.repository}"),
                (_SOURCE_REPOSITORY_DIGEST, identity.commit),
                (_SOURCE_REPOSITORY_REF, identity.ref),
                (_BUILD_CONFIG_URI, workflow),
            ):
                builder = builder.add_extension(x509.UnrecognizedExtension(oid, _der_utf8(value)), critical=False)
        precertificate = builder.sign(self.ca_key, hashes.SHA384())
        return builder.add_extension(
            x509.UnrecognizedExtension(_SCT_LIST, _der_octets(self._sct_list(precertificate, issued))), critical=False
        ).sign(self.ca_key, hashes.SHA384())

    def _sct_list(self, precertificate: x509.Certificate, issued: datetime) -> bytes:
        """The TLS-encoded SignedCertificateTimestampList of one SCT over the precertificate (RFC 6962 3.2)."""
        timestamp = int(issued.timestamp()) * 1000
        tbs = precertificate.tbs_certificate_bytes
        signed = (
            struct.pack("!BBQH", 0, 0, timestamp, 1)
            + _key_id(self.ca_key.public_key())
            + len(tbs).to_bytes(3, "big")
            + tbs
            + struct.pack("!H", 0)
        )
        signature = self.ct_key.sign(signed, ec.ECDSA(hashes.SHA256()))
        sct = (
            struct.pack("!B", 0)
            + _key_id(self.ct_key.public_key())
            + struct.pack("!QH", timestamp, 0)
            + struct.pack("!BBH", 4, 3, len(signature))
            + signature
        )
        return struct.pack("!HH", len(sct) + 2, len(sct)) + sct

    # Rekor ----------------------------------------------------------------------------------------------------

    def _log(self, body: bytes, integrated: datetime, kind: str = "hashedrekord") -> dict[str, object]:
        """Append `body` (a Rekor entry of `kind`, version 0.0.1) to the log; its transparency-log entry as a bundle
        holds it."""
        index = len(self._leaves)
        self._leaves.append(_leaf_hash(body))
        size, root = len(self._leaves), _tree_hash(self._leaves)
        note = f"{self.origin}\n{size}\n{_b64(root)}\n"
        note_signature = self.log_key.sign(note.encode(), ec.ECDSA(hashes.SHA256()))
        log_id = _key_id(self.log_key.public_key())
        name = self.origin.split(" ")[0]
        checkpoint = f"{note}\n\u2014 {name} {_b64(log_id[:4] + note_signature)}\n"
        integrated_time = int(integrated.timestamp())
        promise = rfc8785.dumps(
            {"body": _b64(body), "integratedTime": integrated_time, "logID": log_id.hex(), "logIndex": index}
        )
        return {
            "logIndex": str(index),
            "logId": {"keyId": _b64(log_id)},
            "kindVersion": {"kind": kind, "version": "0.0.1"},
            "integratedTime": str(integrated_time),
            "inclusionPromise": {"signedEntryTimestamp": _b64(self.log_key.sign(promise, ec.ECDSA(hashes.SHA256())))},
            "inclusionProof": {
                "logIndex": str(index),
                "rootHash": _b64(root),
                "treeSize": str(size),
                "hashes": [_b64(h) for h in _inclusion_path(index, self._leaves)],
                "checkpoint": {"envelope": checkpoint},
            },
            "canonicalizedBody": _b64(body),
        }

    # Signing --------------------------------------------------------------------------------------------------

    def sign(
        self,
        data: bytes,
        identity: Identity = Identity(),
        *,
        at: datetime | None = None,
        logged_after: timedelta = timedelta(seconds=5),
        lifetime: timedelta = timedelta(minutes=10),
    ) -> str:
        """A keyless signature of `data` by `identity` at `at` (default now), as the JSON bundle
        `cosign sign-blob --bundle` writes. `logged_after` past the certificate's `lifetime` makes a bundle whose
        certificate had expired when the log recorded it."""
        issued = (at or datetime.now(UTC)).replace(microsecond=0)
        key = ec.generate_private_key(ec.SECP256R1())
        certificate = self.certificate(identity, key, issued, lifetime)
        digest = hashlib.sha256(data).digest()
        signature = key.sign(data, ec.ECDSA(hashes.SHA256()))
        pem = certificate.public_bytes(serialization.Encoding.PEM)
        body = json.dumps(
            {
                "apiVersion": "0.0.1",
                "kind": "hashedrekord",
                "spec": {
                    "data": {"hash": {"algorithm": "sha256", "value": digest.hex()}},
                    "signature": {"content": _b64(signature), "publicKey": {"content": _b64(pem)}},
                },
            },
            separators=(",", ":"),
        ).encode()
        return json.dumps(
            {
                "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
                "verificationMaterial": {
                    "certificate": {"rawBytes": _b64(certificate.public_bytes(serialization.Encoding.DER))},
                    "tlogEntries": [self._log(body, issued + logged_after)],
                    "timestampVerificationData": {},
                },
                "messageSignature": {
                    "messageDigest": {"algorithm": "SHA2_256", "digest": _b64(digest)},
                    "signature": _b64(signature),
                },
            }
        )

    def sign_dsse(
        self,
        payload: bytes,
        identity: Identity = Identity(),
        *,
        payload_type: str = IN_TOTO_PAYLOAD_TYPE,
        at: datetime | None = None,
    ) -> str:
        """A keyless DSSE signature over `payload` (an in-toto statement by default) by `identity`, as the bundle
        sigstore-python's `Signer.sign_dsse` returns: the envelope signed over its pre-authentication encoding (DSSE
        v1), logged as a Rekor `dsse` 0.0.1 entry (payload hash, signature and certificate, as Rekor extracts them).
        By default issued half a minute ago, so that its log time is past too (verifiers refuse a future one)."""
        issued = (at or datetime.now(UTC) - timedelta(seconds=30)).replace(microsecond=0)
        key = ec.generate_private_key(ec.SECP256R1())
        certificate = self.certificate(identity, key, issued)
        type_bytes = payload_type.encode()
        pae = b"DSSEv1 %d %s %d %s" % (len(type_bytes), type_bytes, len(payload), payload)
        signature = key.sign(pae, ec.ECDSA(hashes.SHA256()))
        envelope = {"payload": _b64(payload), "payloadType": payload_type, "signatures": [{"sig": _b64(signature)}]}
        pem = certificate.public_bytes(serialization.Encoding.PEM)
        body = json.dumps(
            {
                "apiVersion": "0.0.1",
                "kind": "dsse",
                "spec": {
                    "envelopeHash": {
                        "algorithm": "sha256",
                        "value": hashlib.sha256(json.dumps(envelope).encode()).hexdigest(),
                    },
                    "payloadHash": {"algorithm": "sha256", "value": hashlib.sha256(payload).hexdigest()},
                    "signatures": [{"signature": _b64(signature), "verifier": _b64(pem)}],
                },
            },
            separators=(",", ":"),
        ).encode()
        return json.dumps(
            {
                "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
                "verificationMaterial": {
                    "certificate": {"rawBytes": _b64(certificate.public_bytes(serialization.Encoding.DER))},
                    "tlogEntries": [self._log(body, issued + timedelta(seconds=5), kind="dsse")],
                    "timestampVerificationData": {},
                },
                "dsseEnvelope": envelope,
            }
        )

    def sign_variant(self, variant: Path, identity: Identity = Identity(), **options: object) -> Path:
        """Sign `variant/metadata.json` as kernels-community's CI does: the bundle beside it."""
        bundle = variant / "metadata.json.sigstore"
        bundle.write_text(self.sign((variant / "metadata.json").read_bytes(), identity, **options))  # type: ignore[arg-type]
        return bundle

    def sign_files(
        self, files: dict[str, bytes], identity: Identity = Identity(), **options: object
    ) -> dict[str, bytes]:
        """A repository tree (testkit.fake_kernel.kernel_files) with every `build/<variant>/metadata.json` signed:
        the bundles added beside them."""
        signed = dict(files)
        for path, data in files.items():
            if path.startswith("build/") and path.endswith("/metadata.json") and path.count("/") == 2:
                signed[path + ".sigstore"] = self.sign(data, identity, **options).encode()  # type: ignore[arg-type]
        return signed
