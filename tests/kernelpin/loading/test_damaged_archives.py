"""Issue 48, finding 7: a ZIP build whose deflate or LZMA member is damaged, or whose member is encrypted, is an
ArchiveError naming the build and the member (d72b531: zlib.error, LZMAError, RuntimeError escaped
loading/archive.read_members, so callers that handle KernelpinError got an exception that named nothing)."""

from __future__ import annotations

import hashlib
import io
import json
import struct
import zipfile
from pathlib import Path

import pytest

from kernelpin.errors import IntegrityError, KernelpinError
from kernelpin.format.lockfile import LockedFile, LockedVariant
from kernelpin.loading import archive as archive_module
from kernelpin.loading.archive import ArchiveError, read_members, verified_bytes, zip_member_of
from testkit.fake_kernel import zip_archive

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


def locked(name: str, data: bytes) -> LockedFile:
    return LockedFile(name, len(data), hashlib.sha256(data).hexdigest())


def test_verified_bytes_are_the_locked_bytes_read_once(tmp_path: Path) -> None:
    data = archive(zipfile.ZIP_STORED)
    (tmp_path / "k.zip").write_bytes(data)
    assert verified_bytes(tmp_path / "k.zip", locked("k.zip", data), "acme/x") == data
    with pytest.raises(IntegrityError, match=r"^acme/x: k.zip is missing; run `kernelpin sync`$"):
        verified_bytes(tmp_path / "gone.zip", locked("k.zip", data), "acme/x")
    for changed in (data + b"x", data[:-1], data[:-1] + bytes([data[-1] ^ 1])):
        (tmp_path / "k.zip").write_bytes(changed)
        with pytest.raises(IntegrityError, match=r"^acme/x: k.zip does not match the lock; it is not imported"):
            verified_bytes(tmp_path / "k.zip", locked("k.zip", data), "acme/x")


def zip_variant(tmp_path: Path, document: object, listed: tuple[str, ...] = ("k1.zip",)) -> LockedVariant:
    metadata = json.dumps(document).encode() if not isinstance(document, bytes) else document
    (tmp_path / "metadata.json").write_bytes(metadata)
    files = (locked("metadata.json", metadata), *(locked(name, b"zip") for name in listed))
    return LockedVariant("torch-cpu", files)


def test_the_archive_of_a_zip_build_is_the_one_its_metadata_names(tmp_path: Path) -> None:
    zipped = {"id": "k1", "build-layout": "zip"}
    assert zip_member_of(tmp_path, zip_variant(tmp_path, zipped), "acme/x") == locked("k1.zip", b"zip")
    assert zip_member_of(tmp_path, zip_variant(tmp_path, {"id": "k1"}), "acme/x") is None
    assert zip_member_of(tmp_path, zip_variant(tmp_path, {**zipped, "build-layout": "files"}), "acme/x") is None
    assert zip_member_of(tmp_path, zip_variant(tmp_path, ["id", "k1"]), "acme/x") is None
    assert zip_member_of(tmp_path, zip_variant(tmp_path, b"{not json"), "acme/x") is None
    assert zip_member_of(tmp_path, zip_variant(tmp_path, b"\xff\xfe"), "acme/x") is None
    assert zip_member_of(tmp_path, zip_variant(tmp_path, b"[" * 100_000), "acme/x") is None
    assert zip_member_of(tmp_path, LockedVariant("torch-cpu", (locked("k1.zip", b"zip"),)), "acme/x") is None
    variant = zip_variant(tmp_path, zipped)
    (tmp_path / "metadata.json").write_bytes(b"{}")  # not the metadata.json the lock pins
    with pytest.raises(IntegrityError, match=r"^acme/x: metadata.json does not match the lock"):
        zip_member_of(tmp_path, variant, "acme/x")
    for document, listed in (
        (zipped, ("k2.zip",)),
        ({**zipped, "id": 7}, ("7.zip",)),
        ({"build-layout": "zip"}, ("None.zip",)),
    ):
        with pytest.raises(ArchiveError) as refused:
            zip_member_of(tmp_path, zip_variant(tmp_path, document, listed), "acme/x")
        assert str(refused.value) == (
            f'acme/x: a ZIP build (metadata.json "build-layout": "zip") without its archive '
            f"{str(document.get('id')) + '.zip'!r} in the lock; run `kernelpin lock` to regenerate it"
        )


def test_directories_are_left_out_and_an_archive_expanding_too_far_is_refused(monkeypatch) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zipped:
        zipped.writestr("pkg/", b"")
        zipped.writestr("pkg/a.py", b"A = 1\n")
        zipped.writestr("b.py", b"B = 22\n")
    assert read_members(buffer.getvalue(), WHERE) == {"pkg/a.py": b"A = 1\n", "b.py": b"B = 22\n"}
    monkeypatch.setattr(archive_module, "MAX_EXPANDED", 13)
    assert read_members(buffer.getvalue(), WHERE) == {"pkg/a.py": b"A = 1\n", "b.py": b"B = 22\n"}
    monkeypatch.setattr(archive_module, "MAX_EXPANDED", 12)
    with pytest.raises(ArchiveError, match=rf"^{WHERE}: expands to more than 12 bytes; refused$"):
        read_members(buffer.getvalue(), WHERE)


def test_refusals_name_the_member_and_the_archive() -> None:
    with pytest.raises(ArchiveError) as refused:
        read_members(encrypted(archive(zipfile.ZIP_STORED)), WHERE)
    assert str(refused.value).startswith(f"{WHERE}: member '__init__.py' cannot be read (File ")
    with pytest.raises(ArchiveError, match=rf"^{WHERE}: not a readable ZIP archive \(File is not a zip file\)$"):
        read_members(b"not a zip", WHERE)
    links = zip_archive({"a.py": b""}, {"l.py": "a.py"})
    with pytest.raises(ArchiveError, match=rf"^{WHERE}: member 'l.py' is a symbolic link; kernelpin imports none$"):
        read_members(links, WHERE)
    with pytest.raises(KernelpinError, match=rf"^{WHERE}: refusing unsafe path '\.\./x\.py'"):
        read_members(zip_archive({"../x.py": b""}), WHERE)
