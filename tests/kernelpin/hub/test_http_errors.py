"""kernelpin.hub.http_errors: an error answer read and worded as huggingface_hub's hf_raise_for_status reads and
words it, checked against that function itself on the same answers (status, headers, body, URL): the first line
kernelpin's messages quote, and what the error is (a missing repository or revision)."""

from __future__ import annotations

import http.client

import httpx2
import pytest
from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError
from huggingface_hub.utils import hf_raise_for_status

from kernelpin.hub.http_errors import refusal

API = "https://huggingface.co/api/models/acme/x/refs"
KERNEL_API = "http://127.0.0.1:8080/api/kernels/acme/x/refs"
FILE = "https://huggingface.co/kernels/acme/x/resolve/0123/build/a.so"
ANSWERS = [
    (404, {"X-Error-Code": "RepoNotFound"}, b'{"error": "Repository not found"}', API),
    (401, {}, b'{"error": "Invalid username or password."}', API),  # the Hub's anonymous "missing or private"
    (401, {"X-Error-Message": "Invalid credentials in Authorization header"}, b"", API),
    (401, {}, b"", KERNEL_API),
    (404, {"X-Error-Code": "RevisionNotFound"}, b'{"error": "Invalid rev id: v9"}', API),
    (404, {"X-Error-Code": "EntryNotFound"}, b"", FILE),
    (403, {"X-Error-Code": "GatedRepo", "X-Error-Message": "Access restricted"}, b"", FILE),
    (403, {"X-Error-Message": "Access to this resource is disabled."}, b"", FILE),
    (403, {"X-Error-Message": "no"}, b'{"error": "forbidden"}', FILE),
    (400, {}, b'{"error": "bad"}', API),
    (400, {"X-Request-Id": "r-1"}, b'{"error": "bad"}', API),
    (429, {"Retry-After": "3"}, b"slow down", API),
    (404, {}, b"Not Found", KERNEL_API),
    (404, {"X-Request-Id": "r-2"}, b"<html>gone</html>", FILE),
    (500, {"Content-Type": "text/html"}, b"<html>oops</html>", FILE),
    (503, {"X-Amzn-Trace-Id": "t-3"}, b'{"errors": [{"message": "down"}]}', KERNEL_API),
    (502, {}, b"[1, 2]", KERNEL_API),
]


def _theirs(status: int, headers: dict[str, str], body: bytes, url: str) -> Exception | None:
    """huggingface_hub's error for the answer; None where it fails on it (a JSON body that is no object)."""
    response = httpx2.Response(status, headers=headers, content=body, request=httpx2.Request("GET", url))
    with pytest.raises(Exception) as raised:
        hf_raise_for_status(response)
    return None if isinstance(raised.value, AttributeError) else raised.value


def _message(headers: dict[str, str]) -> http.client.HTTPMessage:
    """Headers as http.client gives them (looked up without regard to case)."""
    message = http.client.HTTPMessage()
    for name, value in headers.items():
        message[name] = value
    return message


@pytest.mark.parametrize(("status", "headers", "body", "url"), ANSWERS)
def test_an_error_answer_is_what_huggingface_hub_makes_of_it(status, headers, body, url):
    theirs = _theirs(status, headers, body, url)
    ours = refusal(status, httpx2.codes.get_reason_phrase(status), url, _message(headers), body)
    assert ours.status == status
    if theirs is None:  # kernelpin words it all the same
        assert body.startswith(b"[") and str(ours).startswith("Server error '502 Bad Gateway'")
    else:
        assert str(ours).splitlines()[0] == str(theirs).splitlines()[0]
        assert ours.repository_missing == isinstance(theirs, RepositoryNotFoundError)
        assert ours.revision_missing == isinstance(theirs, RevisionNotFoundError)
        assert (ours.kind == "gated") == isinstance(theirs, GatedRepoError)
