"""The repository's own conventions: test folders collect in any combination, scripts import without path edits,
benchmarks/results/ holds one current result set per machine, and the lab, the test kit and the tools import one
another in one direction only."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Where a sys.path edit is still the way: the op tests import the variant directory they just built, as a
# consumer does with PYTHONPATH.
SYS_PATH_EDITS_ALLOWED = {"tests/op/conftest.py"}
SYS_PATH_EDIT = re.compile(r"^\s*sys\.path(\.(insert|append|extend)\(|\[.*\]\s*=)", re.MULTILINE)


def _python_files(*folders: str) -> list[Path]:
    return sorted(
        path for folder in folders for path in (ROOT / folder).rglob("*.py") if "__pycache__" not in path.parts
    )


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
    bare = [
        str(path.relative_to(ROOT))
        for path in _python_files("tests", "testkit")
        if "conftest" in _imported_modules(path)
    ]
    assert bare == []


def test_scripts_and_tests_do_not_edit_sys_path() -> None:
    editing = {
        str(path.relative_to(ROOT))
        for path in _python_files("tests", "testkit", "tools", "benchmarks")
        if _edits_sys_path(path)
    }
    assert editing - SYS_PATH_EDITS_ALLOWED == set()


def test_kernelpin_and_release_tests_collect_together() -> None:
    # The combination that stopped with 4 collection errors (kernelpin tests imported tests/release/conftest.py).
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/kernelpin",
            "tests/release",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


RESULTS = ROOT / "benchmarks" / "results"
# A record named for the commit or the run it came from: the history of a result, which git keeps.
STAMPED = re.compile(r"-[0-9a-f]{7,40}(-run\d+)?\.\w+$|-run\d+\.\w+$")


def _result_names() -> tuple[str, list[str]]:
    """What names result files: the scripts that write them and benchmarks/README.md, which gives each command
    with its output; the names as text, and the globs among them (`host-cpu-*.json`, `kernelpin-bulk-<N>mb.*`)."""
    scripts = [
        path
        for folder in ("benchmarks", "tools")
        for suffix in ("*.py", "*.sh")
        for path in (ROOT / folder).rglob(suffix)
    ]
    text = "\n".join(path.read_text() for path in [*scripts, ROOT / "benchmarks" / "README.md", ROOT / "pixi.toml"])
    patterns = re.sub(r"<[^<>\s]+>", "*", text)  # kernelpin-bulk-<N>mb.* is a glob too
    return text, [glob for glob in re.findall(r"[\w.-]{3,}\*[\w.*-]*", patterns) if "." in glob]


def test_benchmarks_results_hold_one_current_set_per_machine() -> None:
    """benchmarks/results/<machine>/ holds the current records, each named as a script or benchmarks/README.md's
    command writes it: none named for a commit or a run (earlier records are in git history, `git show
    COMMIT:benchmarks/results/...`, where docs/verification.md points), no folder below a machine's."""
    text, globs = _result_names()
    stray = sorted(
        path.relative_to(RESULTS).as_posix()
        for path in RESULTS.rglob("*")
        if path.is_file()
        and (
            path.parent.parent != RESULTS
            or STAMPED.search(path.name)
            or (path.name not in text and not any(fnmatch(path.name, glob) for glob in globs))
        )
    )
    assert stray == []


def test_the_lab_the_test_kit_and_the_tools_import_one_way() -> None:
    """tools/ (the product's build and release tooling) imports neither testkit/ nor benchmarks/; testkit/ uses
    tools/ (it builds releases with tools/builder) and imports no benchmark; benchmarks/, the lab (its experiments
    included), may use both; kernelpin/ imports none of them."""

    def reaching(folder: str, forbidden: set[str]) -> list[str]:
        return [
            f"{path.relative_to(ROOT)}: {module}"
            for path in _python_files(folder)
            for module in sorted(_imported_modules(path))
            if module.split(".")[0] in forbidden
        ]

    assert reaching("tools", {"testkit", "benchmarks"}) == []
    assert reaching("testkit", {"benchmarks"}) == []
    assert reaching("kernelpin", {"tools", "testkit", "benchmarks", "tests"}) == []
