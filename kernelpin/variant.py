"""Build variants: the names of `build/<variant>/` directories, what they stand for, and which one fits."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

_VARIANT_RE = re.compile(
    r"^torch(?P<torch_major>\d)(?P<torch_minor>\d+)"
    r"(?:-cxx(?P<abi>11|98))?"
    r"-(?:(?P<cpu>cpu)|cu(?P<cuda_major>\d\d)(?P<cuda_minor>\d))"
    r"-(?P<arch>x86_64|aarch64)-(?P<os>linux)$"
)

_ARCH_RE = re.compile(r"^(?P<major>\d{1,3})\.(?P<minor>\d{1,3})(?P<suffix>[af]?)(?P<ptx>\+PTX)?$")


def is_arch(text: str) -> bool:
    """Whether `text` is a compute capability in TORCH_CUDA_ARCH_LIST syntax ('8.0', '9.0a', '12.0+PTX')."""
    return _ARCH_RE.match(text) is not None


@dataclass(frozen=True, order=True)
class Variant:
    """One build configuration: torch major.minor, CUDA major.minor (None for CPU), CPU arch, OS.

    `cxx11_abi` is None when the name carries no ABI tag (upstream is dropping it; such builds fit either).
    """

    torch: tuple[int, int]
    cuda: tuple[int, int] | None
    arch: str = "x86_64"
    os: str = "linux"
    cxx11_abi: bool | None = True

    @property
    def name(self) -> str:
        backend = "cpu" if self.cuda is None else f"cu{self.cuda[0]}{self.cuda[1]}"
        abi = {True: "-cxx11", False: "-cxx98", None: ""}[self.cxx11_abi]
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
            cxx11_abi=None if match["abi"] is None else match["abi"] == "11",
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


@dataclass(frozen=True)
class Environment:
    """What a variant must fit: the running (or simulated) OS, CPU arch, torch, C++ ABI, CUDA and GPU."""

    torch: tuple[int, int]
    cuda: tuple[int, int] | None
    arch: str = "x86_64"
    os: str = "linux"
    cxx11_abi: bool = True
    gpu_capability: tuple[int, int] | None = None

    def describe(self) -> str:
        cuda = "no CUDA" if self.cuda is None else f"CUDA {_dotted(self.cuda)}"
        gpu = "" if self.gpu_capability is None else f", GPU capability {_dotted(self.gpu_capability)}"
        abi = "cxx11" if self.cxx11_abi else "pre-cxx11"
        return f"{self.os}/{self.arch}, torch {_dotted(self.torch)} ({abi} ABI), {cuda}{gpu}"


@dataclass(frozen=True)
class Selection:
    """The chosen variant (None when nothing fits) and why each other variant was passed over."""

    chosen: str | None
    rejected: dict[str, str] = field(default_factory=dict)

    def explain(self) -> str:
        return "\n".join(f"  {name}: {reason}" for name, reason in sorted(self.rejected.items()))


def _dotted(pair: tuple[int, int]) -> str:
    return f"{pair[0]}.{pair[1]}"


def arch_covers(arch: str, device: tuple[int, int]) -> bool:
    """Whether a compiled compute capability (TORCH_CUDA_ARCH_LIST syntax) runs on a device.

    SASS M.m runs on devices M.d with d >= m ("a" builds only on M.m exactly); "+PTX" P is JIT-compiled
    for any device >= P.
    """
    match = _ARCH_RE.match(arch.strip())
    if match is None:
        raise ValueError(f"not a compute capability: {arch!r} (expected e.g. '8.0', '9.0a' or '12.0+PTX')")
    built = (int(match["major"]), int(match["minor"]))
    if match["ptx"]:
        return device >= built
    if match["suffix"] == "a":
        return device == built
    return device[0] == built[0] and device[1] >= built[1]


def rejection(variant: Variant, archs: Sequence[str] | None, env: Environment) -> str | None:
    """Why `variant` cannot run in `env`, or None when it can."""
    if variant.os != env.os:
        return f"built for {variant.os}, this is {env.os}"
    if variant.arch != env.arch:
        return f"built for {variant.arch}, this is {env.arch}"
    if variant.torch != env.torch:
        return f"torch {_dotted(variant.torch)} != {_dotted(env.torch)}"
    if variant.cxx11_abi is not None and variant.cxx11_abi != env.cxx11_abi:
        return "C++ ABI differs from this torch's" + (" (cxx11)" if env.cxx11_abi else " (pre-cxx11)")
    if variant.cuda is None:
        return None
    if env.cuda is None:
        return f"CUDA {_dotted(variant.cuda)} build, this environment has no CUDA"
    if variant.cuda[0] != env.cuda[0]:
        return f"CUDA {_dotted(variant.cuda)} has another major version than the system's {_dotted(env.cuda)}"
    if variant.cuda[1] > env.cuda[1]:
        return f"CUDA {_dotted(variant.cuda)} > system {_dotted(env.cuda)}"
    if archs and env.gpu_capability is not None and not any(arch_covers(a, env.gpu_capability) for a in archs):
        return (
            f"compute capabilities {';'.join(archs)} do not cover this GPU's {_dotted(env.gpu_capability)}"
        )
    return None


def select(variants: Mapping[str, Sequence[str] | None], env: Environment) -> Selection:
    """Choose among variant names (each with its compute capabilities, None when unknown) for `env`.

    CUDA builds come first, the highest fitting CUDA minor winning; a CPU build is the fallback (and the
    only choice without CUDA).
    """
    rejected: dict[str, str] = {}
    fitting: list[tuple[Variant, str]] = []
    for name, archs in variants.items():
        try:
            variant = Variant.parse(name)
        except ValueError:
            rejected[name] = "not a variant name this loader knows"
            continue
        reason = rejection(variant, archs, env)
        if reason is None:
            fitting.append((variant, name))
        else:
            rejected[name] = reason
    if not fitting:
        return Selection(None, rejected)
    # Highest CUDA minor first, CPU (cuda None) last; an explicit ABI tag beats an untagged name.
    fitting.sort(key=lambda item: (item[0].cuda is not None, item[0].cuda or (0, 0), item[0].cxx11_abi is not None))
    (_, chosen), *others = reversed(fitting)
    for _, other in others:
        rejected[other] = f"fits, but {chosen} is preferred"
    return Selection(chosen, rejected)
