"""Issue 30, point 6: verified-hash receipts. A load of unchanged files reads none of their bytes; a changed
file is hashed again however its times were dressed up, and no receipt that this user did not write from its
own hash is believed (a co-user's, one in a directory others may write, one reached through a link)."""

from __future__ import annotations

import hashlib
import os
import sys
import time
from pathlib import Path

import pytest

import kernelpin
from kernelpin.errors import IntegrityError
from kernelpin.store import receipts as receipts_module
from kernelpin.store.receipts import MIN_SIZE, SETTLE_NS, Receipts
from testkit.fake_kernel import publish
from tests.kernelpin.helpers import NOBODY, TRUSTED_ORG
from tests.kernelpin.loading.test_loader import vendor

LATER = 10 * SETTLE_NS  # a clock this far ahead sees every file as settled


@pytest.fixture
def hashes(monkeypatch) -> list[str]:
    """The names of the files kernelpin.store.receipts hashes, one per hash (a spy: the real hash runs)."""
    made: list[str] = []
    real = receipts_module.sha256_stream

    def counting(stream):
        made.append(Path(stream.name).name)
        return real(stream)

    monkeypatch.setattr(receipts_module, "sha256_stream", counting)
    return made


def big_file(path: Path, byte: bytes = b"a") -> tuple[Path, str]:
    data = byte * (MIN_SIZE + 7)
    path.write_bytes(data)
    return path, hashlib.sha256(data).hexdigest()


def settled(tmp_path: Path) -> Receipts:
    return Receipts(tmp_path / "receipts", clock=lambda: time.time_ns() + LATER)


def test_an_unchanged_file_is_hashed_once(tmp_path, hashes):
    path, digest = big_file(tmp_path / "lib.so")
    receipts = settled(tmp_path)
    for _ in range(3):
        receipts.verify_file(path, path.stat().st_size, digest, "lib.so")
    assert len(hashes) == 1
    assert (tmp_path / "receipts").stat().st_mode & 0o777 == 0o700
    assert [entry.stat().st_mode & 0o777 for entry in (tmp_path / "receipts").iterdir()] == [0o600]


def test_a_changed_file_is_hashed_again_though_its_size_and_mtime_are_restored(tmp_path, hashes):
    path, digest = big_file(tmp_path / "lib.so")
    receipts = settled(tmp_path)
    receipts.verify_file(path, path.stat().st_size, digest, "lib.so")
    before = path.stat()
    with open(path, "r+b") as stream:  # same inode, same size
        stream.write(b"X")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # what utime can restore; ctime moves on
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    with pytest.raises(IntegrityError, match="lib.so: sha256 .* pinned in the lock"):
        receipts.verify_file(path, before.st_size, digest, "lib.so")
    assert len(hashes) == 2


def test_a_file_renamed_onto_the_path_is_hashed(tmp_path, hashes):
    path, digest = big_file(tmp_path / "lib.so")
    receipts = settled(tmp_path)
    receipts.verify_file(path, path.stat().st_size, digest, "lib.so")
    other, _ = big_file(tmp_path / "other", b"b")
    os.utime(other, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns))
    other.replace(path)
    with pytest.raises(IntegrityError, match="sha256"):
        receipts.verify_file(path, path.stat().st_size, digest, "lib.so")


def test_a_file_that_changed_moments_ago_gets_no_receipt(tmp_path, hashes):
    # Within one timestamp tick a second change leaves the times as they were: such a file is not vouched for.
    path, digest = big_file(tmp_path / "lib.so")
    receipts = Receipts(tmp_path / "receipts")
    receipts.verify_file(path, path.stat().st_size, digest, "lib.so")
    receipts.verify_file(path, path.stat().st_size, digest, "lib.so")
    assert len(hashes) == 2 and not any((tmp_path / "receipts").glob("*"))


def test_a_receipt_is_kept_only_after_the_files_bytes_are_on_disk(tmp_path, monkeypatch):
    # Failed before: receipts never synced the file; the durability came from the download's fsync, which made
    # a cold sync of big kernels bound by the disk's durable write speed. Downloads are no longer synced, so a
    # crash can leave a file with its size and times but bytes that never reached the disk: no receipt may
    # vouch for one before its bytes are on disk.
    path, digest = big_file(tmp_path / "lib.so")
    receipts, events = settled(tmp_path), []
    real_fsync, real_write = os.fsync, receipts_module.PrivateFiles.write
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(("fsync", os.fstat(fd).st_ino)), real_fsync(fd)))
    monkeypatch.setattr(
        receipts_module.PrivateFiles,
        "write",
        lambda files, name, data: (events.append(("receipt", name)), real_write(files, name, data)),
    )
    receipts.verify_file(path, path.stat().st_size, digest, "lib.so")
    stat = path.stat()
    assert events[-2:] == [("fsync", stat.st_ino), ("receipt", f"{stat.st_dev:x}-{stat.st_ino:x}")]


def test_a_file_the_disk_cannot_sync_gets_no_receipt(tmp_path, monkeypatch, hashes):
    path, digest = big_file(tmp_path / "lib.so")
    receipts = settled(tmp_path)

    def refuse(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", refuse)
    for _ in range(2):
        receipts.verify_file(path, path.stat().st_size, digest, "lib.so")
    assert len(hashes) == 2 and not any((tmp_path / "receipts").glob("*"))


def test_small_files_are_hashed_every_time(tmp_path, hashes):
    path = tmp_path / "small.py"
    path.write_bytes(b"x = 1\n")
    receipts = settled(tmp_path)
    for _ in range(2):
        receipts.verify_file(path, 6, hashlib.sha256(b"x = 1\n").hexdigest(), "small.py")
    assert len(hashes) == 2


def test_without_a_receipt_directory_every_file_is_hashed(tmp_path, hashes):
    path, digest = big_file(tmp_path / "lib.so")
    receipts = Receipts(None, clock=lambda: time.time_ns() + LATER)
    for _ in range(2):
        receipts.verify_file(path, path.stat().st_size, digest, "lib.so")
    assert len(hashes) == 2


def forged_receipt(tmp_path: Path) -> tuple[Path, str, Path]:
    """A file with content the lock does not pin and a receipt, written in this user's directory, that vouches
    for it: (file, the pinned sha256, the receipt)."""
    path, _ = big_file(tmp_path / "lib.so", b"evil")
    pinned = hashlib.sha256(b"good").hexdigest()
    stat = path.stat()
    directory = tmp_path / "receipts"
    directory.mkdir(mode=0o700)
    receipt = directory / f"{stat.st_dev:x}-{stat.st_ino:x}"
    receipt.write_text(f"{stat.st_size} {stat.st_mtime_ns} {stat.st_ctime_ns} {pinned}\n")
    receipt.chmod(0o600)
    return path, pinned, receipt


def test_the_forged_receipt_would_be_believed_from_this_user(tmp_path):
    # The control for the tests below: the receipt format is right, so what refuses them is the check.
    path, pinned, _ = forged_receipt(tmp_path)
    settled(tmp_path).verify_file(path, path.stat().st_size, pinned, "lib.so")


def test_a_receipt_another_user_wrote_is_not_believed(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file to another user")
    path, pinned, receipt = forged_receipt(tmp_path)
    os.chown(receipt, NOBODY, NOBODY)
    with pytest.raises(IntegrityError, match="sha256"):
        settled(tmp_path).verify_file(path, path.stat().st_size, pinned, "lib.so")


def test_a_receipt_directory_of_another_user_is_not_believed(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file to another user")
    path, pinned, _ = forged_receipt(tmp_path)
    os.chown(tmp_path / "receipts", NOBODY, NOBODY)
    with pytest.raises(IntegrityError, match="sha256"):
        settled(tmp_path).verify_file(path, path.stat().st_size, pinned, "lib.so")


def test_a_receipt_directory_others_may_write_is_neither_believed_nor_written(tmp_path, hashes):
    path, pinned, receipt = forged_receipt(tmp_path)
    (tmp_path / "receipts").chmod(0o777)
    with pytest.raises(IntegrityError, match="sha256"):
        settled(tmp_path).verify_file(path, path.stat().st_size, pinned, "lib.so")
    receipt.unlink()
    good, digest = big_file(tmp_path / "good.so")
    settled(tmp_path).verify_file(good, good.stat().st_size, digest, "good.so")
    assert not any((tmp_path / "receipts").iterdir())


def test_a_receipt_directory_that_is_a_link_is_not_believed(tmp_path):
    path, pinned, _ = forged_receipt(tmp_path)
    (tmp_path / "receipts").rename(tmp_path / "elsewhere")
    (tmp_path / "receipts").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(IntegrityError, match="sha256"):
        settled(tmp_path).verify_file(path, path.stat().st_size, pinned, "lib.so")


def test_a_receipt_that_is_a_link_is_not_believed(tmp_path):
    path, pinned, receipt = forged_receipt(tmp_path)
    receipt.rename(tmp_path / "planted")
    receipt.symlink_to(tmp_path / "planted")
    with pytest.raises(IntegrityError, match="sha256"):
        settled(tmp_path).verify_file(path, path.stat().st_size, pinned, "lib.so")


def test_receipts_live_in_the_users_state_directory(tmp_path):
    assert Receipts.of_user({"XDG_STATE_HOME": str(tmp_path)}).directory == Path(tmp_path, "kernelpin", "receipts")


def test_a_warm_load_reads_no_byte_of_an_unchanged_library(tmp_path, monkeypatch, hashes):
    # Failed before: every load() hashed every file twice (in the store, and the libraries again before the
    # package ran): about 0.16 s per 200 MiB in memory, more from disk.
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    library = b"\x7fELF" + os.urandom(MIN_SIZE)
    lock, target, name = vendor(tmp_path, extra={"_ops.so": library})
    so = target / "acme/loader-test" / lock.read_text().split('commit = "')[1][:40] / "build"
    so = next(so.glob("*/_ops.so"))
    # A file is vouched for only once its times are older than the settling time (see kernelpin.store.receipts).
    time.sleep(max(0.0, (so.stat().st_ctime_ns + SETTLE_NS - time.time_ns()) / 1e9) + 0.05)

    def fresh_load():
        for loaded in [key for key in sys.modules if key == name or key.startswith(name + ".")]:
            del sys.modules[loaded]
        return kernelpin.load("acme/loader-test", lock=lock, target=target)

    fresh_load()
    assert hashes.count("_ops.so") == 1  # once: the receipt serves the check right before the package runs
    fresh_load()
    assert hashes.count("_ops.so") == 1
    with open(so, "r+b") as stream:
        stream.seek(100)
        stream.write(b"X")
    with pytest.raises(IntegrityError, match="_ops.so: sha256"):
        fresh_load()


def test_a_cold_load_hashes_a_downloaded_library_once(new_repo, project, cli, tmp_path, monkeypatch, hashes):
    # Failed before (issue 53): the download hashed the library as it was written and the loader read it all
    # again right after, before the package ran. The loader's check is kept: a library changed since is refused.
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    repo_id, repo = new_repo("hash-once", "kernel", TRUSTED_ORG)
    publish(repo, "1.0.0", extra={"_ops.so": b"\x7fELF" + os.urandom(MIN_SIZE)})
    root = project(f'"{repo_id}" = "^1"\n')
    assert cli("lock")[0] == 0
    module = kernelpin.load(repo_id, lock=root)
    assert module.VERSION == "1.0.0" and hashes.count("_ops.so") == 0  # the download's own hash served
    library = next(Path(module.__file__).parent.glob("_ops.so")).resolve()
    with open(library, "r+b") as stream:
        stream.seek(100)
        stream.write(b"X")
    for loaded in [key for key in sys.modules if key == module.__name__ or key.startswith(module.__name__ + ".")]:
        del sys.modules[loaded]
    with pytest.raises(IntegrityError, match="_ops.so: sha256"):
        kernelpin.load(repo_id, lock=root)
