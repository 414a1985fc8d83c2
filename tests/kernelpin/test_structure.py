"""kernelpin's module boundaries: the run-time path and the publisher load only what they use, and no module
reaches into another's private names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.kernelpin.helpers import fresh_interpreter

PACKAGE = Path(__file__).resolve().parents[2] / "kernelpin"




@pytest.mark.parametrize(("statement", "absent"), [
    # load() reads a lock; it neither resolves nor edits pyproject.toml.
    ("import kernelpin.runtime", {"kernelpin.resolve", "kernelpin.project", "kernelpin.cli"}),
    # Installing and publishing need the layout's names, not the resolver.
    ("import kernelpin.install", {"kernelpin.resolve", "kernelpin.project"}),
    ("import kernelpin.publisher.release", {"kernelpin.resolve", "kernelpin.project", "kernelpin.install"}),
])
def test_modules_load_only_what_they_use(statement: str, absent: set[str]) -> None:
    loaded = {name for name in fresh_interpreter(statement)[1] if name.startswith("kernelpin")}
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
