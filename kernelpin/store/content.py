"""Where verified kernel files are kept, and the one way they get there.

In the Hub cache the layout is huggingface_hub's, so `kernels` finds kernelpin's downloads offline:
`<cache>/<type>s--<org>--<name>/blobs/<sha256>` holds the bytes (named by the sha256 the LOCK records, never
by a server's ETag) and `snapshots/<commit>/build/<variant>/<path>` links to them (the commit is the lock's,
never a server's X-Repo-Commit). With `sync --target DIR` the files are plain copies in
`DIR/<org>/<name>/<commit>/build/<variant>/<path>`. Every path is built from validated values only: the
lock's commit, repository id, variant name and checked paths.

A download streams into a temporary file beside its destination, is hashed on the way, stops at the locked
size, and is renamed into place only when size and sha256 match. Temporary files a killed process left
behind are removed by the next writer, which holds the repository's file lock. Everything is created and
removed through kernelpin.files.confined, from the cache or target directory down: a link on the way is refused,
never followed, so a shared cache's other users cannot turn a repair or a download against files elsewhere.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import field
from pathlib import Path
from typing import Any, NoReturn

from kernelpin.errors import IntegrityError, KernelpinError
from kernelpin.files import confined
from kernelpin.files.integrity import GIT_OBJECT_ID_RE, SHA256_HEX_RE, check_repo_path
from kernelpin.format.layout import BUILD_DIR, LOCKS_DIR
from kernelpin.format.lockfile import LockedFile, LockedKernel
from kernelpin.hub.listing import check_commit, check_ref_name
from kernelpin.hub.source import HubSource, local_write_problem
from kernelpin.records import record
from kernelpin.store.receipts import Receipts


@record(frozen=False)
class Installed:
    """One variant made present and verified: where it is, and what was done on the way."""

    directory: Path
    downloaded: list[str] = field(default_factory=list)  # paths relative to the repository
    reused: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)


def repository_directory(kernel: LockedKernel, variant_name: str) -> str:
    """The repository directory of a locked variant (build/<variant>, or its per-capability build's)."""
    variant = kernel.variant(variant_name)
    return variant.directory if variant is not None else f"{BUILD_DIR}/{variant_name}"


def checkout_dir(target: Path, kernel: LockedKernel) -> Path:
    """Where `--target` vendoring puts a kernel: DIR/<org>/<name>/<commit>/ (the repository layout below)."""
    org, name = kernel.repo_id.split("/")
    return target / org / name / kernel.commit


class Store:
    """The Hub cache (or a `sync --target` directory) as kernelpin fills it. `progress`, when given, makes a
    progress bar per download (called with `total` bytes and `desc`; tqdm's interface: update, close).
    `receipts` spare re-hashing files this user verified before (default: this user's, kernelpin.store.receipts)."""

    def __init__(
        self,
        source: HubSource,
        target: Path | None = None,
        progress: Callable[..., Any] | None = None,
        receipts: Receipts | None = None,
    ) -> None:
        self.source, self.target, self.progress = source, target, progress
        self.receipts = Receipts.of_user() if receipts is None else receipts

    @property
    def base(self) -> Path:
        """The directory everything of this store lies below: the target directory, or the Hub cache."""
        return self.target if self.target is not None else self.source.settings.cache_dir

    def root(self, kernel: LockedKernel) -> Path:
        """The directory of `kernel` that kernelpin owns: nothing is written above it but the file lock."""
        if self.target is not None:
            return checkout_dir(self.target, kernel)
        return self.source.repo_folder(kernel.repo_id, kernel.repo_type)

    def variant_directory(self, kernel: LockedKernel, variant_name: str) -> Path:
        """Where the locked variant's files lie: build/<variant>/, or its per-capability build's directory when the
        lock entry is narrowed to one (LockedVariant.narrowed)."""
        check_repo_path(variant_name, kernel.repo_id)
        directory = repository_directory(kernel, variant_name)
        if self.target is not None:
            return self.root(kernel) / directory
        return self.root(kernel) / "snapshots" / check_commit(kernel.commit, kernel.repo_id) / directory

    def linked_directory(self, kernel: LockedKernel, variant_name: str) -> Path | None:
        """The first directory from the cache or target directory down to the variant directory that is a
        symbolic link, or None. Nothing is read, listed or removed through one: it would reach what it points to
        (a user's own directory); `sync`, `load` and `verify` refuse it."""
        current = self.base
        for part in confined.parts_below(self.base, self.variant_directory(kernel, variant_name)):
            current = current / part
            if current.is_symlink():
                return current
        return None

    def installed(self, kernel: LockedKernel, variant_name: str, locked: LockedFile) -> Path | None:
        """The installed file (not verified), or None when there is none."""
        path = self.variant_directory(kernel, variant_name) / check_repo_path(locked.path, kernel.repo_id)
        return path if path.is_file() else None

    def ensure_variant(
        self, kernel: LockedKernel, variant_name: str, repair: bool = False, fetched: Mapping[str, bytes] | None = None
    ) -> Installed:
        """Make every file of one locked variant present and verified; return where it is.

        A present file that fails verification is discarded and downloaded again when `repair`, else it is an
        IntegrityError (load never repairs). When every file is present and verified nothing is written, so a
        read-only cache or target works. `fetched` holds files of the variant already in memory (path in the
        variant -> bytes, as resolving it read them): those are written from there, not downloaded again, and
        checked against the lock like a download."""
        variant = kernel.variant(variant_name)
        if variant is None:
            raise KernelpinError(f"{kernel.label}: variant {variant_name} is not in the lock")
        linked = self.linked_directory(kernel, variant.name)
        if linked is not None:
            raise IntegrityError(
                f"{kernel.label}: {linked} is a symbolic link (to {os.readlink(linked)}), not a directory kernelpin "
                "made; nothing is read, listed, removed or loaded through it. Remove the link (it is not kernelpin's) "
                "and run `kernelpin sync` again"
            )
        result = Installed(self.variant_directory(kernel, variant.name))
        prefix = f"{variant.directory}/"
        missing = [locked for locked in variant.files if not self._reuse(kernel, variant.name, locked, repair, result)]
        if missing:
            from kernelpin.store.parallel import run_all  # downloads only: a warm load has every file

            what = f"{kernel.label}: installing {prefix}{missing[0].path}"
            with self._writing(kernel, what):
                # Another process may have installed some while this one waited for the lock.
                todo = [locked for locked in missing if not self._reuse(kernel, variant.name, locked, repair, result)]
                run_all(
                    lambda locked: self._download(
                        kernel, result.directory, locked, prefix, (fetched or {}).get(locked.path)
                    ),
                    todo,
                    self.source.settings.limits.downloads,
                    self.source.stop_waiting,
                )
                result.downloaded += [
                    prefix + locked.path for locked in todo if prefix + locked.path not in result.repaired
                ]
        return result

    def _reuse(
        self, kernel: LockedKernel, variant_name: str, locked: LockedFile, repair: bool, result: Installed
    ) -> bool:
        """Whether the installed file is present and verified; a bad one is discarded (repair) or refused."""
        # result.directory is the variant's (made once per variant: load checks every file on its hot path).
        entry = result.directory / check_repo_path(locked.path, kernel.repo_id)
        path = f"{repository_directory(kernel, variant_name)}/{locked.path}"
        try:
            if not entry.is_file():
                if entry.is_symlink() or not entry.exists():
                    return False  # missing (a dangling link is replaced by the download)
                raise IntegrityError(f"{kernel.label}: {path} is a directory (or no file), not the file the lock lists")
            self.receipts.verify_file(entry, locked.size, locked.sha256, f"{kernel.label}: {path}")
        except IntegrityError as error:
            if not repair:
                raise IntegrityError(
                    f"{error}. The installed file was modified or corrupted and is not used; "
                    "run `kernelpin sync` to replace it"
                ) from None
            # The entry only: in the Hub cache a bad blob is replaced by the download, by name inside blobs/.
            confined.remove(self.base, entry, f"{kernel.label}: repairing {path}")
            result.repaired.append(path)
            return False
        if path not in result.repaired:
            result.reused.append(path)
        return True

    def _blobs(self, kernel: LockedKernel) -> Path:
        return self.root(kernel) / "blobs"

    def _partial_dir(self, kernel: LockedKernel) -> Path:
        return self.root(kernel) if self.target is not None else self._blobs(kernel)

    @contextlib.contextmanager
    def _writing(self, kernel: LockedKernel, what: str, wait: bool = True) -> Iterator[None]:
        """Hold the repository's file lock (one writer per repository), clear what killed writers left,
        and report a disk that refuses writes as such (never as a network problem). Without `wait`, a lock
        another writer holds raises BlockingIOError at once."""
        lock_path = self.base / LOCKS_DIR / f"{kernel.repo_type}s--{kernel.repo_id.replace('/', '--')}.lock"
        try:
            # Only writers lock: loading needs read access.
            with confined.file_lock(self.base, lock_path, what, wait=wait):
                with confined.directory(self.base, self._partial_dir(kernel), what, create=True) as partial:
                    for name in os.listdir(partial):
                        if name.startswith(".") and name.endswith(confined.PARTIAL):
                            confined.remove_name(partial, name)
                yield
        except OSError as error:
            _raise_local(error, what, lock_path.parent)

    def cached(self, kernel: LockedKernel, variant_name: str, path: str, size: int) -> bytes | None:
        """The bytes the store holds at `path` of a variant, at most `size` + 1 of them (unverified: the caller
        checks them), or None when there is no such file or a directory on the way is a symbolic link."""
        if self.linked_directory(kernel, variant_name) is not None:
            return None
        present = self.installed(kernel, variant_name, LockedFile(path, size, ""))
        return None if present is None else _read_at_most(present, size + 1)

    def blob(self, kernel: LockedKernel, name: str, size: int) -> bytes | None:
        """The bytes of the Hub cache's blobs/<name> of `kernel`'s repository, at most `size` + 1 of them
        (unverified: the caller checks them against `name`), or None."""
        path = self._blobs(kernel) / _blob_name(name, kernel.repo_id)
        if any(level.is_symlink() for level in (self.root(kernel), path.parent, path)) or not path.is_file():
            return None
        return _read_at_most(path, size + 1)

    def keep_blob(self, kernel: LockedKernel, name: str, content: bytes) -> None:
        """Store `content`, which the caller fetched and checked to be the file whose git blob id (or LFS sha256)
        is `name`, as the Hub cache's blobs/<name> (huggingface_hub's name for it), so that later commands read
        it from there; no snapshot entry is made (the variant is not installed). It does not wait for another
        writer of the repository (a sync downloading gigabytes): then it raises BlockingIOError."""
        what = f"{kernel.label}: keeping blob {name[:12]}"
        locked = LockedFile(name, len(content), hashlib.sha256(content).hexdigest())
        with self._writing(kernel, what, wait=False):
            self._fetch_into(kernel, self._blobs(kernel) / _blob_name(name, kernel.repo_id), locked, "", what, content)

    def _download(
        self, kernel: LockedKernel, directory: Path, locked: LockedFile, prefix: str, content: bytes | None = None
    ) -> None:
        """Stream one file (or take its `content`, already in memory) into a temporary file, hash it on the
        way, and move it into place when it matches the lock; otherwise delete it. In the Hub cache the bytes
        become blobs/<sha256> and the snapshot entry a relative link to it; where links are off
        (HF_HUB_DISABLE_SYMLINKS=1) or refused (Windows without developer mode, file systems without links) the
        snapshot entry is the file itself, as huggingface_hub keeps it there."""
        destination = directory / locked.path
        what = f"{kernel.label}: {prefix}{locked.path}"
        if self.target is None and self.source.settings.symlinks:
            blob = self._blobs(kernel) / locked.sha256
            if not (blob.is_file() and not blob.is_symlink() and self._matches(blob, locked)):
                self._fetch_into(kernel, blob, locked, prefix, what, content)
            if not self._replace_with_link(destination, os.path.relpath(blob, destination.parent), what):
                self._move(blob, destination, what)
        else:
            self._fetch_into(kernel, destination, locked, prefix, what, content)

    def _fetch_into(
        self,
        kernel: LockedKernel,
        destination: Path,
        locked: LockedFile,
        prefix: str,
        what: str,
        content: bytes | None = None,
    ) -> None:
        with (
            confined.directory(self.base, self._partial_dir(kernel), what, create=True) as partial,
            confined.directory(self.base, destination.parent, what, create=True) as into,
        ):
            self._fetch_between(kernel, partial, into, destination.name, locked, prefix, what, content)

    def _fetch_between(
        self,
        kernel: LockedKernel,
        partial: int,
        into: int,
        name: str,
        locked: LockedFile,
        prefix: str,
        what: str,
        content: bytes | None,
    ) -> None:
        """Download (or take `content`) into a new file of the directory `partial`, then rename it to `name` in
        `into`."""
        fd, temporary = confined.new_file(partial, self._partial_dir(kernel), f".{name}.", confined.PARTIAL)
        bar = self.progress(total=locked.size, desc=locked.path) if self.progress is not None else None
        try:
            digest = hashlib.sha256()
            with os.fdopen(fd, "wb") as stream:

                def sink(chunk: bytes) -> None:
                    digest.update(chunk)
                    try:
                        stream.write(chunk)
                    except OSError as error:  # before the transfer's error handling calls it a network problem
                        _raise_local(error, what, self._partial_dir(kernel) / temporary)
                    if bar is not None:
                        bar.update(len(chunk))

                if content is not None:
                    sink(content)
                else:
                    self.source.stream(
                        kernel.repo_id, kernel.repo_type, kernel.commit, prefix + locked.path, locked.size, sink
                    )
                stream.flush()
                written = os.fstat(stream.fileno())  # the file as hashed: its times once every byte is in
            # Not synced (fsync): a crash may leave the file with bytes that never reached the disk, which the
            # next hash finds; only a hash receipt could vouch for it unread, and receipts sync first.
            if digest.hexdigest() != locked.sha256:
                raise IntegrityError(
                    f"{what}: sha256 {digest.hexdigest()} != {locked.sha256} pinned in the lock. The downloaded file "
                    "was deleted. The server's content differs from what was locked: if the publisher re-tagged on "
                    f"purpose, run `kernelpin lock --upgrade-package {kernel.repo_id}`; "
                    "otherwise do not trust this server"
                )
            os.replace(temporary, name, src_dir_fd=partial, dst_dir_fd=into)
            self.receipts.wrote(written, os.stat(name, dir_fd=into, follow_symlinks=False), locked.sha256)
        except OSError as error:
            confined.remove_name(partial, temporary)
            _raise_local(error, what, self._partial_dir(kernel) / temporary)
        except BaseException:
            confined.remove_name(partial, temporary)
            raise
        finally:
            if bar is not None:
                bar.close()

    def _matches(self, path: Path, locked: LockedFile) -> bool:
        try:
            self.receipts.verify_file(path, locked.size, locked.sha256, locked.path)
        except IntegrityError:
            return False
        return True

    def _replace_with_link(self, path: Path, target: str, what: str) -> bool:
        """Make `path` a symbolic link to `target`, atomically; whatever was at `path` (a link too) is replaced,
        never followed. False when the file system or OS refuses to make links (nothing was changed)."""
        with confined.directory(self.base, path.parent, what, create=True) as parent:
            temporary = f".{path.name}.{os.getpid()}{confined.PARTIAL}"
            confined.remove_name(parent, temporary)
            try:
                os.symlink(target, temporary, dir_fd=parent)
            except OSError as error:
                if error.errno in _NO_LINKS:
                    return False
                raise  # a full or read-only disk refuses the link and the file alike
            try:
                os.replace(temporary, path.name, src_dir_fd=parent, dst_dir_fd=parent)
            except BaseException:
                confined.remove_name(parent, temporary)
                raise
        return True

    def _move(self, source: Path, destination: Path, what: str) -> None:
        """Rename `source` to `destination` (both below the store's base), by name inside directories opened
        without following links: whatever is at `destination` (a link too) is replaced, never followed."""
        with (
            confined.directory(self.base, source.parent, what) as origin,
            confined.directory(self.base, destination.parent, what, create=True) as into,
        ):
            os.replace(source.name, destination.name, src_dir_fd=origin, dst_dir_fd=into)

    def write_ref(self, repo_id: str, repo_type: str, name: str, commit: str) -> Path:
        """Record in the Hub cache that revision `name` (a branch such as `v1`, a tag) is at `commit`:
        `<repo folder>/refs/<name>`, as huggingface_hub does, so `kernels` finds the snapshot offline by that
        name (e.g. `get_kernel(repo, version=1)` reads refs/v1). Both values are checked; a link on the way
        is refused, and an existing ref (or a link in its place) is replaced, never written through."""
        check_ref_name(name, repo_id)
        check_commit(commit, repo_id)
        ref = self.source.repo_folder(repo_id, repo_type) / "refs" / check_repo_path(name, repo_id)
        what = f"{repo_id}: recording ref {name}"
        try:
            confined.replace_file(self.source.settings.cache_dir, ref, commit.encode("ascii"), what)
        except OSError as error:
            _raise_local(error, what, ref)
        return ref


def _raise_local(error: OSError, what: str, path: Path | str) -> NoReturn:
    """Re-raise a disk or permission error as one that names the path and the fix (others as they are)."""
    problem = local_write_problem(error, what, path)
    if problem is None:
        raise error
    raise problem from error


def _read_at_most(path: Path, size: int) -> bytes | None:
    try:
        with open(path, "rb") as stream:
            return stream.read(size)
    except OSError:
        return None


def _blob_name(name: str, repo_id: str) -> str:
    if not (GIT_OBJECT_ID_RE.match(name) or SHA256_HEX_RE.match(name)):
        raise KernelpinError(f"{repo_id}: {name[:80]!r} is neither a git blob id nor a sha256")
    return name


# What making a link fails with where links are not allowed: Linux file systems without them (vfat, some FUSE and
# network mounts) say EPERM or EOPNOTSUPP; Windows without the privilege gives WinError 1314, errno EINVAL.
_NO_LINKS = {errno.EPERM, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP}
