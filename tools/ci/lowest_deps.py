"""kernelpin's tests against the lowest versions of its dependencies that pyproject.toml declares.

    python -m tools.ci.lowest_deps [--venv DIR] [PYTEST ARGS ...]      (default: the suite below)

A floor is only true when kernelpin works there. This makes a virtual environment of its own with uv
(requirements/dev.txt installs it), installs kernelpin with its `test` extra resolved with
`--resolution lowest-direct`, holds every `name>=X` of [project.dependencies] at exactly X (`--override`: a
test tool that wants more, such as kernels' tomlkit, cannot lift a floor), and runs pytest there. torch and
hypothesis, which the tests use but kernelpin does not depend on, are the running environment's versions.
It is also the environment of the oldest supported `kernels` (the test extra's floor): the interop and
differential suites (INTEROP) run here against it. CI runs it after the suite (.ci/run).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
# Used by the tests, not by kernelpin: kept at this environment's versions (numpy: torch warns without it).
TEST_TOOLS = ("torch", "numpy", "hypothesis", "pytest-xdist")
# The tests of the commands that use the dependencies (huggingface_hub and httpx2: lock, versions, sync,
# outdated, the Hub's faults; tomlkit: add/remove; rich: the CLI's output; filelock: lock and sync; sigstore:
# signatures), not the
# whole directory: kernelpin's pure core (ranges, variants, metadata) imports none of them, and CI time counts.
# The test extra's lowest `kernels` is the oldest kernelpin supports (kernelpin.loading.kernels_internals.OLDEST):
# the interop and differential suites run here against it too (requirements/dev.txt's run has the newest).
INTEROP = [
    f"tests/kernelpin/{name}"
    for name in (
        "loading/test_kernels_internals.py",
        "format/test_variant_vs_kernels.py",
        "journeys/test_backends.py",
        "format/test_kernels_compat.py",
        "front/test_kernelize.py",
        # issue 50: every name of the oldest kernels' __all__ from kernelpin, its loaders (get_local_kernel's
        # kernel-depends), and `kernelpin info` against the oldest kernels' info
        "front/test_kernels_api.py",
        "commands/test_kernels_outputs.py",
        "publisher/test_signed_release.py",
        "loading/test_zip_builds.py",
        "loading/test_python_depends.py",
    )
] + [
    # A release with per-capability builds (issue 51) must stay loadable by the oldest kernels unchanged; this file
    # needs no rattler-build (its releases are written by testkit.fake_kernel).
    "tests/release/test_capability_builds.py",
]
SUITE = [
    f"tests/kernelpin/{name}"
    for name in (
        "cli/test_cli.py",
        "commands/test_lock.py",
        "commands/test_sync.py",
        "journeys/test_end_to_end.py",
        "hub/test_repo_types.py",
        "commands/test_sync_faults.py",
        "trust/test_signature.py",
    )
] + INTEROP


def declared_floors(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, str]:
    """{distribution: X} for every `name>=X` of [project.dependencies]; a dependency without a floor is an error."""
    floors = {}
    for line in tomllib.loads(pyproject.read_text())["project"]["dependencies"]:
        requirement = Requirement(line)
        lower = [spec.version for spec in requirement.specifier if spec.operator in (">=", "==", "~=")]
        if len(lower) != 1:
            raise SystemExit(f"lowest_deps: {pyproject} dependency {line!r} needs one lower bound (name>=X)")
        floors[requirement.name] = lower[0]
    return floors


def uv() -> str:
    found = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if not found:
        raise SystemExit("lowest_deps: no `uv` found; `pip install -r requirements/dev.txt` installs it")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--venv", type=Path, default=ROOT / "build" / "lowest-deps", help="the environment to (re)create"
    )
    args, pytest_args = parser.parse_known_args(argv)
    floors = declared_floors()
    venv = args.venv.resolve()
    venv.parent.mkdir(parents=True, exist_ok=True)
    overrides = venv.parent / f"{venv.name}.overrides.txt"
    overrides.write_text("".join(f"{name}=={version}\n" for name, version in sorted(floors.items())))
    env = {**os.environ, "VIRTUAL_ENV": str(venv)}
    if "UV_FIND_LINKS" not in env and env.get("PIP_FIND_LINKS"):  # where this machine's pip finds its torch
        env["UV_FIND_LINKS"] = env["PIP_FIND_LINKS"]
    tools = [f"{name}=={importlib.metadata.version(name)}" for name in TEST_TOOLS]
    subprocess.run([uv(), "venv", "--quiet", "--clear", "--python", sys.executable, str(venv)], check=True, env=env)
    subprocess.run(
        [
            uv(),
            "pip",
            "install",
            "--quiet",
            "--resolution",
            "lowest-direct",
            "--override",
            str(overrides),
            "-e",
            f"{ROOT}[test]",
            *tools,
        ],
        check=True,
        env=env,
    )
    installed = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import importlib.metadata as m, sys; print(' '.join(f'{n}=={m.version(n)}' for n in sys.argv[1:]))",
            *floors,
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    print(f"lowest declared versions: {installed}", flush=True)
    oldest = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            (
                "import importlib.metadata as m; from kernelpin.loading import kernels_internals as k; "
                "print(m.version('kernels'), k.OLDEST)"
            ),
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout.split()
    if oldest[0] != oldest[1]:
        raise SystemExit(
            f"lowest_deps: kernels {oldest[0]} installed, but the oldest kernelpin supports is {oldest[1]}: "
            "the test extra's floor and kernelpin.loading.kernels_internals.OLDEST must agree"
        )
    print(f"oldest supported kernels: {oldest[0]}", flush=True)
    done = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            *(pytest_args or ["-q", "-n", "auto", *SUITE]),
        ],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
