"""The application's pyproject.toml: finding it, reading its kernels, editing it without losing comments."""

from __future__ import annotations

import contextlib
import errno
import re
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from kernelpin.errors import KernelpinError
from kernelpin.files.integrity import find_owned_upward
from kernelpin.format.layout import LOCKFILE, PROJECT_STATE_DIR
from kernelpin.format.nesting import within_nesting
from kernelpin.format.ranges import Range, RangeError, Version
from kernelpin.format.spec import (
    Requirement,
    RequirementValue,
    check_repo_id,
    line_major,
    parse_dependencies,
    toml_kind,
    toml_text,
)
from kernelpin.records import record
from kernelpin.trust.policy import Policy, parse_policy

__untrusted_input__ = (
    "read_document",
    "read_policy",
    "read_requirements",
)  # parsers of input kernelpin does not control (kernelpin.errors)

if TYPE_CHECKING:
    import tomlkit
    from tomlkit.container import OutOfOrderTableProxy
    from tomlkit.items import AbstractTable

    # A table of a tomlkit document: [x] or x = {...} (AbstractTable), or one split around others (the proxy).
    _Table = AbstractTable | OutOfOrderTableProxy

PYPROJECT = "pyproject.toml"


@record
class Project:
    root: Path

    @property
    def pyproject(self) -> Path:
        return self.root / PYPROJECT

    @property
    def lockfile(self) -> Path:
        return self.root / LOCKFILE

    def edit_lock(self) -> contextlib.AbstractContextManager[object]:
        """A lock held while pyproject.toml and kernelpin.lock are read, changed and written, so that concurrent
        `add`/`remove`/`lock` runs apply one after another, whatever Hub cache each uses: it lives in the project,
        in .kernelpin/ (which ignores itself in git, as .pytest_cache does). A project directory nobody may
        write needs none: no edit can be written there either (files are replaced by renames in it)."""
        from filelock import FileLock

        from kernelpin.files.atomic import write_atomic  # edits only: reading a project writes nothing

        state = self.root / PROJECT_STATE_DIR
        try:
            state.mkdir(exist_ok=True)
            ignore = state / ".gitignore"
            if not ignore.exists():
                write_atomic(
                    ignore, "# Created by kernelpin: its own files (a lock of concurrent edits), never committed.\n*\n"
                )
        except OSError as error:
            if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                return contextlib.nullcontext()
            raise
        return FileLock(str(state / "edit.lock"))


def find_project(start: Path) -> Project:
    """The nearest directory at or above `start` holding a pyproject.toml, trusting only what this user or root
    owns, as load()'s lock search does: a project another user planted in a shared parent is never used."""
    start = start.resolve()
    found, stopped = find_owned_upward(
        start, PYPROJECT, "Run kernelpin inside your project, or name it with --project DIR"
    )
    if found is not None:
        return Project(found.parent)
    if stopped is not None:
        raise KernelpinError(
            f"no {PYPROJECT} found in {start} or its parents (the search stops at a directory owned by another "
            f"user, {stopped}, as git's does); run kernelpin inside your project, or name it with --project DIR"
        )
    raise KernelpinError(f"no {PYPROJECT} found in {start} or its parents; run kernelpin inside your project")


_BOM = "\ufeff"  # some Windows editors start UTF-8 files with it; TOML parsers take it for a key


def _text(project: Project) -> str:
    try:
        return project.pyproject.read_text(encoding="utf-8").removeprefix(_BOM)
    except UnicodeDecodeError as error:
        raise KernelpinError(
            f"{project.pyproject}: not UTF-8 ({error.reason} at byte {error.start}); "
            "TOML files are UTF-8: save it as UTF-8 and retry"
        ) from None


def _invalid(project: Project, error: Exception) -> KernelpinError:
    return KernelpinError(f"{project.pyproject}: not valid TOML: {error}; fix the file and retry")


def read_document(project: Project) -> tomlkit.TOMLDocument:
    """pyproject.toml, parsed with its formatting; a leading UTF-8 byte-order mark is accepted (and kept by
    `write_document`)."""
    import tomlkit  # only where the file is edited or its formatting matters: read-only paths need none
    from tomlkit.exceptions import TOMLKitError

    text = _text(project)
    try:
        return within_nesting(tomlkit.parse(text))
    except (TOMLKitError, RecursionError) as error:
        raise _invalid(project, error) from None


def _data(project: Project) -> dict[str, Any]:
    """pyproject.toml as plain data (tomllib: a fraction of tomlkit's import and parse, which get_kernel pays
    on every call); the same file read_document accepts."""
    text = _text(project)
    try:
        return within_nesting(tomllib.loads(text))
    except (tomllib.TOMLDecodeError, RecursionError) as error:
        raise _invalid(project, error) from None


def write_document(project: Project, document: tomlkit.TOMLDocument) -> None:
    """Write pyproject.toml back with its byte-order mark if it had one and its line endings (CRLF stays
    CRLF, the lines kernelpin adds too): its editor and git's autocrlf may rely on them."""
    with open(project.pyproject, encoding="utf-8", newline="") as stream:
        original = stream.read()
    import tomlkit

    from kernelpin.files.atomic import write_atomic

    text = tomlkit.dumps(document)  # LF only: read_document read the file with universal newlines
    if "\r\n" in original:
        text = text.replace("\n", "\r\n")
    write_atomic(project.pyproject, (_BOM if original.startswith(_BOM) else "") + text)


@overload
def _dependencies(document: tomlkit.TOMLDocument, create: Literal[True]) -> _Table: ...


@overload
def _dependencies(document: tomlkit.TOMLDocument, create: bool) -> _Table | None: ...


def _dependencies(document: tomlkit.TOMLDocument, create: bool) -> _Table | None:
    """[tool.kernels.dependencies], created on demand; any level that is not a table is an error."""
    import tomlkit
    from tomlkit.container import OutOfOrderTableProxy
    from tomlkit.items import AbstractTable

    table: _Table | None = None
    parent: tomlkit.TOMLDocument | _Table = document
    for depth, key in enumerate(("tool", "kernels", "dependencies")):
        child = parent.get(key)
        if child is None:
            if not create:
                return None
            child = parent.setdefault(key, tomlkit.table(is_super_table=depth < 2))
        if not isinstance(child, (AbstractTable, OutOfOrderTableProxy)):
            name = ".".join(("tool", "kernels", "dependencies")[: depth + 1])
            raise KernelpinError(
                f"[{name}] in {PYPROJECT} must be a table, not {toml_kind(child)} "
                f'({toml_text(child)}); write e.g.\n[tool.kernels.dependencies]\n"acme/img2gray" = "^0.1"'
            )
        table = parent = child
    return table


def read_policy(project: Project) -> Policy:
    """The publisher policy of pyproject.toml ([tool.kernelpin.trust]; kernelpin.trust.policy's defaults without it)."""
    return parse_policy(_data(project))


def read_requirements(project: Project) -> list[Requirement]:
    document = read_document(project)
    table = _dependencies(document, create=False)
    if table is None:
        return []
    return parse_dependencies(table.unwrap())


@record
class NewEntry:
    """What `kernelpin add` writes for a repository, and whether `kernels lock` can read it."""

    value: str | int  # an integer major (the branch v<N>) or a range string
    kernels_reads: bool
    note: str


def entry_to_add(repo_id: str, range_text: str | None, versions: list[Version], branches: set[str]) -> NewEntry:
    """The requirement to write: the integer major `kernels lock` reads (`= N`, the branch vN) whenever the
    request is a whole major line whose branch exists (no range: the newest release's line; `1`, `^1`, `1.x`,
    `>=1, <2`); otherwise the range as asked, with a note that `kernels lock` will not read that entry."""
    majors = {int(name[1:]) for name in branches if re.fullmatch(r"v[0-9]+", name)}
    if range_text is None:
        releases = [v for v in versions if not v.is_prerelease] or versions
        if releases:
            newest = max(releases)
            if newest.major in majors:
                return NewEntry(newest.major, True, f"the branch v{newest.major} (newest release {newest})")
            range_text = f"^{newest}"
        elif majors:
            return NewEntry(max(majors), True, f"the branch v{max(majors)} (no version tags; its newest branch)")
        else:
            raise KernelpinError(
                f"{repo_id} has neither version tags (v1.2.3) nor major-version branches (v1); add it as "
                f'{repo_id}@RANGE after tagging, or pin a revision in pyproject.toml: {{ revision = "..." }}'
            )
    try:
        major = line_major(Range.parse(range_text))
    except RangeError as error:
        raise KernelpinError(f"{repo_id}: {error}") from None
    if major is not None and major in majors:
        return NewEntry(major, True, f"the branch v{major}: {range_text!r} written as `kernels lock` reads it")
    why = (
        "it takes only an integer major, the branch v<N>"
        if major is None
        else f"the repository has no branch v{major}, which `= {major}` would name"
    )
    return NewEntry(
        range_text,
        False,
        f"`kernels lock` will not read this entry ({why}); kernelpin resolves it against version tags",
    )


def set_requirement(project: Project, repo_id: str, value: RequirementValue) -> None:
    """Add or replace `repo_id = value`, keeping every comment and the rest of the formatting."""
    check_repo_id(repo_id)
    document = read_document(project)
    table = _dependencies(document, create=True)
    table[repo_id] = value
    write_document(project, document)


def remove_requirement(project: Project, repo_id: str) -> None:
    document = read_document(project)
    table = _dependencies(document, create=False)
    if table is None or repo_id not in table:
        present = ", ".join(sorted(table)) if table else "none"
        raise KernelpinError(f"{repo_id} is not in [tool.kernels.dependencies] (present: {present})")
    del table[repo_id]
    write_document(project, document)
