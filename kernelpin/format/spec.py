"""The `[tool.kernels.dependencies]` table of pyproject.toml, parsed into typed requirements."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import field
from typing import Any, TypeGuard

from kernelpin.errors import KernelpinError
from kernelpin.format.ranges import Range, RangeError
from kernelpin.records import record

__untrusted_input__ = (
    "check_repo_id",
    "parse_requirement",
    "parse_dependencies",
)  # parsers of input kernelpin does not control (kernelpin.errors)

# The Hub's rules: org and name of [A-Za-z0-9._-], neither starting nor ending with '.' or '-', no '--' or '..',
# the name at most 96 characters (huggingface_hub.utils.validate_repo_id).
_REPO_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
REPO_ID_RE = re.compile(rf"^{_REPO_PART}/{_REPO_PART}\Z")
REPO_TYPES = ("kernel", "model")
RequirementValue = str | int | dict[str, str | int]  # as written in pyproject.toml, as plain data
DEPENDENCIES_TABLE = "[tool.kernels.dependencies]"
_TABLE_KEYS = {"version", "revision", "repo-type"}
_EXAMPLE = (
    '  "acme/img2gray" = "^0.1"\n'
    '  "acme/other" = { version = ">=1.2, <2" }\n'
    '  "acme/pinned" = { revision = "v0.3.0" }\n'
    '  "acme/line" = 1   # the branch v1, as `kernels lock` reads it'
)


@record
class Requirement:
    """One kernel the project needs: a `range` (against version tags), a `revision`, or a `major`: the
    integer form (`= 1`, what `kernels lock` reads) is the Hub branch `v1`, exactly as `kernels` reads it
    (kernel-builder moves that branch on every upload, tagged or not)."""

    repo_id: str
    value: RequirementValue  # the requirement as written in pyproject.toml, kept in the lock as data
    range: Range | None = None
    revision: str | None = None
    major: int | None = None
    repo_type: str | None = None  # None: detect (kernel first, then model)
    # Where it was written, for messages that say where to fix it: pyproject's table, a get_kernel call, ...
    declared: str = field(default=DEPENDENCIES_TABLE, compare=False)

    @property
    def text(self) -> str:
        """The requirement for messages: `^0.1`, `1`, `{ version = "^2", repo-type = "model" }`."""
        return describe_value(self.value)

    @property
    def branch(self) -> str | None:
        """The Hub major-version branch an integer requirement names."""
        return None if self.major is None else f"v{self.major}"


def line_major(range_: Range) -> int | None:
    """N when `range_` is exactly the major line N (`^1`, `1`, `1.x`, `~1`, `>=1, <2`: >=1.0.0 <2.0.0-0),
    the range `kernels` can say as the integer N; None for any other range (`^1.2`, `>=1 <3`, ...)."""
    first = range_.alternatives[0][0] if len(range_.alternatives) == 1 and range_.alternatives[0] else None
    if first is None:
        return None
    major = first.version.major
    return major if str(range_) == f">={major}.0.0 <{major + 1}.0.0-0" else None


def describe_value(value: RequirementValue) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{key} = {_toml_scalar(item)}" for key, item in value.items()) + " }"
    return str(value)


def _toml_scalar(value: object) -> str:
    return json.dumps(value) if isinstance(value, str) else str(value)


def toml_text(value: object) -> str:
    """A value as TOML spells it (`true`, `[1, 2]`, `"^1"`), cut short, for messages: never Python's `True` nor
    a tomlkit type's name. tomlkit is imported only here, on the way to an error."""
    import tomlkit

    try:
        text = tomlkit.item(value).as_string().strip()
    except (TypeError, ValueError):  # not a TOML value at all
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def toml_kind(value: object) -> str:
    """The TOML type of a parsed value, as a person reads it (`an array`, `a boolean`), not a Python class name."""
    kinds = (
        (bool, "a boolean"),
        (int, "an integer"),
        (float, "a float"),
        (str, "a string"),
        (Mapping, "a table"),
        (list, "an array"),
    )
    return next((name for kind, name in kinds if isinstance(value, kind)), "a date or time")


def is_repo_id(repo_id: object) -> TypeGuard[str]:
    return isinstance(repo_id, str) and bool(REPO_ID_RE.match(repo_id)) and ".." not in repo_id and "--" not in repo_id


def check_repo_id(repo_id: object) -> str:
    if not is_repo_id(repo_id):
        shown = repo_id[:200] if isinstance(repo_id, str) else repo_id
        raise KernelpinError(
            f"{shown!r} is not a Hub repository id; write it as 'org/name' (letters, digits, '.', '_', '-'; "
            "no leading or trailing '.' or '-', no '..' or '--'), e.g. \"acme/img2gray\""
        )
    return repo_id


def parse_requirement(
    repo_id: str, value: Any, where: str | None = None, declared: str = DEPENDENCIES_TABLE
) -> Requirement:
    """One entry of the dependencies table (or a lock's copy of it, `where` says); kept in the lock as data.
    `declared` is where the user writes it, for the messages that say what to change."""
    check_repo_id(repo_id)
    where = where or f"{DEPENDENCIES_TABLE} {repo_id!r}"
    if isinstance(value, bool):
        raise KernelpinError(f"{where}: {toml_text(value)} (a boolean) is not a requirement; use e.g.\n{_EXAMPLE}")
    if isinstance(value, int):
        return Requirement(repo_id, value, major=_major(where, value), declared=declared)
    if isinstance(value, str):
        return Requirement(repo_id, value, range=_parse_range(where, value), declared=declared)
    if isinstance(value, Mapping):
        unknown = set(value) - _TABLE_KEYS
        if unknown:
            raise KernelpinError(
                f"{where}: unknown key(s) {', '.join(repr(key)[1:-1] for key in sorted(unknown))}; allowed: {', '.join(sorted(_TABLE_KEYS))}"
            )
        repo_type = value.get("repo-type")
        if repo_type is not None and repo_type not in REPO_TYPES:
            raise KernelpinError(f"{where}: repo-type must be one of {', '.join(REPO_TYPES)}, not {repo_type!r}")
        if ("version" in value) == ("revision" in value):
            raise KernelpinError(
                f"{where}: give exactly one of 'version' (a range) or 'revision' (tag, branch, commit)"
            )
        if "version" in value:
            version = value["version"]
            plain = dict(value)
            if isinstance(version, int) and not isinstance(version, bool):
                return Requirement(repo_id, plain, major=_major(where, version), repo_type=repo_type, declared=declared)
            if not isinstance(version, str):
                raise KernelpinError(
                    f"{where}: 'version' must be a major version (1) or a range string such as \"^1.2\""
                )
            return Requirement(
                repo_id, plain, range=_parse_range(where, version), repo_type=repo_type, declared=declared
            )
        revision = value["revision"]
        if not isinstance(revision, str) or not revision.strip():
            raise KernelpinError(f"{where}: 'revision' must be a tag, branch or commit sha (a string)")
        return Requirement(repo_id, dict(value), revision=revision.strip(), repo_type=repo_type, declared=declared)
    raise KernelpinError(f"{where}: {toml_text(value)} ({toml_kind(value)}) is not a requirement; use e.g.\n{_EXAMPLE}")


def _major(where: str, value: int) -> int:
    # Major versions (and their Hub branches v0, v1, ...): a negative or absurdly long number names none.
    if not 0 <= value < 10**6:
        raise KernelpinError(f"{where}: a major version is a number from 0 to 999999, not {str(value)[:20]}")
    return value


def _parse_range(where: str, text: str) -> Range:
    try:
        return Range.parse(text)
    except RangeError as error:
        raise KernelpinError(f"{where}: {error}") from None


def parse_dependencies(table: Mapping[str, Any]) -> list[Requirement]:
    """All requirements of a dependencies table, sorted by repository id."""
    return [parse_requirement(repo_id, table[repo_id]) for repo_id in sorted(table)]


def requirement_from_arguments(repo_id: str, version: int | str | None, revision: str | None) -> Requirement:
    """The requirement `kernels.get_kernel`'s arguments mean: exactly one of `version` (a major N, the branch vN,
    or, kernelpin only, a range string) and `revision` (tag, branch or commit), as kernels demands."""
    if (version is None) == (revision is None):
        raise KernelpinError(
            f"{repo_id}: give exactly one of version= (a major version such as 1, the branch v1, or a range such "
            'as "^1.2") and revision= (a tag, branch or commit), as kernels.get_kernel requires'
        )
    value: RequirementValue = {"revision": revision} if revision is not None else version  # type: ignore[assignment]
    where = f"get_kernel({repo_id!r}, {f'revision={revision!r}' if revision is not None else f'version={version!r}'})"
    return parse_requirement(repo_id, value, where=where, declared=where)
