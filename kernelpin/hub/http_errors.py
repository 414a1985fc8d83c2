"""A Hub's error answer (4xx, 5xx) to one of kernelpin's own requests (kernelpin.hub.wire): HubHTTPError, read and
worded as huggingface_hub's hf_raise_for_status reads and words it (which error it is: a missing repository,
revision or file, a gated or disabled repository ...; its first line, the server's own message, the request id),
so that kernelpin's messages (kernelpin.hub.source) say what they said when these requests went through
huggingface_hub's client. Pure: imports no HTTP library.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from kernelpin.errors import KernelpinError
from kernelpin.format.nesting import within_nesting

if TYPE_CHECKING:
    from email.message import Message

# huggingface_hub's REPO_API_REGEX: where a 401 means "no such repository (or not yours)".
_REPO_API = r"^https://[^/]+(/api/(models|datasets|spaces)/(.+)|/(.+)/resolve/(.+))"  # compiled when first used
_BY_CODE = {"RevisionNotFound": "revision", "EntryNotFound": "entry", "GatedRepo": "gated"}
_DISABLED = "Access to this resource is disabled."
_REQUEST_IDS = (("x-request-id", "Request ID"), ("X-Amzn-Trace-Id", "Amzn Trace ID"), ("x-amz-cf-id", "Amz CF ID"))
_STATUS_CLASSES = {1: "Informational response", 3: "Redirect response", 4: "Client error", 5: "Server error"}


class HubHTTPError(KernelpinError):
    """An error answer: its `status`, and `kind`, what huggingface_hub makes of it ("repository", "gated",
    "revision", "entry", "disabled"; None for any other)."""

    def __init__(self, message: str, status: int, kind: str | None) -> None:
        super().__init__(message)
        self.status, self.kind = status, kind

    @property
    def repository_missing(self) -> bool:
        """huggingface_hub's RepositoryNotFoundError (a gated repository is one too): no such repository, or
        one this client may not see."""
        return self.kind in ("repository", "gated")

    @property
    def revision_missing(self) -> bool:
        """huggingface_hub's RevisionNotFoundError: the repository exists, the revision does not."""
        return self.kind == "revision"


def refusal(status: int, reason: str, url: str, headers: Message, body: bytes) -> HubHTTPError:
    """The error for an answer `status` (the server's `reason` phrase) to a GET of `url`, with its `headers` (an
    http.client message: looked up without regard to case) and `body`."""
    code, message = headers.get("X-Error-Code"), headers.get("X-Error-Message")
    kind = _BY_CODE.get(code or "")
    if kind is None and message == _DISABLED:
        kind = "disabled"
    if kind is None and (
        code == "RepoNotFound"
        or (status == 401 and message != "Invalid credentials in Authorization header" and re.search(_REPO_API, url))
    ):
        kind = "repository"
    if kind is not None:
        custom = f"{status} Client Error.\n\n{_KIND_WORDS[kind]} for url: {url}."
    elif status == 400:
        custom = "\n\nBad request:"
    elif status == 403:
        custom = (
            f"\n\n403 Forbidden: {message}.\nCannot access content at: {url}.\n"
            "Make sure your token has the correct permissions."
        )
    elif status == 429:
        custom = f"\n\n429 Too Many Requests for url: {url}."
    else:
        custom = (
            f"{_STATUS_CLASSES.get(status // 100, 'Invalid status code')} '{status} {reason}' for url '{url}'\n"
            f"For more information check: https://developer.mozilla.org/en-US/docs/Web/HTTP/Status/{status}"
        )
    return HubHTTPError(_with_server_words(custom, headers, body), status, kind)


_KIND_WORDS = {
    "repository": "Repository Not Found",
    "gated": "Cannot access gated repo",
    "revision": "Revision Not Found",
    "entry": "Entry Not Found",
    "disabled": "Cannot access repository",
}


def _with_server_words(custom: str, headers: Message, body: bytes) -> str:
    """`custom` with the server's own messages (X-Error-Message, the body's "error"/"errors") and the request id
    added where huggingface_hub adds them."""
    said = [headers.get("X-Error-Message") or "", *_body_errors(headers, body)]
    server = "\n".join(dict.fromkeys(line.strip() for line in said if line.strip()))
    final = custom
    if server and server.lower() not in custom.lower():
        final += ("\n" if "\n\n" in custom else "\n\n") + server
    for header, label in _REQUEST_IDS:
        if value := headers.get(header):
            if value.lower() not in final.lower():
                at = final.find("\n")
                final = f"{final} ({label}: {value})" if at < 0 else f"{final[:at]} ({label}: {value}){final[at:]}"
            break
    return final.strip()


def _body_errors(headers: Message, body: bytes) -> list[str]:
    text = body.decode("utf-8", "replace")
    try:
        data = within_nesting(json.loads(text))
    except (ValueError, RecursionError):
        return [text] if text and "html" not in (headers.get("Content-Type") or "").lower() else []
    if not isinstance(data, dict):
        return []
    found: list[str] = []
    error, description = data.get("error"), data.get("error_description")
    if isinstance(error, list):
        found += [str(line) for line in error]
    elif error is not None:
        found.append(f"{error}: {description}" if description is not None else str(error))
    elif description is not None:
        found.append(str(description))
    if isinstance(data.get("errors"), list):
        found += [str(entry["message"]) for entry in data["errors"] if isinstance(entry, dict) and "message" in entry]
    return found
