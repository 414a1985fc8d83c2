"""kernelpin as users install it: its wheel, in an environment of its own, with the source tree off sys.path.

    python -m tools.ci.installed_wheel [--dir DIR] [PYTEST ARGS ...]      (default: the suite below)

Builds the sdist and, from it, the wheel (`uv build`, as `python -m build` does), installs the wheel into a fresh
virtual environment (uv) with the test tools at this environment's versions, copies tests/ and testkit/ (not
kernelpin/) into a directory of their own and runs an end-to-end subset of kernelpin's tests there, so that
`import kernelpin` can only find the installed wheel (a conftest.py there checks it). A data file the wheel lacks
fails here (it failed so before kernelpin's package-data listed python_depends.json). CI runs it (.ci/run).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tools.ci.lowest_deps import ROOT, uv

# What the tests use beside kernelpin's own dependencies, at this environment's versions.
TEST_TOOLS = ("pytest", "pytest-xdist", "olah", "kernels", "torch", "numpy", "hypothesis")
# lock, sync, load, get_kernel, LOCAL_KERNELS, integrate_kernels + kernelize, kernel-depends, ZIP builds.
SUITE = [
    f"tests/kernelpin/{name}"
    for name in (
        "journeys/test_end_to_end.py",
        "loading/test_get_kernel.py",
        "loading/test_local_kernels.py",
        "loading/test_kernelize.py",
        "journeys/test_dependency_walk.py",
        "loading/test_zip_builds.py",
        "loading/test_kernels_internals.py",
        "loading/test_python_depends.py",
    )
]
CHECK_INSTALLED = '''"""kernelpin must come from the installed wheel here, never from a source tree."""
import kernelpin

assert "site-packages" in kernelpin.__file__, f"kernelpin imported from {kernelpin.__file__}, not the installed wheel"
'''


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--dir", type=Path, default=ROOT / "build" / "installed-wheel", help="work directory (recreated)"
    )
    args, pytest_args = parser.parse_known_args(argv)
    work = args.dir.resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env = {name: value for name, value in os.environ.items() if name not in ("PYTHONPATH", "PYTHONHOME")}
    if "UV_FIND_LINKS" not in env and env.get("PIP_FIND_LINKS"):  # where this machine's pip finds its torch
        env["UV_FIND_LINKS"] = env["PIP_FIND_LINKS"]
    subprocess.run(
        [
            uv(),
            "build",
            "--quiet",
            "--no-build-isolation",
            "--python",
            sys.executable,
            "--out-dir",
            str(work / "dist"),
            str(ROOT),
        ],
        check=True,
        env=env,
    )
    (wheel,) = (work / "dist").glob("kernelpin-*.whl")
    venv = work / "venv"
    env["VIRTUAL_ENV"] = str(venv)
    tools = [f"{name}=={importlib.metadata.version(name)}" for name in TEST_TOOLS]
    subprocess.run([uv(), "venv", "--quiet", "--python", sys.executable, str(venv)], check=True, env=env)
    subprocess.run([uv(), "pip", "install", "--quiet", str(wheel), *tools], check=True, env=env)
    run = work / "run"
    for name in ("tests", "testkit", "tools"):  # testkit publishes with tools.release
        shutil.copytree(ROOT / name, run / name, ignore=shutil.ignore_patterns("__pycache__"))
    (run / "conftest.py").write_text(CHECK_INSTALLED)
    (run / "pytest.ini").write_text("[pytest]\npythonpath = .\n")  # tests and testkit from here; kernelpin installed
    print(f"installed {wheel.name} into {venv}; running {len(SUITE)} test files from {run}", flush=True)
    done = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            *(pytest_args or ["-q", "-n", "auto", *SUITE]),
        ],
        cwd=run,
        env={**env, "PYTHONSAFEPATH": "1"},
        check=False,
    )
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
