"""Real builds, staged releases and a consumer project: shared by tests/release, testkit/gpu_e2e.py and benchmarks.

olah is a read-only mirror: it serves local git repositories and accepts no uploads. A release reaches the
test Hub as the tree `kernelpin publish` would upload (`tools.release stage`'s layout), committed
("Release vX") and tagged (vX, annotated) with git in the repository olah serves. Everything downstream
(refs, trees, downloads, lock/sync/load) goes through the real Hub API.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import tomlkit

from kernelpin.format.ranges import Version
from kernelpin.publisher.release import plan_major_branch
from testkit.hub import HubServer, MirrorRepo
from testkit.sigstore_root import Identity
from tools.builder.config import BuildConfig, copy_build_inputs

REPO_ID = "acme/img2gray"
VERSIONS = ("0.1.0", "0.2.0", "0.2.1-rc.1")
BUILT_VERSIONS = VERSIONS[:2]  # compiled; the prerelease is a fake kernel (it only shows it is never picked)
ROOT = Path(__file__).resolve().parents[1]
IMAGE = ROOT / "examples" / "chelsea.png"
CONSUMER_CHECK = Path(__file__).with_name("consumer_check.py")
KERNELS_CHECK = Path(__file__).with_name("kernels_check.py")
# The workflow whose release job signs a release (tools/ci/workflow.py writes it): the Hub variants and the conda
# packages alike.
RELEASE_WORKFLOW = ".github/workflows/conda-packages.yml"


def release_identity(version: str) -> Identity:
    """Who signs release v`version`: the release job on its tag, as Fulcio certifies GitHub's OIDC token."""
    return Identity(repository=REPO_ID, workflow=RELEASE_WORKFLOW, ref=f"refs/tags/v{version}")


@dataclass(frozen=True)
class Released:
    """Releases of the operator on a running test Hub."""

    hub: HubServer
    repo: MirrorRepo
    sources: dict[str, Path]  # version -> what was staged: a conda channel directory or a build_op variant dir
    staged: dict[str, Path]  # version -> the staged release layout
    commits: dict[str, str]  # version -> the commit its tag names


def source_tree(version: str, into: Path) -> Path:
    """A copy of the operator's sources whose build.toml says `version` (the version is part of the build id)."""
    copy_build_inputs(BuildConfig.load(), into)
    config = tomlkit.parse((into / "build.toml").read_text())
    config["general"]["version"] = version
    (into / "build.toml").write_text(tomlkit.dumps(config))
    return into


def build_command(out: Path, build_dir: Path, cuda: str = "off", abi: str = "exact") -> list[str]:
    """The build of the sources in the working directory it runs in (ROOT or a `source_tree`)."""
    return [
        sys.executable,
        "-m",
        "tools.builder.op",
        "--out",
        str(out),
        "--cuda",
        cuda,
        "--build-dir",
        str(build_dir),
        "--abi",
        abi,
    ]


STATIC_LIBSTDCXX_DRIVER = "g++-static-libstdc++"


def write_static_libstdcxx_driver(into: Path) -> None:
    """Write `<into>/g++-static-libstdc++`, a C++ compiler driver like the H200 image's CXX: g++ with
    -static-libstdc++ after every command line, and a library directory of its own that holds libstdc++.a and no
    libstdc++.so. It appends each command line it runs to `<into>/commands.log`. Writes nothing where this
    machine has no g++ or no libstdc++.a."""
    compiler = shutil.which("g++")
    if compiler is None:
        return
    archive = subprocess.run(
        [compiler, "-print-file-name=libstdc++.a"], capture_output=True, text=True, check=False
    ).stdout.strip()
    if not Path(archive).is_file():
        return
    (into / "lib").mkdir(parents=True)
    (into / "lib" / "libstdc++.a").symlink_to(archive)
    driver, log = into / STATIC_LIBSTDCXX_DRIVER, into / "commands.log"
    driver.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec {compiler} "$@" -L{into / "lib"} -static-libstdc++\n')
    driver.chmod(0o755)


def stage(sources: list[Path], out: Path, repo_id: str) -> Path:
    """`python -m tools.release stage`, as a release manager runs it."""
    run(
        [sys.executable, "-m", "tools.release", "stage", *map(str, sources), "--repo", repo_id, "--out", str(out)],
        cwd=ROOT,
    )
    return out


def release_into_mirror(repo: MirrorRepo, staged: Path, tag: str) -> str:
    """What `kernelpin publish` does on the Hub, done with git: commit the staged release as the repository's
    whole tree, tag it, and move the branch v<major> by the rule publish follows (plan_major_branch)."""
    tags, branches = repo.refs()
    plan = plan_major_branch(Version.parse(tag.removeprefix("v")), tags, branches)
    files = {path.relative_to(staged).as_posix(): path.read_bytes() for path in staged.rglob("*") if path.is_file()}
    repo.write(files, clear=True)
    commit = repo.commit(f"Release {tag}")
    repo.tag(tag, annotated=True)
    if plan.move:
        repo.branch(plan.branch, commit)
    return commit


def hub_env(endpoint: str, home: Path, **extra: str) -> dict[str, str]:
    """The environment of a consumer process: this checkout's kernelpin, the test Hub, a private cache."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("HF_", "KERNELPIN_"))}
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "HF_ENDPOINT": endpoint,
            "HF_HOME": str(home),
            "HF_HUB_CACHE": str(home / "hub"),
            "HF_HUB_DISABLE_TELEMETRY": "1",
            **extra,
        }
    )
    return env


def consumer_project(root: Path, requirement: str, repo_id: str) -> Path:
    """An application's pyproject.toml that needs `repo_id` at `requirement`."""
    root.mkdir(parents=True, exist_ok=True)
    document = tomlkit.document()
    document["project"] = {"name": "app", "version": "1.0"}
    document["tool"] = {"kernels": {"dependencies": {repo_id: requirement}}}
    (root / "pyproject.toml").write_text(tomlkit.dumps(document))
    return root


def run(
    command: list[str], cwd: Path | None = None, env: Mapping[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        command, cwd=cwd, env=None if env is None else dict(env), capture_output=True, text=True, check=False
    )
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(command)} exited {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done


def kernelpin(
    args: list[str], project: Path, env: Mapping[str, str], check: bool = True
) -> subprocess.CompletedProcess[str]:
    """The real CLI in its own process, inside the consumer project."""
    return run([sys.executable, "-m", "kernelpin", *args], cwd=project, env=env, check=check)


def load_and_check(project: Path, repo_id: str, env: Mapping[str, str], device: str = "cpu") -> dict:
    """kernelpin.load(repo_id) in the project's own script (found the lock above it), in a fresh process: the
    op on examples/chelsea.png vs the reference."""
    app = project / "app.py"
    shutil.copyfile(CONSUMER_CHECK, app)
    done = run([sys.executable, str(app), repo_id, str(IMAGE), device], cwd=project, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def kernels_get_and_check(repo_id: str, major: int, env: Mapping[str, str], device: str = "cpu") -> dict:
    """kernels.get_kernel(repo_id, version=major) in a fresh process, then the op on examples/chelsea.png vs
    the reference (testkit/kernels_check.py). With HF_HUB_DISABLE_TELEMETRY=1 in `env`, kernels 0.17.2 sends a
    User-Agent that huggingface_hub's HTTP client rejects (fixed in 0.18): leave it unset to judge 0.17.2."""
    done = run([sys.executable, str(KERNELS_CHECK), repo_id, str(major), str(IMAGE), device], env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def kernels_cli(args: list[str], env: Mapping[str, str], check: bool = True) -> subprocess.CompletedProcess[str]:
    """The `kernels` command line (e.g. `versions REPO`, `lock DIR`) in its own process."""
    code = (
        "import sys; from kernelpin.loading import kernels_internals; "
        "main = kernels_internals.attribute('cli', 'main', 'the kernels command line'); "
        "sys.argv = ['kernels', *sys.argv[1:]]; main()"
    )
    return run([sys.executable, "-c", code, *args], env=env, check=check)
