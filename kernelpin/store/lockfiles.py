"""The project's lock files on disk: kernelpin.lock read and written (atomically), and a kernels.lock beside it
kept in step. Their formats are kernelpin.format.lockfile and kernelpin.format.kernels_lock, which read and render
text only."""

from __future__ import annotations

from pathlib import Path

from kernelpin.errors import KernelpinError
from kernelpin.format import lockfile


def read(path: Path) -> lockfile.Lock | None:
    """The lock at `path`, or None when there is none yet."""
    text = _text(path)
    return None if text is None else lockfile.parse(text, str(path))


def read_entries(path: Path) -> lockfile.LockEntries | None:
    """The lock at `path` as `load` reads it (each entry parsed when asked for), or None when there is none."""
    text = _text(path)
    return None if text is None else lockfile.LockEntries(text, str(path))


def _text(path: Path) -> str | None:
    if not path.is_file():
        return None
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise KernelpinError(
            f"{path}: not UTF-8 ({error.reason} at byte {error.start}); {lockfile.REGENERATE}"
        ) from None


def write(path: Path, lock: lockfile.Lock) -> None:
    from kernelpin.files.atomic import write_atomic  # writers only: `load` reads

    write_atomic(path, lockfile.render(lock))


def kernels_lock_out_of_step(path: Path, lock: lockfile.Lock) -> str | None:
    """Why the kernels.lock at `path` does not name kernelpin's commits, or None when it does (or is absent)."""
    if not path.is_file():
        return None
    from kernelpin.format import kernels_lock  # `lock` and `sync` only: `load` reads kernelpin.lock alone

    return kernels_lock.out_of_step(path.read_bytes(), lock)


def keep_kernels_lock(path: Path, lock: lockfile.Lock, dry_run: bool = False) -> list[str]:
    """Rewrite an existing kernels.lock with kernelpin's commits; the change lines, empty when in step."""
    if kernels_lock_out_of_step(path, lock) is None:
        return []
    from kernelpin.files.atomic import write_atomic
    from kernelpin.format import kernels_lock

    if not dry_run:
        write_atomic(path, kernels_lock.render(lock))
    return [kernels_lock.kept_in_step(lock)]
