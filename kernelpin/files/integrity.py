"""Hashes and untrusted repository paths: the checks every byte goes through."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from kernelpin.errors import IntegrityError, KernelpinError

_CHUNK = 1 << 20
GIT_OBJECT_ID_RE = re.compile(r"^[0-9a-f]{40}$")  # a commit or blob id (SHA-1), as the Hub and locks write it
SHA256_HEX_RE = re.compile(r"^[0-9a-f]{64}$")
MAX_FILE_SIZE = 1 << 40  # 1 TiB: larger sizes are typos or attacks, not kernels


def other_owner(path: Path) -> int | None:
    """The owner of `path` when it is neither this user nor root; None for those (and where there are no uids).
    What kernelpin finds by searching parent directories counts only when this is None (as git's
    safe.directory check): in a shared parent (/tmp, a group directory) anyone can plant a file."""
    if not hasattr(os, "geteuid"):
        return None
    owner = path.stat().st_uid
    return None if owner in (os.geteuid(), 0) else owner


def find_owned_upward(start: Path, name: str, fix: str) -> tuple[Path | None, Path | None]:
    """Search `start` (a directory) and its parents for `name`, trusting only what this user or root owns:
    (the file found, None) or (None, the directory owned by another user where the search stopped) or
    (None, None). A `name` another user owns is refused with an error that ends with `fix`."""
    for directory in (start, *start.parents):
        if other_owner(directory) is not None:
            return None, directory
        candidate = directory / name
        if candidate.is_file():
            owner = other_owner(candidate)
            if owner is not None:
                raise KernelpinError(
                    f"{candidate} belongs to another user (uid {owner}), so it is not used: whoever can write "
                    f"{directory} could have put it there. {fix}"
                )
            return candidate, None
    return None, None


def sha256_stream(stream: BinaryIO) -> str:
    """The hex sha256 of everything `stream` has left to read."""
    digest = hashlib.sha256()
    while chunk := stream.read(_CHUNK):
        digest.update(chunk)
    return digest.hexdigest()


def sha256_file(path: Path) -> str:
    with open(path, "rb") as stream:
        return sha256_stream(stream)


def git_blob_sha1(content: bytes) -> str:
    """The git object id of a blob, as the Hub reports it in `blob_id`."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


MAX_NAME_BYTES = 255  # one path component (NAME_MAX of Linux and macOS file systems)
MAX_PATH_BYTES = 512  # a whole repository path: with the cache's own prefix it stays within PATH_MAX
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # C0, DEL, C1: would move a terminal's cursor when printed


def _path_problem(path: str) -> str | None:
    if not path:
        return "is empty"
    if "\\" in path or "\0" in path:
        return "contains a backslash or NUL"
    if _CONTROL_RE.search(path):
        return "contains a control character"
    if PurePosixPath(path).is_absolute() or (len(path) > 1 and path[1] == ":"):
        return "is absolute"
    if any(part in ("..", ".", "") for part in path.split("/")):
        return "contains '..', '.' or an empty component"
    if len(path.encode()) > MAX_PATH_BYTES:
        return f"is {len(path.encode())} bytes long, more than the {MAX_PATH_BYTES} a path may have"
    longest = max(len(part.encode()) for part in path.split("/"))
    if longest > MAX_NAME_BYTES:
        return f"has a {longest}-byte name, more than the {MAX_NAME_BYTES} a file system stores"
    return None


def check_repo_path(path: str, where: str) -> str:
    """Refuse a path from a repository (or a lock) that could escape the directory it is written into, that a
    file system cannot store there, or that would act on a terminal when printed."""
    problem = _path_problem(path)
    if problem is not None:
        shown = repr(path[:100]) + (f"... ({len(path)} characters)" if len(path) > 100 else "")
        raise KernelpinError(
            f"{where}: refusing unsafe path {shown} (it {problem}); "
            "the repository is malformed or hostile: do not use this revision"
        )
    return path


def check_size(actual: int, size: int, what: str) -> None:
    if actual != size:
        raise IntegrityError(f"{what}: size {actual} != {size} pinned in the lock")


def check_digest(actual: str, sha256: str, what: str) -> None:
    if actual != sha256:
        raise IntegrityError(f"{what}: sha256 {actual} != {sha256} pinned in the lock")


def verify_file(path: Path, size: int, sha256: str, what: str) -> None:
    """Raise IntegrityError unless the file has exactly the pinned size and sha256 (size and bytes read
    through one open file)."""
    with open(path, "rb") as stream:
        check_size(os.fstat(stream.fileno()).st_size, size, what)
        check_digest(sha256_stream(stream), sha256, what)
