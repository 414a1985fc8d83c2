"""Every code block of README.md runs as written, after the commands the README gives before it (`./dev setup`:
the operator is importable in `.venv`). A block is left out only where the README says why, above its fence."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelpin.project import find_project, read_requirements
from tests.markdown import code_blocks
from tests.test_dev import _this_venv_is_devs

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = code_blocks(ROOT / "README.md")


def _blocks(language: str) -> list:
    runnable = [
        pytest.param(block, id=block.where) for block in BLOCKS if block.language == language and not block.not_run
    ]
    return runnable or [
        pytest.param(
            None,
            id="none",
            marks=pytest.mark.skip(
                reason=f"README.md has no ```{language} block to run (any it has is marked not run, with the reason)"
            ),
        )
    ]


def test_every_block_runs_or_says_why_not() -> None:
    runnable = {"python", "toml", "bash"}
    for block in BLOCKS:
        assert block.language in runnable or block.not_run, f"{block.where}: a ```{block.language} block no test runs"
    assert any(b.language == "python" and not b.not_run for b in BLOCKS), "the Quick start is a python block"


def _python_env(checkout_build: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    if not _this_venv_is_devs():
        # Outside the venv ./dev made (which has build/dev on its path), the same build from this run.
        env["PYTHONPATH"] = str(checkout_build.parent)
    return env


@pytest.mark.parametrize("block", _blocks("python"))
def test_python_block(block, checkout_build: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", block.text],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_python_env(checkout_build),
    )
    assert done.returncode == 0, f"{block.where}:\n{done.stderr[-3000:]}"


@pytest.mark.parametrize("block", _blocks("toml"))
def test_toml_block_is_a_valid_kernels_table(block, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "app"\nversion = "0"\n\n' + block.text)
    assert read_requirements(find_project(tmp_path)), block.where


@pytest.mark.parametrize("block", _blocks("bash"))
def test_bash_block(block) -> None:
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.text], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, f"{block.where}:\n{textwrap.shorten(done.stderr, 3000)}"


@pytest.mark.skipif(not _this_venv_is_devs(), reason="checks the venv ./dev made: runs only under ./dev test")
def test_dev_venv_imports_the_operator_without_pythonpath() -> None:
    # Failed before: ModuleNotFoundError in the venv ./dev made; the README's Quick start needs nothing else.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", "import img2gray; print(img2gray.__file__)"],
        capture_output=True,
        text=True,
        cwd="/",
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert Path(done.stdout.strip()).is_relative_to(ROOT / "build" / "dev"), done.stdout


def test_the_readme_carries_no_run_records() -> None:
    # Failed before: the README's first screens told which commit passed what on which day (03b1b84, 59c68cb, ...);
    # those records live in docs/verification.md, which the GPU scripts write.
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    commits = re.findall(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b", text)
    dates = re.findall(r"\b20\d\d-\d\d-\d\d\b", text)
    assert commits == [] and dates == [], (commits, dates)
    assert "docs/verification.md" in text
