"""This user's private state: small files that only this user's kernelpin writes and that it believes because of
that (kernelpin.store.receipts: files hashed; kernelpin.trust.receipts: bundles verified).

Each kind lives in its directory below `$XDG_STATE_HOME/kernelpin/` (default `~/.local/state/kernelpin/`),
created 0700. The directory is reached from the state directory down without following a link
(kernelpin.files.confined: a link on the way, even to a directory of this user's, means none are used) and used only
when its owner is this user and no one else may write it; each file is opened through it without following
links, must be this user's, and is replaced atomically. A directory that fails these checks is ignored (its
users then do the work the files would spare), and so is every file in it. Where the platform lacks uids or
no-follow opens (Windows), there is no private state.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from kernelpin.errors import KernelpinError
from kernelpin.files import confined
from kernelpin.records import record

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


def private_directory(name: str, environ: Mapping[str, str] = os.environ) -> Path | None:
    """This user's directory `name` of kernelpin's state, or None where it cannot be kept safely (no uids, no
    no-follow open)."""
    if not hasattr(os, "geteuid") or not _NOFOLLOW or not _DIRECTORY or os.open not in os.supports_dir_fd:
        return None
    state = environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state, "kernelpin", name)


@record
class PrivateFiles:
    """The files in `directory` (None: there are none, nothing is kept), reached from `root` (trusted as given;
    default: the directory above) without following a link."""

    directory: Path | None
    root: Path | None = None

    @classmethod
    def of_user(cls, name: str, environ: Mapping[str, str] = os.environ) -> PrivateFiles:
        directory = private_directory(name, environ)
        return cls(directory, root=None if directory is None else directory.parent.parent)

    @contextlib.contextmanager
    def opened(self, create: bool) -> Iterator[int | None]:
        """A descriptor of the directory when it is safe to trust, else None."""
        if self.directory is None:
            yield None
            return
        root = self.directory.parent if self.root is None else self.root
        with contextlib.ExitStack() as stack:
            try:
                fd = stack.enter_context(confined.directory(root, self.directory, "private state", create, mode=0o700))
            except (OSError, KernelpinError):  # missing, unwritable, or a link on the way (LinkRefused)
                fd = None
            trusted = fd is not None and os.fstat(fd).st_uid == os.geteuid() and not os.fstat(fd).st_mode & 0o022
            yield fd if trusted else None

    def read(self, name: str, limit: int) -> bytes | None:
        """The first `limit` bytes of this user's file `name`; None when there is none to believe."""
        with self.opened(create=False) as directory:
            if directory is None:
                return None
            try:
                fd = os.open(name, os.O_RDONLY | _NOFOLLOW, dir_fd=directory)
            except OSError:
                return None
        with os.fdopen(fd, "rb") as stream:
            if os.fstat(stream.fileno()).st_uid != os.geteuid():
                return None
            return stream.read(limit)

    def any(self) -> bool:
        """Whether the directory is one to believe and holds any file."""
        with self.opened(create=False) as directory:
            if directory is None:
                return False
            with contextlib.suppress(OSError), os.scandir(directory) as entries:
                return next(entries, None) is not None
        return False

    def write(self, name: str, content: bytes) -> None:
        """Keep `content` as the file `name` (0600), replacing whatever was there. Best effort: a file that cannot
        be written costs its users the work it would have spared, nothing else."""
        with self.opened(create=True) as directory:
            if directory is None:
                return
            assert self.directory is not None  # opened gives a descriptor of it only
            temporary = None
            try:
                fd, temporary = confined.new_file(directory, self.directory, f".{name}.", confined.PARTIAL, 0o600)
                with os.fdopen(fd, "wb") as stream:
                    stream.write(content)
                os.replace(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
            except OSError:
                if temporary is not None:
                    with contextlib.suppress(OSError):
                        confined.remove_name(directory, temporary)
