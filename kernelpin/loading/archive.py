"""ZIP builds (kernel-builder's `"build-layout": "zip"`, read by kernels 0.19): a variant directory holding
`<metadata.id>.zip` beside metadata.json, whose root is the kernel's Python package.

kernels imports such a build straight from the archive (zipimport). kernelpin reads the archive's bytes once,
checks them as one file against the lock, and then serves the package's modules from those verified bytes in
memory: nothing is extracted, and nothing is read again from the file that could have changed meanwhile. Every
member is confined as every other path kernelpin handles (files.integrity): no absolute path, no `..`, no
backslash or control character, no symbolic link, no name twice, and the archive expands to at most
MAX_EXPANDED bytes.
"""

from __future__ import annotations

import hashlib
import io
import json
import lzma
import stat
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path

from kernelpin.errors import IntegrityError, KernelpinError
from kernelpin.files.integrity import check_repo_path
from kernelpin.format.layout import METADATA
from kernelpin.format.lockfile import LockedFile, LockedVariant
from kernelpin.format.nesting import within_nesting

__untrusted_input__ = ("read_members",)  # parsers of input kernelpin does not control (kernelpin.errors)

BUILD_LAYOUT_KEY, ZIP_LAYOUT = "build-layout", "zip"
MAX_EXPANDED = 1 << 30  # 1 GiB of Python sources and data: far above any kernel's, far below a zip bomb's
# What zipfile raises for a damaged or unreadable archive or member: its own errors, the decompressors' (zlib,
# lzma, bz2's OSError; EOFError where a compressed stream ends early), RuntimeError for an encrypted member,
# NotImplementedError for an unknown compression method.
_UNREADABLE = (
    zipfile.BadZipFile,
    OSError,
    ValueError,
    EOFError,
    RuntimeError,
    NotImplementedError,
    zlib.error,
    lzma.LZMAError,
)


class ArchiveError(KernelpinError):
    """A ZIP build that does not match its lock or whose members are unsafe."""


def verified_bytes(path: Path, file: LockedFile, what: str) -> bytes:
    """The file's bytes, read once, when they match the lock's size and sha256."""
    try:
        with open(path, "rb") as stream:
            data = stream.read(file.size + 1)  # one byte more than pinned: a longer file is seen, never read whole
    except FileNotFoundError:
        raise IntegrityError(f"{what}: {file.path} is missing; run `kernelpin sync`") from None
    if len(data) != file.size or hashlib.sha256(data).hexdigest() != file.sha256:
        raise IntegrityError(
            f"{what}: {file.path} does not match the lock; it is not imported. Run `kernelpin sync` to replace it"
        )
    return data


def zip_member_of(directory: Path, variant: LockedVariant, what: str) -> LockedFile | None:
    """The archive of a ZIP build (its metadata.json, verified, says `"build-layout": "zip"`), or None for a
    build of files. The archive must be listed in the lock as `<metadata id>.zip`."""
    metadata = variant.file(METADATA)
    if metadata is None:
        return None
    try:
        document = within_nesting(json.loads(verified_bytes(directory / METADATA, metadata, what)))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None  # not this module's to judge: the loader's own error follows
    if not isinstance(document, dict) or document.get(BUILD_LAYOUT_KEY) != ZIP_LAYOUT:
        return None
    name = f"{document.get('id')}.zip"
    archive = variant.file(name)
    if not isinstance(document.get("id"), str) or archive is None:
        raise ArchiveError(
            f'{what}: a ZIP build (metadata.json "{BUILD_LAYOUT_KEY}": "zip") without its archive '
            f"{name!r} in the lock; run `kernelpin lock` to regenerate it"
        )
    return archive


def read_members(data: bytes, where: str) -> Mapping[str, bytes]:
    """{member path: bytes} of a verified archive's files (directories left out), every member confined."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
    except _UNREADABLE as error:
        raise ArchiveError(f"{where}: not a readable ZIP archive ({error})") from None
    members: dict[str, bytes] = {}
    expanded = 0
    for info in infos:
        if info.is_dir():
            continue
        check_repo_path(info.filename, where)
        if stat.S_ISLNK(info.external_attr >> 16):
            raise ArchiveError(f"{where}: member {info.filename!r} is a symbolic link; kernelpin imports none")
        if info.filename in members:
            raise ArchiveError(f"{where}: member {info.filename!r} appears twice; which one is meant is ambiguous")
        expanded += info.file_size
        if expanded > MAX_EXPANDED:
            raise ArchiveError(f"{where}: expands to more than {MAX_EXPANDED} bytes; refused")
        try:
            members[info.filename] = archive.read(info)  # checks each member's CRC-32
        except _UNREADABLE as error:
            raise ArchiveError(f"{where}: member {info.filename!r} cannot be read ({error})") from None
    return members
