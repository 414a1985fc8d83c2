"""kernelpin.format.kernel_status.parse_status directly: each refusal's exact line, the size bound at its edge,
and what a redirect keeps (the mutation score of docs/verification.md rests on these and test_kernel_status.py)."""

from __future__ import annotations

import pytest

from kernelpin.errors import KernelpinError
from kernelpin.format.kernel_status import MAX_STATUS_SIZE, Redirect, parse_status

WHERE = "acme/old at 0123456789ab: kernel-status.toml"
VALID = b'kind = "redirect"\ndestination = "acme/new"\n'


def refusal(content: bytes) -> str:
    with pytest.raises(KernelpinError) as refused:
        parse_status(content, WHERE)
    message = str(refused.value)
    suffix = "; the repository's kernel-status.toml is broken: ask its publisher"
    assert message.startswith(f"{WHERE}: ") and message.endswith(suffix), message
    return message[len(WHERE) + 2 : -len(suffix)]


def test_a_redirect_keeps_its_destination_and_stripped_revision() -> None:
    assert parse_status(VALID, WHERE) == Redirect("acme/new", None)
    assert parse_status(VALID + b'revision = "  v2 "\n', WHERE) == Redirect("acme/new", "v2")
    padded = VALID + b"#" * (MAX_STATUS_SIZE - len(VALID))
    assert len(padded) == MAX_STATUS_SIZE and parse_status(padded, WHERE).destination == "acme/new"


def test_each_refusal_says_what_is_wrong() -> None:
    assert (
        refusal(VALID + b"#" * (MAX_STATUS_SIZE + 1 - len(VALID)))
        == f"{MAX_STATUS_SIZE + 1} bytes, over {MAX_STATUS_SIZE}"
    )
    assert refusal(b"\xff") == "not TOML (" + "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte)"
    assert refusal(b"kind = ").startswith("not TOML (Invalid value (at end of document)")
    assert refusal(b'destination = "acme/new"\n') == "kind must be \"redirect\", not 'None'"
    assert refusal(f'kind = "{"z" * 100}"\n'.encode()) == f'kind must be "redirect", not {"z" * 40!r}'
    assert refusal(b'kind = "redirect"\ndestination = ""\n') == "no destination"
    assert refusal(b'kind = "redirect"\ndestination = 3\n') == "no destination"
    assert refusal(b'kind = "redirect"\ndestination = "acme"\n').startswith(
        "destination: 'acme' is not a Hub repository id"
    )
    for revision in (b'""', b'"  "', b"3", b"[]"):
        assert (
            refusal(VALID + b"revision = " + revision + b"\n") == "revision must be a tag, branch or commit (a string)"
        )
    assert refusal(b"kind = " + b"[" * 500 + b"]" * 500) == "nested deeper than TOML is parsed"
