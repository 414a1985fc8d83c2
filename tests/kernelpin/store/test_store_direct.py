"""kernelpin.store.content directly: a real HTTP server serves a kernel's files (a directory laid out as the Hub's
resolve URLs, 127.0.0.1), no Hub API; each way a file gets into the store, is reused, repaired or refused,
with its message, fast enough for a mutation run to use."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import re
import resource
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from kernelpin.errors import IntegrityError, KernelpinError
from kernelpin.files import confined
from kernelpin.files.confined import PARTIAL
from kernelpin.format.layout import LOCKS_DIR
from kernelpin.format.lockfile import LockedFile, LockedKernel, LockedVariant
from kernelpin.hub.limits import Limits
from kernelpin.hub.source import HubSettings, HubSource
from kernelpin.store.content import Store, checkout_dir

COMMIT = "c" * 40
VARIANT = "torch213-cxx11-cpu-x86_64-linux"
FILES = {"__init__.py": b"from ._impl import X\n", "_impl.py": b"X = 1\n", "pkg/deep.py": b"DEEP = 2\n"}


def locked(files: dict[str, bytes] = FILES) -> LockedKernel:
    pinned = tuple(LockedFile(path, len(data), hashlib.sha256(data).hexdigest()) for path, data in files.items())
    return LockedKernel("acme/k", "model", "^1", COMMIT, "refs/tags/v1.0.0", "1.0.0", (LockedVariant(VARIANT, pinned),))


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        # A client that stops reading (a failed download) is expected; reporting it would write to stderr,
        # which a test's file size limit may refuse.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


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
    server = _Server(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
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
    # Its temporary files lie in the checkout itself, where the next writer clears them: no blobs/ there.
    assert sorted(os.listdir(checkout_dir(tmp_path / "vendor", locked()))) == ["build"]


@pytest.mark.parametrize("target", [False, True])
def test_a_modified_file_is_repaired_or_refused(served, tmp_path, target):
    kernel = locked()
    installed = store(served, tmp_path, target).ensure_variant(kernel, VARIANT)
    impl = installed.directory / "_impl.py"
    impl.unlink()
    impl.write_bytes(b"X = 666\n")
    with pytest.raises(
        IntegrityError,
        match=re.escape(
            f"acme/k 1.0.0: build/{VARIANT}/_impl.py: size 8 != 6 pinned in the lock. The installed file was "
            "modified or corrupted and is not used; run `kernelpin sync` to replace it"
        ),
    ):
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
    with pytest.raises(
        IntegrityError,
        match=re.escape(
            f"acme/k 1.0.0: build/{VARIANT}/_impl.py is a directory (or no file), not the file the lock lists. "
            "The installed file"
        ),
    ):
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
    with pytest.raises(
        IntegrityError,
        match=re.escape(
            f"acme/k 1.0.0: build/{VARIANT}/_impl.py: sha256 {digest} != {hashlib.sha256(FILES['_impl.py']).hexdigest()} "
            "pinned in the lock. The downloaded file was deleted. The server's content differs from what was "
            "locked: if the publisher re-tagged on purpose, run `kernelpin lock --upgrade-package acme/k`; "
            "otherwise do not trust this server"
        ),
    ):
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
    with pytest.raises(
        KernelpinError,
        match=re.escape(
            f"acme/k: build/{VARIANT}/__init__.py at cccccccccccc is not in the cache ({tmp_path / 'cache'}) and "
            "offline mode is on"
        ),
    ):
        store(served, tmp_path, offline=True).ensure_variant(locked(), VARIANT)


def test_a_variant_the_lock_does_not_have_and_linked_directories_are_refused(served, tmp_path):
    with pytest.raises(KernelpinError, match="^acme/k 1.0.0: variant other is not in the lock$"):
        store(served, tmp_path).ensure_variant(locked(), "other")
    installed = store(served, tmp_path).ensure_variant(locked(), VARIANT)
    elsewhere = tmp_path / "elsewhere"
    installed.directory.parent.rename(elsewhere)
    installed.directory.parent.symlink_to(elsewhere)
    assert store(served, tmp_path).linked_directory(locked(), VARIANT) == installed.directory.parent
    with pytest.raises(
        IntegrityError,
        match=re.escape(
            f"acme/k 1.0.0: {installed.directory.parent} is a symbolic link (to {elsewhere}), not a directory "
            "kernelpin made; nothing is read, listed, removed or loaded through it. Remove the link (it is not "
            "kernelpin's) and run `kernelpin sync` again"
        ),
    ):
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
    with pytest.raises(
        KernelpinError, match=re.escape(f"acme/k: recording ref release/2: {ref.parent / 'release'} is a symbolic link")
    ):
        s.write_ref("acme/k", "kernel", "release/2", COMMIT)
    assert list((tmp_path / "elsewhere").iterdir()) == []
    with pytest.raises(KernelpinError, match=r"^acme/k: '\.\./x' is not a git tag or branch name"):
        s.write_ref("acme/k", "kernel", "../x", COMMIT)
    with pytest.raises(KernelpinError, match="^acme/k: commit 'C{40}' is not 40 lowercase hex digits"):
        s.write_ref("acme/k", "kernel", "v2", "C" * 40)
    with pytest.raises(
        KernelpinError, match="^acme/k: refusing unsafe path .* \\(it has a 400-byte name, more than the 255"
    ):
        s.write_ref("acme/k", "kernel", "é" * 200, COMMIT)  # a git ref name (255 characters at most) too long to store
    assert sorted(p.name for p in ref.parent.iterdir()) == ["release", "v1"]
    assert not list(ref.parent.glob(f".*{PARTIAL}"))


def test_progress_bars_get_each_file_size_and_bytes(served, tmp_path):
    bars, in_flight = [], []
    blobs = tmp_path / "cache" / "models--acme--k" / "blobs"

    class Bar:
        def __init__(self, total: int, desc: str) -> None:
            self.total, self.desc, self.seen, self.closed = total, desc, 0, False
            bars.append(self)

        def update(self, count: int) -> None:
            self.seen += count
            in_flight.append(sorted(entry.name for entry in blobs.iterdir()))

        def close(self) -> None:
            self.closed = True

    # One download at a time (KERNELPIN_DOWNLOADS=1), so each bar sees the blobs before it.
    settings = HubSettings(
        endpoint=served.endpoint, cache_dir=tmp_path / "cache", offline=False, limits=Limits(downloads=1)
    )
    Store(HubSource(settings), progress=Bar).ensure_variant(locked(), VARIANT)
    assert [(b.desc, b.total, b.seen, b.closed) for b in bars] == [(p, len(d), len(d), True) for p, d in FILES.items()]
    # Mid-download the bytes are in a hidden .part file beside the blobs: the name a killed writer's leftover has,
    # that the next writer removes (test_partial_files_a_killed_writer_left_are_removed_by_the_next).
    done = []
    for (_path, data), entries in zip(FILES.items(), in_flight, strict=True):
        blob = hashlib.sha256(data).hexdigest()
        assert len(entries) == len(done) + 1 and re.fullmatch(
            rf"\.{blob}\.[0-9a-f]{{12}}{re.escape(PARTIAL)}", (set(entries) - set(done)).pop()
        )
        done.append(blob)
    assert sorted(p.name for p in blobs.iterdir()) == sorted(done)


@contextlib.contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """Writes past `limit` bytes of one file fail with EFBIG (a real write error, root included, no mount
    needed): this process's RLIMIT_FSIZE, with SIGXFSZ ignored so the write returns the error."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


BIG = bytes(range(256)) * 4096  # 1 MiB: larger than a stream's buffer, so the write inside the transfer fails


@pytest.mark.parametrize("target", [False, True])
@pytest.mark.parametrize(
    ("path", "data"), [("_impl.py", FILES["_impl.py"]), ("big.bin", BIG)], ids=["buffered", "during-transfer"]
)
def test_a_write_the_file_system_refuses_is_named_with_its_partial_file_and_leaves_nothing(
    served, tmp_path, target, path, data
):
    served.file(path).write_bytes(data)
    kernel = locked({path: data})
    s = store(served, tmp_path, target)
    partial_dir = (
        checkout_dir(tmp_path / "vendor", kernel) if target else tmp_path / "cache" / "models--acme--k" / "blobs"
    )
    name = path if target else hashlib.sha256(data).hexdigest()
    with (
        file_size_limit(3),
        pytest.raises(
            KernelpinError,
            match="^"
            + re.escape(f"acme/k 1.0.0: build/{VARIANT}/{path}: cannot write {partial_dir}/.{name}.")
            + "[0-9a-f]{12}"
            + re.escape(
                f"{PARTIAL}: the file is larger than this process may write (its file size limit, "
                "`ulimit -f`); raise the limit, or run `kernelpin sync` where it allows the kernel's files"
            )
            + "$",
        ),
    ):
        s.ensure_variant(kernel, VARIANT)
    assert not [entry for entry in partial_dir.iterdir() if entry.name.endswith(PARTIAL)]
    assert s.installed(kernel, VARIANT, kernel.variants[0].files[0]) is None
    assert s.ensure_variant(kernel, VARIANT).downloaded == [f"build/{VARIANT}/{path}"]


def test_a_failed_ref_write_is_named_and_leaves_no_partial_file(served, tmp_path):
    s = store(served, tmp_path)
    refs = tmp_path / "cache" / "kernels--acme--k" / "refs"
    with (
        file_size_limit(3),
        pytest.raises(
            KernelpinError,
            match="^"
            + re.escape(
                f"acme/k: recording ref v1: cannot write {refs / 'v1'}: the file is larger than this process may write"
            ),
        ),
    ):
        s.write_ref("acme/k", "kernel", "v1", COMMIT)
    assert list(refs.iterdir()) == []


def test_a_link_being_made_by_an_earlier_writer_with_this_pid_is_replaced(served, tmp_path):
    kernel = locked()
    installed = store(served, tmp_path).ensure_variant(kernel, VARIANT)
    (installed.directory / "_impl.py").unlink()
    leftover = installed.directory / f"._impl.py.{os.getpid()}{PARTIAL}"  # killed before its rename; pids recur
    leftover.symlink_to("../elsewhere")
    assert store(served, tmp_path).ensure_variant(kernel, VARIANT).downloaded == [f"build/{VARIANT}/_impl.py"]
    assert not leftover.is_symlink() and (installed.directory / "_impl.py").read_bytes() == FILES["_impl.py"]


@pytest.mark.parametrize(
    ("variant", "commit", "path", "problem"),
    [
        ("../evil", COMMIT, "__init__.py", "refusing unsafe path '../evil'"),
        (VARIANT, "C" * 40, "__init__.py", f"commit '{'C' * 40}' is not 40 lowercase hex digits"),
        (VARIANT, COMMIT, "../../x.py", "refusing unsafe path '../../x.py'"),
    ],
    ids=["variant", "commit", "file"],
)
def test_a_hostile_lock_is_refused_by_the_store_itself_naming_the_repository(
    served, tmp_path, variant, commit, path, problem
):
    kernel = LockedKernel(
        "acme/k",
        "model",
        "^1",
        commit,
        "refs/tags/v1.0.0",
        "1.0.0",
        (LockedVariant(variant, (LockedFile(path, 6, "0" * 64),)),),
    )
    with pytest.raises(KernelpinError, match="^" + re.escape(f"acme/k: {problem}")):
        store(served, tmp_path).ensure_variant(kernel, variant)
    assert not (tmp_path / "cache").exists()


def test_a_linked_locks_directory_is_refused_naming_the_install(served, tmp_path):
    (tmp_path / "cache").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "cache" / LOCKS_DIR).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(
        KernelpinError,
        match="^"
        + re.escape(
            f"acme/k 1.0.0: installing build/{VARIANT}/__init__.py: {tmp_path / 'cache' / LOCKS_DIR} is a symbolic link"
        ),
    ):
        store(served, tmp_path).ensure_variant(locked(), VARIANT)
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_files_another_writer_installed_while_this_one_waited_are_checked_again(served, tmp_path):
    """Under the repository's lock each missing file is looked at again: a good one is reused, a bad one
    repaired (here another writer, holding the lock, installs them while this one waits for it)."""
    kernel = locked()
    this = store(served, tmp_path)
    directory = this.variant_directory(kernel, VARIANT)
    done: dict[str, object] = {}
    with confined.file_lock(tmp_path / "cache", tmp_path / "cache" / LOCKS_DIR / "models--acme--k.lock", "other"):
        waiting = threading.Thread(
            target=lambda: done.update(installed=this.ensure_variant(kernel, VARIANT, repair=True))
        )
        waiting.start()
        (directory / "pkg").mkdir(parents=True)
        (directory / "_impl.py").write_bytes(FILES["_impl.py"])
        (directory / "pkg" / "deep.py").write_bytes(b"BAD = 0\n!")
    waiting.join(60)
    installed = done["installed"]
    assert installed.downloaded == [f"build/{VARIANT}/__init__.py"]
    assert installed.reused == [f"build/{VARIANT}/_impl.py"] and installed.repaired == [f"build/{VARIANT}/pkg/deep.py"]
    assert (directory / "pkg" / "deep.py").read_bytes() == FILES["pkg/deep.py"]


def test_a_kernel_repository_is_fetched_from_its_own_urls_and_cached_under_its_type(served, tmp_path):
    # The Hub serves kernel repositories under /kernels/<repo>/resolve/...; a model's URL would be another file.
    (served.root / "kernels").mkdir()
    (served.root / "acme").rename(served.root / "kernels" / "acme")
    kernel = dataclasses.replace(locked(), repo_type="kernel")
    installed = store(served, tmp_path).ensure_variant(kernel, VARIANT)
    assert installed.directory == tmp_path / "cache" / "kernels--acme--k" / "snapshots" / COMMIT / "build" / VARIANT
    assert {path: (installed.directory / path).read_bytes() for path in FILES} == FILES
