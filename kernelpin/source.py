"""The Hub edge: refs, trees and downloads through huggingface_hub, with errors translated for people.

Settings are read from the environment when a command runs (not when huggingface_hub is imported), so
HF_ENDPOINT, HF_HUB_CACHE/HF_HOME and HF_HUB_OFFLINE can change between calls in one process.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kernelpin.errors import KernelpinError
from kernelpin.integrity import GIT_OBJECT_ID_RE, MAX_FILE_SIZE, SHA256_HEX_RE
from kernelpin.spec import REPO_TYPES

if TYPE_CHECKING:
    from huggingface_hub import HfApi

_DEFAULT_ENDPOINT = "https://huggingface.co"
_TRUE = {"1", "on", "yes", "true"}
OFFLINE = "offline mode is on (--offline or HF_HUB_OFFLINE=1)"
DEFAULT_HTTP_TIMEOUT = 30.0  # seconds without progress before a request fails (KERNELPIN_HTTP_TIMEOUT)


def _timeout(text: str | None) -> float:
    if not text:
        return DEFAULT_HTTP_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= 3600:
        raise KernelpinError(f"KERNELPIN_HTTP_TIMEOUT={text[:20]!r} is not a number of seconds in (0, 3600]")
    return seconds


@dataclass(frozen=True)
class HubSettings:
    endpoint: str
    cache_dir: Path
    offline: bool
    http_timeout: float = DEFAULT_HTTP_TIMEOUT

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> HubSettings:
        home = environ.get("HF_HOME") or os.path.join(
            environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface"
        )
        cache = environ.get("HF_HUB_CACHE") or os.path.join(home, "hub")
        return cls(
            endpoint=(environ.get("HF_ENDPOINT") or _DEFAULT_ENDPOINT).rstrip("/"),
            cache_dir=Path(cache).expanduser(),
            offline=environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE,
            http_timeout=_timeout(environ.get("KERNELPIN_HTTP_TIMEOUT")),
        )


@dataclass(frozen=True)
class RemoteFile:
    path: str
    size: int
    blob_id: str | None  # git SHA-1 of the blob (of the LFS pointer for LFS files)
    lfs_sha256: str | None


def remote_file(path: str, size: object, blob_id: object, lfs_sha256: object, where: str) -> RemoteFile:
    """A file of a repository listing, its fields checked: they end up in the lock, which refuses bad ones."""
    problem = None
    if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_FILE_SIZE:
        problem = f"size {str(size)[:20]} is not between 0 and {MAX_FILE_SIZE}"
    elif blob_id is not None and not (isinstance(blob_id, str) and GIT_OBJECT_ID_RE.match(blob_id)):
        problem = f"git blob id {str(blob_id)[:50]!r} is not 40 lowercase hex digits"
    elif lfs_sha256 is not None and not (isinstance(lfs_sha256, str) and SHA256_HEX_RE.match(lfs_sha256)):
        problem = f"LFS sha256 {str(lfs_sha256)[:70]!r} is not 64 lowercase hex digits"
    if problem:
        raise KernelpinError(
            f"{where}: the repository listing gives {str(path)[:200]!r} a {problem}; "
            "the server is broken or hostile: do not use this revision"
        )
    return RemoteFile(path, size, blob_id, lfs_sha256)


@dataclass(frozen=True)
class Refs:
    repo_type: str
    tags: dict[str, str]  # name -> commit
    branches: dict[str, str]


class HubSource:
    """One Hub (or mirror) as kernelpin uses it. Thread-safe: resolution runs one kernel per thread."""

    def __init__(self, settings: HubSettings) -> None:
        self.settings = settings
        self._api: HfApi | None = None

    @property
    def api(self) -> HfApi:
        self._require_online("this command")  # every API call (refs, trees, publishing) comes through here
        self._use_timeout()
        if self._api is None:
            from huggingface_hub import HfApi

            self._api = HfApi(endpoint=self.settings.endpoint)
        return self._api

    def _use_timeout(self) -> None:
        from kernelpin.hubclient import use_timeout

        use_timeout(self.settings.http_timeout)

    def _require_online(self, what: str) -> None:
        if self.settings.offline:
            raise KernelpinError(
                f"{what} needs the Hub, but {OFFLINE}: go online, "
                "or work from an up-to-date kernelpin.lock and the cache with `kernelpin sync --frozen`"
            )

    def refs(self, repo_id: str, repo_type: str | None) -> Refs:
        """Tags and branches of a repository; with repo_type None, try a kernel repo, then a model repo."""
        self._require_online(f"resolving {repo_id}")
        with translate_errors(f"listing tags of {repo_id}", self.settings.endpoint):
            found = repository_refs(self.api, repo_id, repo_type)
        if found is None:
            kinds = repo_type or " or ".join(REPO_TYPES)
            raise KernelpinError(
                f"{repo_id}: no {kinds} repository of that name at {self.settings.endpoint}; "
                "check the name in [tool.kernels.dependencies] (and HF_ENDPOINT / HF_TOKEN for private repos)"
            )
        return found

    def tree(self, repo_id: str, repo_type: str, commit: str) -> list[RemoteFile]:
        self._require_online(f"listing files of {repo_id}")
        from huggingface_hub.hf_api import RepoFile

        with translate_errors(f"listing files of {repo_id} at {commit[:12]}", self.settings.endpoint, repo_id):
            entries = list(self.api.list_repo_tree(repo_id, recursive=True, revision=commit, repo_type=repo_type))
        where = f"{repo_id} at {commit[:12]}"
        return [
            remote_file(entry.path, entry.size, entry.blob_id, entry.lfs.sha256 if entry.lfs else None, where)
            for entry in entries
            if isinstance(entry, RepoFile)
        ]

    def repo_folder(self, repo_id: str, repo_type: str) -> Path:
        """A repository's folder in the Hub cache: <cache>/<type>s--<org>--<name>/{blobs,snapshots/...}."""
        return self.settings.cache_dir / f"{repo_type}s--{repo_id.replace('/', '--')}"

    def blobs_dir(self, repo_id: str, repo_type: str) -> Path:
        return self.repo_folder(repo_id, repo_type) / "blobs"

    def cached(self, repo_id: str, repo_type: str, commit: str, path: str) -> Path | None:
        """The file in the Hub cache at exactly this commit, without touching the network."""
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(
            repo_id, path, cache_dir=self.settings.cache_dir, revision=commit, repo_type=repo_type
        )
        return Path(found) if isinstance(found, str) else None

    def read(self, repo_id: str, repo_type: str, commit: str, path: str, limit: int) -> bytes:
        """One file at a commit, in memory, with a single GET (hf_hub_download sends a HEAD first and
        writes blobs, links and lock files into the cache). At most `limit` + 1 bytes are read: the caller
        knows the size from the tree listing and checks the content against it."""
        self._require_online(f"downloading {path} of {repo_id}")
        from huggingface_hub import hf_hub_url
        from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

        self._use_timeout()
        url = hf_hub_url(repo_id, path, repo_type=repo_type, revision=commit, endpoint=self.settings.endpoint)
        with translate_errors(f"downloading {path} of {repo_id} at {commit[:12]}", self.settings.endpoint, repo_id):
            with get_session().stream("GET", url, headers=build_hf_headers()) as response:
                hf_raise_for_status(response)
                content = bytearray()
                for chunk in response.iter_bytes():
                    content += chunk
                    if len(content) > limit:
                        break
                return bytes(content)

    def download(
        self, repo_id: str, repo_type: str, commit: str, path: str, local_dir: Path | None = None,
        tqdm_class: type | None = None,
    ) -> Path:
        """Fetch one file at a commit into the Hub cache (or `local_dir`)."""
        if self.settings.offline:
            raise KernelpinError(
                f"{repo_id}: {path} at {commit[:12]} is not in the cache ({self.settings.cache_dir}) and "
                f"{OFFLINE}, so it cannot be downloaded: run `kernelpin sync` with network access first, "
                "or vendor the kernels with `kernelpin sync --target DIR`"
            )
        from huggingface_hub import hf_hub_download

        self._use_timeout()
        what = f"downloading {path} of {repo_id} at {commit[:12]}"
        with translate_errors(what, self.settings.endpoint, repo_id):
            return Path(
                hf_hub_download(
                    repo_id, path, revision=commit, repo_type=repo_type, endpoint=self.settings.endpoint,
                    cache_dir=self.settings.cache_dir, local_dir=local_dir, tqdm_class=tqdm_class,
                    etag_timeout=self.settings.http_timeout,
                )
            )


def http_status(error: BaseException | None) -> int | None:
    """The HTTP status code of a huggingface_hub/httpx error, or None when it carries no response."""
    response = getattr(error, "response", None)
    return getattr(response, "status_code", None)


def repository_refs(api: HfApi, repo_id: str, repo_type: str | None) -> Refs | None:
    """The one probe over repository types: tags and branches of `repo_id` as `repo_type`, or (None) of the
    first of kernel, model that exists; None when there is no such repository.

    "Does not exist" is the Hub's 401/404 RepositoryNotFoundError (it answers 401 to an anonymous client for a
    missing or private repository) or a mirror's plain 404; any other error is raised.
    """
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

    for candidate in (repo_type,) if repo_type else REPO_TYPES:
        try:
            refs = api.list_repo_refs(repo_id, repo_type=candidate)
        except HfHubHTTPError as error:
            if isinstance(error, RepositoryNotFoundError) or http_status(error) == 404:
                continue
            raise
        return Refs(
            repo_type=candidate,
            tags={ref.name: ref.target_commit for ref in refs.tags},
            branches={ref.name: ref.target_commit for ref in refs.branches},
        )
    return None


def _underlying(error: BaseException) -> BaseException:
    """What really happened: huggingface_hub wraps an HTTP error or timeout in LocalEntryNotFoundError
    ("cannot find the requested files in the local cache") when it has no cached copy to fall back to."""
    from huggingface_hub.errors import HfHubHTTPError

    from kernelpin.hubclient import HubTimeout

    seen = error
    for _ in range(8):
        seen = seen.__cause__ or seen.__context__
        if seen is None:
            return error
        if isinstance(seen, (HfHubHTTPError, HubTimeout)):
            return seen
    return error


def _http_problem(error: Exception, what: str, endpoint: str, repo_id: str | None) -> KernelpinError:
    from huggingface_hub.errors import RevisionNotFoundError

    status = http_status(error)
    first_line = str(error).splitlines()[0]
    if status in (401, 403):
        hint = "set HF_TOKEN to a token with read access"
    elif isinstance(error, RevisionNotFoundError):
        hint = (f"that revision does not exist on the server (rewritten history or a deleted branch): "
                f"run `kernelpin lock --upgrade-package {repo_id or 'REPO'}` to lock one that does")
    elif status == 404:
        hint = ("the repository, revision or file does not exist on this server: check the name, and if a "
                f"locked commit is gone, run `kernelpin lock --upgrade-package {repo_id or 'REPO'}`")
    elif status is not None and status >= 500:
        hint = "the server failed; retry later (if it persists, tell the server's operators)"
    else:
        hint = "retry later"
    return KernelpinError(f"{what} failed at {endpoint}: HTTP {status} ({first_line}); {hint}")


@contextlib.contextmanager
def translate_errors(what: str, endpoint: str, repo_id: str | None = None) -> Iterator[None]:
    """Turn huggingface_hub and network exceptions into KernelpinError that says what happened and what to do."""
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled

    from kernelpin.hubclient import HubTimeout

    try:
        yield
    except OfflineModeIsEnabled as error:
        raise KernelpinError(f"{what}: {OFFLINE}; go online to use the Hub") from error
    except HubTimeout as error:
        raise KernelpinError(f"{what} failed: {error}") from error
    except HfHubHTTPError as error:
        raise _http_problem(error, what, endpoint, repo_id) from error
    except (LocalEntryNotFoundError, OSError, ConnectionError) as error:
        cause = _underlying(error)
        if isinstance(cause, HubTimeout):
            raise KernelpinError(f"{what} failed: {cause}") from error
        if isinstance(cause, HfHubHTTPError):
            raise _http_problem(cause, what, endpoint, repo_id) from error
        raise KernelpinError(
            f"{what} failed: cannot reach {endpoint} ({type(error).__name__}); check the network and "
            "HF_ENDPOINT, then re-run: completed files are kept, partial ones are resumed or discarded"
        ) from error
    except Exception as error:
        import httpx2

        if isinstance(error, httpx2.HTTPError):
            raise KernelpinError(
                f"{what} failed: cannot reach {endpoint} ({error}); check the network and HF_ENDPOINT, then re-run"
            ) from error
        raise
