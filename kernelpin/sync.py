"""Install what the lock pins: choose the variant, download only it, verify every file before use."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock

from kernelpin.errors import IntegrityError, KernelpinError, NoVariantError
from kernelpin.integrity import check_repo_path, verify_file
from kernelpin.layout import BUILD_DIR
from kernelpin.lockfile import Lock, LockedFile, LockedKernel
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

    @staticmethod
    def _discard(path: Path) -> None:
        """Remove a bad file: in the Hub cache both the snapshot link and the blob it points at."""
        blob = path.resolve()
        path.unlink(missing_ok=True)
        blob.unlink(missing_ok=True)

    def install(self, kernel: LockedKernel, variant_name: str, repair: bool) -> SyncedVariant:
        """Make every file of one variant present and verified. A cached file that fails verification is
        discarded and downloaded again when `repair`, else it is an IntegrityError (load never repairs)."""
        variant = kernel.variant(variant_name)
        if variant is None:
            raise KernelpinError(f"{kernel.label}: variant {variant_name} is not in the lock")
        check_repo_path(variant.name, kernel.repo_id)
        prefix = f"{BUILD_DIR}/{variant.name}/"
        result = SyncedVariant(kernel.repo_id, kernel.label, variant.name, self._variant_directory(kernel, prefix))
        lock_path = self._lock_path(kernel)
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(lock_path)):
            for locked in variant.files:
                path = prefix + check_repo_path(locked.path, kernel.repo_id)
                self._install_file(kernel, path, locked, repair, result)
        return result

    def _variant_directory(self, kernel: LockedKernel, prefix: str) -> Path:
        if self.target is not None:
            return checkout_dir(self.target, kernel) / prefix.rstrip("/")
        # The Hub cache layout: <cache>/<type>s--<org>--<name>/snapshots/<commit>/<path>.
        repo_folder = f"{kernel.repo_type}s--{kernel.repo_id.replace('/', '--')}"
        return self.source.settings.cache_dir / repo_folder / "snapshots" / kernel.commit / prefix.rstrip("/")

    def _install_file(
        self, kernel: LockedKernel, path: str, locked: LockedFile, repair: bool, result: SyncedVariant
    ) -> None:
        what = f"{kernel.label}: {path}"
        present = self.present(kernel, path)
        if present is not None:
            try:
                verify_file(present, locked.size, locked.sha256, what)
                result.reused.append(path)
                return
            except IntegrityError as error:
                if not repair:
                    raise IntegrityError(
                        f"{error}. The installed file was modified or corrupted and is not used; "
                        "run `kernelpin sync` to replace it"
                    ) from None
                self._discard(present)
                result.repaired.append(path)
        fetched = self._fetch(kernel, path)
        try:
            verify_file(fetched, locked.size, locked.sha256, what)
        except IntegrityError as error:
            self._discard(fetched)
            raise IntegrityError(
                f"{error}. The downloaded file was deleted. The server's content differs from what was locked: "
                "if the publisher re-tagged on purpose, run `kernelpin lock --upgrade-package "
                f"{kernel.repo_id}`; otherwise do not trust this server"
            ) from None
        if path not in result.repaired:
            result.downloaded.append(path)


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
