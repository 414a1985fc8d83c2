"""What issue 30's bulk work writes into the Hub cache (the blobs `lock` keeps, the plain snapshot entries of a
cache without links, the move of a blob into place where links are refused) and into the user's state directory
(hash receipts, the resolutions get_kernel remembers) goes through kernelpin.files.confined: a link planted on the way, before or during the write, never
redirects it. A real HTTP server serves the files (tests.kernelpin.store.test_store_direct)."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import os
import threading
import time
from pathlib import Path

import pytest

from kernelpin.errors import KernelpinError
from kernelpin.files.confined import LinkRefused
from kernelpin.format.layout import LOCKS_DIR
from kernelpin.format.lockfile import LockedFile, LockedKernel, LockedVariant
from kernelpin.format.spec import parse_requirement
from kernelpin.hub.source import HubSettings, HubSource
from kernelpin.store.content import Store
from kernelpin.store.receipts import MIN_SIZE, SETTLE_NS, Receipts
from kernelpin.store.resolutions import Resolutions
from tests.kernelpin.files.test_cache_removal import contents, victim
from tests.kernelpin.store.test_store_direct import COMMIT, FILES, VARIANT, locked, served  # noqa: F401 (a fixture)

BLOB = hashlib.sha1(b"blob 2\0{}").hexdigest()  # metadata.json's git blob id, as `lock` keeps it


def cache_store(served, tmp_path: Path, symlinks: bool = True, progress=None) -> Store:
    settings = HubSettings(endpoint=served.endpoint, cache_dir=tmp_path / "cache", offline=False, symlinks=symlinks)
    return Store(HubSource(settings), progress=progress, receipts=Receipts(None))


@pytest.mark.parametrize("planted", [LOCKS_DIR, "models--acme--k/blobs", f"models--acme--k/blobs/{BLOB}"])
def test_a_kept_blob_is_never_locked_or_written_through_a_link(served, tmp_path, planted):
    # Failed before (the locks directory): keep_blob's writer lock (filelock) created its file in the victim's
    # directory the link named.
    home, before = victim(tmp_path)
    link = tmp_path / "cache" / planted
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(home / "_impl.py" if planted.endswith(BLOB) else home)
    with contextlib.suppress(LinkRefused):
        cache_store(served, tmp_path).keep_blob(locked(), BLOB, b"{}")
    assert contents(home) == before and sorted(home.iterdir()) == sorted(before)
    if planted.endswith(BLOB):  # the link is replaced, by name, with the blob
        assert not link.is_symlink() and link.read_bytes() == b"{}"


class SwapOnFirstByte:
    """A progress bar (tqdm's interface) that, when the first bytes arrive, moves `directory` aside and puts a
    link to `home` in its place: another user of a shared cache racing the download. Downloads run in parallel,
    so the bars' updates come from several threads: one swap, under a lock."""

    def __init__(self, directory: Path, home: Path) -> None:
        self.directory, self.home, self.swapped = directory, home, False
        self.swapping = threading.Lock()

    def __call__(self, total: int, desc: str) -> SwapOnFirstByte:
        return self

    def update(self, count: int) -> None:
        with self.swapping:
            # Another download thread may make the directory again between the rename and the link (that made
            # symlink_to fail with FileExistsError once, in a fresh-clone CI run): move that one aside too.
            for attempt in range(8) if not self.swapped else ():
                if not self.directory.is_dir() or self.directory.is_symlink():
                    break
                self.directory.rename(self.directory.with_name(f"moved-aside-{attempt}"))
                with contextlib.suppress(FileExistsError):
                    self.directory.symlink_to(self.home, target_is_directory=True)
                    self.swapped = True
                    break

    def close(self) -> None:
        pass


def test_a_plain_snapshot_entry_never_lands_through_a_directory_swapped_for_a_link(served, tmp_path):
    # Failed before: without links (HF_HUB_DISABLE_SYMLINKS=1) the finished download was renamed to its snapshot
    # path, resolved again after the download: through the link put there meanwhile, into the victim's directory.
    home, before = victim(tmp_path)
    variant = tmp_path / "cache" / "models--acme--k" / "snapshots" / COMMIT / "build" / VARIANT
    variant.mkdir(parents=True)
    racer = SwapOnFirstByte(variant, home)
    with contextlib.suppress(LinkRefused):  # the downloads that start after the swap are refused
        cache_store(served, tmp_path, symlinks=False, progress=racer).ensure_variant(locked(), VARIANT)
    assert racer.swapped
    assert contents(home) == before and sorted(home.iterdir()) == sorted(before)


@pytest.mark.parametrize("links", ["disabled", "refused"])
def test_a_plain_snapshot_entry_is_never_made_through_a_linked_directory(served, tmp_path, monkeypatch, links):
    home, before = victim(tmp_path)
    variant = tmp_path / "cache" / "models--acme--k" / "snapshots" / COMMIT / "build" / VARIANT
    variant.mkdir(parents=True)
    (variant / "pkg").symlink_to(home, target_is_directory=True)  # pkg/deep.py would land in the victim's
    if links == "refused":  # a file system without links: the blob is moved into place instead

        def refuse(*args, **kwargs):
            raise OSError(errno.EPERM, "Operation not permitted (this file system takes no links)")

        monkeypatch.setattr(os, "symlink", refuse)
    with pytest.raises(LinkRefused, match=f"{variant / 'pkg'} is a symbolic link"):
        cache_store(served, tmp_path, symlinks=links == "refused").ensure_variant(locked(), VARIANT)
    assert contents(home) == before and sorted(home.iterdir()) == sorted(before)
    (variant / "pkg").unlink()
    installed = cache_store(served, tmp_path, symlinks=links == "refused").ensure_variant(locked(), VARIANT)
    for path, data in FILES.items():
        assert not (installed.directory / path).is_symlink() and (installed.directory / path).read_bytes() == data


def test_receipts_are_never_written_through_a_link_on_the_way(tmp_path):
    # Failed before: the receipt directory was made with mkdir(parents=True), which follows a link on the way
    # ($XDG_STATE_HOME/kernelpin -> elsewhere), and receipts were then kept in whatever the link named.
    state, elsewhere = tmp_path / "state", tmp_path / "elsewhere"
    state.mkdir()
    elsewhere.mkdir(mode=0o700)
    (state / "kernelpin").symlink_to(elsewhere, target_is_directory=True)
    receipts = dataclasses.replace(
        Receipts.of_user({"XDG_STATE_HOME": str(state)}), clock=lambda: time.time_ns() + 10 * SETTLE_NS
    )
    data = b"a" * (MIN_SIZE + 7)
    (tmp_path / "lib.so").write_bytes(data)
    receipts.verify_file(tmp_path / "lib.so", len(data), hashlib.sha256(data).hexdigest(), "lib.so")
    assert list(elsewhere.iterdir()) == []
    (state / "kernelpin").unlink()  # the same without the link: a receipt is kept
    receipts.verify_file(tmp_path / "lib.so", len(data), hashlib.sha256(data).hexdigest(), "lib.so")
    assert len(list(Path(state, "kernelpin", "receipts").iterdir())) == 1


@pytest.mark.parametrize("planted", ["state directory, before", "state directory, during", "record, during"])
def test_a_remembered_resolution_is_never_written_through_a_link(tmp_path, monkeypatch, planted):
    # Failed before: `remember` made the state directory with mkdir and wrote the record with write_atomic, which
    # follow links: the record landed in a directory linked in place of `resolved/`, and a link at the record's
    # name had its target (the victim's file) overwritten and made mode 0600.
    home, before = victim(tmp_path)
    state = tmp_path / "state"
    resolutions = Resolutions("http://hub.test", state)
    requirement = parse_requirement("acme/k", 1)
    kernel = LockedKernel(
        "acme/k",
        "kernel",
        1,
        "a" * 40,
        "refs/heads/v1",
        "1.0.0",
        (LockedVariant(VARIANT, (LockedFile("_impl.py", 2, hashlib.sha256(b"{}").hexdigest()),)),),
    )
    record = resolutions.path(requirement)
    real_read = Resolutions.read

    def plant() -> None:
        if planted.startswith("state directory"):
            with contextlib.suppress(FileNotFoundError):
                record.parent.rmdir()
            record.parent.symlink_to(home, target_is_directory=True)
        else:
            record.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            record.symlink_to(home / "thesis.tex")

    if planted.endswith("before"):
        state.mkdir(mode=0o700)
        plant()
    else:  # after the checks `remember` makes first, as a concurrent process could
        monkeypatch.setattr(Resolutions, "read", lambda self, wanted: (real_read(self, wanted), plant())[0])
    refused = pytest.raises(KernelpinError) if planted.startswith("state directory") else contextlib.nullcontext()
    with refused:
        resolutions.remember(kernel, (VARIANT,), requirement)
    assert contents(home) == before and sorted(home.iterdir()) == sorted(before)
    assert (home / "thesis.tex").stat().st_mode & 0o777 != 0o600
    if planted == "record, during":  # the link was replaced by the record, which reads back
        assert not record.is_symlink() and record.stat().st_mode & 0o777 == 0o600
        monkeypatch.setattr(Resolutions, "read", real_read)
        assert resolutions.read(requirement).kernel == kernel
