"""The application's pyproject.toml: finding it, reading its kernels, editing it without losing comments."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import Table

from kernelpin.errors import KernelpinError
from kernelpin.integrity import write_atomic
from kernelpin.layout import LOCKFILE
from kernelpin.spec import Requirement, check_repo_id, parse_dependencies

PYPROJECT = "pyproject.toml"


@dataclass(frozen=True)
class Project:
    root: Path

    @property
    def pyproject(self) -> Path:
        return self.root / PYPROJECT

    @property
    def lockfile(self) -> Path:
        return self.root / LOCKFILE


def find_project(start: Path) -> Project:
    """The nearest directory at or above `start` holding a pyproject.toml."""
    start = start.resolve()
    for directory in (start, *start.parents):
        if (directory / PYPROJECT).is_file():
            return Project(directory)
    raise KernelpinError(f"no {PYPROJECT} found in {start} or its parents; run kernelpin inside your project")


def read_document(project: Project) -> tomlkit.TOMLDocument:
    try:
        return tomlkit.parse(project.pyproject.read_text(encoding="utf-8"))
    except TOMLKitError as error:
        raise KernelpinError(f"{project.pyproject}: not valid TOML: {error}; fix the file and retry") from None


def _dependencies(document: tomlkit.TOMLDocument, create: bool) -> Table | None:
    tool = document.get("tool")
    if tool is None:
        if not create:
            return None
        tool = document.setdefault("tool", tomlkit.table(is_super_table=True))
    kernels = tool.get("kernels")
    if kernels is None:
        if not create:
            return None
        kernels = tool.setdefault("kernels", tomlkit.table(is_super_table=True))
    dependencies = kernels.get("dependencies")
    if dependencies is None:
        if not create:
            return None
        dependencies = kernels.setdefault("dependencies", tomlkit.table())
    if not isinstance(dependencies, dict):
        raise KernelpinError("[tool.kernels.dependencies] must be a table of \"org/name\" = requirement")
    return dependencies


def read_requirements(project: Project) -> list[Requirement]:
    document = read_document(project)
    table = _dependencies(document, create=False)
    if table is None:
        return []
    texts = {key: table.value.item(key).as_string().strip() for key in table}
    plain = table.unwrap()
    return parse_dependencies(plain, texts)


def set_requirement(project: Project, repo_id: str, range_text: str) -> None:
    """Add or replace `repo_id = "range"`, keeping every comment and the rest of the formatting."""
    check_repo_id(repo_id)
    document = read_document(project)
    table = _dependencies(document, create=True)
    table[repo_id] = range_text
    write_atomic(project.pyproject, tomlkit.dumps(document))


def remove_requirement(project: Project, repo_id: str) -> None:
    document = read_document(project)
    table = _dependencies(document, create=False)
    if table is None or repo_id not in table:
        present = ", ".join(sorted(table)) if table else "none"
        raise KernelpinError(f"{repo_id} is not in [tool.kernels.dependencies] (present: {present})")
    del table[repo_id]
    write_atomic(project.pyproject, tomlkit.dumps(document))
