"""What the recipe's build and test steps run works on the recipe's Python floor (`python_min`).

conda-forge builds the recipe with host python `python_min` (3.10). No 3.10 interpreter can be had here
(Debian's is 3.11, `uv python install` needs GitHub), so `vermin` checks the files statically against the
floor that the rendered recipe itself requires (`python >=X.Y`). The files are the ones the steps run:
the modules `python -m tools.builder.op` imports from the checkout, the installed Python package, and the
recipe's test scripts.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.conda.support import conda_forge_pins
from tools.builder.config import BuildConfig
from tools.conda.build import RECIPE, REPO_ROOT, render_variants, variant_config

CONFIG = BuildConfig.load()


def recipe_python_floor() -> str:
    """X.Y of the `python >=X.Y` run requirement of the rendered variants: the lowest with conda-forge's global
    pins or with the project's matrix."""
    floors = set()
    for variant in [*render_variants(conda_forge_pins("linux-64")), *render_variants(variant_config())]:
        floors |= {
            match.group(1)
            for spec in variant.recipe.requirements.to_dict()["run"]
            if (match := re.fullmatch(r"python >=(\d+\.\d+)", spec))
        }
    return min(floors, key=lambda floor: tuple(map(int, floor.split("."))))


def build_step_modules() -> list[Path]:
    """The checkout's files that importing tools.builder.op loads (what the recipe's build script runs)."""
    probe = (
        "import json, sys, tools.builder.op\n"
        "print(json.dumps([getattr(m, '__file__', None) for m in list(sys.modules.values())]))"
    )
    loaded = json.loads(
        subprocess.run(
            [sys.executable, "-c", probe],
            cwd=REPO_ROOT,
            check=True,
            text=True,
            capture_output=True,
            env={"PYTHONPATH": str(REPO_ROOT), "PATH": ""},
        ).stdout
    )
    return sorted({Path(name).resolve() for name in loaded if name and Path(name).resolve().is_relative_to(REPO_ROOT)})


def test_build_and_test_steps_run_on_the_recipe_python_floor() -> None:
    """Failed before: tools/builder/config.py imported tomllib (3.11+), so the build failed on conda-forge's 3.10."""
    floor = recipe_python_floor()
    modules = build_step_modules()
    assert (
        REPO_ROOT / "tools" / "builder" / "config.py" in modules
        and REPO_ROOT / "kernelpin" / "format" / "metadata.py" in modules
    )
    package = sorted((REPO_ROOT / CONFIG.package_dir).glob("*.py"))
    recipe_scripts = sorted(RECIPE.parent.glob("*.py"))
    files = [*modules, *package, *recipe_scripts]
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, vermin; sys.exit(vermin.main())",
            f"--target={floor}-",
            "--violations",
            "--no-tips",
            *map(str, files),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"needs a newer python than the recipe's floor {floor}:\n{done.stdout}{done.stderr}"


def test_the_build_reads_build_toml_below_python_311_with_a_host_requirement() -> None:
    """tomllib is 3.11+: on a lower floor the recipe's host environment brings tomli, which tools/builder/config.py reads."""
    floor = tuple(int(part) for part in recipe_python_floor().split("."))
    [variant, *_] = render_variants(variant_config())
    assert ("tomli" in variant.recipe.requirements.to_dict()["host"]) == (floor < (3, 11))
