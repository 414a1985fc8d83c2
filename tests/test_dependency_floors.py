"""pyproject.toml's declared floors are true: every distribution kernelpin imports is declared, and the declared
build backend builds kernelpin. (The runtime floors are exercised by `python -m tools.ci.lowest_deps`, which CI
runs after the suite: kernelpin's tests against exactly the declared lowest versions.)"""

from __future__ import annotations

import ast
import importlib.metadata
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tools.ci.lowest_deps import declared_floors, uv

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def module_level_imports(package: Path) -> set[str]:
    """Top-level names imported when kernelpin's modules are imported. Function-level imports are the optional
    ones (the caller's torch, kernels, the publish extra's checker, ...)."""
    modules = set()
    for path in package.rglob("*.py"):
        statements = list(ast.parse(path.read_text()).body)
        while statements:
            node = statements.pop()
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, (ast.If, ast.Try)):
                statements += [
                    *node.body,
                    *node.orelse,
                    *getattr(node, "finalbody", []),
                    *(line for handler in getattr(node, "handlers", []) for line in handler.body),
                ]
            elif isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    return modules


def test_every_distribution_kernelpin_imports_is_declared() -> None:
    """Failed before: kernelpin/hub/client.py imports httpx2, which pyproject.toml did not declare (only
    huggingface_hub >= 2.0 brings it)."""
    third_party = module_level_imports(ROOT / "kernelpin") - set(sys.stdlib_module_names) - {"kernelpin"}
    distributions = importlib.metadata.packages_distributions()
    declared = {canonicalize_name(Requirement(line).name) for line in PROJECT["project"]["dependencies"]}
    undeclared = {
        module: distributions.get(module, [module])
        for module in third_party
        if not {canonicalize_name(name) for name in distributions.get(module, [module])} & declared
    }
    assert not undeclared, f"kernelpin imports these without declaring them in pyproject.toml: {undeclared}"
    assert {
        canonicalize_name(name) for name in declared_floors()
    } == declared  # every dependency has a floor (name>=X) for tools.ci.lowest_deps


def test_the_declared_build_backend_floor_builds_kernelpin(tmp_path: Path) -> None:
    """Failed before: `requires = ["setuptools>=68"]`, and setuptools < 77 rejects the SPDX `license = "Apache-2.0"`
    string. Builds a wheel with exactly the declared lowest setuptools (uv, from PyPI)."""
    [requirement] = [Requirement(line) for line in PROJECT["build-system"]["requires"]]
    [floor] = [spec.version for spec in requirement.specifier if spec.operator == ">="]
    venv, source = tmp_path / "venv", tmp_path / "source"
    for name in ("pyproject.toml", "docs/kernelpin.md", "LICENSE"):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / name, source / name)
    shutil.copytree(ROOT / "kernelpin", source / "kernelpin", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([uv(), "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    subprocess.run(
        [uv(), "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), f"{requirement.name}=={floor}"],
        check=True,
    )
    build = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import sys, setuptools.build_meta as backend; print(backend.build_wheel(sys.argv[1]))",
            str(tmp_path / "dist"),
        ],
        cwd=source,
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, f"setuptools=={floor} cannot build kernelpin:\n{build.stderr[-3000:]}"
    assert build.stdout.strip().splitlines()[-1].startswith("kernelpin-")
