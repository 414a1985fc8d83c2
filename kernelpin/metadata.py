"""A build variant's metadata.json as kernelpin trusts it: size-capped, parsed defensively, schema-checked.

The file comes from the repository (a publisher kernelpin does not trust yet), so a wrong type is an error
that names the field, never a string iterated as a list ("9.0" -> ["9", ".", "0"]) or a traceback.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from kernelpin.errors import KernelpinError
from kernelpin.integrity import check_repo_path
from kernelpin.variant import is_arch

MAX_METADATA_SIZE = 1 << 20  # 1 MiB: real ones are a few KiB; checked against the listing before downloading
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_BACKEND_RE = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


@dataclass(frozen=True)
class BuildMetadata:
    digests: dict[str, str]  # path relative to the variant directory -> sha256 (hex)
    backend: str | None
    archs: tuple[str, ...] | None


def check_size(size: int, where: str) -> None:
    if size > MAX_METADATA_SIZE:
        raise KernelpinError(
            f"{where}: {size} bytes, more than the {MAX_METADATA_SIZE} bytes a kernel's metadata.json may have; "
            "the build is broken or hostile: do not use this revision"
        )


def parse_metadata(content: bytes, where: str) -> BuildMetadata:
    """The digests, backend and compute capabilities of one variant; KernelpinError names what is wrong."""
    check_size(len(content), where)

    def broken(problem: str) -> KernelpinError:
        return KernelpinError(f"{where}: not valid kernel metadata ({problem}); the build is broken")

    try:
        document = json.loads(content)
    except RecursionError:
        raise broken("nested too deeply") from None
    except ValueError as error:  # includes UnicodeDecodeError
        raise broken(str(error)[:200]) from None
    if not isinstance(document, dict):
        raise broken(f"the document is {_kind(document)}, not an object")
    digest = _optional(document, "digest", dict, broken) or {}
    algorithm = _optional(digest, "algorithm", str, broken, "digest.")
    if algorithm is not None and algorithm != "sha256":
        raise broken(f"digest.algorithm {algorithm[:40]!r} is not sha256")
    files = _optional(digest, "files", dict, broken, "digest.") or {}
    digests = {}
    for path, value in files.items():
        check_repo_path(path, where)
        if not isinstance(value, str) or not _SHA256_RE.match(value.lower()):
            raise broken(f"digest.files[{path[:80]!r}] is not a sha256 of 64 hex digits")
        digests[path] = value.lower()
    backend = _optional(document, "backend", dict, broken) or {}
    backend_type = _optional(backend, "type", str, broken, "backend.")
    if backend_type is not None and not _BACKEND_RE.match(backend_type):
        raise broken(f"backend.type {backend_type[:40]!r} is not a backend name such as cpu or cuda")
    archs = _optional(backend, "archs", list, broken, "backend.")
    if archs is not None and not all(isinstance(arch, str) and is_arch(arch) for arch in archs):
        raise broken('backend.archs must list compute capabilities such as "8.0", "9.0a", "12.0+PTX"')
    return BuildMetadata(digests, backend_type, None if archs is None else tuple(archs))


def _optional(table: dict, key: str, kind: type, broken: Any, prefix: str = "") -> Any:
    value = table.get(key)
    if value is not None and not isinstance(value, kind):
        raise broken(f"{prefix}{key} is {_kind(value)}, not {_kinds[kind]}")
    return value


_kinds = {dict: "an object", list: "a list", str: "a string"}


def _kind(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", int: "a number", float: "a number",
            bool: "a boolean", type(None): "null"}.get(type(value), type(value).__name__)
