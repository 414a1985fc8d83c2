"""Build the img2gray operator into a relocatable kernel variant directory.

This is the one build of the operator: tests, the demo, the conda recipe and the release step all call it.

    python -m tools.build_op --out DIR [--cuda auto|on|off] [--glibc-floor 2.28|off] [--build-dir DIR] [--verbose]

DIR receives a flat Python package (`__init__.py`, `functional.py`, `_ops.py`, `_img2gray_<id>.abi3.so`,
`metadata.json`) that can be imported as `img2gray` or under any other module name.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from kernelpin import metadata as variant_metadata
from kernelpin.integrity import sha256_file, staged_directory
from kernelpin.layout import METADATA
from kernelpin.ranges import Version
from kernelpin.variant import Variant  # names the build; kernelpin is pure Python

ROOT = Path(__file__).resolve().parent.parent
CSRC = ROOT / "csrc"
TORCH_EXT = ROOT / "torch-ext"
PACKAGE = TORCH_EXT / "img2gray"
CPU_SOURCES = [CSRC / "img2gray_cpu.cpp", TORCH_EXT / "torch_binding.cpp"]
CUDA_SOURCES = [CSRC / "img2gray.cu"]
HEADERS = sorted(CSRC.glob("*.h")) + sorted(TORCH_EXT.glob("*.h"))
# Ordered float math (no FMA contraction) is part of the operator's contract: see csrc/img2gray.h.
# -fopenmp: at::parallel_for is inline and runs serially in a file compiled without it (torch's OpenMP
# backend); torch ships the libgomp it resolves to.
CXX_FLAGS = ["-O3", "-ffp-contract=off", "-fno-math-errno", "-fopenmp"]
NVCC_FLAGS = ["-O3", "-lineinfo", "--fmad=false"]
# Recorded in metadata.json as provenance "kernel-builder" (kernels requires its version).
BUILDER = {"name": "img2gray tools/build_op.py", "version": "1.0.0"}
GLIBC_FLOORS = ("2.28", "off")
GLIBC_FLOOR_HEADER = CSRC / "glibc_floor.h"


def glibc_floor_flags(floor: str) -> list[str]:
    """Compiler flags that keep glibc symbol versions <= the floor (manylinux_2_28): csrc/glibc_floor.h says how."""
    return [] if floor == "off" else ["-include", str(GLIBC_FLOOR_HEADER)]


@dataclass(frozen=True)
class BuildConfig:
    name: str
    version: str
    license: str
    cuda_capabilities: list[str]

    @classmethod
    def load(cls) -> BuildConfig:
        config = tomllib.loads((ROOT / "build.toml").read_text())
        general = config["general"]
        return cls(general["name"], general["version"], general["license"], list(config["cuda"]["capabilities"]))


def cuda_toolkit_available() -> bool:
    from torch.utils.cpp_extension import CUDA_HOME

    return CUDA_HOME is not None and Path(CUDA_HOME, "bin", "nvcc").exists()


def want_cuda(mode: str) -> bool:
    import torch

    available = torch.version.cuda is not None and cuda_toolkit_available()
    if mode == "on" and not available:
        raise SystemExit(
            f"build_op: --cuda on needs a CUDA-enabled torch (found {torch.__version__}) and nvcc "
            "(set CUDA_HOME or put nvcc on PATH)"
        )
    return available if mode == "auto" else mode == "on"


def arch_list(config: BuildConfig) -> str:
    return os.environ.get("TORCH_CUDA_ARCH_LIST") or ";".join(config.cuda_capabilities)


def build_id(config: BuildConfig, sources: list[Path], cuda: bool, glibc_floor: str = "2.28") -> str:
    """Content hash of everything that decides the binary: the op namespace is derived from it."""
    import torch

    digest = hashlib.sha256()
    for part in (config.name, config.version, torch.__version__, str(torch.version.cuda if cuda else None),
                 arch_list(config) if cuda else "", " ".join(CXX_FLAGS + (NVCC_FLAGS if cuda else [])),
                 f"glibc-floor={glibc_floor}"):
        digest.update(part.encode() + b"\0")
    for path in sorted(set(sources + HEADERS + [PACKAGE / "_ops.py.in"])):
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:10]


def source_commit() -> str | None:
    if commit := os.environ.get("IMG2GRAY_SOURCE_COMMIT"):
        return commit
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "csrc", "torch-ext", "build.toml"],
                               capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def compiler_version() -> str:
    compiler = os.environ.get("CXX", "c++")
    try:
        return subprocess.run([compiler, "--version"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return compiler


def compile_library(namespace: str, sources: list[Path], cuda: bool, build_dir: Path, verbose: bool,
                    glibc_floor: str = "2.28") -> Path:
    from torch.utils import cpp_extension

    build_dir.mkdir(parents=True, exist_ok=True)
    defines = (["-DIMG2GRAY_WITH_CUDA"] if cuda else []) + glibc_floor_flags(glibc_floor)
    return Path(
        cpp_extension.load(
            name=namespace,
            sources=[str(s) for s in sources],
            extra_cflags=CXX_FLAGS + defines,
            extra_cuda_cflags=NVCC_FLAGS + defines,
            extra_include_paths=[str(CSRC), str(TORCH_EXT)],
            build_directory=str(build_dir),
            with_cuda=cuda,
            is_python_module=False,
            verbose=verbose,
        )
    )


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
    from torch.utils import cpp_extension

    config = BuildConfig.load()
    nvcc = Path(cpp_extension.CUDA_HOME or "/usr/local/cuda", "bin", "nvcc")
    if not nvcc.exists():
        nvcc = Path(shutil.which("nvcc") or "nvcc")
    includes = list(cpp_extension.include_paths()) + [str(CSRC), str(TORCH_EXT)]
    shim = object_dir / "shim"
    generated = Path("c10/cuda/impl/cuda_cmake_macros.h")
    if not any(Path(inc, generated).exists() for inc in includes):
        (shim / generated).parent.mkdir(parents=True, exist_ok=True)
        (shim / generated).write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
        includes.append(str(shim))
    obj = object_dir / "img2gray.cu.o"
    command = [str(nvcc), "-std=c++20", "-c", str(CUDA_SOURCES[0]), "-o", str(obj), "-DIMG2GRAY_WITH_CUDA",
               "-Xptxas=-warn-spills", *NVCC_FLAGS, *glibc_floor_flags("2.28"), *gencode_flags(arch_list(config).split(";")),
               *(f"-I{inc}" for inc in includes)]
    subprocess.run(command, check=True)
    return obj


def build(out: Path, cuda_mode: str = "auto", build_root: Path | None = None, verbose: bool = False,
          glibc_floor: str = "2.28") -> dict:
    """Compile and lay out one variant directory at `out`; return its metadata."""
    import torch

    config = BuildConfig.load()
    cuda = want_cuda(cuda_mode)
    if cuda:
        os.environ["TORCH_CUDA_ARCH_LIST"] = arch_list(config)
    sources = CPU_SOURCES + (CUDA_SOURCES if cuda else [])
    namespace = f"_{config.name}_{build_id(config, sources, cuda, glibc_floor)}"
    library_name = f"{namespace}.abi3.so"
    build_dir = (build_root or ROOT / "build" / "obj") / namespace
    library = compile_library(namespace, sources, cuda, build_dir, verbose, glibc_floor)

    variant = Variant.from_versions(torch.__version__, torch.version.cuda if cuda else None, platform.machine())
    backend: dict = {"type": "cpu"}
    if cuda:
        backend = {"type": "cuda", "version": torch.version.cuda, "archs": arch_list(config).split(";")}

    # Assembled next to the destination, then swapped in: a reader never sees a half-written variant.
    with staged_directory(out.resolve()) as staging:
        for source in sorted(PACKAGE.glob("*.py")):
            shutil.copyfile(source, staging / source.name)
        template = (PACKAGE / "_ops.py.in").read_text()
        (staging / "_ops.py").write_text(template.replace("@NAMESPACE@", namespace).replace("@LIBRARY@", library_name))
        shutil.copyfile(library, staging / library_name)
        commit = source_commit()
        provenance = {
            "source_commit": commit,
            "compiler": compiler_version(),
            "glibc_floor": glibc_floor,
            "torch": torch.__version__,
            "cuda": torch.version.cuda if cuda else None,
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
            files={path.name: sha256_file(path) for path in staging.iterdir()},
            builder=BUILDER,
            provenance=provenance,
            extra={
                "torch": f"{variant.torch[0]}.{variant.torch[1]}",
                "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
                "os": variant.os,
                "arch": variant.arch,
            },
        )
        (staging / METADATA).write_text(variant_metadata.render(metadata))
    return metadata


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="variant directory to write (replaced if present)")
    parser.add_argument("--nvcc-check", action="store_true",
                        help="only compile the CUDA source with nvcc (no CUDA-enabled torch needed) and exit")
    parser.add_argument("--cuda", choices=["auto", "on", "off"], default="auto",
                        help="build the CUDA kernel too (auto: when torch has CUDA and nvcc is found)")
    parser.add_argument("--glibc-floor", choices=GLIBC_FLOORS, default="2.28",
                        help="keep glibc symbol versions <= 2.28 (manylinux_2_28, what Hub kernels must meet); "
                             "off: whatever the build machine's glibc headers give")
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
    metadata = build(args.out, args.cuda, args.build_dir, args.verbose, args.glibc_floor)
    print(f"built {metadata['name']} {metadata['semver']} ({metadata['variant']}, namespace {metadata['id']}) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
