"""kernelpin's module boundaries: the run-time path and the publisher load only what they use, and no module
reaches into another's private names."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "kernelpin"


def _loaded_after(statement: str) -> set[str]:
    """The kernelpin modules a fresh interpreter has loaded after `statement`."""
    code = f"import sys\n{statement}\nprint(' '.join(m for m in sys.modules if m.startswith('kernelpin')))"
    done = subprocess.run([sys.executable, "-c", code], cwd=PACKAGE.parent, capture_output=True, text=True, check=True)
    return set(done.stdout.split())


@pytest.mark.parametrize(("statement", "absent"), [
    # load() reads a lock; it neither resolves nor edits pyproject.toml.
    ("import kernelpin.runtime", {"kernelpin.resolve", "kernelpin.project", "kernelpin.cli"}),
    # Installing and publishing need the layout's names, not the resolver.
    ("import kernelpin.sync", {"kernelpin.resolve", "kernelpin.project"}),
    ("import kernelpin.publish", {"kernelpin.resolve", "kernelpin.project", "kernelpin.sync"}),
])
def test_modules_load_only_what_they_use(statement: str, absent: set[str]) -> None:
    loaded = _loaded_after(statement)
    assert "kernelpin.layout" in loaded
    assert loaded & absent == set()


def test_no_module_imports_another_modules_private_names() -> None:
    reaching = []
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kernelpin"):
                reaching += [f"{path.name}: {node.module}.{alias.name}" for alias in node.names
                             if alias.name.startswith("_")]
    assert reaching == []
