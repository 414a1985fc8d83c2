"""Creating and removing things inside one of kernelpin's directories without ever leaving it.

The Hub cache may be shared: whoever else can write it can swap any directory below its root for a symbolic
link to someone's files. So nothing below a root (the cache, or a `sync --target` directory; trusted as
given, it may itself be a link to another disk) is reached by a path the kernel resolves: each level is
opened relative to the one above it with O_NOFOLLOW | O_DIRECTORY, a link anywhere on the way is refused
(LinkRefused), and files are created, renamed and unlinked by name inside the directory so opened
(`dir_fd=`), where a link is one more name: removed, never followed. Trees go the same way (shutil.rmtree's
file-descriptor walk). Reading needs none of this: every byte read is hashed against the lock first.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

from kernelpin.errors import KernelpinError

_LEVEL = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

PARTIAL = ".kernelpin-partial"  # suffix of a file being written (or left by a killed process)


class LinkRefused(KernelpinError):
    """Where kernelpin keeps a directory or file of its own, there is a symbolic link (or a file for a directory)."""

    def __init__(self, path: Path, what: str) -> None:
        try:
            found = f"a symbolic link (to {os.readlink(path)})"
        except OSError:
            found = "not a directory"
        super().__init__(
            f"{what}: {path} is {found}, not kernelpin's own; nothing is created or removed through it. "
            "Remove it (it is not kernelpin's) and run `kernelpin sync` again"
        )


def parts_below(root: Path, path: Path) -> tuple[str, ...]:
    """The names from `root` down to `path` (which must lie below it, as kernelpin builds its paths)."""
    return path.relative_to(root).parts


@contextlib.contextmanager
def directory(root: Path, path: Path, what: str, create: bool = False, mode: int = 0o755) -> Iterator[int]:
    """A file descriptor of the directory `path` below `root`, each level opened without following a link
    (and made with `mode`, with `create`); LinkRefused for a level that is a link or no directory,
    FileNotFoundError for a missing one without `create`."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC) if not create else _made_root(root)
    try:
        reached = root
        for name in parts_below(root, path):
            reached = reached / name
            try:
                if create:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(name, mode, dir_fd=fd)
                child = os.open(name, _LEVEL, dir_fd=fd)
            except OSError as error:
                if error.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise LinkRefused(reached, what) from None
                error.filename = str(reached)  # not just the name: errors say which directory refused
                raise
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _made_root(root: Path) -> int:
    root.mkdir(parents=True, exist_ok=True)
    return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def remove(root: Path, path: Path, what: str) -> None:
    """Remove `path` below `root`: a file, a link (never what it points to) or a directory tree; nothing when
    it or a directory above it is missing. A link on the way down is refused."""
    try:
        with directory(root, path.parent, what) as fd:
            remove_name(fd, path.name)
    except FileNotFoundError:
        return


def remove_name(fd: int, name: str) -> None:
    """Remove the entry `name` of the directory open as `fd` (a tree without following the links in it)."""
    try:
        found = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(found.st_mode):
        shutil.rmtree(name, dir_fd=fd)
    else:
        os.unlink(name, dir_fd=fd)


def new_file(fd: int, directory: Path, prefix: str, suffix: str, mode: int = 0o644) -> tuple[int, str]:
    """A new, empty file (mode `mode` whatever the umask; by default 0644: others read the cache) in
    `directory`, open as `fd`: (its descriptor, its name)."""
    while True:
        # secrets.token_hex(6) is exactly this; importing secrets imports hmac (0.4 ms of every cold load).
        name = f"{prefix}{os.urandom(6).hex()}{suffix}"
        try:
            created = os.open(name, _NEW_FILE, mode, dir_fd=fd)
        except FileExistsError:
            continue
        except OSError as error:
            error.filename = str(directory / name)
            raise
        os.fchmod(created, mode)
        return created, name


def replace_file(
    root: Path,
    path: Path,
    content: bytes,
    what: str,
    mode: int = 0o644,
    directory_mode: int = 0o755,
    durable: bool = False,
) -> None:
    """Write `content` as the file `path` below `root`, whole or not at all: a new file (`mode`) in its directory
    (made with `directory_mode` where missing), renamed onto the name, so whatever was there (a link too) is
    replaced, never written through; a link on the way is refused (LinkRefused). `durable`: on disk (fsync)
    before the rename, so a crash leaves the old file or the new one."""
    with directory(root, path.parent, what, create=True, mode=directory_mode) as parent:
        fd, temporary = new_file(parent, path.parent, f".{path.name}.", PARTIAL, mode)
        try:
            with os.fdopen(fd, "wb") as stream:
                stream.write(content)
                if durable:
                    stream.flush()
                    os.fsync(stream.fileno())
            os.replace(temporary, path.name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            remove_name(parent, temporary)
            raise


@contextlib.contextmanager
def file_lock(root: Path, path: Path, what: str, wait: bool = True) -> Iterator[None]:
    """Hold an exclusive lock on the file `path` below `root` (created when missing, never through a link).
    Without `wait`, a lock another holds raises BlockingIOError at once."""
    import fcntl  # POSIX only, as dir_fd is: imported where a lock is taken

    with directory(root, path.parent, what, create=True) as parent:
        try:
            fd = os.open(path.name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=parent)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise LinkRefused(path, what) from None
            error.filename = str(path)
            raise
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock
