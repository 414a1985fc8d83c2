"""Install what the lock pins: choose the variant, download only it, verify every file before use."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kernelpin.errors import IntegrityError, KernelpinError, NoVariantError
from kernelpin.integrity import check_repo_path, discard_file, verify_file
from kernelpin.layout import BUILD_DIR
from kernelpin.lockfile import Lock, LockedFile, LockedKernel, LockedVariant
from kernelpin.source import HubSource
from kernelpin.variant import Environment, select


@dataclass
class SyncedVariant:
    repo_id: str
    label: str
    variant: str
    directory: Path
    downloaded: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # unlisted entries deleted from the variant directory


def choose_variant(kernel: LockedKernel, env: Environment) -> str:
    """The locked variant for `env`; when none fits, the error lists every variant and why it was rejected."""
    selection = select({v.name: v.archs for v in kernel.variants}, env)
    if selection.chosen is None:
        raise NoVariantError(
            f"{kernel.label}: no build variant fits this environment ({env.describe()}). "
            f"Variants at {kernel.commit[:12]}:\n{selection.explain()}\n"
            "Pick a kernel version built for this torch/CUDA, or change torch."
        )
    return selection.chosen


def checkout_dir(target: Path, kernel: LockedKernel) -> Path:
    """Where `--target` vendoring puts a kernel: DIR/<org>/<name>/<commit>/ (the repository layout below)."""
    org, name = kernel.repo_id.split("/")
    return target / org / name / kernel.commit


class Installer:
    """Puts locked files in the Hub cache (or a vendoring target) and vouches for every byte."""

    def __init__(self, source: HubSource, target: Path | None = None, tqdm_class: type | None = None) -> None:
        self.source, self.target, self.tqdm_class = source, target, tqdm_class

    def _lock_path(self, kernel: LockedKernel) -> Path:
        root = self.target if self.target is not None else self.source.settings.cache_dir
        return root / ".kernelpin-locks" / f"{kernel.repo_id.replace('/', '--')}--{kernel.commit}.lock"

    def present(self, kernel: LockedKernel, path: str) -> Path | None:
        if self.target is not None:
            candidate = checkout_dir(self.target, kernel) / path
            return candidate if candidate.is_file() else None
        return self.source.cached(kernel.repo_id, kernel.repo_type, kernel.commit, path)

    def _fetch(self, kernel: LockedKernel, path: str) -> Path:
        local_dir = None if self.target is None else checkout_dir(self.target, kernel)
        return self.source.download(kernel.repo_id, kernel.repo_type, kernel.commit, path, local_dir, self.tqdm_class)

    def _discard(self, kernel: LockedKernel, path: Path) -> None:
        blobs = None if self.target is not None else self.source.blobs_dir(kernel.repo_id, kernel.repo_type)
        discard_file(path, blobs)

    def install(self, kernel: LockedKernel, variant_name: str, repair: bool) -> SyncedVariant:
        """Make every file of one variant present and verified. A cached file that fails verification is
        discarded and downloaded again when `repair`, else it is an IntegrityError (load never repairs).
        When every file is present and verified nothing is written, so a read-only cache or target works."""
        variant = kernel.variant(variant_name)
        if variant is None:
            raise KernelpinError(f"{kernel.label}: variant {variant_name} is not in the lock")
        check_repo_path(variant.name, kernel.repo_id)
        prefix = f"{BUILD_DIR}/{variant.name}/"
        result = SyncedVariant(kernel.repo_id, kernel.label, variant.name, self.variant_directory(kernel, variant.name))
        files = [(prefix + check_repo_path(locked.path, kernel.repo_id), locked) for locked in variant.files]
        missing = [(path, locked) for path, locked in files if not self._reuse(kernel, path, locked, repair, result)]
        if missing:
            from filelock import FileLock  # only writers lock: loading verified files needs read access only

            lock_path = self._lock_path(kernel)
            lock_path.parent.mkdir(parents=True, exist_ok=True)
            with FileLock(str(lock_path)):
                for path, locked in missing:
                    # Another process may have installed it while this one waited for the lock.
                    if not self._reuse(kernel, path, locked, repair, result):
                        self._download(kernel, path, locked, result)
        if repair:
            for extra in unlisted_entries(result.directory, variant):
                _remove_entry(result.directory / extra)
                result.removed.append(f"{prefix}{extra}")
        return result

    def variant_directory(self, kernel: LockedKernel, variant_name: str) -> Path:
        if self.target is not None:
            return checkout_dir(self.target, kernel) / BUILD_DIR / variant_name
        snapshot = self.source.repo_folder(kernel.repo_id, kernel.repo_type) / "snapshots" / kernel.commit
        return snapshot / BUILD_DIR / variant_name

    def _reuse(self, kernel: LockedKernel, path: str, locked: LockedFile, repair: bool, result: SyncedVariant) -> bool:
        """Whether the installed file is present and verified; a bad one is discarded (repair) or refused."""
        present = self.present(kernel, path)
        if present is None:
            return False
        try:
            verify_file(present, locked.size, locked.sha256, f"{kernel.label}: {path}")
        except IntegrityError as error:
            if not repair:
                raise IntegrityError(
                    f"{error}. The installed file was modified or corrupted and is not used; "
                    "run `kernelpin sync` to replace it"
                ) from None
            self._discard(kernel, present)
            result.repaired.append(path)
            return False
        if path not in result.repaired:
            result.reused.append(path)
        return True

    def _download(self, kernel: LockedKernel, path: str, locked: LockedFile, result: SyncedVariant) -> None:
        fetched = self._fetch(kernel, path)
        try:
            verify_file(fetched, locked.size, locked.sha256, f"{kernel.label}: {path}")
        except IntegrityError as error:
            self._discard(kernel, fetched)
            raise IntegrityError(
                f"{error}. The downloaded file was deleted. The server's content differs from what was locked: "
                "if the publisher re-tagged on purpose, run `kernelpin lock --upgrade-package "
                f"{kernel.repo_id}`; otherwise do not trust this server"
            ) from None
        if path not in result.repaired:
            result.downloaded.append(path)


def unlisted_entries(directory: Path, variant: LockedVariant) -> list[str]:
    """Entries of a variant directory the lock does not list (planted files, links, bytecode caches):
    never imported, reported by `verify`, removed by `sync`. Links are not followed."""
    if not directory.is_dir():
        return []
    listed = {f.path for f in variant.files}
    parents = {"/".join(p.split("/")[:i]) for p in listed for i in range(1, p.count("/") + 1)}
    found = []

    def walk(folder: Path, relative: str) -> None:
        for entry in sorted(folder.iterdir()):
            name = f"{relative}{entry.name}"
            if name in parents and entry.is_dir() and not entry.is_symlink():
                walk(entry, name + "/")
            elif name not in listed or (entry.is_dir() and not entry.is_symlink()):
                found.append(name)

    walk(directory, "")
    return found


def _remove_entry(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)  # rmtree removes links inside without following them
    else:
        path.unlink(missing_ok=True)


def sync(
    lock: Lock,
    installer: Installer,
    env: Environment | None,
    all_variants: bool = False,
    repair: bool = True,
    only: Callable[[str], bool] = lambda repo_id: True,
) -> list[SyncedVariant]:
    """Install the variant each locked kernel needs in `env` (or every variant with `all_variants`)."""
    done = []
    for kernel in lock.kernels:
        if not only(kernel.repo_id):
            continue
        if all_variants:
            names = [v.name for v in kernel.variants]
        else:
            assert env is not None, "an environment is needed to choose variants"
            names = [choose_variant(kernel, env)]
        done.extend(installer.install(kernel, name, repair) for name in names)
    return done
