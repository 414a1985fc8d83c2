"""Build the img2gray operator into a relocatable kernel variant directory.

This is the one build of the operator: tests, the demo, the conda recipe and the release step all call it.

    python -m tools.builder.op --out DIR [--abi exact|stable] [--cuda auto|on|off] [--glibc-floor 2.28|off]
                             [--torch-cuda-libs DIR] [--build-dir DIR] [--verbose]

--abi exact (the default) links libtorch's C++ ABI: the variant serves one torch minor (`torch213-cxx11-...`).
--abi stable compiles build.toml's [torch.stable-abi] binding against torch's stable C shims only, with
-DTORCH_TARGET_VERSION of its version: the variant (`torch-stable-abi211-...`) serves that torch and every newer one.

CUDA: the exact build needs a CUDA-enabled torch and names its variant after torch.version.cuda. The stable build
takes its CUDA version from the toolkit it compiles with (`$CUDA_HOME/bin/nvcc --version`: a 12.9 toolkit makes
`torch-stable-abi211-cu129-...` whatever CUDA the build's torch has) and needs no CUDA torch: its headers are the
same in CPU and CUDA wheels, and only the CUDA shims' libraries (libtorch_cuda.so, libc10_cuda.so) are missing from
a CPU torch. --torch-cuda-libs DIR names a torch library directory that holds them (`torch/lib` of any CUDA torch
wheel of the target version or later); it is searched after the build torch's own, for those two only.

DIR receives a flat Python package (`__init__.py`, `functional.py`, `_ops.py`, `_img2gray_<id>.abi3.so`,
`metadata.json`) that can be imported as `img2gray` or under any other module name.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import hashlib
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kernelpin.files.atomic import staged_directory
from kernelpin.files.integrity import sha256_file
from kernelpin.format import capabilities
from kernelpin.format import metadata as variant_metadata
from kernelpin.format.layout import METADATA
from kernelpin.format.ranges import Version
from kernelpin.format.variant import (
    STABLE_ABI,
    Variant,  # names the build; kernelpin is pure Python
)
from tools.builder import capability_builds as capability_builds_of
from tools.builder.config import ABIS, BuildConfig

ROOT = Path(__file__).resolve().parents[2]

INCLUDE_DIRS = ["csrc", "torch-ext"]  # relative to the source root
# Where CUDA builds compile their sources from: a fixed place, since nvcc records the path (see staged_sources).
CUDA_STAGE_PARENT = Path("/tmp")
# Ordered float math (no FMA contraction) is part of the operator's contract: see csrc/img2gray.h.
# -fopenmp: at::parallel_for is inline and runs serially in a file compiled without it (torch's OpenMP
# backend); torch ships the libgomp it resolves to.
CXX_FLAGS = ["-O3", "-ffp-contract=off", "-fno-math-errno", "-fopenmp"]
NVCC_FLAGS = ["-O3", "-lineinfo", "--fmad=false"]
# libstdc++ is linked dynamically, as torch's own libraries link it, even where the compiler driver adds
# -static-libstdc++ (the H200 image's CXX wrapper does): a static copy would bring the build machine's glibc
# symbols (pthread_once@GLIBC_2.34, arc4random@GLIBC_2.36, __isoc23_strtoul@GLIBC_2.38, ...) past the
# manylinux_2_28 gate, and put a second libstdc++ next to torch's in the process. The shared library resolves
# every libstdc++ symbol before the driver's trailing static archive is read, so that contributes nothing.
# It is named by its runtime file name: such a driver's own library directory may hold only libstdc++.a
# (the H200 image's does), where a plain -lstdc++ would find the archive first.
LIBSTDCXX_DYNAMIC = ["-l:libstdc++.so.6"]


def stable_flags(config: BuildConfig, cuda: bool) -> list[str]:
    """Defines of a stable-ABI build: the target torch (the headers then offer nothing newer) and, for CUDA, the
    shims declared under USE_CUDA (aoti_torch_get_current_cuda_stream)."""
    assert config.stable_abi is not None
    return [f"-DTORCH_TARGET_VERSION={config.stable_abi.target:#018x}", *(["-DUSE_CUDA"] if cuda else [])]


def link_flags(cuda: bool, torch_cuda_libs: Path | None = None) -> list[str]:
    """Linker flags of the op library. torch's libraries come before libstdc++, as in the link line torch's
    extension builder writes itself: the std:: template instances they export bind there (unversioned), and
    only the rest binds to libstdc++.so.6, so no GLIBCXX/CXXABI version newer than the build needs is pulled
    in. `torch_cuda_libs` (a stable build on a CPU torch) is searched after torch's own directory, which then
    lacks only the CUDA libraries. Local symbols are dropped (-Wl,-x): nvcc names the host translation unit after a temp file carrying
    its process id (tmpxft_<pid>_...), and that file symbol would differ on every build."""
    from torch.utils.cpp_extension import TORCH_LIB_PATH

    # The stable build links the same libraries: its C shims live in torch_cpu (the CUDA ones in torch_cuda), and
    # c10 exports the std:: instances (stringstream, ...) that would otherwise bind to GLIBCXX_3.4.26+ symbols.
    torch_libraries = ["c10", "torch_cpu", "torch", *(["c10_cuda", "torch_cuda"] if cuda else [])]
    search = [f"-L{TORCH_LIB_PATH}", *([f"-L{torch_cuda_libs}"] if torch_cuda_libs else [])]
    return ["-Wl,-x", *search, *(f"-l{name}" for name in torch_libraries), *LIBSTDCXX_DYNAMIC]


# Recorded in metadata.json as provenance "kernel-builder" (kernels requires its version).
BUILDER = {"name": "img2gray tools/builder/op.py", "version": "1.0.0"}
GLIBC_FLOORS = ("2.28", "off")
GLIBC_FLOOR_HEADER = "csrc/glibc_floor.h"  # declared in build.toml, so staged and hashed with the sources
CONTRACT_HEADER = "torch-ext/contract.h"  # the op's schemas, declared in build.toml like the glibc floor
# What _ops.py.in receives from the contract header: placeholder -> the macro whose string it becomes.
SCHEMA_MACROS = {
    "@SCHEMA@": "IMG2GRAY_SCHEMA",
    "@OUT_SCHEMA@": "IMG2GRAY_OUT_SCHEMA",
    "@CHW_SCHEMA@": "IMG2GRAY_CHW_SCHEMA",
    "@HWC_SCHEMA@": "IMG2GRAY_HWC_SCHEMA",
}


def glibc_floor_flags(config: BuildConfig, floor: str) -> list[str]:
    """Compiler flags that keep glibc symbol versions <= the floor (manylinux_2_28): csrc/glibc_floor.h says how."""
    return [] if floor == "off" else ["-include", str(config.root / GLIBC_FLOOR_HEADER)]


def header_strings(header: str) -> dict[str, str]:
    """The string macros of a C header (`#define NAME "text" OTHER_NAME ...`), concatenated as the compiler does."""
    strings: dict[str, str] = {}
    for name, body in re.findall(
        r'^#define (\w+) ((?:"[^"\\]*"|\w+)(?: +(?:"[^"\\]*"|\w+))*)[ \t]*$', header, re.MULTILINE
    ):
        parts = re.findall(r'"([^"\\]*)"|(\w+)', body)
        if all(literal or word in strings for literal, word in parts):
            strings[name] = "".join(literal or strings[word] for literal, word in parts)
    return strings


def op_schemas(config: BuildConfig) -> dict[str, str]:
    """The op's schemas as the contract header defines them for the exact binding, for _ops.py.in."""
    strings = header_strings((config.root / CONTRACT_HEADER).read_text())
    missing = [macro for macro in SCHEMA_MACROS.values() if macro not in strings]
    if missing:
        raise SystemExit(f"build_op: {CONTRACT_HEADER} defines no string {', '.join(missing)}")
    return {placeholder: strings[macro] for placeholder, macro in SCHEMA_MACROS.items()}


def cuda_home() -> str | None:
    """The CUDA toolkit CUDA builds compile with: torch's CUDA_HOME. A CPU torch sets none (a stable build needs no
    CUDA torch), so then the one torch would find (CUDA_HOME, CUDA_PATH, nvcc on PATH, /usr/local/cuda)."""
    from torch.utils import cpp_extension

    return cpp_extension.CUDA_HOME or cpp_extension._find_cuda_home()


def cuda_toolkit_available() -> bool:
    home = cuda_home()
    return home is not None and Path(home, "bin", "nvcc").exists()


@contextlib.contextmanager
def extension_builder_cuda_home(home: str | None) -> Iterator[None]:
    """torch's extension builder with `home` as CUDA_HOME: it finds nvcc, CUDA's headers and cudart there, and a
    CPU torch leaves it unset."""
    from torch.utils import cpp_extension

    saved, cpp_extension.CUDA_HOME = cpp_extension.CUDA_HOME, home
    try:
        yield
    finally:
        cpp_extension.CUDA_HOME = saved


TORCH_CUDA_LIBRARIES = ("libtorch_cuda.so", "libc10_cuda.so")  # what --torch-cuda-libs must hold


def torch_cuda_problem(
    abi: str, torch_version: str, torch_cuda: str | None, torch_cuda_libs: Path | None
) -> str | None:
    """Why the build's torch cannot serve a CUDA build of `abi` (None: it can). An exact build links libtorch's C++
    ABI, so its torch must be the CUDA one it serves; a stable build needs only libtorch_cuda.so to link."""
    if abi == "exact" and torch_cuda is None:
        return f"with --abi exact needs a CUDA-enabled torch (found {torch_version})"
    if abi == "stable" and torch_cuda is None and torch_cuda_libs is None:
        return (
            f"with --abi stable needs libtorch_cuda.so, which torch {torch_version} lacks: "
            "name a CUDA torch's lib directory with --torch-cuda-libs DIR"
        )
    return None


def want_cuda(mode: str, abi: str = "exact", torch_cuda_libs: Path | None = None) -> bool:
    import torch

    if mode == "off":
        return False
    problem = torch_cuda_problem(abi, torch.__version__, torch.version.cuda, torch_cuda_libs)
    if problem is None and not cuda_toolkit_available():  # probed only when torch allows it: a CPU torch warns
        problem = "needs nvcc (set CUDA_HOME or put nvcc on PATH)"
    if mode == "on" and problem:
        raise SystemExit(f"build_op: --cuda on {problem}")
    return problem is None


def check_torch_cuda_libs(directory: Path, abi: str) -> Path:
    """`directory` resolved, after checking it can serve as --torch-cuda-libs."""
    if abi != "stable":
        raise SystemExit(
            "build_op: --torch-cuda-libs is for --abi stable: an exact build links the CUDA torch it compiles against"
        )
    missing = [name for name in TORCH_CUDA_LIBRARIES if not (directory / name).is_file()]
    if missing:
        raise SystemExit(
            f"build_op: --torch-cuda-libs {directory} lacks {', '.join(missing)}: name the torch/lib "
            "directory of a CUDA torch"
        )
    return directory.resolve()


def toolkit_cuda_version(nvcc_version: str) -> str:
    """The CUDA release of a toolkit, from its `nvcc --version` ("... release 12.9, V12.9.86" -> "12.9")."""
    match = re.search(r"\brelease (\d+\.\d+),", nvcc_version)
    if match is None:
        raise SystemExit(f"build_op: no CUDA release in the output of nvcc --version: {nvcc_version.strip()!r}")
    return match.group(1)


def build_cuda_version(abi: str, torch_cuda: str | None, nvcc_version: str) -> str:
    """The CUDA version a CUDA build serves (its variant's cuXYZ). An exact build serves its torch's CUDA; a stable
    build serves the CUDA of the toolkit it compiles with, whatever CUDA (if any) the build's torch has."""
    if abi == "stable":
        return toolkit_cuda_version(nvcc_version)
    assert torch_cuda is not None, "an exact CUDA build needs a CUDA torch (want_cuda)"
    return torch_cuda


def toolkit_nvcc() -> Path:
    """The nvcc of the toolkit CUDA builds compile with (cuda_home), else PATH's."""
    nvcc = Path(cuda_home() or "/usr/local/cuda", "bin", "nvcc")
    return nvcc if nvcc.exists() else Path(shutil.which("nvcc") or "nvcc")


def nvcc_version_output() -> str:
    return subprocess.run([str(toolkit_nvcc()), "--version"], capture_output=True, text=True, check=True).stdout


def arch_list(config: BuildConfig) -> str:
    """TORCH_CUDA_ARCH_LIST as given (the recipe sets it), else build.toml's list for the toolkit nvcc belongs to."""
    return os.environ.get("TORCH_CUDA_ARCH_LIST") or ";".join(
        config.capabilities_for(toolkit_cuda_version(nvcc_version_output()))
    )


def build_id(config: BuildConfig, cuda_version: str | None, glibc_floor: str = "2.28", abi: str = "exact") -> str:
    """Content hash of everything that decides the binary: the op namespace is derived from it.

    Paths enter only relative to the checkout (and the prefix maps are left out), so one commit gets one
    id wherever it is checked out. `cuda_version` is None for a CPU build.
    """
    import torch

    cuda = cuda_version is not None
    stable = []
    if abi == "stable":
        assert config.stable_abi is not None  # a stable-ABI build needs build.toml's stable ABI
        stable = [f"abi=stable-{config.stable_abi.version}"]
    digest = hashlib.sha256()
    for part in (
        config.name,
        config.version,
        torch.__version__,
        str(cuda_version),
        arch_list(config) if cuda else "",
        " ".join(CXX_FLAGS + (NVCC_FLAGS if cuda else [])),
        f"glibc-floor={glibc_floor}",
        *stable,
    ):
        digest.update(part.encode() + b"\0")
    for relative in sorted({*config.sources(cuda, abi), f"{config.package_dir}/_ops.py.in"}):
        digest.update(relative.encode() + b"\0" + (config.root / relative).read_bytes())
    return digest.hexdigest()[:10]


@contextlib.contextmanager
def staged_sources(
    config: BuildConfig, key: str, cuda: bool, stage_parent: Path = CUDA_STAGE_PARENT, abi: str = "exact"
) -> Iterator[BuildConfig]:
    """The config to compile from: the checkout itself for a CPU build, for a CUDA build a copy of exactly its
    declared sources at `<stage_parent>/<name>-sources-<key>` (`key` hashes their content: `build_id`).

    g++ records paths only where -ffile-prefix-map reaches. nvcc has no such map for device code: the names of
    anonymous namespaces hash the resolved source path and -lineinfo records the source directories (and each
    file's mtime), so every checkout of one commit must compile the same paths, dated alike. The copy is private to this build: a directory this user
    owns that nobody else can write (a planted one, a symlink or another user's is refused, never read), held
    under an exclusive lock (another build of the same sources waits), written afresh and removed afterwards.
    """
    if not cuda:
        yield config
        return
    stage = stage_parent / f"{config.name}-sources-{key}"
    lock = _lock_private_directory(stage)
    try:
        for leftover in stage.iterdir():  # a build of ours that was killed before its clean-up
            shutil.rmtree(leftover) if leftover.is_dir() and not leftover.is_symlink() else leftover.unlink()
        # -lineinfo's file table records each file's mtime too: the copies get the fixed build time.
        epoch = int(fixed_timestamp())
        for path in config.sources(cuda, abi):
            (stage / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(config.root / path, stage / path)
            os.utime(stage / path, (epoch, epoch))
        yield dataclasses.replace(config, root=stage)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        os.close(lock)  # after the removal: a waiting build then creates the directory anew


def _lock_private_directory(path: Path) -> int:
    """A descriptor holding an exclusive lock on `path`, created (0700) if missing; refuses what is not ours."""
    while True:
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
        try:
            descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except FileNotFoundError:  # removed by the build that held it, between mkdir and open
            continue
        except OSError as error:
            raise SystemExit(
                f"build_op: {path} is not a directory ({error.strerror}); remove it and build again"
            ) from None
        info = os.fstat(descriptor)
        if info.st_uid != os.getuid() or info.st_mode & 0o022:
            os.close(descriptor)
            raise SystemExit(
                f"build_op: {path} is not private to this build (owner uid {info.st_uid}, mode "
                f"{stat.S_IMODE(info.st_mode):o}); a CUDA build compiles only from a directory of its own: "
                "remove it (or let that user's build finish) and build again"
            )
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        if os.fstat(descriptor).st_nlink:  # still there: not removed by a build that held the lock before us
            return descriptor
        os.close(descriptor)


def prefix_maps(config: BuildConfig, cuda: bool) -> dict[str, str]:
    """Build-machine directories -> the fixed names recorded instead (in __FILE__ strings, debug info).

    The checkout, torch's headers and the CUDA toolkit would otherwise put their absolute paths into the
    library, and one commit built in two directories would differ.
    """
    import torch

    roots = {ROOT: config.name, config.root: config.name, Path(torch.__file__).parent: "torch"}
    if cuda and (home := cuda_home()):
        roots[Path(home)] = "cuda"
    maps: dict[str, str] = {}
    for directory, name in roots.items():
        for spelling in {str(directory), os.path.realpath(directory)}:  # as the compiler sees it, and resolved
            if "," in spelling or "=" in spelling:
                raise SystemExit(
                    f"build_op: cannot map the path {spelling!r} (it holds ',' or '='); "
                    "build from a directory without them"
                )
            maps[spelling] = f"/{name}"
    return maps


def prefix_map_flags(maps: dict[str, str]) -> tuple[list[str], list[str]]:
    """(g++ flags, nvcc flags). GCC tries the last -ffile-prefix-map first, so the longest paths go last:
    torch inside a virtual environment inside the checkout maps to /torch, not to /img2gray/.venv/..."""
    ordered = sorted(maps.items(), key=lambda item: len(item[0]))
    cxx = [f"-ffile-prefix-map={old}={new}" for old, new in ordered]
    cxx += [f"-fmacro-prefix-map={old}={new}" for old, new in ordered]
    return cxx, [flag for option in cxx for flag in ("-Xcompiler", option)]


def fixed_timestamp() -> str:
    """SOURCE_DATE_EPOCH for the compilers (__DATE__/__TIME__): the caller's, else the commit time, else 0."""
    if epoch := os.environ.get("SOURCE_DATE_EPOCH"):
        return epoch
    try:
        return (
            subprocess.run(
                ["git", "-C", str(ROOT), "log", "-1", "--format=%ct"], capture_output=True, text=True, check=True
            ).stdout.strip()
            or "0"
        )
    except (OSError, subprocess.CalledProcessError):
        return "0"


def source_commit() -> str | None:
    if commit := os.environ.get("IMG2GRAY_SOURCE_COMMIT"):
        return commit
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", *BuildConfig.load().build_inputs()],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def compiler_version() -> str:
    compiler = os.environ.get("CXX", "c++")
    try:
        return subprocess.run([compiler, "--version"], capture_output=True, text=True, check=True).stdout.splitlines()[
            0
        ]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return compiler


def compile_library(
    config: BuildConfig,
    namespace: str,
    cuda: bool,
    build_dir: Path,
    verbose: bool,
    glibc_floor: str = "2.28",
    abi: str = "exact",
    torch_cuda_libs: Path | None = None,
) -> Path:
    """Compile the sources of `config` (see staged_sources) into `build_dir`; return the library."""
    import torch
    from torch.utils import cpp_extension

    build_dir.mkdir(parents=True, exist_ok=True)
    defines = (["-DIMG2GRAY_WITH_CUDA"] if cuda else []) + glibc_floor_flags(config, glibc_floor)
    defines += stable_flags(config, cuda) if abi == "stable" else []
    # The stable build reaches torch's thread pool through a C shim: no OpenMP of its own.
    cxx_flags = [flag for flag in CXX_FLAGS if abi == "exact" or flag != "-fopenmp"]
    cxx_maps, nvcc_maps = prefix_map_flags(prefix_maps(config, cuda))
    with extension_builder_cuda_home(cuda_home() if cuda else cpp_extension.CUDA_HOME):
        try:
            return Path(
                cpp_extension.load(
                    name=namespace,
                    sources=[str(s) for s in config.compiled(cuda, abi)],
                    extra_cflags=cxx_flags + defines + cxx_maps,
                    extra_cuda_cflags=NVCC_FLAGS + defines + nvcc_maps,
                    extra_ldflags=link_flags(cuda, torch_cuda_libs),
                    extra_include_paths=[str(config.root / path) for path in INCLUDE_DIRS],
                    build_directory=str(build_dir),
                    with_cuda=cuda,
                    is_python_module=False,
                    verbose=verbose,
                )
            )
        except OSError:
            # load() loads what it built, and a torch without CUDA cannot load a library linked to libtorch_cuda.so
            # (--torch-cuda-libs): a failed build raises RuntimeError, so the library is built and is checked by the
            # ABI gate instead.
            if torch_cuda_libs is None or torch.version.cuda is not None:
                raise
            return build_dir / f"{namespace}.so"


def gencode_flags(archs: list[str]) -> list[str]:
    """nvcc -gencode flags for TORCH_CUDA_ARCH_LIST-style entries ("9.0", "12.0+PTX")."""
    flags = []
    for arch in archs:
        number = arch.removesuffix("+PTX").replace(".", "")
        flags.append(f"-gencode=arch=compute_{number},code=sm_{number}")
        if arch.endswith("+PTX"):
            flags.append(f"-gencode=arch=compute_{number},code=compute_{number}")
    return flags


def nvcc_compile_check(object_dir: Path) -> Path:
    """Compile the CUDA source to an object with the release flags, without a CUDA-enabled torch.

    CPU builds of torch ship the c10/cuda headers but not the one CMake generates for them; an
    equivalent is written to a private include dir so nvcc sees what a CUDA build of torch provides.
    """
    checkout = BuildConfig.load()
    with staged_sources(checkout, build_id(checkout, toolkit_cuda_version(nvcc_version_output())), cuda=True) as config:
        return _nvcc_compile(config, object_dir)


def _nvcc_compile(config: BuildConfig, object_dir: Path) -> Path:
    obj = object_dir / "img2gray.cu.o"
    command = nvcc_command(
        config, toolkit_nvcc(), object_dir, ["-c", "-o", str(obj)], gencode_flags(arch_list(config).split(";"))
    )
    subprocess.run(command, check=True, env={**os.environ, "SOURCE_DATE_EPOCH": fixed_timestamp()})
    return obj


def nvcc_command(config: BuildConfig, nvcc: Path, scratch: Path, output: list[str], targets: list[str]) -> list[str]:
    """nvcc compiling the CUDA source of `config` with the release flags (`output`: -c -o FILE, -ptx -o FILE;
    `targets`: -gencode/-arch flags), without a CUDA-enabled torch: CPU builds of torch ship the c10/cuda headers
    but not the one CMake generates for them, so an equivalent is written below `scratch`."""
    from torch.utils import cpp_extension

    includes = list(cpp_extension.include_paths()) + [str(config.root / path) for path in INCLUDE_DIRS]
    shim = scratch / "shim"
    generated = Path("c10/cuda/impl/cuda_cmake_macros.h")
    if not any(Path(inc, generated).exists() for inc in includes):
        (shim / generated).parent.mkdir(parents=True, exist_ok=True)
        (shim / generated).write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
        includes.append(str(shim))
    [cuda_source] = [path for path in config.compiled(cuda=True) if path.suffix == ".cu"]
    return [
        str(nvcc),
        "-std=c++20",
        str(cuda_source),
        *output,
        "-DIMG2GRAY_WITH_CUDA",
        "-Xptxas=-warn-spills",
        *NVCC_FLAGS,
        *glibc_floor_flags(config, "2.28"),
        *targets,
        *prefix_map_flags(prefix_maps(config, cuda=True))[1],
        *(f"-I{inc}" for inc in includes),
    ]


def build(
    out: Path,
    cuda_mode: str = "auto",
    build_root: Path | None = None,
    verbose: bool = False,
    glibc_floor: str = "2.28",
    abi: str = "exact",
    torch_cuda_libs: Path | None = None,
    capability_builds: Path | None = None,
) -> dict:
    """Compile and lay out one variant directory at `out`; return its metadata. `capability_builds`: a directory
    that receives one build per compiled capability (tools/builder/capability_builds.py), listed in the
    variant's metadata.json."""
    import torch

    config = BuildConfig.load()
    if torch_cuda_libs is not None:
        torch_cuda_libs = check_torch_cuda_libs(torch_cuda_libs, abi)
    cuda = want_cuda(cuda_mode, abi, torch_cuda_libs)
    cuda_version = build_cuda_version(abi, torch.version.cuda, nvcc_version_output()) if cuda else None
    if cuda:
        os.environ["TORCH_CUDA_ARCH_LIST"] = arch_list(config)
    os.environ["SOURCE_DATE_EPOCH"] = fixed_timestamp()  # read by the compilers cpp_extension starts
    config.binding_sources(abi)  # a clear error when build.toml declares no such build
    namespace = f"_{config.name}_{build_id(config, cuda_version, glibc_floor, abi)}"
    library_name = f"{namespace}.abi3.so"
    build_dir = (build_root or ROOT / "build" / "obj") / namespace
    with staged_sources(config, namespace, cuda, abi=abi) as sources:
        library = compile_library(sources, namespace, cuda, build_dir, verbose, glibc_floor, abi, torch_cuda_libs)

    variant = Variant.from_versions(torch.__version__, cuda_version, platform.machine())
    if abi == "stable":
        assert config.stable_abi is not None
        major, minor = config.stable_abi.version.split(".")
        stable_torch = (int(major), int(minor))
        variant = dataclasses.replace(variant, version=stable_torch, cxx11_abi=None, framework=STABLE_ABI)
    backend: dict = {"type": "cpu"}
    if cuda:
        backend = {"type": "cuda", "version": cuda_version, "archs": arch_list(config).split(";")}

    # Assembled next to the destination, then swapped in: a reader never sees a half-written variant.
    with staged_directory(out.resolve()) as staging:
        package = config.root / config.package_dir
        for source in sorted(package.glob("*.py")):
            shutil.copyfile(source, staging / source.name)
        ops_module = (package / "_ops.py.in").read_text()
        substitutions = {"@NAMESPACE@": namespace, "@LIBRARY@": library_name, "@ABI@": abi, **op_schemas(config)}
        for placeholder, value in substitutions.items():
            ops_module = ops_module.replace(placeholder, value)
        (staging / "_ops.py").write_text(ops_module)
        shutil.copyfile(library, staging / library_name)
        for relative, content in variant_metadata.compat_package(
            config.name
        ).items():  # for `kernels` before the flat layout
            (staging / relative).parent.mkdir(parents=True, exist_ok=True)
            (staging / relative).write_bytes(content)
        commit = source_commit()
        torch_minor = variant.torch
        assert torch_minor is not None  # a torch build
        provenance: dict[str, Any] = {
            "source_commit": commit,
            "compiler": compiler_version(),
            "glibc_floor": glibc_floor,
            "torch": torch.__version__,
            "cuda": cuda_version,
            "abi": abi,
        }
        if commit:  # kernels warns about builds from a dirty tree
            provenance["kernel"] = {"commit": commit.removesuffix("-dirty"), "dirty": commit.endswith("-dirty")}
        metadata = variant_metadata.compose(
            op_id=namespace,
            name=config.name,
            version=Version.parse(config.version),
            license=config.license,
            variant=variant.name,
            backend=backend,
            files={
                path.relative_to(staging).as_posix(): sha256_file(path) for path in staging.rglob("*") if path.is_file()
            },
            builder=BUILDER,
            provenance=provenance,
            # A kernel of its own (not a port of another project's) has its own repository as its upstream.
            upstream=config.upstream or config.repository,
            kernels_minver=config.kernels_minver,
            extra={
                "torch": f"{torch_minor[0]}.{torch_minor[1]}",
                **({"torch-stable-abi": config.stable_abi.version} if abi == "stable" and config.stable_abi else {}),
                "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
                "os": variant.os,
                "arch": variant.arch,
            },
        )
        if capability_builds is not None:
            if not cuda:
                raise SystemExit(
                    "build_op: --capability-builds is for CUDA builds (this build compiled no device code)"
                )
            # Written beside the variant (never inside it: `kernels` downloads build/<variant>/ whole), and listed
            # with their digests in its metadata.json, which a release signs.
            metadata[capabilities.KEY] = capability_builds_of.write(
                staging, metadata, build_dir, library_name, backend["archs"], capability_builds
            )
        (staging / METADATA).write_text(variant_metadata.render(metadata))
    return metadata


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="variant directory to write (replaced if present)")
    parser.add_argument(
        "--nvcc-check",
        action="store_true",
        help="only compile the CUDA source with nvcc (no CUDA-enabled torch needed) and exit",
    )
    parser.add_argument(
        "--abi",
        choices=ABIS,
        default="exact",
        help="exact: libtorch's C++ ABI, one torch minor; stable: torch's stable C ABI from "
        "build.toml [torch.stable-abi] version on (torch-stable-abi<maj><min>-... variants)",
    )
    parser.add_argument(
        "--cuda",
        choices=["auto", "on", "off"],
        default="auto",
        help="build the CUDA kernel too (auto: when torch has CUDA and nvcc is found)",
    )
    parser.add_argument(
        "--glibc-floor",
        choices=GLIBC_FLOORS,
        default="2.28",
        help="keep glibc symbol versions <= 2.28 (manylinux_2_28, what Hub kernels must meet); "
        "off: whatever the build machine's glibc headers give",
    )
    parser.add_argument(
        "--torch-cuda-libs",
        type=Path,
        default=None,
        metavar="DIR",
        help="--abi stable on a torch without CUDA: a CUDA torch's lib directory holding "
        "libtorch_cuda.so and libc10_cuda.so, to link the CUDA shims against",
    )
    parser.add_argument(
        "--capability-builds",
        type=Path,
        default=None,
        metavar="DIR",
        help="CUDA: also write one build per compiled capability into DIR/sm_XY/ (re-linked from the same "
        "objects, device code for that capability alone; the +PTX one keeps its PTX), listed in metadata.json; "
        "`python -m tools.release stage` takes them from DIR when it is the variant directory's name + "
        f"{capability_builds_of.BESIDE!r}",
    )
    parser.add_argument("--build-dir", type=Path, default=None, help="where objects are kept between builds")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    if args.nvcc_check:
        object_dir = (args.build_dir or ROOT / "build" / "nvcc-check").resolve()
        object_dir.mkdir(parents=True, exist_ok=True)
        print(f"nvcc compile check passed: {nvcc_compile_check(object_dir)}")
        return 0
    if args.out is None:
        parser.error("--out is required (or --nvcc-check)")
    metadata = build(
        args.out,
        args.cuda,
        args.build_dir,
        args.verbose,
        args.glibc_floor,
        args.abi,
        args.torch_cuda_libs,
        args.capability_builds,
    )
    print(
        f"built {metadata['name']} {metadata['semver']} ({metadata['variant']}, namespace {metadata['id']}) -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
