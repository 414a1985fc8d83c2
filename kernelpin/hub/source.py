"""The Hub edge: refs, trees and file bodies over kernelpin's own HTTP client (kernelpin.hub.wire: the standard
library's http.client, held to the command's limits), with errors translated for people; huggingface_hub's client
(HfApi) serves publishing only. Answers are parsed by kernelpin.hub.listing; nothing here builds a path from a server's data.

Settings are read from the environment when a command runs (not when huggingface_hub is imported), so
HF_ENDPOINT, HF_HUB_CACHE/HF_HOME and HF_HUB_OFFLINE can change between calls in one process.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from kernelpin.errors import IntegrityError, KernelpinError
from kernelpin.files.integrity import check_repo_path
from kernelpin.format.nesting import within_nesting
from kernelpin.format.spec import DEPENDENCIES_TABLE, REPO_TYPES, Requirement
from kernelpin.hub.limits import Budget, Limits, running
from kernelpin.hub.limits import current as current_budget
from kernelpin.hub.listing import (
    Refs,
    RemoteFile,
    check_commit,
    check_count,
    files_of,
    malformed,
    next_page,
    parse_refs,
    parse_tree_page,
)
from kernelpin.records import record

__untrusted_input__ = ("HubSettings.from_env",)  # parsers of input kernelpin does not control (kernelpin.errors)

if TYPE_CHECKING:
    from concurrent.futures import Future

    from huggingface_hub import HfApi

    from kernelpin.hub.wire import Wire

_Answer = TypeVar("_Answer")
_DEFAULT_ENDPOINT = "https://huggingface.co"
_TRUE = {"1", "on", "yes", "true"}
OFFLINE = "offline mode is on (--offline or HF_HUB_OFFLINE=1)"
DEFAULT_HTTP_TIMEOUT = Limits.http_timeout  # seconds without progress before a request fails (KERNELPIN_HTTP_TIMEOUT)


@record
class HubSettings:
    endpoint: str
    cache_dir: Path
    offline: bool
    limits: Limits = field(default_factory=Limits)
    # HF_HUB_DISABLE_SYMLINKS=1, huggingface_hub's switch: snapshots hold the files themselves, not links to blobs.
    symlinks: bool = True

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> HubSettings:
        home = environ.get("HF_HOME") or os.path.join(
            environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface"
        )
        cache = environ.get("HF_HUB_CACHE") or os.path.join(home, "hub")
        for name, path in (("HF_HOME", home), ("HF_HUB_CACHE", cache)):
            # Else reading the token or the cache fails as NotADirectoryError, which looks like a network error.
            if os.path.exists(path) and not os.path.isdir(path):
                raise KernelpinError(
                    f"{name} is {path}, a file, not a directory: huggingface_hub keeps the token and the Hub cache "
                    f"there. Point {name} at a directory (or move the file away)"
                )
        return cls(
            endpoint=(environ.get("HF_ENDPOINT") or _DEFAULT_ENDPOINT).rstrip("/"),
            cache_dir=Path(cache).expanduser(),
            offline=environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE,
            limits=Limits.from_env(environ),
            symlinks=environ.get("HF_HUB_DISABLE_SYMLINKS", "").strip().lower() not in _TRUE,
        )


class HubSource:
    """One Hub (or mirror) as kernelpin uses it: every answer goes through kernelpin.hub.listing's checks
    before anything else sees it, and every request is held to the command's limits (kernelpin.hub.limits).
    Thread-safe: resolution runs one kernel per thread."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ, refs_ahead: Requirement | None = None) -> HubSource:
        """The Hub the environment names (HF_ENDPOINT, HF_HUB_OFFLINE, HF_HUB_CACHE, KERNELPIN_* limits): what
        every command uses unless it is given one."""
        return cls(HubSettings.from_env(environ), refs_ahead)

    def __init__(self, settings: HubSettings, refs_ahead: Requirement | None = None) -> None:
        """`refs_ahead`: a requirement whose refs to ask for at once, online (the refs_ahead method)."""
        self.settings = settings
        self._api: HfApi | None = None
        self._wire: Wire | None = None  # this command's connections, made on its first request
        self._headers: dict[str, str] | None = None  # its requests' headers (the token read once), likewise
        self._wiring = threading.Lock()
        self._budget = Budget(settings.limits)  # the command's deadline runs from here
        self._publishers: dict[str, bool] = {}  # organization -> trusted kernel publisher, asked once per command
        self._asking = threading.Lock()
        self._transfers = threading.BoundedSemaphore(settings.limits.downloads)  # file bodies at once
        self._reads = threading.BoundedSemaphore(settings.limits.reads)  # small files into memory at once
        self._refs_on_their_way: dict[tuple[str, str | None, str], Future[Refs]] = {}  # refs_ahead's, not yet taken
        if refs_ahead is not None and not settings.offline:
            self.refs_ahead(refs_ahead.repo_id, refs_ahead.repo_type, refs_ahead.declared)

    @property
    def api(self) -> HfApi:
        """huggingface_hub's client, for publishing (callers run it inside `budget()`)."""
        self._require_online("this command")
        self._use_timeout()
        if self._api is None:
            from huggingface_hub import HfApi

            self._api = HfApi(endpoint=self.settings.endpoint)
        return self._api

    def stop_waiting(self) -> None:
        """For a command interrupted (Ctrl-C): every request of this source still waiting, in any thread, ends
        within a wait slice, raising Interrupted (Budget.interrupt): this source's budget, and the one running in
        the caller's thread where another runs there (its requests count against that one, kernelpin.hub.limits)."""
        self._budget.interrupt()
        running_here = current_budget()
        if running_here is not None:
            running_here.interrupt()

    def budget(self) -> contextlib.AbstractContextManager[Budget]:
        """Hold the requests made inside to this command's limits (its deadline counts from the creation
        of this source, in every thread)."""
        return running(self._budget)

    def _connections(self) -> Wire:
        from kernelpin.hub.wire import Wire

        with self._wiring:
            if self._wire is None:
                self._wire = Wire(self.settings.limits.http_timeout)
            return self._wire

    def _request_headers(self) -> dict[str, str]:
        from kernelpin.hub.request_headers import request_headers

        with self._wiring:
            if self._headers is None:
                self._headers = request_headers()
            return self._headers

    def _use_timeout(self) -> None:
        from kernelpin.hub.client import use_timeout

        use_timeout(self.settings.limits.http_timeout)

    def _require_online(self, what: str) -> None:
        if self.settings.offline:
            raise KernelpinError(
                f"{what} needs the Hub, but {OFFLINE}: go online, "
                "or work from an up-to-date kernelpin.lock and the cache with `kernelpin sync --frozen`"
            )

    def _api_url(self, repo_id: str, repo_type: str, *parts: str) -> str:
        from urllib.parse import quote

        base = f"{self.settings.endpoint}/api/{repo_type}s/{repo_id}"
        return "/".join([base, *(quote(part, safe="") for part in parts)])

    def _file_url(self, repo_id: str, repo_type: str, revision: str, path: str) -> str:
        """A file's download URL, as huggingface_hub's hf_hub_url makes it; made here because that function's
        module (file_download) takes about 12 ms to import, a twentieth of a cold get_kernel, for one format."""
        from urllib.parse import quote

        from huggingface_hub.constants import REPO_TYPES_URL_PREFIXES

        prefix = REPO_TYPES_URL_PREFIXES.get(repo_type, "")
        return f"{self.settings.endpoint}/{prefix}{repo_id}/resolve/{quote(revision, safe='')}/{quote(path)}"

    def _get_json(self, url: str, params: dict[str, str] | None = None) -> tuple[object, str | None]:
        """One API answer, parsed as JSON (its size capped by KERNELPIN_MAX_RESPONSE_BYTES), and the URL of its
        next page, if any."""
        from urllib.parse import urlencode

        body = bytearray()
        with self.budget() as budget:
            answer = self._connections().get(
                f"{url}?{urlencode(params)}" if params else url, self._request_headers(), budget, body.extend
            )
        following = next_page(", ".join(answer.headers.get_all("Link") or ()))  # several headers read as one
        try:
            return within_nesting(json.loads(body)), following
        except (ValueError, RecursionError):
            raise malformed(url.split("?")[0], "the answer is not JSON") from None

    def _list_refs(self, repo_id: str, repo_type: str) -> Refs:
        data, _ = self._get_json(self._api_url(repo_id, repo_type, "refs"))
        return parse_refs(
            data, repo_type, f"the refs of {repo_id} at {self.settings.endpoint}", self.settings.limits.max_listing
        )

    def refs(self, repo_id: str, repo_type: str | None, named_in: str = DEPENDENCIES_TABLE) -> Refs:
        """Tags and branches of a repository; with repo_type None, try a kernel repo, then a model repo.
        `named_in` is where the user wrote the name, for the message when there is no such repository.
        Asked ahead with the same arguments (refs_ahead), the answer on its way, or its error."""
        with self._wiring:
            on_its_way = self._refs_on_their_way.pop((repo_id, repo_type, named_in), None)
        if on_its_way is not None:
            return on_its_way.result()
        return self._refs_now(repo_id, repo_type, named_in)

    def refs_ahead(self, repo_id: str, repo_type: str | None, named_in: str = DEPENDENCIES_TABLE) -> None:
        """Ask for `refs` now, in a thread, for the next `refs` call with the same arguments to take: a caller sure
        to ask for them imports and checks the rest of its way while the request is on the wire (a warm
        get_kernel's one request beside most of its imports). The thread runs what `refs` runs, so the answer, the
        error and the limits are refs' own. A daemon thread: an answer nobody takes never holds up the
        interpreter's exit."""
        # The connections and the headers (their modules, the token) made here: a thread gets the interpreter every
        # few milliseconds while this one runs Python, and made there they delayed the request by ~6 ms. Their
        # failures (the token's) are worded as the request's would be.
        with translate_errors(f"listing tags of {repo_id}", self.settings.endpoint):
            self._connections()
            self._request_headers()
        with self._wiring:
            self._refs_on_their_way[(repo_id, repo_type, named_in)] = in_a_thread(
                "kernelpin-refs-ahead", lambda: self._refs_now(repo_id, repo_type, named_in)
            )

    def _refs_now(self, repo_id: str, repo_type: str | None, named_in: str) -> Refs:
        self._require_online(f"resolving {repo_id}")
        with self.budget(), translate_errors(f"listing tags of {repo_id}", self.settings.endpoint):
            found = repository_refs(lambda kind: self._list_refs(repo_id, kind), repo_type)
        if found is None:
            kinds = repo_type or " or ".join(REPO_TYPES)
            raise KernelpinError(
                f"{repo_id}: no {kinds} repository of that name at {self.settings.endpoint}; "
                f"check the name in {named_in} (and HF_ENDPOINT / HF_TOKEN for private repos)"
            )
        return found

    def tree(self, repo_id: str, repo_type: str, commit: str) -> list[RemoteFile]:
        """Every file of a repository at a commit, page after page, bounded by KERNELPIN_MAX_LISTING."""
        self._require_online(f"listing files of {repo_id}")
        where = f"the file listing of {repo_id} at {commit[:12]} ({self.settings.endpoint})"
        limit = self.settings.limits.max_listing
        entries: list[RemoteFile | str] = []
        with (
            self.budget(),
            translate_errors(f"listing files of {repo_id} at {commit[:12]}", self.settings.endpoint, repo_id),
        ):
            url: str | None = self._api_url(repo_id, repo_type, "tree", check_commit(commit, where))
            params: dict[str, str] | None = {"recursive": "true", "expand": "false"}
            while url is not None:
                data, url = self._get_json(url, params)
                if url is not None and not same_origin(url, self.settings.endpoint):
                    # It would get this client's token (HF_TOKEN) with the request.
                    raise malformed(where, f"the next page is on another server ({url[:100]})")
                page = parse_tree_page(data, where)
                if url is not None and not page:
                    raise malformed(where, "a page without entries points to a next page")
                entries += page
                check_count(len(entries), limit, where)
                params = None  # the next page's URL carries them
        return files_of(entries, where)

    def trusted_publisher(self, org: str) -> bool:
        """Whether the Hub marks `org` a trusted kernel publisher (`trustedKernelPublisher` in its overview,
        what `kernels` checks); a namespace that is no organization (a user's: 404) is not one."""
        from urllib.parse import quote

        with self._asking:  # kernels resolve in parallel: one question per organization
            if org not in self._publishers:
                self._require_online(f"checking whether {org} is a trusted kernel publisher")
                url = f"{self.settings.endpoint}/api/organizations/{quote(org, safe='')}/overview"
                with (
                    self.budget(),
                    translate_errors(f"checking whether {org} is a trusted kernel publisher", self.settings.endpoint),
                ):
                    try:
                        data, _ = self._get_json(url)
                    except Exception as error:
                        if http_status(error) != 404:
                            raise
                        data = None
                self._publishers[org] = isinstance(data, dict) and data.get("trustedKernelPublisher") is True
            return self._publishers[org]

    def repo_folder(self, repo_id: str, repo_type: str) -> Path:
        """A repository's folder in the Hub cache: <cache>/<type>s--<org>--<name>/{blobs,snapshots/...}."""
        return self.settings.cache_dir / f"{repo_type}s--{repo_id.replace('/', '--')}"

    def stream(
        self,
        repo_id: str,
        repo_type: str,
        commit: str,
        path: str,
        size: int,
        sink: Callable[[bytes], None],
        *,
        small: bool = False,
    ) -> None:
        """One file at a commit, handed to `sink` chunk by chunk, with a single GET (no HEAD, no header of
        the answer is used). The body must be exactly `size` bytes (from the lock or the listing): a longer
        one is cut off at `size` by the transport, a shorter one is an error. The caller checks the content.
        `small`: one of the source's small reads (limits.reads at once), not of its downloads (limits.downloads)."""
        if self.settings.offline:
            raise KernelpinError(
                f"{repo_id}: {path} at {commit[:12]} is not in the cache ({self.settings.cache_dir}) and "
                f"{OFFLINE}, so it cannot be downloaded: run `kernelpin sync` with network access first, "
                "or vendor the kernels with `kernelpin sync --target DIR`"
            )
        what = _downloading(repo_id, commit, path)
        received = 0

        def counted(chunk: bytes) -> None:
            nonlocal received
            received += len(chunk)
            sink(chunk)

        self._get_file(
            repo_id,
            repo_type,
            commit,
            path,
            what,
            counted,
            size,
            self._reads if small else self._transfers,
        )
        if received != size:
            raise IntegrityError(
                f"{what}: the server sent {received} bytes, not the {size} the file has (as locked or listed); "
                "nothing of it is kept. Retry; if it persists, the server is broken or hostile"
            )

    def _get_file(
        self,
        repo_id: str,
        repo_type: str,
        commit: str,
        path: str,
        what: str,
        sink: Callable[[bytes], None],
        size: int | None,
        slots: threading.BoundedSemaphore,
    ) -> None:
        """The GET of one file at a commit, its body (`size` bytes at most, where known) handed to `sink`, in one
        of `slots` (the source's bound on downloads, or on small reads)."""
        url = self._file_url(repo_id, repo_type, check_commit(commit, repo_id), check_repo_path(path, repo_id))
        with self.budget() as budget, translate_errors(what, self.settings.endpoint, repo_id):
            if not slots.acquire(timeout=max(budget.remaining(), 0)):
                raise budget.exceeded(what)
            try:
                self._connections().get(url, self._request_headers(), budget, sink, size)
            finally:
                slots.release()

    def read(self, repo_id: str, repo_type: str, commit: str, path: str, size: int) -> bytes:
        """One small file (a metadata.json) in memory, exactly `size` bytes; the caller checks the content."""
        content = bytearray()
        self.stream(repo_id, repo_type, commit, path, size, content.extend, small=True)
        return bytes(content)

    def read_ahead(self, repo_id: str, repo_type: str, commit: str, path: str, at_most: int) -> bytes | None:
        """A small file read before the listing that gives its size has come (so the two requests share a round
        trip): at most `at_most` bytes; None where the server has no such file or sends more (the rest is not
        read), which the caller then reads as usual; any other failure raises as `read`'s does. The caller uses
        the content only where the listing names the file with this size and git blob id (or LFS sha256)."""
        content = bytearray()

        def bounded(chunk: bytes) -> None:
            content.extend(chunk)
            if len(content) > at_most:
                raise _TooLong

        try:
            self._get_file(
                repo_id, repo_type, commit, path, _downloading(repo_id, commit, path), bounded, None, self._reads
            )
        except _TooLong:
            return None
        except KernelpinError as error:
            if http_status(error.__cause__) == 404:
                return None
            raise
        return bytes(content)


def in_a_thread(name: str, ask: Callable[[], _Answer]) -> Future[_Answer]:
    """`ask()` run in a daemon thread of its own, its answer or its error in the future returned: for a request
    sent ahead of the moment its answer is needed. A daemon, unlike an executor's threads (joined at exit, up to
    a request's timeout): an answer nobody waits for never holds up the interpreter's exit."""
    from concurrent.futures import Future  # asking ahead only: a load from a lock asks nothing ahead

    answer: Future[_Answer] = Future()

    def run() -> None:
        try:
            answer.set_result(ask())
        except BaseException as error:  # noqa: BLE001  # handed to whoever waits for the answer
            answer.set_exception(error)

    threading.Thread(target=run, name=name, daemon=True).start()
    return answer


def _downloading(repo_id: str, commit: str, path: str) -> str:
    """What a file's download is called in its errors."""
    return f"downloading {path} of {repo_id} at {commit[:12]}"


class _TooLong(Exception):
    """A body read ahead is longer than it may be (HubSource.read_ahead stops reading it)."""


def same_origin(url: str, endpoint: str) -> bool:
    from urllib.parse import urlsplit

    one, other = urlsplit(url), urlsplit(endpoint)
    return (one.scheme, one.netloc) == (other.scheme, other.netloc)


def http_status(error: BaseException | None) -> int | None:
    """The HTTP status code of an error answer (kernelpin.hub.wire's, or huggingface_hub's/httpx's), or None when
    it carries no response."""
    from kernelpin.hub.http_errors import HubHTTPError

    if isinstance(error, HubHTTPError):
        return error.status
    response = getattr(error, "response", None)
    return getattr(response, "status_code", None)


def repository_refs(list_refs: Callable[[str], Refs], repo_type: str | None) -> Refs | None:
    """The one probe over repository types: `list_refs(type)` for `repo_type`, or (None) for the first of
    kernel, model that exists; None when there is no such repository.

    "Does not exist" is the Hub's 401/404 RepositoryNotFoundError (it answers 401 to an anonymous client for a
    missing or private repository) or a mirror's plain 404; any other error is raised.
    """
    for candidate in (repo_type,) if repo_type else REPO_TYPES:
        try:
            return list_refs(candidate)
        except Exception as error:
            if _repository_missing(error):
                continue
            raise
    return None


def _repository_missing(error: Exception) -> bool:
    """Whether `error` says "no such repository": kernelpin.hub.wire's answer, or huggingface_hub's (publishing
    asks through HfApi; its errors are looked at only where one came, so that the load paths never import it)."""
    from kernelpin.hub.http_errors import HubHTTPError

    if isinstance(error, HubHTTPError):
        return error.repository_missing or error.status == 404
    if isinstance(error, KernelpinError):
        return False
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

    return isinstance(error, RepositoryNotFoundError) or (
        isinstance(error, HfHubHTTPError) and http_status(error) == 404
    )


def _underlying(error: BaseException) -> BaseException:
    """What really happened: huggingface_hub wraps an HTTP error or timeout in LocalEntryNotFoundError
    ("cannot find the requested files in the local cache") when it has no cached copy to fall back to."""
    from huggingface_hub.errors import HfHubHTTPError

    from kernelpin.hub.wire import HubTimeout

    seen = error
    for _ in range(8):
        below = seen.__cause__ or seen.__context__
        if below is None:
            return error
        if isinstance(below, (HfHubHTTPError, HubTimeout)):
            return below
        seen = below
    return error


def _http_problem(error: Exception, what: str, endpoint: str, repo_id: str | None) -> KernelpinError:
    """The message for an error answer: kernelpin.hub.wire's HubHTTPError, or huggingface_hub's HfHubHTTPError."""
    from kernelpin.hub.http_errors import HubHTTPError

    if isinstance(error, HubHTTPError):
        revision_missing = error.revision_missing
    else:
        from huggingface_hub.errors import RevisionNotFoundError

        revision_missing = isinstance(error, RevisionNotFoundError)
    status = http_status(error)
    first_line = str(error).splitlines()[0]
    if status in (401, 403):
        hint = "set HF_TOKEN to a token with read access"
    elif revision_missing:
        hint = (
            f"that revision does not exist on the server (rewritten history or a deleted branch): "
            f"run `kernelpin lock --upgrade-package {repo_id or 'REPO'}` to lock one that does"
        )
    elif status == 404:
        hint = (
            "the repository, revision or file does not exist on this server: check the name, and if a "
            f"locked commit is gone, run `kernelpin lock --upgrade-package {repo_id or 'REPO'}`"
        )
    elif status == 429:
        hint = "the server is throttling requests (kernelpin waited as it asked, and gave up); retry later"
    elif status is not None and status >= 500:
        hint = "the server failed; retry later (if it persists, tell the server's operators)"
    else:
        hint = "retry later"
    return KernelpinError(f"{what} failed at {endpoint}: HTTP {status} ({first_line}); {hint}")


# A local file system that refuses a write: not the network's fault, and not fixed by retrying.
_DISK_ERRORS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EFBIG: "the file is larger than this process may write (its file size limit, `ulimit -f`)",
}


def local_write_problem(error: OSError, what: str, path: Path | str | None = None) -> KernelpinError | None:
    """A KernelpinError naming the path (the error's, else `path`), the cause and the fix when `error` is a
    disk or permission problem; None for other errors."""
    cause = _DISK_ERRORS.get(error.errno or 0)
    if cause is None:
        return None
    where = f" {error.filename or path}" if error.filename or path else ""
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        fix = "free space there, or point HF_HUB_CACHE (or `sync --target DIR`) at a file system with room"
    elif error.errno == errno.EFBIG:
        fix = "raise the limit, or run `kernelpin sync` where it allows the kernel's files"
    else:
        fix = (
            "run `kernelpin sync` as a user who can write there, or point HF_HUB_CACHE (or `sync --target DIR`) "
            "at a writable directory; loading needs write access only to download missing files"
        )
    return KernelpinError(f"{what}: cannot write{where}: {cause}; {fix}")


@contextlib.contextmanager
def translate_errors(what: str, endpoint: str, repo_id: str | None = None) -> Iterator[None]:
    """Turn kernelpin.hub.wire's, huggingface_hub's and network exceptions into KernelpinError that says what
    happened and what to do."""
    try:
        yield
    except KernelpinError as error:
        # The wire's errors are imported here, not on entry: a request that succeeds reads no error answer.
        from kernelpin.hub.http_errors import HubHTTPError
        from kernelpin.hub.wire import HubTimeout, HubUnreachable

        if isinstance(error, HubTimeout):
            raise KernelpinError(f"{what} failed: {error}") from error
        if isinstance(error, HubHTTPError):
            raise _http_problem(error, what, endpoint, repo_id) from error
        if isinstance(error, HubUnreachable):
            raise _unreachable(what, endpoint, error) from error
        raise
    except Exception as error:
        translated = _hub_client_problem(error, what, endpoint, repo_id)
        if translated is None:
            raise
        raise translated from error


def _unreachable(what: str, endpoint: str, error: Exception) -> KernelpinError:
    return KernelpinError(
        f"{what} failed: cannot reach {endpoint} ({error}); check the network and HF_ENDPOINT, then re-run"
    )


def _hub_client_problem(error: Exception, what: str, endpoint: str, repo_id: str | None) -> KernelpinError | None:
    """The KernelpinError for an exception of huggingface_hub's client (publishing goes through HfApi) or of the
    local disk; None where it is neither (then it is raised as it is). Imports huggingface_hub's errors only here,
    where one of its exceptions may have come."""
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled

    from kernelpin.hub.wire import HubTimeout

    if isinstance(error, OfflineModeIsEnabled):
        return KernelpinError(f"{what}: {OFFLINE}; go online to use the Hub")
    if isinstance(error, HfHubHTTPError):
        return _http_problem(error, what, endpoint, repo_id)
    if isinstance(error, (LocalEntryNotFoundError, OSError, ConnectionError)):
        if isinstance(error, OSError) and (local := local_write_problem(error, what)) is not None:
            return local
        cause = _underlying(error)
        if isinstance(cause, HubTimeout):
            return KernelpinError(f"{what} failed: {cause}")
        if isinstance(cause, HfHubHTTPError):
            return _http_problem(cause, what, endpoint, repo_id)
        return KernelpinError(
            f"{what} failed: cannot reach {endpoint} ({type(error).__name__}); check the network and "
            "HF_ENDPOINT, then re-run: completed files are kept, partial ones are discarded"
        )
    import httpx2

    if isinstance(error, httpx2.HTTPError):
        return _unreachable(what, endpoint, error)
    return None
