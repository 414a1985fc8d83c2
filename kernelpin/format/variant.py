"""Build variants: the names of `build/<variant>/` directories, what they stand for, and which one fits.

The grammar and the choice are those of HF `kernels` 0.19.1 (`kernels/_internals/variants.py`, `backends.py`,
`archs.py`): kernel-builder's legacy names (`torch213-cxx11-cu130-x86_64-linux`) and its new ones
(`torch-2.13-cxx11-cuda-13.0-cpython-3.10-abi3-x86_64-linux`, `torch-stable-abi-2.11-...`, `tvm-ffi-0.1-...`, the
SDK variants `sdk`, `sdk-<backend>`, `sdk-[<backend>-]cpython-...`, and `mlx-<backend>`), with the Python floor and
ABI tag (`abi3`; `abi3t` for free-threaded Python 3.15+) as selection inputs. tests/kernelpin/format/test_variant_vs_kernels.py
checks parse and choice against the installed kernels' own code; docs/kernelpin.md ("Which variant") lists where
kernelpin differs and why.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import field, replace

from kernelpin.errors import KernelpinError
from kernelpin.records import record

__untrusted_input__ = (
    "Backend.parse",
    "Variant.parse",
)  # parsers of input kernelpin does not control (kernelpin.errors)

TORCH, STABLE_ABI, TVM_FFI, NOARCH, MLX, SDK = "torch", "torch-stable-abi", "tvm-ffi", "noarch", "mlx", "sdk"

# Framework parts, legacy (torch213, torch-stable-abi211, tvm-ffi01: one-digit torch major, first digit of
# tvm-ffi) and new (torch-2.13, torch-stable-abi-2.11, tvm-ffi-0.1), as kernels' regexes read them. This table's
# patterns and the backend tags' are compiled on first use (re's cache): a load reads the one or two its lock names.
_FRAMEWORK_PATTERNS = {
    (TORCH, True): r"torch([0-9])([0-9]+)(?:-(cxx11|cxx98))?",
    (TORCH, False): r"torch-([0-9]+)\.([0-9]+)(?:-(cxx11|cxx98))?",
    (STABLE_ABI, True): r"torch-stable-abi([0-9])([0-9]+)",
    (STABLE_ABI, False): r"torch-stable-abi-([0-9]+)\.([0-9]+)",
    (TVM_FFI, True): r"tvm-ffi([0-9]+?)([0-9]+)",
    (TVM_FFI, False): r"tvm-ffi-([0-9]+)\.([0-9]+)",
}
_CXX_TAGS = ("cxx11", "cxx98")
# A legacy backend tag: its version's minor is the last digit (cu128 = CUDA 12.8, rocm71, xpu20253 = XPU 2025.3,
# cann81), except ROCm 7.14 (rocm714). New names spell them cuda-12.8, rocm-7.14, xpu-2025.3, cann-8.1.
_BACKEND_TAG_PATTERNS = {
    "cuda": r"cu([0-9]+)([0-9]+)",
    "rocm": r"rocm(7(?=14\Z)|[0-9]+)([0-9]+)",
    "xpu": r"xpu([0-9]+)([0-9]+)",
    "cann": r"cann([0-9]+)([0-9]+)",
}
_TAG_PREFIXES = {"cuda": "cu", "rocm": "rocm", "xpu": "xpu", "cann": "cann"}
# Backend names variants use for a backend that kernel-builder (metadata.json's `backend`) calls otherwise:
# Python-only builds for Ascend NPUs are named after torch's device type, `torch-npu`, and record cann.
_BACKEND_ALIASES = {"npu": "cann"}
# The backend of Python-only builds that run on every backend (`torch-universal`).
UNIVERSAL = "universal"
_DOTTED = r"([0-9]+)\.([0-9]+)"  # new-format names only: compiled when first used (re caches it)
_UNVERSIONED_BACKENDS = ("cpu", "metal", "neuron", "tpu")
_BACKEND_LABELS = {
    "cuda": "CUDA",
    "rocm": "ROCm",
    "xpu": "XPU",
    "cann": "CANN",
    "cpu": "CPU",
    "metal": "Metal",
    "neuron": "Neuron",
    "tpu": "TPU",
}
# The Python floor and ABI of compiled parts: `cpython-3.10-abi3` in new names, implicit 3.9 and abi3 in legacy
# ones. abi3 does not load on free-threaded Python; abi3t (PEP 803) needs 3.15 and loads on both kinds.
PYTHON_MARKER, ABI3, ABI3T = "cpython", "abi3", "abi3t"
_ABIS = (ABI3, ABI3T)
LEGACY_PYTHON, ABI3T_MIN_PYTHON = (3, 9), (3, 15)
# Metal builds use -std=metal4.0, which needs macOS 26 (`kernels`' _METAL_MIN_MACOS_VERSION).
METAL_MIN_MACOS = (26, 0)

# What a build may list in backend.archs: CUDA compute capabilities ("8.0", "9.0a", "10.0f+PTX"), ROCm gfx
# names ("gfx942"), or forms a newer kernel-builder writes (`kernels` assumes those compatible).
_ARCH_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+:-]{0,63}\Z")
# Compiled when first used (re caches it): only a GPU machine compares archs.
_CUDA_ARCH = r"^(?P<major>[0-9]+)\.(?P<minor>[0-9]+)(?P<suffix>[af]?)(?P<ptx>\+PTX)?\Z"


def is_arch(text: str) -> bool:
    """Whether `text` can be an entry of backend.archs: a compute capability, a gfx name or another plain token."""
    return _ARCH_NAME_RE.match(text) is not None


def _dotted(pair: tuple[int, int]) -> str:
    return f"{pair[0]}.{pair[1]}"


class VariantNameError(KernelpinError, ValueError):
    """A variant name or a backend that cannot be read (a ValueError too, as these parsers always raised)."""


MAX_VARIANT_NAME = 255  # a variant is a directory: one path component


def _not_a_variant(name: str, why: str) -> VariantNameError:
    shown = repr(name[:MAX_VARIANT_NAME]) + ("..." if len(name) > MAX_VARIANT_NAME else "")
    return VariantNameError(
        f"not a kernel variant name: {shown} ({why}; expected e.g. 'torch213-cxx11-cu130-x86_64-linux', "
        "'torch-2.13-cuda-13.0-cpython-3.10-abi3-x86_64-linux', 'torch-stable-abi211-rocm71-x86_64-linux', "
        "'tvm-ffi01-cu130-x86_64-linux', 'torch-cuda', 'mlx-metal' or 'sdk-cpu-cpython-3.12-abi3-x86_64-linux')"
    )


@record
class Backend:
    """A backend as variant names spell it: `name` ("cpu", "cuda", "rocm", "xpu", "cann", "metal", "neuron",
    "tpu"; for Python-only builds and `sdk-<backend>` any name) and, for CUDA/ROCm/XPU/CANN, its (major, minor)."""

    name: str
    version: tuple[int, int] | None = None

    @property
    def tag(self) -> str:
        """The legacy spelling: cu130, rocm71, xpu20253, cpu, ..."""
        if self.version is None:
            return self.name
        return f"{_TAG_PREFIXES.get(self.name, self.name)}{self.version[0]}{self.version[1]}"

    def spelled(self, legacy: bool) -> str:
        """The backend's part of a variant name: its tag (legacy) or cuda-13.0, rocm-7.1, cpu, ... (new)."""
        return self.tag if legacy or self.version is None else f"{self.name}-{_dotted(self.version)}"

    def describe(self) -> str:
        label = _BACKEND_LABELS.get(self.name, self.name)
        return label if self.version is None else f"{label} {_dotted(self.version)}"

    @classmethod
    def parse(cls, tag: str) -> Backend:
        """A backend as one argument spells it: a legacy tag ('cu130', 'rocm71', 'xpu20253', 'cann81', 'cpu',
        'metal', ...) or a new one ('cuda-13.0', 'rocm-7.1')."""
        try:
            return cls.from_parts(tag.split("-"), legacy="-" not in tag)
        except ValueError:
            raise VariantNameError(
                f"not a backend: {tag[:80]!r} (expected cpu, cu<XY> such as cu130 or cuda-13.0, rocm<XY> or rocm-X.Y, "
                "xpu<YYYYR> or xpu-YYYY.R, cann<XY> or cann-X.Y, metal, neuron or tpu)"
            ) from None

    @classmethod
    def from_parts(cls, parts: Sequence[str], legacy: bool) -> Backend:
        """The backend parts of a variant name, as kernels' parse_backend reads them: one part in the legacy
        format (cu128), a name and a dotted version (cuda, 12.8) or an unversioned name (cpu) in the new one."""
        if legacy:
            if len(parts) != 1:
                raise ValueError(f"a legacy backend is one part, not {list(parts)}")
            tag = parts[0]
            if tag in _UNVERSIONED_BACKENDS:
                return cls(tag)
            name = next(
                (
                    name
                    for name, prefix in (("cuda", "cu"), ("rocm", "rocm"), ("xpu", "xpu"), ("cann", "cann"))
                    if tag.startswith(prefix)
                ),
                None,
            )
            match = re.fullmatch(_BACKEND_TAG_PATTERNS[name], tag) if name else None
        else:
            name = parts[0] if parts else ""
            if name in _UNVERSIONED_BACKENDS and len(parts) == 1:
                return cls(name)
            match = re.fullmatch(_DOTTED, parts[1]) if name in _TAG_PREFIXES and len(parts) == 2 else None
        if match is None or name is None:
            raise ValueError(f"unknown backend {'-'.join(parts)!r}")
        return cls(name, (int(match[1]), int(match[2])))


CPU = Backend("cpu")


def cuda(major: int, minor: int) -> Backend:
    return Backend("cuda", (major, minor))


def _parse_python(parts: Sequence[str]) -> tuple[tuple[int, int], str]:
    """`cpython-<M>.<m>-<abi>`: the Python floor and ABI of a new-format name."""
    if len(parts) != 3 or parts[0] != PYTHON_MARKER:
        raise ValueError(f"expected {PYTHON_MARKER}-<version>-<abi>, got {'-'.join(parts)!r}")
    match = re.fullmatch(_DOTTED, parts[1])
    if match is None or parts[2] not in _ABIS:
        raise ValueError(f"expected {PYTHON_MARKER}-<major>.<minor>-abi3|abi3t, got {'-'.join(parts)!r}")
    version = (int(match[1]), int(match[2]))
    if parts[2] == ABI3T and version < ABI3T_MIN_PYTHON:
        raise ValueError(f"abi3t needs Python {_dotted(ABI3T_MIN_PYTHON)} or later, not {_dotted(version)}")
    return version, parts[2]


@record
class Variant:
    """One build configuration, as `kernels` parses a variant name.

    `framework` TORCH: built for torch `version` exactly (`cxx11_abi` None when the name has no ABI tag);
    STABLE_ABI: against torch `version`'s stable ABI, so it runs on that torch and newer; TVM_FFI: for tvm-ffi
    `version` exactly; NOARCH (torch-<backend>) and MLX (mlx-<backend>): Python only, `backend` is the name after
    the dash (cuda, cann, universal, ...), `version`, `arch`, `os` are None; SDK: no framework, `backend` None
    (sdk), a name only (sdk-<backend>) or a backend with a system (sdk-[<backend>-]cpython-...).
    `python` and `abi` are the floor and ABI tag of compiled parts (None for Python-only builds and SDKs without
    a system); `legacy` says which spelling the name uses (both spellings of one build are the same variant).
    """

    framework: str
    version: tuple[int, int] | None
    backend: Backend | None
    arch: str | None = "x86_64"
    os: str | None = "linux"
    cxx11_abi: bool | None = None
    python: tuple[int, int] | None = LEGACY_PYTHON
    abi: str | None = ABI3
    legacy: bool = field(default=True, compare=False)

    @property
    def torch(self) -> tuple[int, int] | None:
        """The torch version a TORCH or STABLE_ABI build is for."""
        return self.version if self.framework in (TORCH, STABLE_ABI) else None

    @property
    def compiled(self) -> bool:
        """Whether the build has compiled parts (a system and a Python ABI)."""
        return self.arch is not None

    @property
    def recorded_backend(self) -> str | None:
        """The backend a build of this variant records in its metadata.json (kernel-builder's name: `torch-npu`
        builds record cann), or None where the variant names no one backend (`torch-universal`, `sdk`)."""
        if self.backend is None or self.backend.name == UNIVERSAL:
            return None
        return _BACKEND_ALIASES.get(self.backend.name, self.backend.name)

    @property
    def name(self) -> str:
        if self.framework in (NOARCH, MLX):
            assert self.backend is not None
            return f"{'torch' if self.framework == NOARCH else 'mlx'}-{self.backend.name}"
        parts: list[str] = []
        if self.framework == SDK:
            parts.append("sdk")
        else:
            assert self.version is not None
            major, minor = self.version
            if self.legacy:
                parts.append(
                    {TORCH: "torch", STABLE_ABI: "torch-stable-abi", TVM_FFI: "tvm-ffi"}[self.framework]
                    + f"{major}{minor}"
                )
            else:
                parts.append(f"{self.framework}-{major}.{minor}")
            if self.cxx11_abi is not None:
                parts.append("cxx11" if self.cxx11_abi else "cxx98")
        if self.backend is not None:
            parts.append(
                self.backend.name if self.framework == SDK and not self.compiled else self.backend.spelled(self.legacy)
            )
        if self.compiled:
            if not self.legacy:
                assert self.python is not None
                parts.append(f"{PYTHON_MARKER}-{_dotted(self.python)}-{self.abi}")
            parts.append(f"{self.arch}-{self.os}")
        return "-".join(parts)

    @classmethod
    def parse(cls, name: str) -> Variant:
        """Parse a variant directory name as kernels 0.19.1's `parse_variant` does; ValueError when it can't."""
        if len(name) > MAX_VARIANT_NAME:
            raise _not_a_variant(name, f"longer than the {MAX_VARIANT_NAME} characters of a directory name")
        parts = name.split("-")
        if parts[0] == SDK:
            return cls._parse_sdk(name, parts[1:])
        if name.startswith("torch-stable-abi"):
            framework, legacy = STABLE_ABI, not (len(parts) > 3 and parts[2] == "abi")
            count = 3 if legacy else 4
        elif parts[0] == "torch" and len(parts) >= 2 and parts[1][:1].isdigit():
            framework, legacy = TORCH, False
            count = 3 if len(parts) >= 3 and parts[2] in _CXX_TAGS else 2
        elif parts[0] == "torch":
            return cls(NOARCH, None, Backend("-".join(parts[1:])), None, None, python=None, abi=None)
        elif parts[0] == "mlx" and len(parts) >= 2 and not parts[1][:1].isdigit():
            return cls(MLX, None, Backend("-".join(parts[1:])), None, None, python=None, abi=None)
        elif parts[0].startswith("torch"):
            framework, legacy = TORCH, True
            count = 2 if len(parts) >= 2 and parts[1] in _CXX_TAGS else 1
        elif parts[0] == "tvm" and len(parts) >= 2 and parts[1].startswith("ffi"):
            framework, legacy = TVM_FFI, not (len(parts) > 2 and parts[1] == "ffi")
            count = 2 if legacy else 3
        else:
            raise _not_a_variant(name, "unknown framework")
        match = re.fullmatch(_FRAMEWORK_PATTERNS[framework, legacy], "-".join(parts[:count]))
        if match is None:
            raise _not_a_variant(name, f"unreadable {framework} version")
        rest = parts[count:]
        if len(rest) < 2:
            raise _not_a_variant(name, "no <cpu>-<os>")
        backend_parts, (arch, os_name) = rest[:-2], rest[-2:]
        python, abi = LEGACY_PYTHON, ABI3
        try:
            if not legacy:
                if PYTHON_MARKER not in backend_parts:
                    raise ValueError(f"a new-format name needs {PYTHON_MARKER}-<version>-<abi>")
                split = backend_parts.index(PYTHON_MARKER)
                (python, abi), backend_parts = _parse_python(backend_parts[split:]), backend_parts[:split]
            if not backend_parts:
                raise ValueError("no backend")
            backend = Backend.from_parts(backend_parts, legacy)
        except ValueError as error:
            raise _not_a_variant(name, str(error)) from None
        cxx11_abi = (
            None if framework != TORCH or match[3] is None else match[3] == "cxx11"
        )  # only torch's have a group 3"
        return cls(framework, (int(match[1]), int(match[2])), backend, arch, os_name, cxx11_abi, python, abi, legacy)

    @classmethod
    def _parse_sdk(cls, name: str, rest: list[str]) -> Variant:
        """sdk, sdk-<backend>, sdk-cpython-<M.m>-<abi>-<cpu>-<os>, sdk-<backend>[-<X.Y>]-cpython-...: kernels'
        parse_sdk_variant (a backend with a system is versioned where its kind is; one without is a name only)."""
        if PYTHON_MARKER not in rest:
            if len(rest) > 1:
                raise _not_a_variant(name, "an SDK without compiled parts names at most its backend")
            return cls(SDK, None, Backend(rest[0]) if rest else None, None, None, python=None, abi=None, legacy=False)
        try:
            if len(rest) < 2:
                raise ValueError("no <cpu>-<os>")
            rest, (arch, os_name) = rest[:-2], rest[-2:]
            if PYTHON_MARKER not in rest:
                raise ValueError(f"{PYTHON_MARKER}-<version>-<abi> must come before <cpu>-<os>")
            split = rest.index(PYTHON_MARKER)
            (python, abi), rest = _parse_python(rest[split:]), rest[:split]
            backend = Backend.from_parts(rest, legacy=False) if rest else None
        except ValueError as error:
            raise _not_a_variant(name, str(error)) from None
        return cls(SDK, None, backend, arch, os_name, None, python, abi, legacy=False)

    @classmethod
    def from_versions(cls, torch_version: str, cuda_version: str | None, arch: str, os: str = "linux") -> Variant:
        """The cxx11 variant of a build from version strings such as '2.11.0+cu130' and '13.0'."""
        torch_major, torch_minor = (int(part) for part in torch_version.split("+")[0].split(".")[:2])
        backend = CPU
        if cuda_version:
            cuda_major, cuda_minor = (int(part) for part in cuda_version.split(".")[:2])
            backend = cuda(cuda_major, cuda_minor)
        return cls(TORCH, (torch_major, torch_minor), backend, arch, os, cxx11_abi=True)


def this_python() -> tuple[int, int]:
    """This interpreter's (major, minor)."""
    return sys.version_info[0], sys.version_info[1]


@record
class Environment:
    """What a variant must fit: a running (or described) machine, with the backend selected for it.

    `backend` is the one `kernels` selects (the torch build's: CUDA, ROCm, XPU, Metal, CANN, ... or CPU; CPU
    also when asked for, as kernels' backend="cpu"). `cuda` is a shorthand: Environment(cuda=(13, 0)) is
    Environment(backend=Backend("cuda", (13, 0))). `cxx11_abi` is None where torch has no such ABI choice
    (`kernels` reads it on Linux only); `gpu_capability` (CUDA) and `gpu_arch` (ROCm gcnArchName, e.g.
    "gfx942") are None when no GPU is visible or described. `macos` is the macOS version on darwin,
    `tvm_ffi` the installed tvm-ffi's (major, minor), `python` the interpreter's (major, minor) (default: this
    one's), `free_threaded` whether it is a free-threaded build, `mlx` whether MLX is installed.
    """

    torch: tuple[int, int] | None
    cuda: tuple[int, int] | None = None
    arch: str = "x86_64"
    os: str = "linux"
    cxx11_abi: bool | None = True
    gpu_capability: tuple[int, int] | None = None
    backend: Backend | None = None
    gpu_arch: str | None = None
    macos: tuple[int, int] | None = None
    tvm_ffi: tuple[int, int] | None = None
    free_threaded: bool = False
    python: tuple[int, int] = field(default_factory=this_python)
    mlx: bool = False

    def __post_init__(self) -> None:
        if self.backend is None:
            object.__setattr__(self, "backend", CPU if self.cuda is None else cuda(*self.cuda))
        elif self.cuda is None and self.backend.name == "cuda":
            object.__setattr__(self, "cuda", self.backend.version)
        elif self.cuda is not None and self.backend != cuda(*self.cuda):
            raise ValueError(f"cuda={self.cuda} contradicts backend={self.backend}")

    @property
    def selected(self) -> Backend:
        assert self.backend is not None
        return self.backend

    def describe(self) -> str:
        system = self.os if self.macos is None else f"{self.os} {_dotted(self.macos)}"
        torch = "no torch" if self.torch is None else f"torch {_dotted(self.torch)}"
        if self.torch is not None and self.cxx11_abi is not None:
            torch += " (cxx11 ABI)" if self.cxx11_abi else " (pre-cxx11 ABI)"
        parts = [f"{system}/{self.arch}", torch, self.selected.describe() if self.selected != CPU else "no CUDA"]
        if self.gpu_capability is not None:
            parts.append(f"GPU capability {_dotted(self.gpu_capability)}")
        if self.gpu_arch is not None:
            parts.append(f"GPU {self.gpu_arch}")
        if self.tvm_ffi is not None:
            parts.append(f"tvm-ffi {_dotted(self.tvm_ffi)}")
        if self.mlx:
            parts.append("MLX")
        parts.append(f"{'free-threaded ' if self.free_threaded else ''}Python {_dotted(self.python)}")
        return ", ".join(parts)


@record
class Selection:
    """The chosen variant (None when nothing fits), why each other variant was passed over, when nothing fits
    what the user could ask for instead (`hint`, "" when nothing), and the ranking by name (`ranked`)."""

    chosen: str | None
    rejected: dict[str, str]
    hint: str = ""
    ranked: tuple[str, ...] = ()  # every variant that fits by name, best first (chosen first when it fits the GPU)

    def explain(self) -> str:
        lines = [f"  {name}: {reason}" for name, reason in sorted(self.rejected.items())]
        return "\n".join(lines + ([self.hint] if self.hint else []))


def cuda_arch_covers(arch: str, device: tuple[int, int]) -> bool | None:
    """Whether a compiled CUDA arch (TORCH_CUDA_ARCH_LIST syntax) runs on a device; None for another format.

    An `a` (arch-specific) build runs on that capability only, an `f` (family-specific) one and a plain one
    on M.d with d >= m; only a plain `+PTX` build is JIT-compiled forward onto any later capability.
    """
    match = re.match(_CUDA_ARCH, arch)
    if match is None:
        return None
    built = (int(match["major"]), int(match["minor"]))
    if match["suffix"] == "a":
        return device == built
    if match["ptx"] and not match["suffix"]:
        return device >= built
    return device[0] == built[0] and device[1] >= built[1]


def arch_rejection(variant: Variant, archs: Sequence[str] | None, env: Environment) -> str | None:
    """Why `variant`, listing `archs`, cannot run on the GPU of `env`, or None: `kernels`' check_arch, which it
    applies to the chosen variant only, for CUDA and ROCm builds. Without archs or a known GPU nothing is
    checked; CUDA archs none of which can be read are assumed to fit; a ROCm GPU's gfx name must be listed."""
    if not archs or variant.backend is None:
        return None
    if variant.backend.name == "cuda" and env.selected.name == "cuda" and env.gpu_capability is not None:
        covers = [cuda_arch_covers(arch, env.gpu_capability) for arch in archs]
        if all(cover is None for cover in covers) or any(covers):
            return None
        return f"compute capabilities {';'.join(archs)} do not cover this GPU's {_dotted(env.gpu_capability)}"
    if variant.backend.name == "rocm" and env.selected.name == "rocm" and env.gpu_arch is not None:
        gpu = env.gpu_arch.split(":")[0]  # gfx90a:sramecc+:xnack- -> gfx90a
        return None if gpu in archs else f"ROCm archs {';'.join(archs)} do not include this GPU's {gpu}"
    return None


def _python_rejection(variant: Variant, env: Environment) -> str | None:
    assert variant.python is not None
    if variant.abi == ABI3 and env.free_threaded:
        return "abi3 build; free-threaded Python loads abi3t builds only"
    if env.python < variant.python:
        return f"needs Python {_dotted(variant.python)} or later, this is {_dotted(env.python)}"
    return None


def _system_rejection(variant: Variant, env: Environment) -> str | None:
    if variant.arch != env.arch:
        return f"built for {variant.arch}, this is {env.arch}"
    if variant.os != env.os:
        return f"built for {variant.os}, this is {env.os}"
    return None


def _backend_rejection(built: Backend, env: Environment) -> str | None:
    """kernels' _backend_mismatch: CUDA and ROCm builds of the system's major and a minor up to its own fit;
    other backends must be the selected one exactly; Metal needs macOS 26."""
    backend = env.selected
    if built.name == backend.name and built.name in ("cuda", "rocm"):
        assert built.version is not None and backend.version is not None
        if built.version[0] != backend.version[0]:
            return f"{built.describe()} has another major version than the system's {_dotted(backend.version)}"
        if built.version[1] > backend.version[1]:
            return f"{built.describe()} > system {_dotted(backend.version)}"
        return None
    if built != backend:
        return f"{built.describe()} build, this machine's backend is {backend.describe()}"
    if built.name == "metal" and (env.macos is None or env.macos < METAL_MIN_MACOS):
        macos = "unknown" if env.macos is None else _dotted(env.macos)
        return f"Metal builds need macOS {_dotted(METAL_MIN_MACOS)} or later, this is macOS {macos}"
    return None


def rejection(variant: Variant, env: Environment) -> str | None:
    """Why `variant` (by its name) cannot run in `env`, or None when it can: `kernels`' rules."""
    backend = env.selected
    if variant.framework in (NOARCH, MLX):
        assert variant.backend is not None
        if variant.framework == MLX and not env.mlx:
            return "MLX build; MLX is not installed"
        if variant.backend.name in (backend.name, UNIVERSAL):
            return None
        return f"Python-only build for {variant.backend.name}; this machine's backend is {backend.name}"
    if variant.framework == SDK:
        reason = None
        if variant.compiled:
            reason = _python_rejection(variant, env) or _system_rejection(variant, env)
        if reason is None and variant.backend is not None:
            if not variant.compiled:
                if variant.backend.name != backend.name:
                    reason = f"SDK for {variant.backend.name}; this machine's backend is {backend.name}"
            else:
                reason = _backend_rejection(variant.backend, env)
        return reason
    reason = _python_rejection(variant, env) or _system_rejection(variant, env)
    if reason is not None:
        return reason
    assert variant.version is not None and variant.backend is not None
    if variant.framework == TORCH:
        if variant.version != env.torch:
            return f"torch {_dotted(variant.version)} != {'none' if env.torch is None else _dotted(env.torch)}"
        if variant.cxx11_abi is not None and variant.cxx11_abi != env.cxx11_abi:
            have = {True: "cxx11", False: "pre-cxx11", None: "no tagged"}[env.cxx11_abi]
            return f"C++ ABI differs from this torch's ({have})"
    elif variant.framework == STABLE_ABI:
        if env.torch is None or variant.version > env.torch:
            torch = "no torch" if env.torch is None else f"torch {_dotted(env.torch)}"
            return f"torch stable ABI {_dotted(variant.version)} is newer than {torch}"
    elif variant.version != env.tvm_ffi:
        tvm_ffi = "no tvm-ffi" if env.tvm_ffi is None else f"tvm-ffi {_dotted(env.tvm_ffi)}"
        return f"tvm-ffi {_dotted(variant.version)} build, this machine has {tvm_ffi}"
    return _backend_rejection(variant.backend, env)


def _backend_minor(backend: Backend | None) -> int:
    return -backend.version[1] if backend is not None and backend.version is not None else 0


def _python_order(variant: Variant) -> tuple[int, int, int]:
    assert variant.python is not None and variant.abi is not None
    return _ABIS.index(variant.abi), -variant.python[0], -variant.python[1]


def preference(variant: Variant) -> tuple[int, ...]:
    """Sort key among fitting variants, best first, as kernels 0.19.1 sorts: stable-ABI builds (newest ABI
    first), per-torch builds (untagged before ABI-tagged), tvm-ffi builds, SDKs with compiled parts
    (backend-agnostic last), Python-only builds (`torch-universal` last), `sdk-<backend>`, `sdk`; within each
    the highest backend minor (CUDA, ROCm, XPU, CANN) first, then abi3 before abi3t, then the highest Python
    floor. Where kernels' keys tie its order is the repository listing's (arbitrary); kernelpin's is by name."""
    if variant.framework in (TORCH, STABLE_ABI, TVM_FFI):
        assert variant.version is not None
        if variant.framework == STABLE_ABI:
            key = (0, -variant.version[0], -variant.version[1])
        elif variant.framework == TORCH:
            key = (1, 0, 0 if variant.cxx11_abi is None else 1)
        else:
            key = (2, 0, 0)
        return (*key, _backend_minor(variant.backend), *_python_order(variant))
    if variant.framework == SDK:
        if variant.compiled:
            return (3, 0, 0, 1 if variant.backend is None else _backend_minor(variant.backend), *_python_order(variant))
        return (5 if variant.backend is not None else 6, 0, 0, 0, 0, 0, 0)
    assert variant.backend is not None
    return (4, 0, 0, 1 if variant.backend.name == UNIVERSAL else 0, 0, 0)


def exact_build(env: Environment) -> str | None:
    """The name of the per-torch build made for exactly this environment (kernel-builder's classic output:
    what `select` chooses where no stable-ABI build fits), or None without a torch version."""
    if env.torch is None:
        return None
    return Variant(TORCH, env.torch, env.selected, env.arch, env.os, env.cxx11_abi).name


def select(variants: Mapping[str, Sequence[str] | None], env: Environment) -> Selection:
    """Choose among variant names (each with its backend.archs, None when unknown) for `env` as `kernels`
    does: the most preferred variant that fits by name, then its archs checked against the GPU. Like
    kernels, a preferred build whose archs miss the GPU is refused, not passed over for another."""
    rejected: dict[str, str] = {}
    fitting: list[tuple[Variant, str]] = []
    for name in variants:
        try:
            variant = Variant.parse(name)
        except ValueError:
            rejected[name] = "not a variant name kernelpin (or kernels) knows"
            continue
        reason = rejection(variant, env)
        if reason is None:
            fitting.append((variant, name))
        else:
            rejected[name] = reason
    if not fitting:
        return Selection(None, rejected, _cpu_hint(variants, env))
    fitting.sort(key=lambda item: (preference(item[0]), item[1]))
    ranked = tuple(name for _, name in fitting)
    (best, chosen), *others = fitting
    arch_reason = arch_rejection(best, variants[chosen], env)
    if arch_reason is not None:
        rejected[chosen] = arch_reason
        for _, other in others:
            rejected[other] = (
                f"fits, but {chosen} comes first and (as in kernels) a build missing the GPU is not passed over"
            )
        return Selection(None, rejected, _cpu_hint(variants, env), ranked)
    for _, other in others:
        rejected[other] = f"fits, but {chosen} is preferred"
    return Selection(chosen, rejected, ranked=ranked)


def _cpu_hint(variants: Mapping[str, Sequence[str] | None], env: Environment) -> str:
    """When nothing fits an accelerator's backend but a CPU build would: how to ask for it, as kernels'
    backend="cpu" does (kernels, like kernelpin, never takes a CPU build on its own there)."""
    if env.selected == CPU:
        return ""
    as_cpu = replace(env, cuda=None, backend=CPU, gpu_capability=None, gpu_arch=None)
    chosen = select(variants, as_cpu).chosen
    if chosen is None:
        return ""
    return (
        f"A CPU build fits ({chosen}): ask for it with `kernelpin sync --backend cpu` or "
        'kernelpin.load(..., backend="cpu") (kernels: backend="cpu").'
    )
