"""Small helpers shared by the kernelpin tests (fixtures live in conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def fresh_interpreter(code: str) -> tuple[str, set[str]]:
    """Run `code` in a fresh interpreter, in the working directory, with this checkout first on its path:
    (what it printed, the names of every module loaded by then)."""
    script = f"{code}\nimport sys\nprint('\\nMODULES', *sys.modules)"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0, done.stderr
    output, _, modules = done.stdout.rpartition("\nMODULES ")
    return output, set(modules.split())


def snapshot_dir(cache: Path, repo_id: str, commit: str, repo_type: str = "model") -> Path:
    return cache / f"{repo_type}s--{repo_id.replace('/', '--')}" / "snapshots" / commit


def snapshot_files(cache: Path, repo_id: str, commit: str) -> dict[str, Path]:
    snapshot = snapshot_dir(cache, repo_id, commit)
    return {str(p.relative_to(snapshot)): p for p in snapshot.rglob("*") if p.is_file()}
