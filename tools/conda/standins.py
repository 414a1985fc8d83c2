"""Stand-in conda packages for an offline build: this machine's toolchain, python and torch as a channel.

The recipe asks for conda-forge packages (`compiler('cxx')`, `stdlib('c')`, `python`, `pytorch`, ...).
Where no conda channel can be reached, each of those is answered by a small, real conda package that
points at what the machine already has: the compiler activation exports the machine's `CXX`, the `python`
package's `bin/python` runs the interpreter that runs this tool (with the prefix's site-packages on its path),
`pytorch` carries conda-forge's build-string convention for the installed torch. Nothing here is read by the
recipe: the offline build selects these packages only through a variant-config override
(`offline_variant_overrides`).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

# Names the offline variant override gives to conda-forge's compiler/stdlib keys; "machine-" says they wrap
# the host's own tools rather than conda-forge's.
CXX_COMPILER = "machine-gxx"
CUDA_COMPILER = "machine-cuda-nvcc"
C_STDLIB = "machine-sysroot"


@dataclass(frozen=True)
class Machine:
    """What this machine offers to a build: interpreter, torch, compilers, CUDA toolkit."""

    python_executable: str
    python_version: str  # "3.11.7"
    torch_version: str  # "2.13.0" (local tag stripped)
    torch_cuda: str | None  # "13.0" for a CUDA-enabled torch, else None
    cxx: str
    cc: str
    gcc_version: str  # "12.2.0"
    glibc_version: str  # "2.36"
    ninja: str
    ninja_version: str
    cuda_home: str | None  # toolkit root holding bin/nvcc, when a CUDA build is possible
    nvcc_version: str | None  # "13.0.88"
    subdir: str = "linux-64"

    @property
    def python_minor(self) -> str:
        return ".".join(self.python_version.split(".")[:2])

    @property
    def torch_minor(self) -> str:
        return ".".join(self.torch_version.split(".")[:2])

    @property
    def cuda_version(self) -> str | None:
        """major.minor of the CUDA toolkit a CUDA variant can be built with here, or None."""
        if self.nvcc_version is None:
            return None
        return ".".join(self.nvcc_version.split(".")[:2])


def _run(*command: str) -> str:
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()


def _release_part(version: str) -> str:
    """The leading dotted numbers of a tool's version ("1.13.2.git.kitware.jobserver-pipe-1" -> "1.13.2")."""
    found = re.match(r"\d+(?:\.\d+)*", version)
    if found is None:
        raise RuntimeError(f"offline conda build: {version[:80]!r} is not a version")
    return found.group(0)


def _require_tool(name: str, found: str | None, fix: str) -> str:
    if not found:
        raise RuntimeError(f"offline conda build: no `{name}` found on this machine; {fix}")
    return found


def detect_machine() -> Machine:
    """Inspect the running interpreter, its torch and the host toolchain."""
    import torch
    from torch.utils import cpp_extension

    cxx = _require_tool("g++", shutil.which(os.environ.get("CXX") or "g++"), "install g++ or set CXX")
    cc = _require_tool("gcc", shutil.which(os.environ.get("CC") or "gcc"), "install gcc or set CC")
    scripts_dir = Path(sys.executable).parent
    ninja = _require_tool(
        "ninja",
        shutil.which("ninja") or shutil.which("ninja", path=str(scripts_dir)),
        "pip install ninja (torch's extension builder needs it)",
    )
    libc, glibc_version = platform.libc_ver()
    if libc != "glibc":
        raise RuntimeError(f"offline conda build needs a glibc Linux; found libc {libc!r}")
    cuda_home, nvcc_version = None, None
    if torch.version.cuda and cpp_extension.CUDA_HOME:
        nvcc = Path(cpp_extension.CUDA_HOME) / "bin" / "nvcc"
        if nvcc.exists():
            cuda_home = cpp_extension.CUDA_HOME
            nvcc_version = _nvcc_version(_run(str(nvcc), "--version"))
            if nvcc_version.split(".")[0] != torch.version.cuda.split(".")[0]:
                raise RuntimeError(
                    f"nvcc {nvcc_version} at {nvcc} does not match torch's CUDA {torch.version.cuda}; "
                    "set CUDA_HOME to a toolkit of the same major version"
                )
    return Machine(
        python_executable=sys.executable,
        python_version=platform.python_version(),
        torch_version=torch.__version__.split("+")[0],
        torch_cuda=torch.version.cuda,
        cxx=cxx,
        cc=cc,
        gcc_version=_run(cxx, "-dumpfullversion"),
        glibc_version=glibc_version,
        ninja=ninja,
        # pip's ninja reports e.g. "1.13.2.git.kitware.jobserver-pipe-1": keep the conda-valid release part.
        ninja_version=_release_part(_run(ninja, "--version")),
        cuda_home=cuda_home,
        nvcc_version=nvcc_version,
    )


def _nvcc_version(version_output: str) -> str:
    match = re.search(r"V(\d+\.\d+\.\d+)", version_output)
    if match is None:
        raise RuntimeError(f"cannot read the nvcc version from: {version_output!r}")
    return match.group(1)


@dataclass(frozen=True)
class StandIn:
    """One stand-in package: conda metadata plus the few files that bridge to the machine."""

    name: str
    version: str
    stands_for: str
    build_tag: str = "machine"  # build string prefix
    build_number: int = 0
    depends: tuple[str, ...] = ()
    constrains: tuple[str, ...] = ()
    strong_run_exports: tuple[str, ...] = ()
    weak_run_exports: tuple[str, ...] = ()
    files: dict[str, str] = field(default_factory=dict)  # path in prefix -> text; bin/* made executable

    @property
    def build_string(self) -> str:
        # The hash covers everything the package says, so a changed machine never reuses a cached package.
        digest = hashlib.sha256(json.dumps(self._identity(), sort_keys=True).encode()).hexdigest()[:7]
        return f"{self.build_tag}_h{digest}_{self.build_number}"

    def _identity(self) -> dict[str, object]:
        return {
            "name": self.name,
            "version": self.version,
            "depends": self.depends,
            "constrains": self.constrains,
            "run_exports": [self.strong_run_exports, self.weak_run_exports],
            "files": self.files,
        }


def _next_minor(version: str) -> str:
    major, minor = version.split(".")[:2]
    return f"{major}.{int(minor) + 1}"


def _activation(name: str, exports: dict[str, str]) -> dict[str, str]:
    lines = [f"# {name}: points the build at this machine's tools"]
    lines += [f'export {key}="{value}"' for key, value in exports.items()]
    return {f"etc/conda/activate.d/{name}.sh": "\n".join(lines) + "\n"}


def standins(machine: Machine) -> list[StandIn]:
    """The stand-in packages for `machine` (pure: the same machine gives the same packages)."""
    target = machine.subdir
    py_tag = "py" + machine.python_minor.replace(".", "")
    site_packages = f"lib/python{machine.python_minor}/site-packages"
    python_wrapper = (
        "#!/bin/sh\n"
        "# Stand-in python: the machine's interpreter with this prefix's site-packages first on its path.\n"
        'prefix="$(cd "$(dirname "$0")/.." && pwd)"\n'
        f'PYTHONPATH="$prefix/{site_packages}${{PYTHONPATH:+:$PYTHONPATH}}" '
        f'exec "{machine.python_executable}" "$@"\n'
    )
    torch_flavour = f"cuda{machine.torch_cuda.replace('.', '')[:3]}" if machine.torch_cuda else "cpu"
    packages = [
        StandIn(
            name="python",
            version=machine.python_version,
            stands_for=machine.python_executable,
            files={f"bin/python{machine.python_minor}": python_wrapper, f"{site_packages}/.keep": ""},
        ),
        StandIn(
            name="pytorch",
            version=machine.torch_version,
            stands_for=f"torch {machine.torch_version} ({torch_flavour}) of {machine.python_executable}",
            # conda-forge: {cpu|cudaXYZ}_{blas}_py{XY}_h{hash}_{n}, CUDA builds +200.
            build_tag=f"{torch_flavour}_generic_{py_tag}",
            build_number=200 if machine.torch_cuda else 0,
            depends=(f"python {machine.python_minor}.*",) + (("__cuda",) if machine.torch_cuda else ()),
            weak_run_exports=(f"pytorch >={machine.torch_version},<{_next_minor(machine.torch_version)}.0a0",),
        ),
        StandIn(
            name=f"{CXX_COMPILER}_{target}",
            version=machine.gcc_version,
            stands_for=machine.cxx,
            files=_activation(f"{CXX_COMPILER}_{target}", {"CXX": machine.cxx, "CC": machine.cc}),
        ),
        StandIn(
            name=f"{C_STDLIB}_{target}",
            version=machine.glibc_version,
            stands_for=f"the machine's glibc {machine.glibc_version}",
            strong_run_exports=(f"__glibc >={machine.glibc_version},<3.0.a0",),
        ),
        StandIn(
            name="ninja",
            version=machine.ninja_version,
            stands_for=machine.ninja,
            files={"bin/ninja": f'#!/bin/sh\nexec "{machine.ninja}" "$@"\n'},
        ),
    ]
    if machine.cuda_home and machine.cuda_version:
        cuda = machine.cuda_version
        cuda_range = f">={cuda},<{int(cuda.split('.')[0]) + 1}.0a0"
        packages += [
            StandIn(
                name=f"{CUDA_COMPILER}_{target}",
                version=machine.nvcc_version or cuda,
                stands_for=f"{machine.cuda_home}/bin/nvcc",
                files=_activation(
                    f"{CUDA_COMPILER}_{target}",
                    {
                        "CUDA_HOME": machine.cuda_home,
                        "CUDA_PATH": machine.cuda_home,
                        "NVCC": f"{machine.cuda_home}/bin/nvcc",
                    },
                ),
                strong_run_exports=(f"cuda-version {cuda_range}",),
            ),
            StandIn(
                name="cuda-version",
                version=cuda,
                stands_for=f"the CUDA {cuda} toolkit at {machine.cuda_home}",
                constrains=(f"__cuda >={cuda.split('.')[0]}",),
            ),
            StandIn(
                name="cuda-cudart-dev",
                version=cuda,
                stands_for=f"CUDA runtime headers and libraries in {machine.cuda_home}",
                depends=(f"cuda-version {cuda_range}",),
            ),
        ]
    return packages


def _recipe(standin: StandIn, files_dir: Path) -> dict[str, object]:
    requirements: dict[str, object] = {}
    if standin.depends:
        requirements["run"] = list(standin.depends)
    if standin.constrains:
        requirements["run_constraints"] = list(standin.constrains)
    run_exports = {
        kind: list(specs)
        for kind, specs in (("strong", standin.strong_run_exports), ("weak", standin.weak_run_exports))
        if specs
    }
    if run_exports:
        requirements["run_exports"] = run_exports
    return {
        "schema_version": 1,
        "package": {"name": standin.name, "version": standin.version},
        "build": {
            "number": standin.build_number,
            "string": standin.build_string,
            "script": [f'cp -R "{files_dir}/." "$PREFIX/"'],
            "dynamic_linking": {"binary_relocation": False},
        },
        "requirements": requirements,
        "about": {"summary": f"Offline stand-in for {standin.stands_for}", "license": "Apache-2.0"},
    }


def _stage_files(standin: StandIn, files_dir: Path) -> None:
    marker = {"stand-in": standin.name, "stands_for": standin.stands_for}
    files = {**standin.files, f"share/machine-standins/{standin.name}.json": json.dumps(marker, indent=2)}
    for relative, text in files.items():
        path = files_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if relative.startswith("bin/"):
            path.chmod(0o755)
    python_links = [name for name in standin.files if re.fullmatch(r"bin/python\d+\.\d+", name)]
    for link in python_links:  # bin/python and bin/python3 point at bin/pythonX.Y, as in conda-forge
        for alias in ("python", "python3"):
            (files_dir / "bin" / alias).symlink_to(Path(link).name)


def build_standin_channel(machine: Machine, channel_dir: Path, names: Collection[str] | None = None) -> str:
    """Build every stand-in (or those of `names`) into `channel_dir` (a conda channel, indexed) and return its
    file:// URL."""
    from rattler_build import Stage0Recipe, ToolConfiguration

    from tools.conda.channel import index_channel

    channel_dir = channel_dir.resolve()
    work_dir = channel_dir.parent / f"{channel_dir.name}-work"
    shutil.rmtree(work_dir, ignore_errors=True)
    for standin in standins(machine):
        if names is not None and standin.name not in names:
            continue
        recipe_dir = work_dir / standin.name
        files_dir = recipe_dir / "files"
        files_dir.mkdir(parents=True)
        _stage_files(standin, files_dir)
        recipe = Stage0Recipe.from_dict(_recipe(standin, files_dir), recipe_dir=recipe_dir)
        recipe.run_build(tool_config=ToolConfiguration(), output_dir=work_dir / "output", channels=[], no_build_id=True)
    for package in (work_dir / "output").glob("*/*.conda"):
        destination = channel_dir / package.parent.name / package.name
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(package, destination)
    shutil.rmtree(work_dir)
    return index_channel(channel_dir)


def offline_variant_overrides(machine: Machine) -> dict[str, list[str]]:
    """Variant values that make the recipe's requirements resolve to the stand-ins of `machine`.

    The flavour is the installed torch's: a CPU torch gives the CPU variant, a CUDA torch (with nvcc) the
    CUDA variant of its CUDA version. Keys zipped in the variant config get lists of equal length.
    """
    if machine.torch_cuda and machine.cuda_version is None:
        raise RuntimeError(
            f"torch {machine.torch_version} is a CUDA {machine.torch_cuda} build but no nvcc was found "
            "(set CUDA_HOME to the CUDA toolkit): the offline CUDA variant needs both"
        )
    return {
        "pytorch": [machine.torch_minor],
        "python_min": [machine.python_minor],
        "cxx_compiler": [CXX_COMPILER],
        "cxx_compiler_version": [machine.gcc_version.split(".")[0]],
        "cuda_compiler": [CUDA_COMPILER],
        "cuda_compiler_version": [machine.cuda_version or "None"],
        "c_stdlib": [C_STDLIB],
        "c_stdlib_version": [machine.glibc_version],
    }
