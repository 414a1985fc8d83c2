"""CEP 27 publication statements and CEP 50 attestation sidecars of conda packages, pure: build the statement a
publisher signs, read one back strictly, check that it names a given package file, and lay out (or read) the
`<package>.sigs.<sha256>` sidecar a channel serves beside the package.

The byte format is the one conda-sigstore 0.1.5 (conda-incubator's verifier, the conda ecosystem's judge) signs and
checks: an in-toto Statement v1 whose one subject is the package file's name and sha256, predicate type
`https://schemas.conda.org/attestations-publish-1.schema.json` (CEP 27 as accepted; an early draft said
`.../attestations/publish/v1`), predicate `{"targetChannel": URL}`, serialized with sorted keys and no whitespace.
Signing (a Sigstore DSSE bundle) and verifying the signature are the callers' business: this module holds no keys
and imports no Sigstore code.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any, NoReturn
from urllib.parse import SplitResult, urlsplit, urlunsplit

from kernelpin.errors import KernelpinError
from kernelpin.format.nesting import within_nesting
from kernelpin.records import record

__untrusted_input__ = ("parse_publication_statement", "parse_sidecar")  # (kernelpin.errors)

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PUBLISH_PREDICATE_TYPE = "https://schemas.conda.org/attestations-publish-1.schema.json"
PAYLOAD_TYPE = "application/vnd.in-toto+json"  # the DSSE envelope's payloadType
SIDECAR_INFIX = ".sigs."  # CEP 50: <package>.sigs.<sha256 of the sidecar's bytes>
MAX_STATEMENT_BYTES = 64 * 1024  # a statement is a few hundred bytes; anything larger is not one
MAX_SIDECAR_BYTES = 10 * 1024 * 1024  # conda-sigstore's default limit on a sidecar
MAX_CHANNEL_URL = 2083  # CEP 27's schema: targetChannel maxLength

_SHA256 = re.compile(r"[0-9a-f]{64}")
_PACKAGE_EXTENSIONS = (".conda", ".tar.bz2")
_ANACONDA_TOKEN = re.compile(r"/t/[A-Za-z0-9-]*")  # anaconda.org's token in a channel path: a credential


class AttestationError(KernelpinError):
    """A publication statement or sidecar that is malformed, or does not bind the package it is checked against."""


def _refuse(problem: str, fix: str) -> NoReturn:
    raise AttestationError(f"{problem}; {fix}")


def package_filename(name: object) -> str:
    """`name` if it is a conda package's file name (`<name>-<version>-<build>.conda` or `.tar.bz2`, lowercase, no
    directory): the only thing a CEP 27 subject may name."""
    if not isinstance(name, str) or not name:
        _refuse("a CEP 27 subject must name a conda package file", "give the package's file name")
    if "/" in name or "\\" in name or "\0" in name:
        _refuse(f"conda package file name {name!r} holds a path", "give the file name alone")
    extension = next((ext for ext in _PACKAGE_EXTENSIONS if name.endswith(ext)), None)
    if extension is None:
        _refuse(f"{name!r} is not a conda package file name", "it must end in .conda or .tar.bz2")
    stem = name[: -len(extension)]
    if stem.count("-") < 2 or not all(stem.split("-")):
        _refuse(f"{name!r} is not a conda package file name", "it must read <name>-<version>-<build>" + extension)
    if stem != stem.lower():
        _refuse(f"conda package file name {name!r} has capitals", "CEP 27 names packages in lowercase")
    return name


def sha256_digest(value: object, what: str = "sha256") -> str:
    """`value` as 64 lowercase hex digits (upper case is accepted and lowered, as conda-sigstore does)."""
    if not isinstance(value, str) or not _SHA256.fullmatch(value.lower()):
        _refuse(f"{what} {value!r} is not a sha256", "give 64 hexadecimal digits")
    return value.lower()


def channel_url(url: object) -> str:
    """`url` as CEP 27's `targetChannel`: an http(s) URL of a channel with no credentials, query or trailing slash,
    the scheme and host lowercased and a default port dropped, so that the statement names the channel exactly as
    conda-sigstore compares it."""
    fix = "give the channel's URL, e.g. https://prefix.dev/my-channel (no trailing slash, no token)"
    if not isinstance(url, str) or not url or len(url) > MAX_CHANNEL_URL:
        _refuse(f"channel URL {url!r} is not a URL of at most {MAX_CHANNEL_URL} characters", fix)
    if url.endswith("/"):
        _refuse(f"channel URL {url!r} ends in a slash", fix)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        _refuse(f"channel URL {url!r} is malformed", fix)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        _refuse(f"channel URL {url!r} is not a plain http(s) URL", fix)
    if parts.username or parts.password or _ANACONDA_TOKEN.search(parts.path):
        _refuse(f"channel URL {url!r} carries a credential", fix)
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    if port is not None and (scheme, port) not in (("http", 80), ("https", 443)):
        host = f"{host}:{port}"
    return urlunsplit(SplitResult(scheme, host, parts.path, "", ""))


@record
class PublicationStatement:
    """What a CEP 27 publication attestation says: this file, with this sha256, was published to this channel."""

    filename: str
    sha256: str
    target_channel: str | None  # None: a statement without a predicate (CEP 27 allows it; we always write one)

    def to_json(self) -> dict[str, Any]:
        return {
            "_type": STATEMENT_TYPE,
            "subject": [{"name": self.filename, "digest": {"sha256": self.sha256}}],
            "predicateType": PUBLISH_PREDICATE_TYPE,
            "predicate": None if self.target_channel is None else {"targetChannel": self.target_channel},
        }

    def payload(self) -> bytes:
        """The bytes to sign (the DSSE payload): sorted keys, no whitespace, UTF-8, as conda-sigstore writes them."""
        return json.dumps(self.to_json(), ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()


def publication_statement(filename: str, sha256: str, target_channel: str) -> PublicationStatement:
    """The statement a publisher signs for one package file bound for `target_channel`, every field checked."""
    return PublicationStatement(package_filename(filename), sha256_digest(sha256), channel_url(target_channel))


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Two readers of a statement with a duplicated key may each see a different value: refuse it.
    table: dict[str, Any] = {}
    for key, value in pairs:
        if key in table:
            _refuse(f"publication statement repeats the key {key!r}", "a statement must be unambiguous JSON")
        table[key] = value
    return table


def _no_constant(name: str) -> NoReturn:
    _refuse(f"publication statement holds {name}, which JSON does not define", "a statement must be plain JSON")


def parse_publication_statement(payload: bytes) -> PublicationStatement:
    """Read a signed statement's payload back: exactly one subject with exactly a sha256 digest, CEP 27's predicate
    type, a predicate that is null or names a valid channel. Anything else is refused with what is wrong."""
    fix = "the attestation is not a CEP 27 publication statement"
    if len(payload) > MAX_STATEMENT_BYTES:
        _refuse(f"publication statement is {len(payload)} bytes (at most {MAX_STATEMENT_BYTES})", fix)
    try:
        value = within_nesting(
            json.loads(payload.decode("utf-8"), object_pairs_hook=_unique_keys, parse_constant=_no_constant)
        )
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        _refuse(f"publication statement is not UTF-8 JSON ({error})", fix)
    if not isinstance(value, dict):
        _refuse("publication statement is not a JSON object", fix)
    if value.get("_type") != STATEMENT_TYPE:
        _refuse(f"statement type {value.get('_type')!r} is not {STATEMENT_TYPE}", fix)
    if value.get("predicateType") != PUBLISH_PREDICATE_TYPE:
        _refuse(f"predicate type {value.get('predicateType')!r} is not {PUBLISH_PREDICATE_TYPE}", fix)
    subjects = value.get("subject")
    if not isinstance(subjects, list) or len(subjects) != 1 or not isinstance(subjects[0], dict):
        _refuse("a CEP 27 statement has exactly one subject", fix)
    digest = subjects[0].get("digest")
    if not isinstance(digest, dict) or set(digest) != {"sha256"}:
        _refuse("the subject's digest must hold exactly a sha256", fix)
    predicate = value.get("predicate")
    target: str | None = None
    if predicate is not None:
        if not isinstance(predicate, dict) or "targetChannel" not in predicate:
            _refuse("the predicate must be null or an object with targetChannel", fix)
        target = channel_url(predicate["targetChannel"])
    return PublicationStatement(
        package_filename(subjects[0].get("name")), sha256_digest(digest["sha256"], "subject sha256"), target
    )


def check_binds(statement: PublicationStatement, filename: str, sha256: str, channel: str | None = None) -> None:
    """Refuse unless `statement` names this package file and its bytes' sha256 (and, given `channel`, that
    channel): a valid signature over a statement about another file proves nothing about this one."""
    if statement.filename != package_filename(filename):
        _refuse(
            f"the attestation is for {statement.filename}, not {filename}",
            "the sidecar belongs to another package; fetch the one repodata names for this package",
        )
    if statement.sha256 != sha256_digest(sha256):
        _refuse(
            f"{filename} has sha256 {sha256_digest(sha256)}, the attestation names {statement.sha256}",
            "the package's bytes are not the ones that were signed; download it again from the channel",
        )
    if channel is not None and statement.target_channel != channel_url(channel):
        _refuse(
            f"{filename} was attested for channel {statement.target_channel}, not {channel_url(channel)}",
            "install it from the channel it was published to",
        )


# CEP 50 sidecars ----------------------------------------------------------------------------------------------


def sidecar_bytes(bundles: Sequence[str]) -> bytes:
    """A sidecar: the JSON array of the Sigstore bundles (each kept byte for byte, CEP 50's append-only rule), in
    the order given."""
    if not bundles:
        _refuse("a sidecar holds at least one attestation", "sign the package first")
    for index, bundle in enumerate(bundles):
        try:
            parsed = within_nesting(json.loads(bundle, object_pairs_hook=_unique_keys, parse_constant=_no_constant))
        except (json.JSONDecodeError, RecursionError) as error:
            _refuse(f"attestation bundle {index} is not JSON ({error})", "give Sigstore bundles as JSON text")
        if not isinstance(parsed, dict):
            _refuse(f"attestation bundle {index} is not a JSON object", "give Sigstore bundles as JSON text")
    return ("[" + ",".join(bundle.strip() for bundle in bundles) + "]").encode()


def sidecar_name(package: str, sidecar: bytes) -> str:
    """CEP 50's content-addressed name of `sidecar` beside `package`: `<package>.sigs.<sha256 of its bytes>`."""
    return f"{package_filename(package)}{SIDECAR_INFIX}{hashlib.sha256(sidecar).hexdigest()}"


def parse_sidecar(body: bytes, attestations_sha256: str) -> tuple[str, ...]:
    """The bundles of a sidecar fetched for repodata's `attestations_sha256`: its bytes hash-checked first (CEP 50's
    client rule), then read as a non-empty JSON array of objects; each bundle returned as JSON text."""
    expected = sha256_digest(attestations_sha256, "attestations_sha256")
    if attestations_sha256 != expected:
        _refuse(f"attestations_sha256 {attestations_sha256!r} is not lowercase", "CEP 50 requires lowercase hex")
    if len(body) > MAX_SIDECAR_BYTES:
        _refuse(f"attestation sidecar is {len(body)} bytes (at most {MAX_SIDECAR_BYTES})", "the channel is broken")
    actual = hashlib.sha256(body).hexdigest()
    if actual != expected:
        _refuse(
            f"attestation sidecar has sha256 {actual}, repodata says {expected}",
            "the channel served other bytes than it advertises; try again later or report it to the channel",
        )
    try:
        value = within_nesting(
            json.loads(body.decode("utf-8"), object_pairs_hook=_unique_keys, parse_constant=_no_constant)
        )
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        _refuse(f"attestation sidecar is not UTF-8 JSON ({error})", "the channel is broken")
    if not isinstance(value, list) or not value or not all(isinstance(bundle, dict) for bundle in value):
        _refuse("attestation sidecar is not a non-empty JSON array of bundles", "the channel is broken")
    return tuple(json.dumps(bundle, ensure_ascii=False, separators=(",", ":")) for bundle in value)
