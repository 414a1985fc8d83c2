"""Build variants: the names of `build/<variant>/` directories and what they stand for."""

from __future__ import annotations

import re
from dataclasses import dataclass

_VARIANT_RE = re.compile(
    r"^torch(?P<torch_major>\d)(?P<torch_minor>\d+)"
    r"(?P<cxx11>-cxx11)?"
    r"-(?:(?P<cpu>cpu)|cu(?P<cuda_major>\d\d)(?P<cuda_minor>\d))"
    r"-(?P<arch>x86_64|aarch64)-(?P<os>linux)$"
)


@dataclass(frozen=True, order=True)
class Variant:
    """One build configuration: torch major.minor, CUDA major.minor (None for CPU), CPU arch, OS."""

    torch: tuple[int, int]
    cuda: tuple[int, int] | None
    arch: str = "x86_64"
    os: str = "linux"
    cxx11_abi: bool = True

    @property
    def name(self) -> str:
        backend = "cpu" if self.cuda is None else f"cu{self.cuda[0]}{self.cuda[1]}"
        abi = "-cxx11" if self.cxx11_abi else ""
        return f"torch{self.torch[0]}{self.torch[1]}{abi}-{backend}-{self.arch}-{self.os}"

    @classmethod
    def parse(cls, name: str) -> Variant:
        """Parse a variant directory name; raise ValueError naming the expected form."""
        match = _VARIANT_RE.match(name)
        if match is None:
            raise ValueError(
                f"not a kernel variant name: {name!r} "
                "(expected e.g. 'torch211-cxx11-cu130-x86_64-linux' or 'torch213-cxx11-cpu-x86_64-linux')"
            )
        cuda = None if match["cpu"] else (int(match["cuda_major"]), int(match["cuda_minor"]))
        return cls(
            torch=(int(match["torch_major"]), int(match["torch_minor"])),
            cuda=cuda,
            arch=match["arch"],
            os=match["os"],
            cxx11_abi=match["cxx11"] is not None,
        )

    @classmethod
    def from_versions(cls, torch_version: str, cuda_version: str | None, arch: str, os: str = "linux") -> Variant:
        """The variant of a build from version strings such as '2.11.0+cu130' and '13.0'."""
        torch_major, torch_minor = (int(part) for part in torch_version.split("+")[0].split(".")[:2])
        cuda = None
        if cuda_version:
            cuda_major, cuda_minor = (int(part) for part in cuda_version.split(".")[:2])
            cuda = (cuda_major, cuda_minor)
        return cls(torch=(torch_major, torch_minor), cuda=cuda, arch=arch, os=os)
