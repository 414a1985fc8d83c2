"""Local conda channels: index them, solve against them and install from them with py-rattler (pixi's engine)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from rattler import (
    BuildString,
    Channel,
    GenericVirtualPackage,
    PackageName,
    RepoDataRecord,
    Subdir,
    Version,
    VirtualPackage,
    install,
    solve,
)
from rattler.exceptions import SolverError
from rattler.index import index_fs
from rattler.repo_data import Gateway

# Sentinel for `cuda=`: use whatever virtual packages this machine really has.
DETECT = "detect"


class NoCandidateError(RuntimeError):
    """No build in the channels satisfies the request; the message lists what exists and why it was refused."""


def index_channel(channel_dir: Path) -> str:
    """Write repodata.json for every subdir of `channel_dir` (noarch included) and return the channel URL."""
    channel_dir = channel_dir.resolve()
    (channel_dir / "noarch").mkdir(parents=True, exist_ok=True)
    asyncio.run(index_fs(channel_dir, write_zst=False, write_shards=False, force=True))
    return channel_dir.as_uri()


def virtual_packages(cuda: str | None = DETECT) -> list[GenericVirtualPackage]:
    """This machine's virtual packages; `cuda` replaces `__cuda` ("13.0"), removes it (None) or keeps it."""
    detected = [package.into_generic() for package in VirtualPackage.detect()]
    if cuda == DETECT:
        return detected
    without_cuda = [package for package in detected if package.name.normalized != "__cuda"]
    if cuda is None:
        return without_cuda
    return [*without_cuda, GenericVirtualPackage(PackageName("__cuda"), Version(cuda), BuildString("0"))]


def solve_environment(
    channels: Sequence[str],
    specs: Sequence[str],
    *,
    cuda: str | None = DETECT,
    platform: str = "linux-64",
) -> list[RepoDataRecord]:
    """Solve `specs` against `channels` the way pixi does; raise NoCandidateError with an explanation."""
    subdirs = [Subdir(platform), Subdir("noarch")]
    try:
        return asyncio.run(
            solve(
                sources=[Channel(url) for url in channels],
                specs=list(specs),
                platforms=subdirs,
                virtual_packages=virtual_packages(cuda),
            )
        )
    except SolverError as error:
        raise NoCandidateError(_explain(channels, specs, subdirs, cuda, str(error))) from error


def _explain(
    channels: Sequence[str], specs: Sequence[str], subdirs: list[Subdir], cuda: str | None, solver: str
) -> str:
    names = [spec.split()[0].split("=")[0].split("[")[0] for spec in specs]
    records = asyncio.run(Gateway().query([Channel(url) for url in channels], subdirs, names, recursive=False))
    available = [
        f"  {record.name.normalized} {record.version} {record.build}  needs: {', '.join(record.depends) or '-'}"
        for per_channel in records
        for record in per_channel
    ]
    gpu = "no __cuda" if cuda is None else "__cuda " + cuda if cuda != DETECT else "detected virtual packages"
    return "\n".join(
        [
            f"no candidate satisfies {', '.join(specs)} on {subdirs[0]} ({gpu}).",
            "Builds in the channels:",
            *(available or ["  (none)"]),
            "Solver explanation:",
            solver,
        ]
    )


def install_environment(
    channels: Sequence[str],
    specs: Sequence[str],
    prefix: Path,
    *,
    cuda: str | None = DETECT,
    platform: str = "linux-64",
) -> list[RepoDataRecord]:
    """Solve `specs` and install the result into the fresh prefix `prefix`; return the installed records."""
    records = solve_environment(channels, specs, cuda=cuda, platform=platform)
    asyncio.run(install(records, target_prefix=prefix, show_progress=False))
    return records
