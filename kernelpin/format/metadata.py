"""metadata.json of a kernel variant: the one place that writes it and the one place that reads it.

The format is the `kernels` ecosystem's (PyPI `kernels-data` parses it; `kernels` refuses anything else):
`version` is the kernel's major version as an integer (its `v<major>` branch), `digest.files` maps every
other file of the variant to the base64 of its sha256, and `provenance`, when present, names the build
tool under `kernel-builder.version`. kernelpin adds the full SemVer of the release under `semver`
(unknown keys are ignored by `kernels`). Variants written before this format (`version` the SemVer string,
hex digests: "legacy") are still read, so locks of older releases keep working; publishing one is refused.

A metadata.json from a repository comes from a publisher kernelpin does not trust yet: it is size-capped,
parsed defensively and schema-checked, so a wrong type is an error that names the field, never a string
iterated as a list ("9.0" -> ["9", ".", "0"]) or a traceback.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any

from kernelpin.errors import KernelpinError
from kernelpin.files.integrity import SHA256_HEX_RE, check_repo_path
from kernelpin.format.layout import CAPABILITY_BUILDS, METADATA, SIGNATURE
from kernelpin.format.nesting import within_nesting
from kernelpin.format.ranges import Version, VersionError
from kernelpin.format.spec import RequirementValue, is_repo_id
from kernelpin.format.variant import is_arch
from kernelpin.records import record

__untrusted_input__ = ("parse_metadata",)  # parsers of input kernelpin does not control (kernelpin.errors)

DIGEST_ALGORITHM = "sha256"
SEMVER_KEY = "semver"
MAX_METADATA_SIZE = 1 << 20  # 1 MiB: real ones are a few KiB; checked against the listing before downloading
_REQUIRED = ("id", "name", "version", "license", "python-depends", "backend")
BACKEND_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,31}\Z")  # cpu, cuda, rocm, xpu, metal, ...
# Optional keys `kernels` shows (`kernels info`) and checks: the oldest `kernels` that loads the variant, as
# three numbers (kernels refuses `0.11` or `v0.11.0`), and the kernel's upstream repository, a git URL.
KERNELS_MINVER_KEY, UPSTREAM_KEY = "kernels-minver", "upstream"
DEPENDS_KEY = "kernel-depends"  # other Hub kernels this variant loads with kernels.get_kernel_dep
# Their patterns, compiled on first use (re's cache): most builds carry neither key.
_KERNELS_MINVER = r"^[0-9]+\.[0-9]+\.[0-9]+\Z"
_GIT_URL = r"^(?:(?:https?|ssh|git)://[^\s/]+/\S+|[\w.-]+@[\w.-]+:\S+)\Z"


class MetadataError(KernelpinError):
    """A metadata.json that is not kernel metadata; the message says which field and what is expected."""


def digest_covers(path: str) -> bool:
    """Whether a variant's digest must list `path` (relative to the variant, POSIX), as kernels-data hashes a
    variant: every file but metadata.json itself, its signature bundle beside it and bytecode caches."""
    return path not in (METADATA, SIGNATURE) and "__pycache__" not in path.split("/")


def sha256_base64(hex_digest: str) -> str:
    """A sha256 as `kernels_data.Digest` writes it: standard base64 of the 32 raw bytes."""
    return base64.b64encode(bytes.fromhex(hex_digest)).decode("ascii")


def sha256_hex(base64_digest: str) -> str:
    """The inverse of sha256_base64; raises ValueError unless it is the base64 of 32 bytes."""
    raw = base64.b64decode(base64_digest, validate=True)
    if len(raw) != 32:
        raise ValueError(f"{base64_digest[:60]!r} is not the base64 of a sha256 (32 bytes)")
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
    upstream: str | None = None,
    kernels_minver: str | None = None,
) -> dict[str, Any]:
    """The metadata.json document of one variant. `files`: path -> hex sha256 of every other file;
    `builder`: {"name", "version"} of the build tool (recorded as provenance's `kernel-builder`);
    `upstream` and `kernels_minver` become the optional keys `kernels` reads, when given."""
    if "version" not in builder:
        raise ValueError("builder needs a 'version' (kernels requires provenance.kernel-builder.version)")
    optional = {
        key: value
        for key, value in ((UPSTREAM_KEY, upstream), (KERNELS_MINVER_KEY, kernels_minver))
        if value is not None
    }
    return {
        **(extra or {}),
        **optional,
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


# What HF's kernel requirements still ask of every variant for `kernels` releases older than the flat layout:
# a package `build/<variant>/<name>/` (the kernel's name, `-` as `_`) exporting what `build/<variant>/__init__.py`
# exports. Those releases import that package by its file path; it runs the variant's own __init__.py as a
# subpackage and re-exports its names, so both layouts run the same code (and the same library).
COMPAT_INIT = b"""\
# Written by kernelpin for `kernels` releases that import build/<variant>/<name>/__init__.py: runs the
# variant's own __init__.py (one directory up) as a subpackage and re-exports its public names.
import importlib.util as _util
import sys as _sys
from pathlib import Path as _Path

_spec = _util.spec_from_file_location(f"{__name__}._variant", _Path(__file__).resolve().parent.parent / "__init__.py")
_variant = _util.module_from_spec(_spec)
_sys.modules[_spec.name] = _variant
_spec.loader.exec_module(_variant)
globals().update({key: value for key, value in vars(_variant).items() if not key.startswith("__")})
if hasattr(_variant, "__all__"):
    __all__ = list(_variant.__all__)
"""


def compat_package_name(kernel_name: str) -> str:
    return kernel_name.replace("-", "_")


def compat_package(kernel_name: str) -> dict[str, bytes]:
    """The compatibility package's files, relative to the variant directory."""
    return {f"{compat_package_name(kernel_name)}/__init__.py": COMPAT_INIT}


def render(document: Mapping[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


@record
class BuildMetadata:
    """What kernelpin needs from a metadata.json, in either format."""

    digests: dict[str, str]  # path relative to the variant directory -> sha256 (hex); empty without a digest
    backend: str | None
    archs: tuple[str, ...] | None
    major: int | None = None  # the `v<major>` line; None when the build does not say
    semver: Version | None = None  # None for builds that record only the major (kernel-builder's)
    variant: str | None = None  # the variant name the build says it is, when it says
    legacy: bool = False  # written before the kernels format (SemVer `version`, hex digests)
    document: dict[str, Any] = field(default_factory=dict, repr=False)
    # `kernel-depends`: (repo id, requirement as kernelpin writes it: N for {"version": N}, {"revision": r})
    kernel_depends: tuple[tuple[str, RequirementValue], ...] = ()
    # `capability-builds` (kernelpin.format.capabilities): name -> (archs, {path: hex sha256}); {} without them
    capability_builds: dict[str, tuple[tuple[str, ...], dict[str, str]]] = field(default_factory=dict)


def check_size(size: int, where: str) -> None:
    if size > MAX_METADATA_SIZE:
        raise MetadataError(
            f"{where}: {size} bytes, more than the {MAX_METADATA_SIZE} bytes a kernel's metadata.json may have; "
            "the build is broken or hostile: do not use this revision"
        )


def parse_metadata(content: bytes | str, where: str) -> BuildMetadata:
    """Read one variant's metadata.json (either format); MetadataError names what is wrong."""
    check_size(len(content), where)

    def broken(problem: str) -> MetadataError:
        return MetadataError(f"{where}: not valid kernel metadata ({problem}); the build is broken")

    try:
        document = within_nesting(json.loads(content))
    except RecursionError:
        raise broken("nested too deeply") from None
    except ValueError as error:  # includes UnicodeDecodeError
        raise broken(str(error)[:200]) from None
    if not isinstance(document, dict):
        raise broken(f"the document is {_kind(document)}, not an object")
    digest = _optional(document, "digest", dict, broken) or {}
    files = _optional(digest, "files", dict, broken, "digest.") or {}
    for path in files:  # before anything else of a hostile file is looked at
        check_repo_path(path, where)
    algorithm = _optional(digest, "algorithm", str, broken, "digest.")
    if algorithm is not None and algorithm != DIGEST_ALGORITHM:
        raise broken(f"digest.algorithm {algorithm[:40]!r} is not {DIGEST_ALGORITHM}")

    version = document.get("version")
    legacy = isinstance(version, str)
    major, semver = None, None
    if legacy:
        semver = _semver(version, "version", broken)
        major = semver.major
    elif isinstance(version, int) and not isinstance(version, bool) and 0 <= version < 10**20:
        major = version
        if document.get(SEMVER_KEY) is not None:
            semver = _semver(document[SEMVER_KEY], SEMVER_KEY, broken)
            if semver.major != major:
                raise broken(f"{SEMVER_KEY} {semver} is not on major version {major} (version)")
    elif version is not None:
        raise broken(
            f"version must be the kernel's major version as an unsigned integer (e.g. 1), not {str(version)[:40]}"
        )

    digests = {}
    for path, value in files.items():
        digests[path] = _digest(path, value, legacy, broken)
    backend = _optional(document, "backend", dict, broken) or {}
    backend_type = _optional(backend, "type", str, broken, "backend.")
    if backend_type is not None and not BACKEND_NAME_RE.match(backend_type):
        raise broken(f"backend.type {backend_type[:40]!r} is not a backend name such as cpu or cuda")
    archs = _optional(backend, "archs", list, broken, "backend.")
    if archs is not None and not all(isinstance(arch, str) and is_arch(arch) for arch in archs):
        raise broken('backend.archs must list GPU archs such as "8.0", "9.0a", "12.0+PTX", "gfx942"')
    variant = _optional(document, "variant", str, broken)
    kernel_depends = tuple(
        _kernel_dependency(item, broken) for item in _optional(document, DEPENDS_KEY, list, broken) or ()
    )
    listing = document.get(CAPABILITY_BUILDS)
    capability_builds: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {}
    if listing is not None:  # a CUDA release's: other builds never import kernelpin.format.capabilities
        from kernelpin.format import capabilities

        capability_builds = capabilities.parse_listing(
            listing, lambda path, value: _digest(path, value, legacy, broken), broken
        )
    return BuildMetadata(
        digests=digests,
        backend=backend_type,
        archs=None if archs is None else tuple(archs),
        major=major,
        semver=semver,
        variant=variant,
        legacy=legacy,
        document=document,
        kernel_depends=kernel_depends,
        capability_builds=capability_builds,
    )


def _kernel_dependency(item: Any, broken: Callable[[str], MetadataError]) -> tuple[str, RequirementValue]:
    """One `kernel-depends` entry as `kernels` writes it: {"repo-id", "version": N} or {"repo-id", "revision"}."""
    if not isinstance(item, dict) or not isinstance(item.get("repo-id"), str) or not is_repo_id(item["repo-id"]):
        raise broken(f'{DEPENDS_KEY} entries must be {{"repo-id": "org/name", "version": N}}, not {str(item)[:80]}')
    version, revision = item.get("version"), item.get("revision")
    if (version is None) == (revision is None):
        raise broken(f'{DEPENDS_KEY} entry {item["repo-id"]}: give exactly one of "version" or "revision"')
    if version is not None:
        if not isinstance(version, int) or isinstance(version, bool) or not 0 <= version < 10**6:
            raise broken(f"{DEPENDS_KEY} entry {item['repo-id']}: version must be a major version (0 to 999999)")
        return item["repo-id"], version
    if not isinstance(revision, str) or not revision.strip():
        raise broken(f"{DEPENDS_KEY} entry {item['repo-id']}: revision must be a tag, branch or commit (a string)")
    return item["repo-id"], {"revision": revision.strip()}


def check_kernels_format(metadata: BuildMetadata, where: str) -> None:
    """Refuse what `kernels` would refuse to load: the legacy format, missing required fields, a
    provenance without `kernel-builder.version`, a variant without a digest, or one without a SemVer."""
    if metadata.legacy:
        raise MetadataError(
            f'{where}: old metadata format ("version" is the SemVer string, digests are hex), which the '
            "`kernels` package refuses to load; rebuild the variant with tools/builder/op.py"
        )
    document = metadata.document
    missing = [key for key in _REQUIRED if key not in document]
    if missing:
        raise MetadataError(f"{where}: missing {', '.join(missing)} (required by the kernels metadata format)")
    provenance = document.get("provenance")
    if provenance is not None and not (
        isinstance(provenance, dict) and isinstance((provenance.get("kernel-builder") or {}).get("version"), str)
    ):
        raise MetadataError(f'{where}: "provenance" must name the build tool: {{"kernel-builder": {{"version": ...}}}}')
    minver = document.get(KERNELS_MINVER_KEY)
    if minver is not None and not (isinstance(minver, str) and re.match(_KERNELS_MINVER, minver)):
        raise MetadataError(
            f'{where}: "{KERNELS_MINVER_KEY}" {str(minver)[:40]!r} is not a kernels version of '
            'three numbers (e.g. "0.17.0"); kernels refuses to parse it'
        )
    upstream = document.get(UPSTREAM_KEY)
    if upstream is not None and not (isinstance(upstream, str) and re.match(_GIT_URL, upstream)):
        raise MetadataError(
            f'{where}: "{UPSTREAM_KEY}" {str(upstream)[:80]!r} is not a git URL '
            '(e.g. "https://github.com/org/kernel"); kernels refuses to parse it'
        )
    if metadata.major is None:
        raise MetadataError(f'{where}: no "version" (the kernel\'s major version, an integer)')
    if not metadata.digests:
        raise MetadataError(f'{where}: no "digest"; every released variant lists the sha256 of its files')
    if metadata.semver is None:
        raise MetadataError(
            f'{where}: no "{SEMVER_KEY}": kernelpin releases are tagged with the full version '
            f'(e.g. "{SEMVER_KEY}": "{metadata.major}.1.0"); rebuild with tools/builder/op.py'
        )


def _semver(value: Any, key: str, broken: Callable[[str], MetadataError]) -> Version:
    if not isinstance(value, str):
        raise broken(f"{key} is {_kind(value)}, not a version string")
    try:
        return Version.parse(value)
    except VersionError as error:
        raise broken(f"{key}: {error}") from None


def _digest(path: str, value: Any, legacy: bool, broken: Callable[[str], MetadataError]) -> str:
    if legacy:
        if not isinstance(value, str) or not SHA256_HEX_RE.match(value.lower()):
            raise broken(f"digest.files[{path[:80]!r}] is not a sha256 of 64 hex digits")
        return value.lower()
    problem = f"digest.files[{path[:80]!r}] is not a sha256 in base64 (as kernels_data writes it)"
    if not isinstance(value, str):
        raise broken(problem)
    try:
        return sha256_hex(value)
    except (ValueError, binascii.Error):
        raise broken(problem) from None


def _optional(
    table: dict[str, Any], key: str, kind: type, broken: Callable[[str], MetadataError], prefix: str = ""
) -> Any:
    value = table.get(key)
    if value is not None and not isinstance(value, kind):
        raise broken(f"{prefix}{key} is {_kind(value)}, not {_kinds[kind]}")
    return value


_kinds: dict[type, str] = {dict: "an object", list: "a list", str: "a string"}


def _kind(value: object) -> str:
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        int: "a number",
        float: "a number",
        bool: "a boolean",
        type(None): "null",
    }.get(type(value), type(value).__name__)
