"""metadata.json of a kernel variant: the one place that writes it and the one place that reads it.

The format is the `kernels` ecosystem's (PyPI `kernels-data` parses it; `kernels` refuses anything else):
`version` is the kernel's major version as an integer (its `v<major>` branch), `digest.files` maps every
other file of the variant to the base64 of its sha256, and `provenance`, when present, names the build
tool under `kernel-builder.version`. kernelpin adds the full SemVer of the release under `semver`
(unknown keys are ignored by `kernels`). Variants written before this format (`version` the SemVer string,
hex digests: "legacy") are still read, so locks of older releases keep working; publishing one is refused.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kernelpin.errors import KernelpinError
from kernelpin.integrity import check_repo_path
from kernelpin.layout import METADATA
from kernelpin.ranges import Version, VersionError
DIGEST_ALGORITHM = "sha256"
SEMVER_KEY = "semver"
_REQUIRED = ("id", "name", "version", "license", "python-depends", "backend")


class MetadataError(KernelpinError):
    """A metadata.json that is not kernel metadata; the message says which field and what is expected."""


def sha256_base64(hex_digest: str) -> str:
    """A sha256 as `kernels_data.Digest` writes it: standard base64 of the 32 raw bytes."""
    return base64.b64encode(bytes.fromhex(hex_digest)).decode("ascii")


def sha256_hex(base64_digest: str) -> str:
    """The inverse of sha256_base64; raises ValueError unless it is the base64 of 32 bytes."""
    raw = base64.b64decode(base64_digest, validate=True)
    if len(raw) != 32:
        raise ValueError(f"{base64_digest!r} is not the base64 of a sha256 (32 bytes)")
    return raw.hex()


def compose(
    *,
    op_id: str,
    name: str,
    version: Version,
    license: str,
    variant: str,
    backend: Mapping[str, Any],
    files: Mapping[str, str],
    builder: Mapping[str, str],
    provenance: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The metadata.json document of one variant. `files`: path -> hex sha256 of every other file;
    `builder`: {"name", "version"} of the build tool (recorded as provenance's `kernel-builder`)."""
    if "version" not in builder:
        raise ValueError("builder needs a 'version' (kernels requires provenance.kernel-builder.version)")
    return {
        **(extra or {}),
        "id": op_id,
        "name": name,
        "version": version.major,
        SEMVER_KEY: str(version),
        "license": license,
        "variant": variant,
        "backend": dict(backend),
        "python-depends": [],
        "digest": {
            "algorithm": DIGEST_ALGORITHM,
            "files": {path: sha256_base64(digest) for path, digest in sorted(files.items())},
        },
        "provenance": {**(provenance or {}), "kernel-builder": dict(builder)},
    }


def render(document: Mapping[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


@dataclass(frozen=True)
class VariantMetadata:
    """What kernelpin needs from a metadata.json, in either format."""

    document: dict[str, Any]
    major: int | None  # the `v<major>` line; None when the build does not say
    semver: Version | None  # None for builds that record only the major (kernel-builder's)
    digests: dict[str, str]  # path -> hex sha256 (empty when the variant has no digest)
    backend: str | None
    archs: tuple[str, ...] | None
    variant: str | None  # the variant name the build says it is, when it says
    legacy: bool  # written before the kernels format (SemVer `version`, hex digests)


def parse(content: bytes | str, where: str) -> VariantMetadata:
    """Read metadata.json; raise MetadataError saying which field is wrong and how it should look."""
    try:
        document = json.loads(content)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise MetadataError(f"{where}: not valid JSON ({error}); the build is broken") from None
    if not isinstance(document, dict):
        raise MetadataError(f"{where}: expected a JSON object, got {type(document).__name__}")
    raw_digest = document.get("digest")
    if isinstance(raw_digest, dict) and isinstance(raw_digest.get("files"), dict):
        for path in raw_digest["files"]:  # before anything else of a hostile file is looked at
            check_repo_path(str(path), where)
    version = document.get("version")
    legacy = isinstance(version, str)
    major: int | None = None
    semver: Version | None = None
    if legacy:
        semver = _semver(version, where, "version")
        major = semver.major
    elif isinstance(version, int) and not isinstance(version, bool) and version >= 0:
        major = version
        if SEMVER_KEY in document:
            semver = _semver(document[SEMVER_KEY], where, SEMVER_KEY)
            if semver.major != major:
                raise MetadataError(
                    f"{where}: \"{SEMVER_KEY}\" {semver} is not on major version {major} (\"version\"); rebuild"
                )
    elif version is not None:
        raise MetadataError(
            f"{where}: \"version\" must be the kernel's major version as an unsigned integer (e.g. 1), "
            f"not {version!r}"
        )
    digests = _digests(document.get("digest"), where, legacy)
    backend = document.get("backend")
    if backend is not None and not isinstance(backend, dict):
        raise MetadataError(f"{where}: \"backend\" must be an object such as {{\"type\": \"cuda\", \"archs\": [...]}}")
    backend = backend or {}
    archs = backend.get("archs")
    if archs is not None and not (isinstance(archs, list) and all(isinstance(a, str) for a in archs)):
        raise MetadataError(f"{where}: \"backend.archs\" must be a list of strings such as [\"8.0\", \"9.0\"]")
    kind = backend.get("type")
    variant = document.get("variant")
    return VariantMetadata(
        document=document,
        major=major,
        semver=semver,
        digests=digests,
        backend=kind.lower() if isinstance(kind, str) else None,
        archs=None if archs is None else tuple(archs),
        variant=variant if isinstance(variant, str) else None,
        legacy=legacy,
    )


def check_kernels_format(metadata: VariantMetadata, where: str) -> None:
    """Refuse what `kernels` would refuse to load: the legacy format, missing required fields, a
    provenance without `kernel-builder.version`, a variant without a digest, or one without a SemVer."""
    if metadata.legacy:
        raise MetadataError(
            f"{where}: old metadata format (\"version\" is the SemVer string, digests are hex), which the "
            "`kernels` package refuses to load; rebuild the variant with tools/build_op.py"
        )
    document = metadata.document
    missing = [key for key in _REQUIRED if key not in document]
    if missing:
        raise MetadataError(f"{where}: missing {', '.join(missing)} (required by the kernels metadata format)")
    provenance = document.get("provenance")
    if provenance is not None and not isinstance((provenance.get("kernel-builder") or {}).get("version"), str):
        raise MetadataError(f"{where}: \"provenance\" must name the build tool: {{\"kernel-builder\": {{\"version\": ...}}}}")
    if metadata.major is None:
        raise MetadataError(f"{where}: no \"version\" (the kernel's major version, an integer)")
    if not metadata.digests:
        raise MetadataError(f"{where}: no \"digest\"; every released variant lists the sha256 of its files")
    if metadata.semver is None:
        raise MetadataError(
            f"{where}: no \"{SEMVER_KEY}\": kernelpin releases are tagged with the full version "
            f"(e.g. \"{SEMVER_KEY}\": \"{metadata.major}.1.0\"); rebuild with tools/build_op.py"
        )


def _semver(value: Any, where: str, key: str) -> Version:
    try:
        return Version.parse(str(value))
    except VersionError as error:
        raise MetadataError(f"{where}: \"{key}\": {error}") from None


def _digests(digest: Any, where: str, legacy: bool) -> dict[str, str]:
    if digest is None:
        return {}
    if not isinstance(digest, dict) or not isinstance(digest.get("files"), dict):
        raise MetadataError(f"{where}: \"digest\" must be {{\"algorithm\": \"sha256\", \"files\": {{path: hash}}}}")
    algorithm = digest.get("algorithm", DIGEST_ALGORITHM)
    if algorithm != DIGEST_ALGORITHM:
        raise MetadataError(f"{where}: digest algorithm {algorithm!r} is not {DIGEST_ALGORITHM}")
    files = {}
    for path, value in digest["files"].items():
        check_repo_path(path, where)
        try:
            if not isinstance(value, str):
                raise ValueError(f"{value!r} is not a string")
            if legacy:
                if len(value) != 64:
                    raise ValueError(f"{value!r} is not a hex sha256")
                files[path] = bytes.fromhex(value).hex()
            else:
                files[path] = sha256_hex(value)
        except (ValueError, binascii.Error) as error:
            form = "hex" if legacy else "base64"
            raise MetadataError(f"{where}: digest of {path}: {error} (expected the {form} sha256)") from None
    return files
