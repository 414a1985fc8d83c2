"""Conda packages of kernels, pure: where a package puts its Hub variant, and what an environment's
`conda-meta/<name>-<version>-<build>.json` says was installed.

A kernel's conda package (recipe/ of img2gray, or any built the same way) installs the Hub variant directory as
`site-packages/<package>/` (noarch: python, as the archive holds it) or `lib/pythonX.Y/site-packages/<package>/`
(as a prefix holds it), metadata.json included; that metadata's `variant` is the Hub variant it is a build of.
`tools/release/stage.py` (conda package -> release) and `kernelpin verify-conda` (installed package -> release)
both find it with `variant_directory`.

conda-meta records are read strictly: they are files in someone's environment, so a record that is not what conda
or rattler writes (wrong types, absolute or `..` paths, oversized) is refused with one line, never followed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, NoReturn

from kernelpin.errors import KernelpinError
from kernelpin.files.integrity import SHA256_HEX_RE, check_repo_path
from kernelpin.format.conda_attestation import package_filename
from kernelpin.format.layout import METADATA
from kernelpin.format.nesting import within_nesting
from kernelpin.records import record

__untrusted_input__ = ("parse_prefix_record",)  # parsers of input kernelpin does not control (kernelpin.errors)

MAX_RECORD_BYTES = 8 * 1024 * 1024  # a kernel package's record lists a few files; pytorch's is about 2 MiB
MAX_RECORD_FILES = 100_000
_VARIANT_METADATA = re.compile(r"(?:lib/python[0-9.]+t?/)?site-packages/([A-Za-z0-9_.-]+)/" + re.escape(METADATA))
_NAME = re.compile(r"[a-z0-9_][a-z0-9_.-]{0,127}")


class CondaRecordError(KernelpinError):
    """A conda-meta record, or a package's file list, that is not what conda writes."""


def variant_directory(paths: Iterable[str], where: str) -> str:
    """The one directory among a package's file paths (POSIX, relative) that holds a kernel variant:
    `[lib/pythonX.Y/]site-packages/<package>/metadata.json`'s directory. Refused when there is none or several."""
    found = sorted(
        {match.group(0)[: -len(METADATA) - 1] for path in paths if (match := _VARIANT_METADATA.fullmatch(path))}
    )
    if len(found) != 1:
        listed = ", ".join(found) or "none"
        raise CondaRecordError(
            f"{where}: expected one kernel variant (site-packages/<package>/{METADATA}), found {listed}; "
            "is this a package built from a kernel's recipe?"
        )
    return found[0]


@record
class InstalledPackage:
    """One conda-meta record: the package file installed, its sha256, where it came from and what it installed."""

    name: str
    version: str
    build: str
    filename: str  # the package file, e.g. img2gray-0.1.0-cpu_stableabi211_h0123abc_100.conda
    sha256: str  # of that file, as the installer downloaded it
    url: str | None  # where it was downloaded from (<channel>/<subdir>/<filename>)
    channel: str | None
    subdir: str | None
    files: tuple[str, ...]  # relative to the prefix


def _refuse(where: str, problem: str) -> NoReturn:
    raise CondaRecordError(
        f"{where}: {problem}; this is not a conda-meta record as conda or pixi writes it: reinstall the package "
        "(pixi install / conda install --force-reinstall)"
    )


def _optional(record: dict[str, Any], key: str, where: str) -> str | None:
    value = record.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > 4096 or "\0" in value:
        _refuse(where, f"{key!r} is not a short string")
    return value


def _required(record: dict[str, Any], key: str, where: str) -> str:
    value = _optional(record, key, where)
    if value is None:
        _refuse(where, f"{key!r} is missing")
    return value


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for key, value in pairs:
        if key in table:
            raise ValueError(f"the key {key!r} appears twice")
        table[key] = value
    return table


def parse_prefix_record(content: bytes, where: str) -> InstalledPackage:
    """A conda-meta record, strictly: name, version, build, fn, sha256 and the installed `files`, each a relative
    POSIX path without `..` (kernelpin.files.integrity.check_repo_path's rules)."""
    if len(content) > MAX_RECORD_BYTES:
        _refuse(where, f"{len(content)} bytes, over the {MAX_RECORD_BYTES} a record may be")
    try:
        record = within_nesting(json.loads(content.decode("utf-8"), object_pairs_hook=_unique))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        _refuse(where, f"not JSON ({' '.join(str(error).split())[:120]})")
    if not isinstance(record, dict):
        _refuse(where, "not a JSON object")
    name = _required(record, "name", where)
    if not _NAME.fullmatch(name):
        _refuse(where, f"package name {name[:80]!r} is not a conda package name")
    filename = _required(record, "fn", where)
    try:
        package_filename(filename)
    except KernelpinError as error:
        _refuse(where, str(error).split(";")[0])
    sha256 = _required(record, "sha256", where)
    if not SHA256_HEX_RE.fullmatch(sha256):
        _refuse(where, "'sha256' is not 64 lowercase hexadecimal digits")
    files = record.get("files")
    if not isinstance(files, list) or len(files) > MAX_RECORD_FILES or not all(isinstance(f, str) for f in files):
        _refuse(where, f"'files' is not a list of at most {MAX_RECORD_FILES} paths")
    try:
        checked = tuple(check_repo_path(path, where) for path in files)
    except KernelpinError as error:
        _refuse(where, f"an installed path is unsafe ({' '.join(str(error).split())[:160]})")
    return InstalledPackage(
        name,
        _required(record, "version", where),
        _required(record, "build", where),
        filename,
        sha256,
        _optional(record, "url", where),
        _optional(record, "channel", where),
        _optional(record, "subdir", where),
        checked,
    )


def package_channel(package: InstalledPackage) -> tuple[str, str] | None:
    """(channel URL, subdir) the package was installed from, None where the record does not say. From the package
    URL (`<channel>/<subdir>/<file>`, which rattler and conda both record) where there is one, else from `channel`
    (rattler writes the channel's URL, conda the subdir's: a trailing `/<subdir>` is dropped)."""
    subdir = package.subdir or "noarch"
    if package.url is not None and package.url.endswith(f"/{subdir}/{package.filename}"):
        return package.url[: -len(f"/{subdir}/{package.filename}")], subdir
    if package.channel is None or "://" not in package.channel:  # a name such as "conda-forge": no URL to fetch
        return None
    channel = package.channel.rstrip("/")
    return channel.removesuffix(f"/{subdir}"), subdir
