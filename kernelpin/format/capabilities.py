"""Per-capability builds of a CUDA variant: their names, their listing in the variant's signed metadata.json, and
which one a GPU runs (pure: no I/O).

A fat CUDA build carries device code for every capability it was compiled for. Beside it a release may carry one
build per capability (`capabilities/<variant>/sm_<XY>/`: the same files, the library holding that capability's
code alone; the build of the list's `+PTX` capability holds its PTX too), listed in the variant's metadata.json
under `capability-builds` with the sha256 of every file, so the variant's signature covers them. `kernels`
downloads `build/*` only and ignores the unknown key: for it the release is what it always was.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from kernelpin.errors import KernelpinError
from kernelpin.files.integrity import check_repo_path
from kernelpin.format.layout import CAPABILITY_BUILDS
from kernelpin.format.variant import cuda_arch_covers

__untrusted_input__ = ("parse_listing",)  # parsers of input kernelpin does not control (kernelpin.errors)

KEY = CAPABILITY_BUILDS  # in metadata.json: {"sm_80": {"archs": ["8.0"], "files": {path: base64 sha256}}}
NAME_RE = re.compile(r"^sm_[1-9][0-9]{1,2}[af]?\Z")
_ARCH_RE = re.compile(r"^(?P<major>[0-9]+)\.(?P<minor>[0-9])(?P<suffix>[af]?)(?P<ptx>\+PTX)?\Z")


def build_name(arch: str) -> str:
    """The directory of the build of one TORCH_CUDA_ARCH_LIST entry: "8.0" -> sm_80, "12.1+PTX" -> sm_121,
    "9.0a" -> sm_90a. ValueError for anything else."""
    match = _ARCH_RE.match(arch)
    if match is None:
        raise ValueError(f"{arch!r} is not a CUDA compute capability such as 8.0, 9.0a or 12.1+PTX")
    return f"sm_{match['major']}{match['minor']}{match['suffix']}"


class Choice(NamedTuple):
    """Which per-capability build a GPU takes: its name, how it runs there, or why none does."""

    name: str | None  # None: no per-capability build runs on the GPU
    how: str  # "exact", "compatible" (a lower minor of its major), "ptx" (JIT from PTX), or the reason for none


def choose(builds: Mapping[str, Sequence[str]], capability: tuple[int, int]) -> Choice:
    """The build (name -> its archs) that runs on a GPU of `capability`, best first: its own capability's code,
    else code of a lower minor of the same major (binary compatible), else PTX compiled forward by the driver."""
    ranked = []
    for name, archs in builds.items():
        for arch in archs:
            if not cuda_arch_covers(arch, capability):
                continue
            match = _ARCH_RE.match(arch)
            assert match is not None  # cuda_arch_covers read it
            built = (int(match["major"]), int(match["minor"]))
            sass = built[0] == capability[0] and (match["suffix"] != "" or built[1] <= capability[1])
            how = "exact" if built == capability else ("compatible" if sass else "ptx")
            # Own code first, then compatible code of the nearest minor, then the newest PTX.
            ranked.append(
                ((0 if how == "exact" else 1 if how == "compatible" else 2), (-built[0], -built[1]), name, how)
            )
    if not ranked:
        listed = ";".join(arch for archs in builds.values() for arch in archs)
        return Choice(None, f"compiled for {listed}")
    *_, name, how = min(ranked)
    return Choice(name, how)


def no_build_message(label: str, variant: str, capability: tuple[int, int], archs: Iterable[str]) -> str:
    """kernels#698's diagnostic, one line: the GPU is not a compiled target of this release."""
    return (
        f"{label}: this GPU (compute capability {capability[0]}.{capability[1]}) is not a compiled target of "
        f"{variant}, which was compiled for {';'.join(archs)} and has no PTX that runs on it; nothing was "
        'downloaded. Use a release compiled for this GPU (or a CPU build: backend="cpu")'
    )


def parse_listing(
    value: Any, decode: Callable[[str, Any], str], broken: Callable[[str], Exception]
) -> dict[str, tuple[tuple[str, ...], dict[str, str]]]:
    """metadata.json's `capability-builds`, checked: name -> (archs, {path: hex sha256}). `decode` turns one
    digest value into hex (metadata's own base64 reader); `broken` makes the error naming the problem."""
    if not isinstance(value, dict):
        raise broken(f'{KEY} must be an object such as {{"sm_80": {{"archs": ["8.0"], "files": {{...}}}}}}')
    listing = {}
    for name, entry in value.items():
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise broken(f"{KEY}: {str(name)[:40]!r} is not a capability build name such as sm_80")
        if not isinstance(entry, dict) or not isinstance(entry.get("files"), dict) or not entry["files"]:
            raise broken(f"{KEY}.{name} needs files (path -> sha256) and archs")
        archs = entry.get("archs")
        if (
            not isinstance(archs, list)
            or not archs
            or not all(isinstance(arch, str) and _ARCH_RE.match(arch) and build_name(arch) == name for arch in archs)
        ):
            raise broken(f'{KEY}.{name}.archs must list the capability it was built for, e.g. ["8.0"]')
        files = {}
        for path, digest in entry["files"].items():
            try:
                check_repo_path(path, f"{KEY}.{name}")
            except KernelpinError as error:  # its message names the listing, not the document: `broken` says which
                raise broken(str(error)) from None
            files[path] = decode(path, digest)
        listing[name] = (tuple(archs), files)
    return listing
