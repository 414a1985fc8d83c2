"""Per-capability builds from the fat build's own compile: one library per compiled capability, re-linked from the
same objects with the CUDA object's device code cut down to that capability.

nvcc embeds the device code of a translation unit as one fatbin container in the object's `.nv_fatbin` section:
a 16-byte header (magic 0xBA55ED50, version, header size, size of what follows) and one entry per image, each a
header (kind: 1 PTX, 2 ELF/SASS; its own header size and padded payload size; the SM number at byte 28) and its
payload (the same bytes `fatbinary` wrote; PTX compressed). Keeping the entries of one capability (its SASS, and
for the list's `+PTX` entry its PTX too) gives that capability's fatbin; `objcopy --update-section` puts it in a copy
of the object (a relocatable object: the section may change size, the relocation of `__fatDeviceText` points at
its start), and the fat build's own link line (build.ninja) links it with the other, unchanged objects. No device
code is compiled again: per capability the cost is one objcopy and one link (tools/maintainer/toolkits.py records
the seconds).
"""

from __future__ import annotations

import copy
import hashlib
import shlex
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelpin.files.atomic import staged_directory
from kernelpin.format import capabilities
from kernelpin.format.layout import METADATA
from kernelpin.format.metadata import render, sha256_base64

FATBIN_MAGIC = 0xBA55ED50
SECTION = ".nv_fatbin"
BESIDE = ".capabilities"  # where `tools.release stage` looks for a variant directory's builds: <dir>.capabilities/
KIND_PTX, KIND_ELF = 1, 2
_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, size of the entries
_ENTRY = struct.Struct("<HHIQ")  # kind, version, header size, padded payload size
_ENTRY_SM_OFFSET = 28


class FatbinError(ValueError):
    """Device code that is not the fatbin nvcc writes, or lacks what a capability needs."""


@dataclass(frozen=True)
class Image:
    kind: int  # KIND_PTX or KIND_ELF
    sm: int  # 80 for sm_80 / compute_80
    raw: bytes  # its header and payload, as in the container


def images(fatbin: bytes) -> list[list[Image]]:
    """The images of each container of a `.nv_fatbin` section (one container per translation unit)."""
    containers, offset = [], 0
    while offset < len(fatbin):
        if len(fatbin) - offset < _HEADER.size:
            if fatbin[offset:].strip(b"\0"):
                raise FatbinError(f"trailing bytes after the fatbin containers at offset {offset}")
            break
        magic, _, header_size, size = _HEADER.unpack_from(fatbin, offset)
        if magic != FATBIN_MAGIC:
            if not fatbin[offset:].strip(b"\0"):  # alignment padding between or after containers
                break
            raise FatbinError(f"no fatbin container at offset {offset} (magic {magic:#x}, not {FATBIN_MAGIC:#x})")
        position, end = offset + header_size, offset + header_size + size
        if end > len(fatbin):
            raise FatbinError(f"the container at offset {offset} claims {size} bytes, past the section's end")
        found = []
        while position < end:
            kind, _, entry_header, padded = _ENTRY.unpack_from(fatbin, position)
            (sm,) = struct.unpack_from("<I", fatbin, position + _ENTRY_SM_OFFSET)
            stop = position + entry_header + padded
            if stop > end or entry_header < _ENTRY_SM_OFFSET + 4:
                raise FatbinError(f"a fatbin entry at offset {position} runs past its container")
            found.append(Image(kind, sm, fatbin[position:stop]))
            position = stop
        containers.append(found)
        offset = end + (-end % 8)  # containers are 8-byte aligned
    return containers


def sm_of(arch: str) -> tuple[int, bool]:
    """(SM number, whether its PTX is kept) of a TORCH_CUDA_ARCH_LIST entry: "12.1+PTX" -> (121, True)."""
    name = capabilities.build_name(arch)
    if name[-1] in "af":
        raise FatbinError(f"{arch}: arch-specific and family builds are not split (their SM number is shared)")
    return int(name.removeprefix("sm_")), arch.endswith("+PTX")


def subset(fatbin: bytes, arch: str) -> bytes:
    """The fatbin of one capability: its SASS in every container, and its PTX where the entry says +PTX."""
    sm, ptx = sm_of(arch)
    out = b""
    for container in images(fatbin):
        kept = [i for i in container if i.sm == sm and (i.kind == KIND_ELF or (ptx and i.kind == KIND_PTX))]
        if not any(i.kind == KIND_ELF for i in kept) or (ptx and not any(i.kind == KIND_PTX for i in kept)):
            have = ", ".join(f"{'ptx' if i.kind == KIND_PTX else 'sm'}_{i.sm}" for i in container)
            raise FatbinError(f"{arch}: the device code has no {'SASS and PTX' if ptx else 'SASS'} for it ({have})")
        body = b"".join(i.raw for i in kept)
        out += _HEADER.pack(FATBIN_MAGIC, 1, _HEADER.size, len(body)) + body
        out += b"\0" * (-len(out) % 8)
    return out


def section(binary: Path, objcopy: str = "objcopy") -> bytes:
    """The `.nv_fatbin` section of an object or library (empty when it has none); `objcopy`: one that reads the
    binary's machine (aarch64-linux-gnu-objcopy for an AArch64 one)."""
    with tempfile.TemporaryDirectory(prefix="fatbin-") as scratch:
        out = Path(scratch) / "section"
        subprocess.run(
            [objcopy, "-O", "binary", f"--only-section={SECTION}", str(binary), str(out)],
            check=True,
            capture_output=True,
        )
        return out.read_bytes() if out.exists() else b""


def split_object(obj: Path, arch: str, out: Path) -> Path:
    """A copy of the CUDA object `obj` whose device code is that of `arch` alone."""
    with tempfile.TemporaryDirectory(prefix="fatbin-") as scratch:
        part = Path(scratch) / "part.fatbin"
        part.write_bytes(subset(section(obj), arch))
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["objcopy", f"--update-section={SECTION}={part}", str(obj), str(out)], check=True, capture_output=True
        )
    return out


@dataclass(frozen=True)
class LinkLine:
    """How the fat library was linked, read from the build.ninja torch's extension builder wrote."""

    compiler: list[str]
    objects: list[str]  # as build.ninja names them, relative to the build directory
    flags: list[str]
    cuda_objects: list[str]  # those compiled by nvcc (rule cuda_compile)


def link_line(build_dir: Path, library: str) -> LinkLine:
    variables: dict[str, str] = {}
    objects, cuda_objects = None, []
    for line in (build_dir / "build.ninja").read_text().splitlines():
        if line.startswith((" ", "\t")) or ("=" not in line and not line.startswith("build ")):
            continue
        if line.startswith("build "):
            outputs, _, rest = line[len("build ") :].partition(":")
            rule, *inputs = rest.split()
            if rule == "link" and outputs.strip() == library:
                objects = inputs
            elif rule == "cuda_compile":
                cuda_objects.append(outputs.strip())
        else:
            key, _, value = line.partition("=")
            variables[key.strip()] = value.strip()
    if objects is None or not cuda_objects:
        raise FatbinError(f"{build_dir}/build.ninja: no link of {library} from a CUDA object; was it a CUDA build?")
    return LinkLine(shlex.split(variables["cxx"]), objects, shlex.split(variables.get("ldflags", "")), cuda_objects)


def relink(build_dir: Path, library: str, arch: str, out: Path) -> Path:
    """The fat library linked again from the same objects, its CUDA objects cut down to `arch`."""
    line = link_line(build_dir, library)
    with tempfile.TemporaryDirectory(prefix="capability-", dir=build_dir) as scratch:
        objects = [
            str(split_object(build_dir / name, arch, Path(scratch) / name)) if name in line.cuda_objects else name
            for name in line.objects
        ]
        subprocess.run([*line.compiler, *objects, *line.flags, "-o", str(out)], cwd=build_dir, check=True)
    return out


def beside(variant: Path) -> Path:
    """Where a variant directory's per-capability builds are looked for when it is staged: <dir>.capabilities/."""
    return variant.with_name(variant.name + BESIDE)


def _digests(directory: Path) -> dict[str, str]:
    return {
        path.relative_to(directory).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file() and path.name != METADATA
    }


def write(
    variant: Path, metadata: dict[str, Any], build_dir: Path, library: str, archs: Iterable[str], into: Path
) -> dict[str, Any]:
    """Write one build per capability of `archs` into `into/<sm_XY>/` (replaced as a whole): the fat variant's
    files (`variant`, its metadata.json not yet written; `metadata` its document) with the library re-linked for
    that capability and a metadata.json of its own. Returns metadata.json's `capability-builds` listing."""
    listing: dict[str, Any] = {}
    with staged_directory(into.resolve()) as staging:
        for arch in archs:
            name = capabilities.build_name(arch)
            build = staging / name
            shutil.copytree(variant, build, ignore=shutil.ignore_patterns(METADATA, library, "__pycache__"))
            relink(build_dir, library.replace(".abi3.so", ".so"), arch, build / library)
            own = copy.deepcopy(metadata)
            own["backend"]["archs"] = [arch]
            files = _digests(build)
            own["digest"]["files"] = {path: sha256_base64(digest) for path, digest in files.items()}
            (build / METADATA).write_text(render(own))
            files[METADATA] = hashlib.sha256((build / METADATA).read_bytes()).hexdigest()
            listing[name] = {
                "archs": [arch],
                "files": {path: sha256_base64(digest) for path, digest in sorted(files.items())},
            }
    return listing
