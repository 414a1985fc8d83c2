"""The Hub's answers, parsed into checked values: the one place server data is read.

A refs listing becomes `Refs` (every commit id 40 lowercase hex digits, names git ref names), a file listing
becomes `RemoteFile`s (paths safe to join below a directory, sizes in range, blob ids and LFS digests in
their formats, no path twice), each listing bounded in entries. Anything else (a number where a path
belongs, an object where a list belongs, a missing field) is a KernelpinError naming the server, never a
traceback, and nothing downstream of this module sees the raw answer. Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any

from kernelpin.errors import KernelpinError
from kernelpin.files.integrity import GIT_OBJECT_ID_RE, MAX_FILE_SIZE, SHA256_HEX_RE, check_repo_path
from kernelpin.hub.limits import MAX_LISTING, LimitExceeded
from kernelpin.records import record

__untrusted_input__ = (
    "check_commit",
    "check_ref_name",
    "parse_refs",
    "remote_file",
    "parse_tree_page",
    "next_page",
)  # parsers of input kernelpin does not control (kernelpin.errors)

# A tag or branch name as kernelpin.lock stores it after refs/tags/ or refs/heads/ (git's ref-name rules,
# minus what needs no check here); a name the lock reader would refuse must not reach a lock. Compiled when first
# used (re caches it): a load from a lock reads no refs.
_REF_NAME = r"^(?!.*\.\.)(?!.*//)(?!/)[^\x00-\x20\x7f~^:?*\[\\]{1,255}(?<!/)\Z"


class MalformedAnswer(KernelpinError):
    """A server's answer that is not what the Hub API answers."""


@record
class RemoteFile:
    path: str
    size: int
    blob_id: str | None  # git SHA-1 of the blob (of the LFS pointer for LFS files)
    lfs_sha256: str | None


@record
class Refs:
    repo_type: str
    tags: dict[str, str]  # name -> commit
    branches: dict[str, str]


def _short(value: object, length: int = 80) -> str:
    return repr(value)[:length]


def malformed(where: str, problem: str) -> MalformedAnswer:
    return MalformedAnswer(f"{where}: {problem}; the server is broken or hostile: do not use it for this repository")


def check_commit(value: object, where: str) -> str:
    """A commit id from a server: 40 lowercase hex digits, or MalformedAnswer."""
    if not (isinstance(value, str) and GIT_OBJECT_ID_RE.match(value)):
        raise malformed(where, f"commit {_short(value)} is not 40 lowercase hex digits")
    return value


def check_ref_name(value: object, where: str) -> str:
    """A tag or branch name: git's ref-name rules (no '..', no control characters, spaces, '~^:?*[\\')."""
    if not (isinstance(value, str) and re.match(_REF_NAME, value)):
        raise malformed(where, f"{_short(value)} is not a git tag or branch name")
    return value


def check_count(count: int, limit: int, where: str) -> None:
    if count > limit:
        raise LimitExceeded(
            f"{where}: more than {limit} entries ({MAX_LISTING}); the repository is not a kernel or the server "
            f"is hostile. If it is genuine, set {MAX_LISTING}=N to allow more"
        )


def parse_refs(data: Any, repo_type: str, where: str, limit: int) -> Refs:
    """A refs answer ({"tags": [...], "branches": [...], ...}) as Refs."""
    if not isinstance(data, dict):
        raise malformed(where, f"the refs listing is {type(data).__name__}, not an object")
    found: dict[str, dict[str, str]] = {}
    count = 0
    for kind, one in (("tags", "tag"), ("branches", "branch")):
        entries = data.get(kind, [])
        if not isinstance(entries, list):
            raise malformed(where, f"'{kind}' is {type(entries).__name__}, not a list")
        count += len(entries)
        check_count(count, limit, where)
        named = found[kind] = {}
        for entry in entries:
            if not isinstance(entry, dict):
                raise malformed(
                    where, f"an entry of '{kind}' is {type(entry).__name__} {_short(entry, 40)}, not an object"
                )
            name = check_ref_name(entry.get("name"), where)
            if name in named:
                raise malformed(where, f"{one} {name!r} is listed twice")
            named[name] = check_commit(entry.get("targetCommit"), f"{where}: {one} {name!r}")
    return Refs(repo_type=repo_type, tags=found["tags"], branches=found["branches"])


def remote_file(path: str, size: object, blob_id: object, lfs_sha256: object, where: str) -> RemoteFile:
    """A file of a repository listing, its fields checked: they end up in the lock, which refuses bad ones."""

    def refused(problem: str) -> KernelpinError:
        return KernelpinError(
            f"{where}: the repository listing gives {str(path)[:200]!r} a {problem}; "
            "the server is broken or hostile: do not use this revision"
        )

    if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_FILE_SIZE:
        raise refused(f"size {str(size)[:20]} is not between 0 and {MAX_FILE_SIZE}")
    if blob_id is not None and not (isinstance(blob_id, str) and GIT_OBJECT_ID_RE.match(blob_id)):
        raise refused(f"git blob id {str(blob_id)[:50]!r} is not 40 lowercase hex digits")
    if lfs_sha256 is not None and not (isinstance(lfs_sha256, str) and SHA256_HEX_RE.match(lfs_sha256)):
        raise refused(f"LFS sha256 {str(lfs_sha256)[:70]!r} is not 64 lowercase hex digits")
    return RemoteFile(path, size, blob_id, lfs_sha256)


def parse_tree_page(data: Any, where: str) -> list[RemoteFile | str]:
    """One page of a recursive tree listing: its files as RemoteFile, its directories as their paths."""
    if not isinstance(data, list):
        raise malformed(where, f"the file listing is {type(data).__name__}, not a list")
    entries: list[RemoteFile | str] = []
    for entry in data:
        if not isinstance(entry, dict):
            raise malformed(where, f"a listing entry is {type(entry).__name__} {_short(entry, 40)}, not an object")
        path = entry.get("path")
        if not isinstance(path, str):
            raise malformed(where, f"a listing entry's path is {_short(path, 40)}, not a string")
        check_repo_path(path, where)
        kind = entry.get("type")
        if kind == "directory":
            entries.append(path)
        elif kind == "file":
            lfs = entry.get("lfs")
            if lfs is not None and not isinstance(lfs, dict):
                raise malformed(where, f"{path!r}: 'lfs' is {type(lfs).__name__}, not an object")
            lfs_sha256 = lfs.get("oid") if lfs else None
            entries.append(remote_file(path, entry.get("size"), entry.get("oid"), lfs_sha256, where))
        else:
            raise malformed(where, f"{path!r}: type {_short(kind, 40)} is neither 'file' nor 'directory'")
    return entries


def files_of(entries: list[RemoteFile | str], where: str) -> list[RemoteFile]:
    """The files of a whole listing; a path listed twice, or a file that other files are listed below
    (no directory can hold both), is refused."""
    seen: set[str] = set()
    for entry in entries:
        path = entry if isinstance(entry, str) else entry.path
        if path in seen:
            raise malformed(where, f"{path!r} is listed twice")
        seen.add(path)
    files = [entry for entry in entries if isinstance(entry, RemoteFile)]
    folders = {path.rsplit("/", 1)[0] for path in seen if "/" in path}
    below = next((file.path for file in files if file.path in folders), None)
    if below is not None:
        raise malformed(where, f"{below!r} is listed as a file and as a directory")
    return files


def next_page(link: str | None) -> str | None:
    """The URL of a listing's next page from its Link header (`<URL>; rel="next"`, as the Hub paginates), read as
    huggingface_hub's client (httpx) reads it; None where there is none."""
    strip = " '\""
    for value in re.split(", *<", (link or "").strip(strip)):
        url, _, params = value.partition(";")
        for param in params.split(";"):
            key, equals, name = param.partition("=")
            if not equals or "=" in name:
                break
            if key.strip(strip) == "rel" and name.strip(strip) == "next":
                return url.strip("<> '\"") or None
    return None
