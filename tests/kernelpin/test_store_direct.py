"""kernelpin.store directly: a real HTTP server serves a kernel's files (a directory laid out as the Hub's
resolve URLs, 127.0.0.1), no Hub API; each way a file gets into the store, is reused, repaired or refused,
with its message, fast enough for a mutation run to use."""

from __future__ import annotations

import functools
import hashlib
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from kernelpin.errors import IntegrityError, KernelpinError
from kernelpin.layout import LOCKS_DIR, PARTIAL
from kernelpin.lockfile import LockedFile, LockedKernel, LockedVariant
from kernelpin.source import HubSettings, HubSource
from kernelpin.store import Store, checkout_dir

COMMIT = "c" * 40
VARIANT = "torch213-cxx11-cpu-x86_64-linux"
FILES = {"__init__.py": b"from ._impl import X\n", "_impl.py": b"X = 1\n", "pkg/deep.py": b"DEEP = 2\n"}


def locked(files: dict[str, bytes] = FILES) -> LockedKernel:
    pinned = tuple(LockedFile(path, len(data), hashlib.sha256(data).hexdigest()) for path, data in files.items())
    return LockedKernel("acme/k", "model", "^1", COMMIT, "refs/tags/v1.0.0", "1.0.0", (LockedVariant(VARIANT, pinned),))


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@dataclass(frozen=True)
class Served:
    root: Path
    endpoint: str

    def file(self, path: str) -> Path:
        return self.root / "acme" / "k" / "resolve" / COMMIT / "build" / VARIANT / path


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """A directory that a real HTTP server serves as `<repo>/resolve/<commit>/build/<variant>/<path>`."""
    root = tmp_path / "served"
    for path, data in FILES.items():
        file = root / "acme" / "k" / "resolve" / COMMIT / "build" / VARIANT / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(data)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    yield Served(root, f"http://127.0.0.1:{server.server_address[1]}")
    server.shutdown()
    server.server_close()


def store(served: Served, tmp_path: Path, target: bool = False, offline: bool = False) -> Store:
    settings = HubSettings(endpoint=served.endpoint, cache_dir=tmp_path / "cache", offline=offline)
    return Store(HubSource(settings), tmp_path / "vendor" if target else None)


def test_the_hub_cache_gets_blobs_named_by_sha256_and_relative_links(served, tmp_path):
    kernel = locked()
    installed = store(served, tmp_path).ensure_variant(kernel, VARIANT)
    folder = tmp_path / "cache" / "models--acme--k"
    assert installed.directory == folder / "snapshots" / COMMIT / "build" / VARIANT
    assert installed.downloaded == [f"build/{VARIANT}/{path}" for path in FILES] and installed.reused == []
    for path, data in FILES.items():
        entry = installed.directory / path
        blob = hashlib.sha256(data).hexdigest()
        assert entry.is_symlink() and os.readlink(entry) == os.path.relpath(folder / "blobs" / blob, entry.parent)
        assert entry.read_bytes() == data and (folder / "blobs" / blob).stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "cache" / LOCKS_DIR / "models--acme--k.lock").is_file()
    assert not list(folder.rglob(f"*{PARTIAL}"))
    again = store(served, tmp_path).ensure_variant(kernel, VARIANT)
    assert again.reused == installed.downloaded and again.downloaded == again.repaired == []


def test_a_target_gets_plain_copies(served, tmp_path):
    installed = store(served, tmp_path, target=True).ensure_variant(locked(), VARIANT)
    assert installed.directory == tmp_path / "vendor" / "acme" / "k" / COMMIT / "build" / VARIANT
    assert checkout_dir(tmp_path / "vendor", locked()) == tmp_path / "vendor" / "acme" / "k" / COMMIT
    for path, data in FILES.items():
        assert not (installed.directory / path).is_symlink() and (installed.directory / path).read_bytes() == data
    assert (tmp_path / "vendor" / LOCKS_DIR / "models--acme--k.lock").is_file() and not (tmp_path / "cache").exists()


@pytest.mark.parametrize("target", [False, True])
def test_a_modified_file_is_repaired_or_refused(served, tmp_path, target):
    kernel = locked()
    installed = store(served, tmp_path, target).ensure_variant(kernel, VARIANT)
    impl = installed.directory / "_impl.py"
    impl.unlink()
    impl.write_bytes(b"X = 666\n")
    with pytest.raises(IntegrityError, match=re.escape(
            f"acme/k 1.0.0: build/{VARIANT}/_impl.py: size 8 != 6 pinned in the lock. The installed file was "
            "modified or corrupted and is not used; run `kernelpin sync` to replace it")):
        store(served, tmp_path, target).ensure_variant(kernel, VARIANT)
    repaired = store(served, tmp_path, target).ensure_variant(kernel, VARIANT, repair=True)
    assert repaired.repaired == [f"build/{VARIANT}/_impl.py"] and repaired.downloaded == []
    assert sorted(repaired.reused) == [f"build/{VARIANT}/__init__.py", f"build/{VARIANT}/pkg/deep.py"]
    assert impl.read_bytes() == FILES["_impl.py"]


def test_a_directory_where_a_file_belongs_is_refused_or_replaced(served, tmp_path):
    kernel = locked()
    installed = store(served, tmp_path).ensure_variant(kernel, VARIANT)
    (installed.directory / "_impl.py").unlink()
    (installed.directory / "_impl.py" / "x").mkdir(parents=True)
    with pytest.raises(IntegrityError, match=re.escape(
            f"acme/k 1.0.0: build/{VARIANT}/_impl.py is a directory (or no file), not the file the lock lists. "
            "The installed file")):
        store(served, tmp_path).ensure_variant(kernel, VARIANT)
    repaired = store(served, tmp_path).ensure_variant(kernel, VARIANT, repair=True)
    assert repaired.repaired == [f"build/{VARIANT}/_impl.py"] and (installed.directory / "_impl.py").is_file()


def test_a_missing_entry_and_a_dangling_link_are_downloaded_again(served, tmp_path):
    kernel = locked()
    installed = store(served, tmp_path).ensure_variant(kernel, VARIANT)
    (installed.directory / "_impl.py").unlink()
    (installed.directory / "pkg" / "deep.py").unlink()
    (installed.directory / "pkg" / "deep.py").symlink_to("../nowhere")
    again = store(served, tmp_path).ensure_variant(kernel, VARIANT)
    assert again.downloaded == [f"build/{VARIANT}/_impl.py", f"build/{VARIANT}/pkg/deep.py"]
    assert (installed.directory / "pkg" / "deep.py").read_bytes() == FILES["pkg/deep.py"]


def test_a_bad_blob_is_downloaded_again_and_an_existing_good_one_reused(served, tmp_path):
    kernel = locked()
    installed = store(served, tmp_path).ensure_variant(kernel, VARIANT)
    blobs = tmp_path / "cache" / "models--acme--k" / "blobs"
    blob = blobs / hashlib.sha256(FILES["_impl.py"]).hexdigest()
    blob.write_bytes(b"X = 9\n")  # same size, other bytes
    for path in FILES:
        (installed.directory / path).unlink()
    served.file("__init__.py").write_bytes(b"changed on the server")  # its good blob is reused: never fetched
    again = store(served, tmp_path).ensure_variant(kernel, VARIANT)
    assert len(again.downloaded) == 3 and blob.read_bytes() == FILES["_impl.py"]
    assert (installed.directory / "__init__.py").read_bytes() == FILES["__init__.py"]


def test_bytes_that_do_not_match_the_lock_are_deleted_and_named(served, tmp_path):
    served.file("_impl.py").write_bytes(b"X = 7\n")
    digest = hashlib.sha256(b"X = 7\n").hexdigest()
    with pytest.raises(IntegrityError, match=re.escape(
            f"acme/k 1.0.0: build/{VARIANT}/_impl.py: sha256 {digest} != {hashlib.sha256(FILES['_impl.py']).hexdigest()} "
            "pinned in the lock. The downloaded file was deleted. The server's content differs from what was "
            "locked: if the publisher re-tagged on purpose, run `kernelpin lock --upgrade-package acme/k`; "
            "otherwise do not trust this server")):
        store(served, tmp_path).ensure_variant(locked(), VARIANT)
    folder = tmp_path / "cache" / "models--acme--k"
    assert not list(folder.rglob(f"*{PARTIAL}")) and not (folder / "blobs" / digest).exists()
    # Downloads run in parallel: the good files fetched alongside the bad one may be kept, nothing else.
    good = {hashlib.sha256(FILES[name]).hexdigest() for name in ("__init__.py", "pkg/deep.py")}
    assert hashlib.sha256(FILES["__init__.py"]).hexdigest() in {p.name for p in (folder / "blobs").iterdir()}
    assert {p.name for p in (folder / "blobs").iterdir()} <= good


def test_partial_files_a_killed_writer_left_are_removed_by_the_next(served, tmp_path):
    blobs = tmp_path / "cache" / "models--acme--k" / "blobs"
    blobs.mkdir(parents=True)
    (blobs / f".x.abc{PARTIAL}").write_bytes(b"half")
    (blobs / f"kept{PARTIAL}").write_bytes(b"not one of kernelpin's names")
    (blobs / ".hidden").write_bytes(b"neither")
    store(served, tmp_path).ensure_variant(locked(), VARIANT)
    assert not (blobs / f".x.abc{PARTIAL}").exists() and (blobs / f"kept{PARTIAL}").exists()
    assert (blobs / ".hidden").exists()


def test_offline_a_missing_file_names_the_cache(served, tmp_path):
    with pytest.raises(KernelpinError, match=re.escape(
            f"acme/k: build/{VARIANT}/__init__.py at cccccccccccc is not in the cache ({tmp_path / 'cache'}) and "
            "offline mode is on")):
        store(served, tmp_path, offline=True).ensure_variant(locked(), VARIANT)


def test_a_variant_the_lock_does_not_have_and_linked_directories_are_refused(served, tmp_path):
    with pytest.raises(KernelpinError, match="^acme/k 1.0.0: variant other is not in the lock$"):
        store(served, tmp_path).ensure_variant(locked(), "other")
    installed = store(served, tmp_path).ensure_variant(locked(), VARIANT)
    elsewhere = tmp_path / "elsewhere"
    installed.directory.parent.rename(elsewhere)
    installed.directory.parent.symlink_to(elsewhere)
    assert store(served, tmp_path).linked_directory(locked(), VARIANT) == installed.directory.parent
    with pytest.raises(IntegrityError, match=re.escape(
            f"acme/k 1.0.0: {installed.directory.parent} is a symbolic link (to {elsewhere}), not a directory "
            "kernelpin made; nothing is read, listed, removed or loaded through it. Remove the link (it is not "
            "kernelpin's) and run `kernelpin sync` again")):
        store(served, tmp_path).ensure_variant(locked(), VARIANT)
    assert store(served, tmp_path).linked_directory(locked(), "other") == installed.directory.parent
    (tmp_path / "cache").rename(tmp_path / "real-cache")
    (tmp_path / "cache").symlink_to(tmp_path / "real-cache")  # the cache itself may be a link (another disk)
    assert store(served, tmp_path).linked_directory(locked(), VARIANT) == installed.directory.parent


def test_a_ref_is_recorded_replaced_and_never_written_through_a_link(served, tmp_path):
    s = store(served, tmp_path)
    ref = s.write_ref("acme/k", "kernel", "v1", COMMIT)
    assert ref == tmp_path / "cache" / "kernels--acme--k" / "refs" / "v1" and ref.read_text() == COMMIT
    assert ref.stat().st_mode & 0o777 == 0o644
    assert s.write_ref("acme/k", "kernel", "v1", "d" * 40).read_text() == "d" * 40
    assert s.write_ref("acme/k", "kernel", "release/1", COMMIT).read_text() == COMMIT
    ref.unlink()
    ref.symlink_to(tmp_path / "victim")
    s.write_ref("acme/k", "kernel", "v1", COMMIT)
    assert not ref.is_symlink() and not (tmp_path / "victim").exists()
    (tmp_path / "elsewhere").mkdir()
    (ref.parent / "release").rename(tmp_path / "moved")
    (ref.parent / "release").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(KernelpinError, match=re.escape(f"acme/k: recording ref release/2: {ref.parent / 'release'} "
                                                       "is a symbolic link")):
        s.write_ref("acme/k", "kernel", "release/2", COMMIT)
    assert list((tmp_path / "elsewhere").iterdir()) == []
    with pytest.raises(KernelpinError, match="is not a git tag or branch name"):
        s.write_ref("acme/k", "kernel", "../x", COMMIT)
    with pytest.raises(KernelpinError, match="is not 40 lowercase hex digits"):
        s.write_ref("acme/k", "kernel", "v2", "C" * 40)
    assert not list(ref.parent.glob(f".*{PARTIAL}"))


def test_progress_bars_get_each_file_size_and_bytes(served, tmp_path):
    bars = []

    class Bar:
        def __init__(self, total: int, desc: str) -> None:
            self.total, self.desc, self.seen, self.closed = total, desc, 0, False
            bars.append(self)

        def update(self, count: int) -> None:
            self.seen += count

        def close(self) -> None:
            self.closed = True

    settings = HubSettings(endpoint=served.endpoint, cache_dir=tmp_path / "cache", offline=False)
    Store(HubSource(settings), progress=Bar).ensure_variant(locked(), VARIANT)
    assert [(b.desc, b.total, b.seen, b.closed) for b in bars] == [(p, len(d), len(d), True) for p, d in FILES.items()]
