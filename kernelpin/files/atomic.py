"""Atomic writes: a file or a directory is replaced whole, so readers never see a half-written one. Shared by
kernelpin (the lock, pyproject.toml) and the repository's tools (build outputs, the CI workflow, recipes)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def write_atomic(path: Path, text: str) -> None:
    """Write a text file so that readers see either the old or the new content, never a mix.

    A symbolic link (a pyproject.toml shared between checkouts, say) stays a link: its target is replaced.
    """
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        if path.exists():
            os.chmod(temporary, path.stat().st_mode & 0o777)
        else:
            os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink()  # mkstemp made it, and only this function removes it
        raise


@contextmanager
def staged_directory(target: Path) -> Iterator[Path]:
    """Yield an empty directory beside `target` to fill; when the block succeeds it takes `target`'s place.

    Readers see the old directory or the complete new one, never a half-written one; on failure the staging
    directory is removed and `target` is left as it was.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    staging.chmod(0o755)
    try:
        yield staging
        retired = staging.with_name(f"{staging.name}-old")
        if target.exists():
            target.rename(retired)
        staging.rename(target)
        shutil.rmtree(retired, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
