"""The three names conda-sigstore's verification library imports from conda itself, for running that library here.

conda-sigstore 0.1.5 is a conda plugin: its modules import `conda.exceptions.CondaError` (the base of its own
errors), `conda.common.url.split_anaconda_token` (to refuse a channel URL carrying an anaconda.org token) and
`conda.gateways.disk.read.compute_sum` (to hash a package file). conda itself is not installable from PyPI (its last
upload there, 4.3.16 from 2017, does not import on Python 3.11), so `install()` registers these three, written as
conda 25/26 has them, when no real conda is importable. Everything that decides whether a package verifies
(statement parsing and binding, sidecar transport, the Sigstore calls) stays conda-sigstore's own code; its CLI,
audit and install hooks need much more of conda and are not used.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
import types
from pathlib import Path


class CondaError(Exception):
    """conda.exceptions.CondaError: an error with a message and keyword details."""

    def __init__(self, message: str, caused_by: BaseException | None = None, **kwargs: object) -> None:
        self.message = message
        self._kwargs = kwargs
        self._caused_by = caused_by
        super().__init__(message)


def split_anaconda_token(url: str) -> tuple[str, str | None]:
    """conda.common.url.split_anaconda_token: the URL without its `/t/<token>` part, and the token."""
    match = re.search(r"/t/([a-zA-Z0-9-]*)", url)
    token = match.groups()[0] if match else None
    cleaned = url.replace("/t/" + token, "", 1) if token is not None else url
    return cleaned.rstrip("/"), token


def compute_sum(path: str | Path, algo: str) -> str:
    """conda.gateways.disk.read.compute_sum: the md5 or sha256 hex digest of a file, read in blocks."""
    if algo not in ("md5", "sha256"):
        raise ValueError(f"unsupported hash algorithm {algo!r}")
    hasher = hashlib.new(algo)
    with Path(path).open("rb") as stream:
        for block in iter(lambda: stream.read(256 * 1024), b""):
            hasher.update(block)
    return hasher.hexdigest()


def install() -> None:
    """Register the three names under their conda module paths unless a real conda is importable (then it is used)."""
    if "conda" in sys.modules or importlib.util.find_spec("conda") is not None:
        return
    names = (
        "conda",
        "conda.exceptions",
        "conda.common",
        "conda.common.url",
        "conda.gateways",
        "conda.gateways.disk",
        "conda.gateways.disk.read",
    )
    modules = {name: types.ModuleType(name) for name in names}
    modules["conda.exceptions"].CondaError = CondaError  # type: ignore[attr-defined]
    modules["conda.common.url"].split_anaconda_token = split_anaconda_token  # type: ignore[attr-defined]
    modules["conda.gateways.disk.read"].compute_sum = compute_sum  # type: ignore[attr-defined]
    for name, module in modules.items():
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(modules[parent], child, module)
        sys.modules[name] = module
