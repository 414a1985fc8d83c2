"""The repository's own conventions: test folders collect in any combination, scripts import without path edits."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Where a sys.path edit is still the way: the op tests import the variant directory they just built, as a
# consumer does with PYTHONPATH.
SYS_PATH_EDITS_ALLOWED = {"tests/op/conftest.py"}
SYS_PATH_EDIT = re.compile(r"^\s*sys\.path(\.(insert|append|extend)\(|\[.*\]\s*=)", re.MULTILINE)


def _python_files(*folders: str) -> list[Path]:
    return sorted(path for folder in folders for path in (ROOT / folder).rglob("*.py") if "__pycache__" not in path.parts)


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    return names | {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}


def _edits_sys_path(path: Path) -> bool:
    return SYS_PATH_EDIT.search(path.read_text()) is not None


def test_every_test_folder_is_a_package_and_no_module_imports_a_bare_conftest() -> None:
    # A bare `conftest` is whichever conftest.py pytest put on sys.path first: another folder's, in a combined run.
    folders = {path.parent for path in (ROOT / "tests").rglob("test_*.py")}
    assert sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").is_file()) == []
    bare = [str(path.relative_to(ROOT)) for path in _python_files("tests", "testkit")
            if "conftest" in _imported_modules(path)]
    assert bare == []


def test_scripts_and_tests_do_not_edit_sys_path() -> None:
    editing = {str(path.relative_to(ROOT)) for path in _python_files("tests", "testkit", "tools", "benchmarks")
               if _edits_sys_path(path)}
    assert editing - SYS_PATH_EDITS_ALLOWED == set()


def test_kernelpin_and_release_tests_collect_together() -> None:
    # The combination that stopped with 4 collection errors (kernelpin tests imported tests/release/conftest.py).
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "tests/kernelpin", "tests/release"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
