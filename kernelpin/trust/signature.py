"""Sigstore signatures of releases: verifying a variant's `metadata.json.sigstore` bundle over its
`metadata.json` bytes, offline, with sigstore-python's `Verifier`, and reading who signed it.

What a valid bundle proves: a certificate from the trust root's CA (Fulcio), for the identity in it, logged in
a certificate-transparency log (the SCT) and valid when the transparency log (Rekor) recorded the signature (its
inclusion proof, signed checkpoint and signed entry timestamp); the signature covers exactly these metadata.json
bytes, whose digest covers every other file of the variant. Who may sign is the publisher policy's question
(kernelpin.trust.policy), asked of the verified identity.

The trust root is Sigstore's public-good one as sigstore-python ships it (offline; `refresh=True` updates it
through TUF first), or a `trusted_root.json` the policy names. Imported only by the commands that verify
(lock, sync, verify): `load` checks what the lock recorded, with no cryptography.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from kernelpin.errors import KernelpinError
from kernelpin.format.layout import METADATA
from kernelpin.format.layout import SIGNATURE as BUNDLE
from kernelpin.format.signer import Signer
from kernelpin.hub.limits import HTTP_TIMEOUT, Limits
from kernelpin.records import record
from kernelpin.trust.gate import Evidence, EvidenceKind, enforce
from kernelpin.trust.policy import Policy, SignatureError

if TYPE_CHECKING:
    from cryptography.x509 import Certificate
    from sigstore.models import TrustedRoot
    from sigstore.verify import Verifier

PUBLIC_GOOD_TUF = "https://tuf-repo-cdn.sigstore.dev"  # sigstore-python's DEFAULT_TUF_URL
MAX_BUNDLE_BYTES = 1 << 20  # a real bundle is about 5 KB: a certificate, a signature, one log entry

# Fulcio's certificate extensions (https://github.com/sigstore/fulcio/blob/main/docs/oid-info.md).
_ISSUER_V1 = "1.3.6.1.4.1.57264.1.1"
_ISSUER = "1.3.6.1.4.1.57264.1.8"
_SOURCE_REPOSITORY_URI = "1.3.6.1.4.1.57264.1.12"
_SOURCE_REPOSITORY_DIGEST = "1.3.6.1.4.1.57264.1.13"
_SOURCE_REPOSITORY_REF = "1.3.6.1.4.1.57264.1.14"


@record
class Verified:
    """A bundle that verified: who signed, which bundle, where the transparency log recorded it."""

    signer: Signer
    bundle_sha256: str
    log_index: int
    log_id: str  # hex sha256 of the log's public key
    integrated_time: int  # seconds since the epoch, as the log recorded it

    def fields(self) -> dict[str, Any]:
        """As JSON data (the signature worker's answers, the signature receipts)."""
        return {
            "signer": vars(self.signer),
            "bundle_sha256": self.bundle_sha256,
            "log_index": self.log_index,
            "log_id": self.log_id,
            "integrated_time": self.integrated_time,
        }

    @classmethod
    def from_fields(cls, fields: object) -> Verified:
        """What `fields` wrote; ValueError for anything else."""

        def text(value: object) -> str:
            if isinstance(value, str):
                return value
            raise ValueError("not a string")

        def number(value: object) -> int:
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            raise ValueError("not a whole number")

        signer = fields.get("signer") if isinstance(fields, dict) else None
        if not isinstance(fields, dict) or not isinstance(signer, dict):
            raise ValueError("not a verified signature")  # noqa: TRY004  # malformed data: the contract is ValueError
        optional = (
            None if signer.get(key) is None else text(signer.get(key))
            for key in ("source_repository", "source_commit", "source_ref")
        )
        return cls(
            Signer(text(signer.get("issuer")), text(signer.get("identity")), *optional),
            text(fields.get("bundle_sha256")),
            number(fields.get("log_index")),
            text(fields.get("log_id")),
            number(fields.get("integrated_time")),
        )


class TrustRootError(KernelpinError):
    """The Sigstore trust root could not be loaded or refreshed."""


def _refreshed_root(timeout: float) -> TrustedRoot:
    """Sigstore's public-good trust root as its TUF repository has it now, within `timeout` seconds: tuf waits
    30 s per request and retries, minutes behind a silent link or a black-holing proxy. The refresh runs in a
    daemon thread that is left behind when it does not answer in time."""
    from sigstore.errors import Error
    from sigstore.models import ClientTrustConfig

    outcome: list[TrustedRoot | BaseException] = []

    def refresh() -> None:
        try:
            outcome.append(ClientTrustConfig.production(offline=False).trusted_root)
        except BaseException as error:  # noqa: BLE001  # handed to the caller's thread
            outcome.append(error)

    thread = threading.Thread(target=refresh, name="kernelpin-tuf", daemon=True)
    thread.start()
    thread.join(timeout)
    fix = "run without --refresh-trust-root to use the one sigstore-python ships (it works offline)"
    if not outcome:
        raise TrustRootError(
            f"no answer from Sigstore's TUF repository within {timeout:g} s, "
            f"so its trust root cannot be refreshed (offline, or the network blocks it); {fix}, or "
            f"set {HTTP_TIMEOUT}=SECONDS to wait longer"
        )
    if isinstance(outcome[0], Error):
        # sigstore's TUFError says only "Failed to refresh TUF metadata": the causes below it say what failed and why.
        causes: list[str] = []
        cause: BaseException | None = outcome[0].__cause__ or outcome[0]
        while cause is not None and len(causes) < 4:
            causes.append((str(cause).splitlines() or [type(cause).__name__])[0])
            cause = cause.__cause__
        detail = ": ".join(causes)[:400]
        raise TrustRootError(f"cannot refresh Sigstore's trust root through TUF ({detail}); {fix}") from None
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def _one_line(error: BaseException, limit: int = 200) -> str:
    """An error's text on one line (pydantic's validation errors take several), cut at `limit` characters."""
    return " ".join(str(error).split())[:limit]


def verifier(
    policy: Policy, project_root: Path, refresh: bool = False, refresh_timeout: float = Limits.http_timeout
) -> Verifier:
    """The verifier of the policy's trust root: its `trusted-root` file, else Sigstore's public-good root as
    sigstore-python ships it (or as its TUF cache last updated it); `refresh` asks TUF for a newer one first,
    waiting at most `refresh_timeout` seconds."""
    from sigstore.errors import Error
    from sigstore.models import TrustedRoot
    from sigstore.verify import Verifier

    if policy.trusted_root is not None:
        path = project_root / policy.trusted_root
        try:
            return Verifier(trusted_root=TrustedRoot.from_file(str(path)))
        except (OSError, ValueError, Error) as error:
            raise TrustRootError(
                f"{path} (trusted-root in [tool.kernelpin.trust]): not a Sigstore trusted root "
                f"({_one_line(error)}); point it at a trusted_root.json"
            ) from None
    if refresh:
        return Verifier(trusted_root=_refreshed_root(refresh_timeout))
    shipped = public_good_root()
    try:
        if shipped is None:
            raise OSError("sigstore-python ships none")
        return Verifier(trusted_root=TrustedRoot.from_file(str(shipped)))
    except (OSError, ValueError, Error) as error:  # a damaged TUF cache of sigstore-python's
        raise TrustRootError(
            f"cannot load Sigstore's trust root from {shipped} ({_one_line(error)}); run with "
            "--refresh-trust-root (online) to fetch it again"
        ) from None


def verifier_and_root(
    policy: Policy, project_root: Path, refresh: bool = False, refresh_timeout: float = Limits.http_timeout
) -> tuple[Verifier, str | None]:
    """`verifier`, and the trust_root_id of the root it loaded: read before and after it was made, so a root that
    changed meanwhile (a refresh, an edit) is not known for sure (None; nothing is kept as verified under it)."""
    before = trust_root_id(policy, project_root)
    made = verifier(policy, project_root, refresh, refresh_timeout)
    return made, before if trust_root_id(policy, project_root) == before else None


def public_good_root() -> Path | None:
    """The public-good trusted_root.json the offline verifier reads: sigstore-python's TUF cache copy (platformdirs'
    user cache, which a refresh updates through TUF) when it is this user's own, else the one sigstore-python ships
    (None without sigstore). Offline, sigstore-python would read the cached copy unverified: one another user
    could have planted or can change (XDG_CACHE_HOME is HF_HOME's default parent, so a shared Hub cache often
    shares it) would verify forgeries, so it is passed over, as receipts not this user's own are."""
    import importlib.util

    import platformdirs

    repository = quote(PUBLIC_GOOD_TUF, safe="")
    cache = Path(platformdirs.user_cache_dir("sigstore-python", "sigstore"))
    cached = cache / "tuf" / repository / "trusted_root.json"
    if owned_by_user(cached, cache):
        return cached
    spec = importlib.util.find_spec("sigstore")  # finds the package without running it
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "_store" / repository / "trusted_root.json"


def owned_by_user(path: Path, top: Path) -> bool:
    """Whether only this user can have written `path`: it is a file (not a link), and it and every directory
    from it up to `top` are this user's and writable by no one else; the directory holding `top` is this user's
    or root's, and others cannot rename what is in it (not writable by them, or sticky). False where the
    platform has no uids (then the shipped root is used)."""
    import stat

    if not hasattr(os, "geteuid") or not path.is_relative_to(top):
        return False
    me = os.geteuid()
    try:
        found = os.lstat(path)
        if not stat.S_ISREG(found.st_mode) or found.st_uid != me or found.st_mode & 0o022:
            return False
        for directory in (path.parent, *path.parent.parents):
            found = os.lstat(directory)
            if not stat.S_ISDIR(found.st_mode) or found.st_uid != me or found.st_mode & 0o022:
                return False
            if directory == top:
                break
        above = os.lstat(top.parent)
    except OSError:
        return False
    return above.st_uid in (me, 0) and (not above.st_mode & 0o022 or bool(above.st_mode & stat.S_ISVTX))


def trust_root_id(policy: Policy, project_root: Path) -> str | None:
    """What a bundle's verification depends on besides its bytes and metadata.json's, as one sha256: the bytes of
    the trust root `verifier` loads (offline) and sigstore-python's version. None when they cannot be read
    (then nothing is recalled: kernelpin.trust.receipts). Reads files only: sigstore is not imported."""
    import importlib.metadata

    try:
        version = importlib.metadata.version("sigstore")
        if policy.trusted_root is not None:
            content = (project_root / policy.trusted_root).read_bytes()
        else:
            path = public_good_root()
            if path is None:
                return None
            content = path.read_bytes()
    except (OSError, ImportError, ValueError):  # no sigstore distribution (PackageNotFoundError), or no file
        return None
    return hashlib.sha256(f"sigstore-python {version}\0".encode() + content).hexdigest()


def _extension(certificate: Certificate, oid: str) -> str | None:
    from cryptography import x509
    from cryptography.hazmat import asn1

    try:
        value = certificate.extensions.get_extension_for_oid(x509.ObjectIdentifier(oid)).value
    except x509.ExtensionNotFound:
        return None
    if not isinstance(value, x509.UnrecognizedExtension):  # Fulcio's extensions are none cryptography knows
        return None
    raw = value.value
    if oid == _ISSUER_V1:
        return raw.decode()
    return asn1.decode_der(str, raw)


def signer_of(certificate: Certificate) -> Signer:
    """Who a Fulcio certificate was issued to."""
    from cryptography import x509

    try:
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        subjects = names.get_values_for_type(x509.UniformResourceIdentifier) + names.get_values_for_type(
            x509.RFC822Name
        )
    except x509.ExtensionNotFound:  # (an empty SubjectAlternativeName cannot be made: cryptography refuses it)
        subjects = []
    return Signer(
        issuer=_extension(certificate, _ISSUER) or _extension(certificate, _ISSUER_V1) or "",
        identity=subjects[0] if subjects else "",
        source_repository=_extension(certificate, _SOURCE_REPOSITORY_URI),
        source_commit=_extension(certificate, _SOURCE_REPOSITORY_DIGEST),
        source_ref=_extension(certificate, _SOURCE_REPOSITORY_REF),
    )


class SignerRecorder:
    """A sigstore VerificationPolicy that accepts any identity and remembers it: the identity is checked against
    the publisher policy after the whole bundle verified, so that each failure gets its own cause."""

    signer: Signer | None = None

    def verify(self, cert: Certificate) -> None:
        self.signer = signer_of(cert)


def oversized(repo_id: str, variant: str, size: int) -> SignatureError:
    """The refusal of a bundle too large to be one, before it is read."""
    return SignatureError(
        repo_id,
        variant,
        f"{BUNDLE} is {size} bytes, over the {MAX_BUNDLE_BYTES} a Sigstore bundle may be",
        "the release is broken or hostile; ask the publisher to sign it again",
    )


def verify_bundle(
    repo_id: str, variant: str, metadata: bytes, bundle: bytes | None, policy: Policy, verifier: Verifier | None
) -> Verified | None:
    """Verify `bundle` over `metadata` (both as the release holds them) and its signer against `policy`.
    None for an unsigned release the policy lets through; `SignatureError` for everything else. `verifier`
    may be None only for a release without a bundle."""

    def refuse(cause: str, fix: str) -> SignatureError:
        return SignatureError(repo_id, variant, cause, fix)

    if bundle is None:
        enforce(policy, repo_id, variant, Evidence(EvidenceKind.RELEASE))
        return None
    # Only for a bundle: importing sigstore costs about 0.4 s of CPU, which an unsigned release never pays.
    from sigstore.errors import CertValidationError, VerificationError
    from sigstore.models import Bundle, InvalidBundle

    if len(bundle) > MAX_BUNDLE_BYTES:
        raise oversized(repo_id, variant, len(bundle))
    try:
        parsed = Bundle.from_json(bundle)
        entries = json.loads(bundle)["verificationMaterial"]["tlogEntries"]
        log_index, log_id = int(entries[0]["logIndex"]), base64.b64decode(entries[0]["logId"]["keyId"]).hex()
        integrated_time = int(entries[0].get("integratedTime", 0))
    except (InvalidBundle, ValueError, KeyError, IndexError, TypeError, RecursionError) as error:
        raise refuse(
            f"{BUNDLE} is not a Sigstore bundle ({str(error).splitlines()[0][:160]})",
            "the release is broken or hostile; ask the publisher to sign it again",
        ) from None
    other_bytes = refuse(
        f"{BUNDLE} signs other bytes than this metadata.json (tampered metadata, or the signature of another release)",
        "do not use this release; tell the publisher",
    )
    digest = parsed._inner.message_signature.message_digest if parsed._inner.message_signature else None
    if digest is not None and digest.digest != hashlib.sha256(metadata).digest():
        raise other_bytes
    recorder = SignerRecorder()
    assert verifier is not None, "a bundle needs a verifier"
    try:
        verifier.verify_artifact(metadata, parsed, recorder)
    except CertValidationError as error:
        if "not valid at validation time" in str(error):
            raise refuse(
                "the certificate had expired (or was not yet valid) when the log recorded the signature",
                "do not use this release; ask the publisher to sign it again",
            ) from None
        raise refuse(
            f"the certificate does not verify against the Sigstore trust root ({str(error)[:160]}): "
            "issued by another CA",
            "do not use this release; ask the publisher to sign it again",
        ) from None
    except VerificationError as error:
        text = str(error)
        if "Signature is invalid for input" in text or "inconsistent with other materials" in text:
            raise other_bytes from None
        if "expired at time of signing" in text:
            raise refuse(
                "the certificate had expired when the log recorded the signature",
                "do not use this release; ask the publisher to sign it again",
            ) from None
        raise refuse(
            f"the signature does not verify ({text.splitlines()[0][:200]})",
            "do not use this release; ask the publisher to sign it again",
        ) from None
    signer = recorder.signer
    assert signer is not None  # the verifier asks the policy before it can succeed
    enforce(policy, repo_id, variant, Evidence(EvidenceKind.RELEASE, signer))
    return Verified(signer, hashlib.sha256(bundle).hexdigest(), log_index, log_id, integrated_time)


def verify_variant(directory: Path, repo_id: str, policy: Policy, verifier: Verifier) -> Verified | None:
    """The full check of an installed or staged variant, as `kernels verify-signature` makes it: the bundle
    over metadata.json's bytes (before they are parsed), then every file against the signed digest."""
    from kernelpin.files.integrity import sha256_file
    from kernelpin.format.metadata import MetadataError, digest_covers, parse_metadata

    variant = directory.name
    try:
        metadata = (directory / METADATA).read_bytes()
    except OSError as error:
        raise SignatureError(
            repo_id, variant, f"no readable {METADATA} ({error.strerror})", "sync the kernel again"
        ) from None
    bundle_path = directory / BUNDLE
    size = bundle_path.stat().st_size if bundle_path.is_file() else None
    if size is not None and size > MAX_BUNDLE_BYTES:
        raise oversized(repo_id, variant, size)
    bundle = bundle_path.read_bytes() if size is not None else None
    verified = verify_bundle(repo_id, variant, metadata, bundle, policy, verifier)
    try:
        digests = parse_metadata(metadata, str(directory / METADATA)).digests
    except MetadataError as error:
        raise SignatureError(repo_id, variant, str(error), "do not use this build") from None
    present = {path.relative_to(directory).as_posix(): path for path in directory.rglob("*") if path.is_file()}
    present = {path: file for path, file in present.items() if digest_covers(path)}
    problems = sorted(present.keys() ^ digests.keys())
    problems += sorted(path for path in present.keys() & digests.keys() if sha256_file(present[path]) != digests[path])
    if problems or not digests:
        raise SignatureError(
            repo_id,
            variant,
            f"the files do not match the signed {METADATA} digest ({', '.join(problems[:5]) or 'no digest'})",
            "do not use this build; sync it again",
        )
    return verified
