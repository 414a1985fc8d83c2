"""The CLI finds its project (pyproject.toml) as load() finds its lock: only in directories and files this user
or root owns, so a project another user planted in a shared parent (/tmp, mode 1777) is never used."""

from __future__ import annotations

import os

import pytest

from kernelpin.errors import KernelpinError
from kernelpin.project import find_project
from tests.kernelpin.helpers import NOBODY

PYPROJECT_TEXT = '[project]\nname = "planted"\nversion = "1.0"\n\n[tool.kernels.dependencies]\n"acme/evil" = "^1"\n'


def test_a_pyproject_another_user_planted_in_a_shared_parent_is_refused(shared_parent):
    # Failed before: `kernelpin sync` in shared/app synced (and `lock` edited) the planted project.
    planted = shared_parent / "pyproject.toml"
    planted.write_text(PYPROJECT_TEXT)
    os.chown(planted, NOBODY, NOBODY)
    with pytest.raises(
        KernelpinError,
        match=rf"{planted} belongs to another user \(uid {NOBODY}\), so it is not "
        r"used.*--project",
    ):
        find_project(shared_parent / "app")
    os.chown(planted, os.geteuid(), os.getegid())
    assert find_project(shared_parent / "app").root == shared_parent


def test_the_project_search_stops_at_a_directory_another_user_owns(shared_parent):
    (shared_parent / "pyproject.toml").write_text(PYPROJECT_TEXT)
    os.chown(shared_parent, NOBODY, NOBODY)
    with pytest.raises(KernelpinError, match="the search stops at a directory owned by another user.*--project"):
        find_project(shared_parent / "app")


def test_a_project_named_with_project_is_used_whoever_owns_it(shared_parent, cli, monkeypatch):
    (shared_parent / "pyproject.toml").write_text(PYPROJECT_TEXT.replace('"acme/evil" = "^1"\n', ""))
    os.chown(shared_parent / "pyproject.toml", NOBODY, NOBODY)
    monkeypatch.chdir(shared_parent / "app")
    status, _, err = cli("verify")
    assert status == 1 and "belongs to another user" in err, err
    status, _out, err = cli("verify", "--project", str(shared_parent))
    assert "belongs to another user" not in err, err
