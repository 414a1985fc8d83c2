"""Issue 48, finding 7: a ZIP build whose deflate or LZMA member is damaged, or whose member is encrypted, is an
ArchiveError naming the build and the member (d72b531: zlib.error, LZMAError, RuntimeError escaped
loading/archive.read_members, so callers that handle KernelpinError got an exception that named nothing)."""

from __future__ import annotations

import io
import struct
import zipfile

import pytest

from kernelpin.loading.archive import ArchiveError, read_members

WHERE = "acme/x torch213-cxx11-cpu-x86_64-linux: img2gray_0123.zip"
SOURCE = b"def gray(pixels):\n    return [sum(p) // 3 for p in pixels]\n" * 40


def archive(compression: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as zipped:
        zipped.writestr("__init__.py", SOURCE)
    return buffer.getvalue()


def damaged(data: bytes, at: float = 1 / 3) -> bytes:
    """The member's compressed bytes overwritten with 0xFF from `at` of their length (0: the first, which for
    deflate is a block header of the reserved type 3); headers, sizes and CRC left as they were."""
    local = data.index(b"PK\x03\x04")
    name_length, extra_length = struct.unpack_from("<HH", data, local + 26)
    start = local + 30 + name_length + extra_length
    size = struct.unpack_from("<I", data, local + 18)[0]
    middle = start + int(size * at)
    return data[:middle] + bytes([0xFF]) * 8 + data[middle + 8 :]


def encrypted(data: bytes) -> bytes:
    """The member marked encrypted (general purpose flag bit 0) in its local and central headers."""
    out = bytearray(data)
    for signature, flag_offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        offset = data.index(signature)
        out[offset + flag_offset] |= 1
    return bytes(out)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(damaged(archive(zipfile.ZIP_DEFLATED), at=0), id="deflate-block-type"),
        pytest.param(damaged(archive(zipfile.ZIP_DEFLATED)), id="deflate"),
        pytest.param(damaged(archive(zipfile.ZIP_LZMA)), id="lzma"),
        pytest.param(damaged(archive(zipfile.ZIP_BZIP2)), id="bzip2"),
        pytest.param(encrypted(archive(zipfile.ZIP_STORED)), id="encrypted"),
        pytest.param(archive(zipfile.ZIP_DEFLATED)[:-30], id="truncated"),
    ],
)
def test_a_damaged_or_encrypted_member_is_an_archive_error_naming_build_and_member(data: bytes) -> None:
    with pytest.raises(ArchiveError) as refused:
        read_members(data, WHERE)
    message = str(refused.value)
    assert message.startswith(f"{WHERE}: ") and "\n" not in message
    assert "member '__init__.py' cannot be read" in message or "not a readable ZIP archive" in message


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_LZMA, zipfile.ZIP_BZIP2])
def test_an_intact_archive_is_read(compression: int) -> None:
    assert read_members(archive(compression), WHERE) == {"__init__.py": SOURCE}
