"""Verified-hash receipts: a file kernelpin hashed once and that has not changed since is not hashed again.

A receipt says "the file at (device, inode), of this size, mtime_ns and ctime_ns, had this sha256 when this user
hashed it". A load of unchanged files then costs one stat per file instead of reading every byte; a changed
file is hashed again, since every change of content (a write, a truncation, a rename onto the path, a new file
on a reused inode) gives the file a new ctime, which only the clock sets: neither utime() nor a co-user can set
it back (only root, by moving the system clock).

Receipts are written only by this user, only after kernelpin hashed the bytes itself (a Hub's claims never make
one), into this user's private state (kernelpin.files.private_state: `$XDG_STATE_HOME/kernelpin/receipts`, default
`~/.local/state/kernelpin/receipts`, 0700, reached without following links, used only when only this user can
write it; each receipt this user's, opened without following links, replaced atomically). Where it fails those
checks, or the platform lacks uids or no-follow opens (Windows), there are no receipts: every file is hashed.

"Racy" files are never vouched for: a file whose mtime or ctime is less than SETTLE_NS before the hash started
could change again within the same timestamp tick (file systems keep times at 1 ns to 2 s granularity) without
its times changing, so its receipt waits for a later hash. Small files are cheaper to hash than to look up.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import field
from pathlib import Path

from kernelpin.files.integrity import check_digest, check_size, sha256_stream
from kernelpin.files.private_state import PrivateFiles
from kernelpin.records import record

SETTLE_NS = 2_000_000_000  # a file's times must be this much older than the hash (FAT keeps mtimes to 2 s)
MIN_SIZE = 1 << 20  # smaller files are hashed each time (faster than a receipt's lookup, and no clutter)


def _key(stat: os.stat_result) -> str:
    return f"{stat.st_dev:x}-{stat.st_ino:x}"


def _record_of(stat: os.stat_result, sha256: str) -> str:
    return f"{stat.st_size} {stat.st_mtime_ns} {stat.st_ctime_ns} {sha256}\n"


def _unchanged(before: os.stat_result, after: os.stat_result) -> bool:
    return _record_of(before, "") == _record_of(after, "") and _key(before) == _key(after)


@record(frozen=False)
class Receipts:
    """The receipts in `directory` (None: none are kept, every file is hashed), reached from `root` (trusted as
    given; default: the directory above) without following a link. `clock` gives the wall-clock time in ns, the
    clock file systems stamp files with."""

    directory: Path | None
    clock: Callable[[], int] = field(default=time.time_ns)
    root: Path | None = None
    # Files this process wrote and hashed on the way in (a download), by identity and times: the loader's check
    # of the same file, moments later, need not read it again (a cold load hashed a library twice). Never on disk.
    written: dict[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def of_user(cls, environ: Mapping[str, str] = os.environ) -> Receipts:
        files = PrivateFiles.of_user("receipts", environ)
        return cls(files.directory, root=files.root)

    @property
    def _files(self) -> PrivateFiles:
        return PrivateFiles(self.directory, self.root)

    def vouches(self, stat: os.stat_result, sha256: str) -> bool:
        """Whether a receipt of this user says the file `stat` describes has `sha256`."""
        if stat.st_size < MIN_SIZE:
            return False
        return self._files.read(_key(stat), 256) == _record_of(stat, sha256).encode()

    def record(self, fd: int, before: os.stat_result, started_ns: int, sha256: str) -> None:
        """Keep a receipt for the open file `fd`, hashed to `sha256` from `started_ns` on, when it is one worth
        keeping: the file did not change while it was hashed (`before`, now) and its times had settled. Its bytes
        are put on disk (fsync) first: downloads are not synced, and after a crash a file whose bytes never
        reached the disk can keep its size and times, so only a receipt could vouch for it. Best effort: a
        receipt that cannot be written costs a hash next time, nothing else."""
        settled = max(before.st_mtime_ns, before.st_ctime_ns) < started_ns - SETTLE_NS
        if before.st_size < MIN_SIZE or not settled or not _unchanged(before, os.fstat(fd)):
            return
        try:
            os.fsync(fd)
        except OSError:  # a disk that cannot promise the bytes gets no receipt
            return
        self._files.write(_key(before), _record_of(before, sha256).encode())

    def wrote(self, written: os.stat_result, now: os.stat_result, sha256: str) -> None:
        """This process wrote a file and hashed its bytes on the way in to `sha256`: `written` its stat when the
        last byte was in, `now` after it was moved into place; kept only when nothing changed it in between."""
        same = (written.st_size, written.st_mtime_ns) == (now.st_size, now.st_mtime_ns)
        if same and _key(written) == _key(now):  # not its ctime: the move into place sets it
            self.written[_key(now)] = _record_of(now, sha256)

    def verify_file(self, path: Path, size: int, sha256: str, what: str) -> None:
        """integrity.verify_file, without reading the bytes of a file this user's receipt vouches for, or one
        this process wrote and hashed (`wrote`) that has not changed since (same inode, size and times)."""
        with open(path, "rb") as stream:
            before = os.fstat(stream.fileno())
            check_size(before.st_size, size, what)
            if self.written.get(_key(before)) == _record_of(before, sha256) or self.vouches(before, sha256):
                return
            started = self.clock()
            check_digest(sha256_stream(stream), sha256, what)
            self.record(stream.fileno(), before, started, sha256)
