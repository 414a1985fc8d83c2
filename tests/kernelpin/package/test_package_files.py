"""The artifacts users install: the sdist and the wheel built from pyproject.toml hold every file kernelpin reads
at run time, not only its Python modules (pytest imports kernelpin from the source tree, where a data file left
out of the wheel is still found; an installed kernelpin then fails on its first load).

The build is `uv build` (what `python -m build` does: an sdist, then the wheel built from that sdist) of a copy of
the files the build reads, with this environment's setuptools (no download)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "kernelpin"


def package_files() -> set[str]:
    """Every file of the kernelpin package in the source tree, as a path below the tree's root."""
    return {
        path.relative_to(ROOT).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


def data_files_read() -> set[str]:
    """The data files kernelpin's modules open beside themselves (`Path(__file__).with_name("x.json")`)."""
    read = set()
    for module in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(module.read_text(), str(module))):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", None) == "with_name"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                read.add((module.parent / node.args[0].value).relative_to(ROOT).as_posix())
    return read


def build_distributions(into: Path) -> tuple[Path, Path]:
    """(sdist, wheel) built as `python -m build` builds them, from a copy of what the build reads."""
    source = into / "source"
    source.mkdir()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for name in ("pyproject.toml", "LICENSE", project["readme"]):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(PACKAGE, source / "kernelpin", ignore=shutil.ignore_patterns("__pycache__"))
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        pytest.fail("uv is not installed: pip install -r requirements/dev.txt")
    subprocess.run(
        [
            uv,
            "build",
            "--quiet",
            "--no-build-isolation",
            "--python",
            sys.executable,
            "--out-dir",
            str(into / "dist"),
            str(source),
        ],
        check=True,
        capture_output=True,
    )
    (sdist,), (wheel,) = (into / "dist").glob("*.tar.gz"), (into / "dist").glob("*.whl")
    return sdist, wheel


@pytest.fixture(scope="module")
def distributions(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build_distributions(tmp_path_factory.mktemp("build"))


def test_the_data_files_read_are_files_of_the_package():
    read = data_files_read()
    assert {"kernelpin/loading/python_depends.json", "kernelpin/publisher/stable_abi_shims.json"} <= read
    assert read <= package_files(), read - package_files()


def test_the_wheel_holds_every_file_of_the_package(distributions):
    _, wheel = distributions
    with zipfile.ZipFile(wheel) as archive:
        shipped = set(archive.namelist())
    missing = sorted(package_files() - shipped)
    assert not missing, f"{wheel.name} lacks {missing}: list them in pyproject.toml [tool.setuptools.package-data]"
    assert "kernelpin/py.typed" in shipped  # PEP 561: type checkers read an installed kernelpin's annotations


def test_the_sdist_holds_every_file_of_the_package(distributions):
    sdist, _ = distributions
    with tarfile.open(sdist) as archive:
        top = sdist.name.removesuffix(".tar.gz")
        shipped = {name.removeprefix(top + "/") for name in archive.getnames()}
    missing = sorted(package_files() - shipped)
    assert not missing, f"{sdist.name} lacks {missing}"
