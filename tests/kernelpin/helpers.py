"""Small helpers shared by the kernelpin tests (fixtures live in conftest.py)."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def snapshot_dir(cache: Path, repo_id: str, commit: str, repo_type: str = "model") -> Path:
    return cache / f"{repo_type}s--{repo_id.replace('/', '--')}" / "snapshots" / commit


def snapshot_files(cache: Path, repo_id: str, commit: str) -> dict[str, Path]:
    snapshot = snapshot_dir(cache, repo_id, commit)
    return {str(p.relative_to(snapshot)): p for p in snapshot.rglob("*") if p.is_file()}
