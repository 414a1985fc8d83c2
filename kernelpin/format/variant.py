"""Build variants: the names of `build/<variant>/` directories, what they stand for, and which one fits.

The grammar and the choice are those of HF `kernels` 0.17.2 (`kernels/variants.py`, `kernels/archs.py`),
checked against it by tests/kernelpin/test_variant_vs_kernels.py; docs/kernelpin.md ("Which variant")
lists where kernelpin differs and why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kernelpin.errors import NoVariantError

if TYPE_CHECKING:
    from kernelpin.format.lockfile import LockedKernel

TORCH, STABLE_ABI, TVM_FFI, NOARCH = "torch", "torch-stable-abi", "tvm-ffi", "noarch"

# The framework part of an arch build's name, as `kernels` reads it: torch<major><minor> (one digit, then the
# rest), torch-stable-abi<major><minor> likewise, tvm-ffi<major><minor> (the first digit is the major).
_TORCH_RE = re.compile(r"torch([0-9])([0-9]+)")
_STABLE_ABI_RE = re.compile(r"torch-stable-abi([0-9])([0-9]+)")
_TVM_FFI_RE = re.compile(r"tvm-ffi([0-9]+?)([0-9]+)")
# A backend tag: its version's minor is the last digit (cu128 = CUDA 12.8, rocm71, xpu20253 = XPU 2025.3, cann81).
_BACKEND_TAG_RE = re.compile(r"(?P<prefix>cu|rocm|xpu|cann)(?P<major>[0-9]+)(?P<minor>[0-9])")
_VERSIONED_BACKENDS = {"cu": "cuda", "rocm": "rocm", "xpu": "xpu", "cann": "cann"}
_UNVERSIONED_BACKENDS = ("cpu", "metal", "neuron", "tpu")
_BACKEND_LABELS = {"cuda": "CUDA", "rocm": "ROCm", "xpu": "XPU", "cann": "CANN", "cpu": "CPU", "metal": "Metal",
                   "neuron": "Neuron", "tpu": "TPU"}
# Metal builds use -std=metal4.0, which needs macOS 26 (`kernels`' _METAL_MIN_MACOS_VERSION).
METAL_MIN_MACOS = (26, 0)

# What a build may list in backend.archs: CUDA compute capabilities ("8.0", "9.0a", "10.0f+PTX"), ROCm gfx
# names ("gfx942"), or forms a newer kernel-builder writes (`kernels` assumes those compatible).
_ARCH_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+:-]{0,63}$")
_CUDA_ARCH_RE = re.compile(r"^(?P<major>[0-9]+)\.(?P<minor>[0-9]+)(?P<suffix>[af]?)(?P<ptx>\+PTX)?$")


def is_arch(text: str) -> bool:
    """Whether `text` can be an entry of backend.archs: a compute capability, a gfx name or another plain token."""
    return _ARCH_NAME_RE.match(text) is not None


def _dotted(pair: tuple[int, int]) -> str:
    return f"{pair[0]}.{pair[1]}"


@dataclass(frozen=True)
class Backend:
    """A backend as variant names spell it: `name` ("cpu", "cuda", "rocm", "xpu", "cann", "metal", "neuron",
    "tpu"; for Python-only builds any name after `torch-`) and, for CUDA/ROCm/XPU/CANN, its (major, minor)."""

    name: str
    version: tuple[int, int] | None = None

    @property
    def tag(self) -> str:
        if self.version is None:
            return self.name
        prefix = "cu" if self.name == "cuda" else self.name
        return f"{prefix}{self.version[0]}{self.version[1]}"

    @property
    def noarch_name(self) -> str:
        """The name Python-only builds use for this backend (`torch-npu` for CANN)."""
        return "npu" if self.name == "cann" else self.name

    def describe(self) -> str:
        label = _BACKEND_LABELS.get(self.name, self.name)
        return label if self.version is None else f"{label} {_dotted(self.version)}"

    @classmethod
    def parse(cls, tag: str) -> Backend:
        """A backend tag of a variant name ('cu130', 'rocm71', 'xpu20253', 'cann81', 'cpu', 'metal', ...)."""
        if tag in _UNVERSIONED_BACKENDS:
            return cls(tag)
        match = _BACKEND_TAG_RE.fullmatch(tag)
        if match is None:
            raise ValueError(
                f"not a backend tag: {tag!r} (expected cpu, cu<XY> such as cu130, rocm<XY>, xpu<YYYYR>, cann<XY>, "
                "metal, neuron or tpu)"
            )
        return cls(_VERSIONED_BACKENDS[match["prefix"]], (int(match["major"]), int(match["minor"])))


CPU = Backend("cpu")


def cuda(major: int, minor: int) -> Backend:
    return Backend("cuda", (major, minor))


@dataclass(frozen=True)
class Variant:
    """One build configuration, as `kernels` parses a variant name.

    `framework` TORCH: built for torch `version` exactly (`cxx11_abi` None when the name has no ABI tag);
    STABLE_ABI: against torch `version`'s stable ABI, so it runs on that torch and newer; TVM_FFI: for tvm-ffi
    `version` exactly; NOARCH: Python only (`version`, `arch`, `os` are None; `backend` is the name after
    `torch-`, e.g. cuda, npu, universal).
    """

    framework: str
    version: tuple[int, int] | None
    backend: Backend
    arch: str | None = "x86_64"
    os: str | None = "linux"
    cxx11_abi: bool | None = None

    @property
    def torch(self) -> tuple[int, int] | None:
        """The torch version a TORCH or STABLE_ABI build is for."""
        return self.version if self.framework in (TORCH, STABLE_ABI) else None

    @property
    def name(self) -> str:
        if self.framework == NOARCH:
            return f"torch-{self.backend.name}"
        assert self.version is not None
        major, minor = self.version
        if self.framework == STABLE_ABI:
            framework = f"torch-stable-abi{major}{minor}"
        elif self.framework == TVM_FFI:
            framework = f"tvm-ffi{major}{minor}"
        else:
            abi = {True: "-cxx11", False: "-cxx98", None: ""}[self.cxx11_abi]
            framework = f"torch{major}{minor}{abi}"
        return f"{framework}-{self.backend.tag}-{self.arch}-{self.os}"

    @classmethod
    def parse(cls, name: str) -> Variant:
        """Parse a variant directory name as `kernels.variants.parse_variant` does; ValueError when it can't."""
        parts = name.split("-")
        if name.startswith("torch-stable-abi"):
            framework, version, rest, cxx11_abi = STABLE_ABI, _STABLE_ABI_RE.fullmatch("-".join(parts[:3])), parts[3:], None
        elif parts[0] == "torch":
            return cls(NOARCH, None, Backend("-".join(parts[1:])), arch=None, os=None)
        elif parts[0].startswith("torch"):
            tagged = len(parts) >= 2 and parts[1] in ("cxx11", "cxx98")
            cxx11_abi = None if not tagged else parts[1] == "cxx11"
            framework, version, rest = TORCH, _TORCH_RE.fullmatch(parts[0]), parts[2 if tagged else 1:]
        elif parts[0] == "tvm" and len(parts) >= 2 and parts[1].startswith("ffi"):
            framework, version, rest, cxx11_abi = TVM_FFI, _TVM_FFI_RE.fullmatch(f"tvm-{parts[1]}"), parts[2:], None
        else:
            version, rest = None, []
        if version is None or len(rest) != 3:
            raise ValueError(
                f"not a kernel variant name: {name!r} (expected e.g. 'torch213-cxx11-cu130-x86_64-linux', "
                "'torch-stable-abi210-rocm71-x86_64-linux', 'tvm-ffi01-cu130-x86_64-linux' or 'torch-cuda')"
            )
        backend, arch, os_name = rest
        return cls(framework, (int(version[1]), int(version[2])), Backend.parse(backend), arch, os_name, cxx11_abi)

    @classmethod
    def from_versions(cls, torch_version: str, cuda_version: str | None, arch: str, os: str = "linux") -> Variant:
        """The cxx11 variant of a build from version strings such as '2.11.0+cu130' and '13.0'."""
        torch_major, torch_minor = (int(part) for part in torch_version.split("+")[0].split(".")[:2])
        backend = CPU
        if cuda_version:
            cuda_major, cuda_minor = (int(part) for part in cuda_version.split(".")[:2])
            backend = cuda(cuda_major, cuda_minor)
        return cls(TORCH, (torch_major, torch_minor), backend, arch, os, cxx11_abi=True)


@dataclass(frozen=True)
class Environment:
    """What a variant must fit: a running (or described) machine, with the backend selected for it.

    `backend` is the one `kernels` selects (the torch build's: CUDA, ROCm, XPU, Metal, CANN, ... or CPU; CPU
    also when asked for, as kernels' backend="cpu"). `cuda` is a shorthand: Environment(cuda=(13, 0)) is
    Environment(backend=Backend("cuda", (13, 0))). `cxx11_abi` is None where torch has no such ABI choice
    (`kernels` reads it on Linux only); `gpu_capability` (CUDA) and `gpu_arch` (ROCm gcnArchName, e.g.
    "gfx942") are None when no GPU is visible or described. `macos` is the macOS version on darwin,
    `tvm_ffi` the installed tvm-ffi's (major, minor), `free_threaded` a free-threaded Python before 3.15.
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
        if self.free_threaded:
            parts.append("free-threaded Python")
        return ", ".join(parts)


@dataclass(frozen=True)
class Selection:
    """The chosen variant (None when nothing fits), why each other variant was passed over, when nothing fits
    what the user could ask for instead (`hint`, "" when nothing), and the ranking by name (`ranked`)."""

    chosen: str | None
    rejected: dict[str, str] = field(default_factory=dict)
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
    match = _CUDA_ARCH_RE.match(arch)
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
    if not archs:
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


def rejection(variant: Variant, env: Environment) -> str | None:
    """Why `variant` (by its name) cannot run in `env`, or None when it can: `kernels`' rules."""
    backend = env.selected
    if variant.framework == NOARCH:
        if variant.backend.name in (backend.noarch_name, "universal"):
            return None
        return f"Python-only build for {variant.backend.name}; this machine's backend is {backend.noarch_name}"
    if env.free_threaded:
        return "compiled build; free-threaded Python before 3.15 cannot load it (no stable ABI)"
    if variant.arch != env.arch:
        return f"built for {variant.arch}, this is {env.arch}"
    if variant.os != env.os:
        return f"built for {variant.os}, this is {env.os}"
    assert variant.version is not None
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
    built = variant.backend
    if built.name == "cuda" and backend.name == "cuda":
        assert built.version is not None and backend.version is not None
        if built.version[0] != backend.version[0]:
            return f"CUDA {_dotted(built.version)} has another major version than the system's {_dotted(backend.version)}"
        if built.version[1] > backend.version[1]:
            return f"CUDA {_dotted(built.version)} > system {_dotted(backend.version)}"
        return None
    if built != backend:
        return f"{built.describe()} build, this machine's backend is {backend.describe()}"
    if built.name == "metal" and (env.macos is None or env.macos < METAL_MIN_MACOS):
        macos = "unknown" if env.macos is None else _dotted(env.macos)
        return f"Metal builds need macOS {_dotted(METAL_MIN_MACOS)} or later, this is macOS {macos}"
    return None


def preference(variant: Variant) -> tuple:
    """Sort key among fitting variants, best first, as `kernels` sorts: stable-ABI builds (newest ABI first),
    then per-torch builds (untagged before ABI-tagged), then tvm-ffi and Python-only builds, `torch-universal`
    last; the highest backend minor (CUDA, ROCm, XPU, CANN) first within each. Where kernels' keys tie (a
    tvm-ffi build whose backend minor is 0 or unversioned, and a Python-only build) its order is the
    repository listing's, i.e. arbitrary; kernelpin puts the tvm-ffi build first, as kernels' documentation
    orders them."""
    minor = -variant.backend.version[1] if variant.backend.version and variant.framework != NOARCH else 0
    if variant.framework == STABLE_ABI:
        assert variant.version is not None
        key = (0, -variant.version[0], -variant.version[1], minor)
    elif variant.framework == TORCH:
        key = (1, 0, 0 if variant.cxx11_abi is None else 1, minor)
    elif variant.framework == TVM_FFI:
        key = (2, 0, 0, minor)
    else:
        key = (2, 0, 0, 1 if variant.backend.name == "universal" else 0)
    return (*key, variant.framework == NOARCH)


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
    for name, archs in variants.items():
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
            rejected[other] = f"fits, but {chosen} comes first and (as in kernels) a build missing the GPU is not passed over"
        return Selection(None, rejected, _cpu_hint(variants, env), ranked)
    for _, other in others:
        rejected[other] = f"fits, but {chosen} is preferred"
    return Selection(chosen, rejected, ranked=ranked)


def _cpu_hint(variants: Mapping[str, Sequence[str] | None], env: Environment) -> str:
    """When nothing fits an accelerator's backend but a CPU build would: how to ask for it, as kernels'
    backend="cpu" does (kernels, like kernelpin, never takes a CPU build on its own there)."""
    if env.selected == CPU:
        return ""
    as_cpu = Environment(env.torch, None, env.arch, env.os, env.cxx11_abi, macos=env.macos, tvm_ffi=env.tvm_ffi,
                         free_threaded=env.free_threaded)
    chosen = select(variants, as_cpu).chosen
    if chosen is None:
        return ""
    return (f"A CPU build fits ({chosen}): ask for it with `kernelpin sync --backend cpu` or "
            "kernelpin.load(..., backend=\"cpu\") (kernels: backend=\"cpu\").")


def choose_variant(kernel: LockedKernel, env: Environment, check_arch: bool = True) -> str:
    """The locked variant for `env` (its GPU archs checked unless `check_arch` is false); when none fits, the
    error lists every variant and why it was rejected."""
    selection = select({v.name: v.archs if check_arch else None for v in kernel.variants}, env)
    if selection.chosen is None:
        archs = check_arch and select({v.name: None for v in kernel.variants}, env).chosen is not None
        raise NoVariantError(
            f"{kernel.label}: no build variant fits this environment ({env.describe()}). "
            f"Variants at {kernel.commit[:12]}:\n{selection.explain()}\n"
            + ("The declared GPU archs can be incomplete (a kernel with a Triton fallback): "
               "load(..., check_arch=False) skips their check." if archs else
               "Pick a kernel version built for this torch/CUDA, or change torch.")
        )
    return selection.chosen
