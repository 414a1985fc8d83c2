"""Session builds shared by every pytest-xdist worker of one test run (pytest-xdist's documented FileLock pattern).

A session-scoped fixture is set up once per worker process. For a build that takes half a minute that means one
build per worker, unless the workers share it: the first worker that needs it builds it into the run's common
temporary directory, and any other waits on a file lock and reuses it. The tests then need no scheduling
constraints (`--dist loadgroup`, which also stopped grouping with pytest 9.2: pytest-dev/pytest-xdist#1386).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock


def run_directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temporary directory of this test run: under pytest-xdist the parent of the workers' own directories
    (it is new for every run), else the session's."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def build_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The directory `<run directory>/<name>`, filled by `build(directory)` once per test run.

    A build that raised is not marked done: the next worker that asks tries again (and fails with its own error)."""
    root = run_directory(tmp_path_factory)
    directory, done = root / name, root / f"{name}.done"
    with FileLock(root / f"{name}.lock"):
        if not done.exists():
            shutil.rmtree(directory, ignore_errors=True)  # what a failed attempt left
            directory.mkdir()
            build(directory)
            done.touch()
    return directory
