"""Small helpers shared by the kernelpin tests (fixtures live in conftest.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelpin.trust.policy import Policy, parse_policy

REPO_ROOT = Path(__file__).resolve().parents[2]
# Trusted kernel publishers on the test Hub (`kernels lock`, `get_kernel` and `kernelpin lock` check), and one that
# is not.
TRUSTED_ORG = "trusted"
UNTRUSTED_ORG = "stranger"
# Runs a command as the unprivileged user nobody: root ignores permission bits, so read-only tests need it.
NOBODY = 65534  # the uid of the user nobody
AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def forget_signature_receipts() -> None:
    """Remove this test's signature receipts (its XDG_STATE_HOME's): the next lock or sync verifies every bundle."""
    from kernelpin.files.private_state import private_directory

    directory = private_directory("signatures")
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


def require_nobody() -> None:
    """Skip unless this test process can run this checkout's kernelpin as the user nobody."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run as an unprivileged user (root ignores permissions)")
    probe = subprocess.run(
        [*AS_NOBODY, sys.executable, "-c", "import kernelpin, huggingface_hub"],
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        pytest.skip(
            f"the user nobody cannot read this checkout or its Python environment ({REPO_ROOT}, "
            f"{sys.prefix}): {probe.stderr.strip().splitlines()[-1][:200]}"
        )


def fresh_interpreter(code: str) -> tuple[str, set[str]]:
    """Run `code` in a fresh interpreter, in the working directory, with this checkout first on its path
    (then the caller's PYTHONPATH, where the GPU machine keeps kernelpin's dependencies):
    (what it printed, the names of every module loaded by then)."""
    script = f"{code}\nimport sys\nprint('\\nMODULES', *sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        },
    )
    assert done.returncode == 0, done.stderr
    output, _, modules = done.stdout.rpartition("\nMODULES ")
    return output, set(modules.split())


def snapshot_dir(cache: Path, repo_id: str, commit: str, repo_type: str = "model") -> Path:
    return cache / f"{repo_type}s--{repo_id.replace('/', '--')}" / "snapshots" / commit


def snapshot_files(cache: Path, repo_id: str, commit: str) -> dict[str, Path]:
    snapshot = snapshot_dir(cache, repo_id, commit)
    return {str(p.relative_to(snapshot)): p for p in snapshot.rglob("*") if p.is_file()}


def policy_of(trust: dict, root: Path | None = None) -> Policy:
    """The policy of a pyproject.toml whose [tool.kernelpin.trust] is `trust` (with `root` as its trusted-root)."""
    table = dict(trust)
    if root is not None:
        table["trusted-root"] = str(root)
    return parse_policy({"tool": {"kernelpin": {"trust": table}}})
