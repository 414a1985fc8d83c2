"""Every CUDA toolkit of the build matrix, installed from PyPI and compiling the op's device code here.

    python -m tools.maintainer.toolkits [--toolkit 13.2 ...] [--archs 9.0] [--install-only] [--write-table]
                                        [--keep DIR] [--out benchmarks/results/cpu/toolkits.json]

For each toolkit of build.toml's `[cuda.capabilities]` plus the newer releases the matrix builds with (13.2 takes
13.0's list), NVIDIA's wheels are installed with `pip install --no-deps --target build/toolkits/<release>/`
(cached: a prefix whose marker names the same pins is reused), then:

- its own list of what it compiles replaces the hand-kept table row: `nvcc --list-gpu-code` (CUDA 13), or, where
  PyPI has no nvcc driver (below), the SASS targets its `ptxas --help` names; every capability build.toml lists for
  it must be there, else the run fails naming it;
- the device code (csrc/img2gray.cu, op.py's flags) is compiled for build.toml's list of that toolkit: CUDA 13
  with the toolkit's own nvcc, the exact build's flavour for every capability and the stable build's
  (-DUSE_CUDA -DTORCH_TARGET_VERSION: only the host side of img2gray.cu differs) for the first capability only,
  whose cubin must equal the exact flavour's (the device code does not include ATen or the binding).

PyPI's CUDA 12 compilers are ptxas and libnvvm only: `nvidia-cuda-nvcc-cu12` 12.6.85 and 12.9.86 have no nvcc
driver, cicc, cudafe++ or fatbinary (and no `nvidia-nvvm-cu12` exists). For 12.6 and 12.9 the C++ front end is
therefore CUDA 13.0's (the local nvcc or the installed 13.0 prefix): it writes each capability's PTX, whose
`.version` line is lowered to the PTX ISA the CUDA 12 toolkit reads (8.5 for 12.6, 8.8 for 12.9), and the toolkit's
own ptxas assembles it for that capability. What is checked there is the CUDA 12 code generator for every
capability of its list, not its C++ front end. 12.9's `10.1` is 13.0's `11.0`: the PTX of compute_110 is assembled
as sm_101.

The whole run downloads about 400 MB and takes CPU-minutes (the record says how many): run it by hand with
`nice`, not in CI. tests/test_toolkits.py runs a CI-sized piece (one toolkit, one capability) when its prefix is
installed. The record (per toolkit: version, capabilities, seconds, CPU-minutes, sizes) goes to --out.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tools.builder.config import BuildConfig, cuda_release

ROOT = Path(__file__).resolve().parents[2]
PREFIXES = ROOT / "build" / "toolkits"
MARKER = ".installed"  # in a prefix: the pins it was installed with


@dataclass(frozen=True)
class Toolkit:
    """One CUDA toolkit of the matrix as PyPI has it."""

    release: str  # "12.6"
    packages: tuple[str, ...]  # pip requirements, each pinned
    ptx_isa: str | None = None  # CUDA 12 (ptxas only): the newest PTX ISA its ptxas reads

    @property
    def has_nvcc(self) -> bool:
        return self.ptx_isa is None

    def prefix(self, base: Path = PREFIXES) -> Path:
        return base / self.release

    def bin_dir(self, base: Path = PREFIXES) -> Path:
        return self.prefix(base) / "nvidia" / ("cu13" if self.has_nvcc else "cuda_nvcc") / "bin"


TOOLKITS = {
    toolkit.release: toolkit
    for toolkit in (
        Toolkit(
            "12.6",
            ("nvidia-cuda-nvcc-cu12==12.6.85", "nvidia-cuda-runtime-cu12==12.6.77", "nvidia-cuda-cccl-cu12==12.6.77"),
            ptx_isa="8.5",
        ),
        Toolkit(
            "12.9",
            ("nvidia-cuda-nvcc-cu12==12.9.86", "nvidia-cuda-runtime-cu12==12.9.79", "nvidia-cuda-cccl-cu12==12.9.27"),
            ptx_isa="8.8",
        ),
        Toolkit(
            "13.0",
            (
                "nvidia-cuda-nvcc==13.0.88",
                "nvidia-nvvm==13.0.88",
                "nvidia-cuda-crt==13.0.88",
                "nvidia-cuda-runtime==13.0.88",
                "nvidia-cuda-cccl==13.0.85",
            ),
        ),
        Toolkit(
            "13.2",
            (
                "nvidia-cuda-nvcc==13.2.86",
                "nvidia-nvvm==13.2.86",
                "nvidia-cuda-crt==13.2.86",
                "nvidia-cuda-runtime==13.2.86",
                "nvidia-cuda-cccl==13.2.86",
                "nvidia-cuda-cuobjdump==13.2.86",
                "nvidia-cuda-nvdisasm==13.2.86",  # cuobjdump -sass runs it
            ),
        ),
    )
}


class ToolkitError(RuntimeError):
    """A toolkit that cannot be installed, or cannot compile what build.toml asks of it."""


def install(toolkit: Toolkit, base: Path = PREFIXES) -> Path:
    """The toolkit's prefix, installed with pip unless a prefix of the same pins is there already."""
    prefix = toolkit.prefix(base)
    pins = "\n".join(toolkit.packages) + "\n"
    if (prefix / MARKER).is_file() and (prefix / MARKER).read_text() == pins:
        return prefix
    shutil.rmtree(prefix, ignore_errors=True)
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(prefix)]
    done = subprocess.run([*command, *toolkit.packages], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ToolkitError(
            f"CUDA {toolkit.release}: pip could not install {' '.join(toolkit.packages)}:\n{done.stderr}"
        )
    for tool in toolkit.bin_dir(base).parent.rglob("*"):  # wheels do not keep the executable bit everywhere
        if tool.is_file() and tool.parent.name == "bin":
            tool.chmod(0o755)
    (prefix / MARKER).write_text(pins)
    return prefix


def version(toolkit: Toolkit, base: Path = PREFIXES) -> str:
    """The toolkit's own version line: nvcc's (CUDA 13) or ptxas's ("V12.6.85")."""
    tool = toolkit.bin_dir(base) / ("nvcc" if toolkit.has_nvcc else "ptxas")
    output = subprocess.run([str(tool), "--version"], capture_output=True, text=True, check=True).stdout
    match = re.search(r"\bV(\d+\.\d+\.\d+)", output)
    if match is None:
        raise ToolkitError(f"{tool} --version names no version: {output.strip()!r}")
    return match.group(1)


def gpu_codes(toolkit: Toolkit, base: Path = PREFIXES) -> tuple[str, ...]:
    """The compute capabilities the toolkit compiles SASS for, from its own tools: `nvcc --list-gpu-code`, or the
    sm_XY values its ptxas --help allows (arch-specific `a`/`f` names left out: the lists name plain capabilities)."""
    if toolkit.has_nvcc:
        tool = [str(toolkit.bin_dir(base) / "nvcc"), "--list-gpu-code"]
    else:
        tool = [str(toolkit.bin_dir(base) / "ptxas"), "--help"]
    output = subprocess.run(tool, capture_output=True, text=True, check=True).stdout
    if not toolkit.has_nvcc:  # only the --gpu-name option's allowed values
        output = output.split("--gpu-name", 1)[1].split("\n--", 1)[0]
    numbers = sorted({int(number) for number in re.findall(r"\bsm_(\d+)\b", output)})
    return tuple(f"{number // 10}.{number % 10}" for number in numbers)


def check_list(release: str, wanted: Sequence[str], compiles: Sequence[str]) -> None:
    """Refuse a build.toml list naming a capability the toolkit's own tools do not compile."""
    missing = [arch for arch in wanted if arch.removesuffix("+PTX") not in compiles]
    if missing:
        raise ToolkitError(
            f"CUDA {release} cannot compile {', '.join(missing)} (build.toml [cuda.capabilities]); it compiles "
            f"{', '.join(compiles)}: change the list"
        )


@dataclass
class Compiled:
    """One toolkit's compile of the device code: what it made and what it cost."""

    release: str
    version: str
    compiles: tuple[str, ...]
    archs: tuple[str, ...]
    front_end: str  # whose nvcc parsed the C++: the toolkit's own, or CUDA 13.0's (CUDA 12 on PyPI)
    seconds: float = 0.0
    cpu_minutes: float = 0.0
    sizes: dict[str, int] = field(default_factory=dict)  # object / cubin name -> bytes
    notes: list[str] = field(default_factory=list)


def _timed(compiled: Compiled, command: list[str], env: dict[str, str] | None = None) -> None:
    before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False, env={**os.environ, **(env or {})})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    compiled.seconds += time.monotonic() - started
    compiled.cpu_minutes += (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) / 60
    if done.returncode != 0:
        raise ToolkitError(f"CUDA {compiled.release}: {shlex.join(command[:6])} ... failed:\n{done.stderr[-3000:]}")


AARCH64_CXX = "aarch64-linux-gnu-g++"  # Debian's cross compiler (apt-get install g++-aarch64-linux-gnu)
AARCH64_OBJCOPY = "aarch64-linux-gnu-objcopy"  # its binutils: the x86_64 objcopy does not read AArch64 objects


def compile_for_aarch64(toolkit: Toolkit, archs: Sequence[str], work: Path, base: Path = PREFIXES) -> Compiled:
    """The exact flavour's device code for a linux-aarch64 host: the toolkit's x86_64 nvcc with Debian's aarch64
    cross compiler as its host compiler (the device code is the host's business only in its stub). The object
    must be an AArch64 one; its SASS is compared with the x86_64 object's where that is in `work`."""
    from tools.builder import capability_builds
    from tools.builder.op import fixed_timestamp, gencode_flags, nvcc_command

    if not toolkit.has_nvcc:
        raise ToolkitError(f"CUDA {toolkit.release}: PyPI has no nvcc for it (ptxas only); no host to cross-compile")
    if shutil.which(AARCH64_CXX) is None:
        raise ToolkitError(f"no {AARCH64_CXX}: apt-get install g++-aarch64-linux-gnu")
    check_list(toolkit.release, archs, gpu_codes(toolkit, base))
    nvcc = toolkit.bin_dir(base) / "nvcc"
    compiled = Compiled(
        f"{toolkit.release} aarch64",
        version(toolkit, base),
        gpu_codes(toolkit, base),
        tuple(archs),
        f"nvcc + {AARCH64_CXX}",
    )
    work.mkdir(parents=True, exist_ok=True)
    obj = work / "img2gray-exact-aarch64.o"
    output = ["-c", "-o", str(obj), "-ccbin", AARCH64_CXX, "-Xcompiler", "-fPIC"]
    _timed(
        compiled,
        nvcc_command(BuildConfig.load(), nvcc, work, output, gencode_flags(list(archs))),
        {"SOURCE_DATE_EPOCH": fixed_timestamp()},
    )
    header = subprocess.run(["readelf", "-h", str(obj)], capture_output=True, text=True, check=True).stdout
    if "AArch64" not in header:
        raise ToolkitError(f"CUDA {toolkit.release}: {obj} is not an AArch64 object:\n{header}")
    compiled.sizes = {obj.name: obj.stat().st_size}
    x86 = work / "img2gray-exact.o"
    if x86.is_file():
        same = capability_builds.section(obj, AARCH64_OBJCOPY) == capability_builds.section(x86)
        compiled.notes.append(
            "AArch64 object; its device code (.nv_fatbin) is "
            + ("byte-identical to the x86_64 object's" if same else "not byte-identical to the x86_64 object's")
        )
    else:
        compiled.notes.append("AArch64 object (no x86_64 object in the work directory to compare with)")
    return compiled


def compile_device_code(
    toolkit: Toolkit, archs: Sequence[str], work: Path, base: Path = PREFIXES, front_end: Path | None = None
) -> Compiled:
    """Compile img2gray.cu for `archs` with the toolkit (see the module docstring); every capability listed must be
    one it compiles."""
    from tools.builder import capability_builds
    from tools.builder.op import fixed_timestamp, gencode_flags, nvcc_command, stable_flags

    config = BuildConfig.load()
    compiles = gpu_codes(toolkit, base)
    check_list(toolkit.release, archs, compiles)
    work.mkdir(parents=True, exist_ok=True)
    env = {"SOURCE_DATE_EPOCH": fixed_timestamp()}
    if toolkit.has_nvcc:
        nvcc = toolkit.bin_dir(base) / "nvcc"
        compiled = Compiled(
            toolkit.release, version(toolkit, base), compiles, tuple(archs), f"nvcc {version(toolkit, base)}"
        )
        exact = work / "img2gray-exact.o"
        pic = ["-Xcompiler", "-fPIC"]
        _timed(
            compiled,
            [*nvcc_command(config, nvcc, work, ["-c", "-o", str(exact), *pic], gencode_flags(list(archs)))],
            env,
        )
        # The stable binding's flavour differs in its host side only: one capability, its SASS compared.
        stable = work / "img2gray-stable.o"
        first = [archs[0].removesuffix("+PTX")]
        flavour = [*stable_flags(config, cuda=True), "-c", "-o", str(stable), *pic]
        _timed(compiled, nvcc_command(config, nvcc, work, flavour, gencode_flags(first)), env)
        compiled.notes.append(_compare_sass(toolkit, base, exact, stable, first[0]))
        compiled.sizes = {exact.name: exact.stat().st_size, stable.name: stable.stat().st_size}
        for container in capability_builds.images(capability_builds.section(exact)):
            for image in container:
                kind = "sm" if image.kind == capability_builds.KIND_ELF else "ptx"
                compiled.sizes[f"{kind}_{image.sm}"] = len(image.raw)
        return compiled
    # CUDA 12 from PyPI: CUDA 13.0's front end writes the PTX, the toolkit's ptxas assembles it.
    nvcc = front_end or Path(shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc")
    ptxas = toolkit.bin_dir(base) / "ptxas"
    compiled = Compiled(toolkit.release, version(toolkit, base), compiles, tuple(archs), f"{nvcc} (CUDA 13.0 cicc)")
    compiled.notes.append(
        f"PyPI's CUDA {toolkit.release} has ptxas and libnvvm only: PTX from CUDA 13.0's front end, its .version "
        f"lowered to ISA {toolkit.ptx_isa}, assembled by ptxas {compiled.version}"
    )
    for arch in archs:
        number = arch.removesuffix("+PTX").replace(".", "")
        front = RENAMED_IN_13.get(number, number)  # 12.9's sm_101 is CUDA 13's sm_110
        ptx, cubin = work / f"img2gray.compute_{number}.ptx", work / f"img2gray.sm_{number}.cubin"
        # One front end writes the PTX of both CUDA 12 toolkits: kept by capability beside the prefixes.
        cached = base / "ptx" / f"compute_{front}-{_front_end_key(nvcc, config)}.ptx"
        if not cached.is_file():
            _timed(
                compiled, nvcc_command(config, nvcc, work, ["-ptx", "-o", str(ptx)], [f"-arch=compute_{front}"]), env
            )
            cached.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ptx, cached.with_suffix(".partial"))
            cached.with_suffix(".partial").replace(cached)
        else:
            compiled.notes.append(f"PTX of compute_{front} reused from {cached.name} (same front end and sources)")
        text = cached.read_text()
        text = re.sub(r"^\.version \d+\.\d+$", f".version {toolkit.ptx_isa}", text, count=1, flags=re.MULTILINE)
        text = re.sub(r"^\.target sm_\d+", f".target sm_{number}", text, count=1, flags=re.MULTILINE)
        ptx.write_text(text)
        _timed(compiled, [str(ptxas), f"-arch=sm_{number}", "-O3", str(ptx), "-o", str(cubin)])
        compiled.sizes[cubin.name] = cubin.stat().st_size
    return compiled


def _compare_sass(toolkit: Toolkit, base: Path, exact: Path, stable: Path, arch: str) -> str:
    """Whether the two flavours' device code for `arch` is the same: byte for byte, else the same instructions
    (cuobjdump -sass, where the toolkit has it: line tables differ with the headers each flavour includes)."""
    from tools.builder import capability_builds

    sm = capability_builds.sm_of(arch)[0]

    def image(path: Path) -> bytes:
        images = capability_builds.images(capability_builds.section(path))
        return b"".join(i.raw for c in images for i in c if i.sm == sm and i.kind == capability_builds.KIND_ELF)

    what = f"stable flavour (-DUSE_CUDA -DTORCH_TARGET_VERSION) compiled for {arch}: its sm_{sm} image"
    if image(exact) == image(stable):
        return f"{what} is byte-identical to the exact flavour's"
    cuobjdump = toolkit.bin_dir(base) / "cuobjdump"
    if not cuobjdump.is_file():
        return f"{what} differs from the exact flavour's (no cuobjdump in this toolkit to compare instructions)"

    def sass(path: Path) -> dict[str, list[str]]:
        done = subprocess.run(
            [str(cuobjdump), "-sass", "-arch", f"sm_{sm}", str(path)],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "PATH": f"{cuobjdump.parent}{os.pathsep}{os.environ.get('PATH', '')}"},
        )
        if done.returncode != 0:
            raise ToolkitError(f"cuobjdump -sass {path}: {done.stderr.strip()}")
        # By function; CUB's namespace spells the capability list compiled (…_SM_750_800_…), not the code.
        functions: dict[str, list[str]] = {}
        name = ""
        for line in done.stdout.splitlines():
            if line.strip().startswith("Function :"):
                name = re.sub(r"cub\d+_V_\d+_SM_[\d_]+detail", "cub_V_SM_detail", line.split(":", 1)[1].strip())
                functions[name] = []
            elif line.strip().startswith("/*") and name:
                functions[name].append(line.strip())
        return functions

    ours, theirs = sass(exact), sass(stable)
    differ = sorted(name for name in ours.keys() | theirs.keys() if ours.get(name) != theirs.get(name))
    if not differ:
        return f"{what} differs in bytes; its instructions (cuobjdump -sass) are the same"
    return (
        f"{what} differs in bytes, and in the instructions of {len(differ)} of {len(ours)} kernels (e.g. "
        f"{differ[0][:80]}): the flavours' device code is not the same, so each is compiled for every capability "
        "(as tools/builder/op.py does)"
    )


def write_table(rows: dict[str, list[str]]) -> None:
    """Merge measured rows into tools/builder/toolkit_archs.json (sorted, so a rerun changes nothing)."""
    from tools.builder.config import TOOLKIT_TABLE

    table = json.loads(TOOLKIT_TABLE.read_text())
    table["compiles"] = {**table["compiles"], **rows}
    table["compiles"] = {release: table["compiles"][release] for release in sorted(table["compiles"], key=cuda_release)}
    TOOLKIT_TABLE.write_text(json.dumps(table, indent=2) + "\n")


def _front_end_key(nvcc: Path, config: BuildConfig) -> str:
    """What decides the PTX the front end writes: its version and the CUDA build's sources."""
    digest = hashlib.sha256(
        subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, check=True).stdout.encode()
    )
    for path in config.sources(cuda=True):
        digest.update(path.encode() + b"\0" + (config.root / path).read_bytes())
    return digest.hexdigest()[:12]


RENAMED_IN_13 = {"101": "110"}  # CUDA 12.9's names that CUDA 13 changed


def write_record(out: Path, records: Sequence[Compiled], failed: Sequence[str]) -> None:
    """Merge this run's toolkits into the record at `out` (runs of some toolkits each add theirs)."""
    earlier = json.loads(out.read_text()) if out.is_file() else {"toolkits": []}
    done = {r.release for r in records}
    toolkits = [t for t in earlier["toolkits"] if t["release"] not in done] + [asdict(r) for r in records]
    record = {
        "machine": f"{os.cpu_count()} CPUs, shared (load average {os.getloadavg()[0]:.0f} at the end)",
        "toolkits": sorted(toolkits, key=lambda t: (cuda_release(t["release"].split()[0]), t["release"])),
        "failed": sorted(set(earlier.get("failed", [])) - done | set(failed)),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--toolkit", action="append", choices=sorted(TOOLKITS), help="default: every toolkit")
    parser.add_argument("--install-only", action="store_true")
    parser.add_argument("--archs", help="compile these capabilities (;-separated) instead of build.toml's list")
    parser.add_argument("--out", type=Path, help="write the record (JSON) here")
    parser.add_argument(
        "--aarch64",
        nargs="?",
        const="also",
        choices=["also", "only"],
        help="also (or only) compile for a linux-aarch64 host (CUDA 13: nvcc with Debian's g++-aarch64-linux-gnu)",
    )
    parser.add_argument(
        "--keep", type=Path, help="keep each toolkit's objects in DIR/<release>/ (else a temporary dir)"
    )
    parser.add_argument(
        "--write-table",
        action="store_true",
        help="write each toolkit's own list of what it compiles to tools/builder/toolkit_archs.json (what "
        "tools/builder/config.py checks build.toml against)",
    )
    args = parser.parse_args(argv)
    records, failed = [], []
    table: dict[str, list[str]] = {}
    for release in args.toolkit or sorted(TOOLKITS, key=cuda_release):
        toolkit, started = TOOLKITS[release], time.monotonic()
        install(toolkit)
        print(f"CUDA {release}: installed in {toolkit.prefix()} ({time.monotonic() - started:.0f} s)", flush=True)
        if args.write_table:
            table[release] = list(gpu_codes(toolkit))
        if args.install_only:
            continue
        archs = args.archs.split(";") if args.archs else list(BuildConfig.load().capabilities_for(release))
        try:
            with tempfile.TemporaryDirectory(prefix=f"toolkit-{release}-") as scratch:
                work = args.keep / release if args.keep else Path(scratch)
                if args.aarch64 == "only":  # the x86_64 compile is in --keep's directory already, or not wanted
                    compiled, cross = compile_for_aarch64(toolkit, archs, work), None
                else:
                    compiled = compile_device_code(toolkit, archs, work)
                    cross = compile_for_aarch64(toolkit, archs, work) if args.aarch64 and toolkit.has_nvcc else None
        except ToolkitError as error:
            print(f"CUDA {release}: FAILED: {error}", flush=True)
            failed.append(release)
            continue
        records += [compiled, *([cross] if cross else [])]
        print(
            f"CUDA {release} ({compiled.version}): {';'.join(archs)} compiled in {compiled.seconds:.0f} s, "
            f"{compiled.cpu_minutes:.1f} CPU-minutes; it compiles {', '.join(compiled.compiles)}",
            flush=True,
        )
        for note in [*compiled.notes, *(cross.notes if cross else [])]:
            print(f"  {note}", flush=True)
        if args.out:  # after each toolkit: a long run stopped later keeps what it measured
            write_record(args.out, [compiled, *([cross] if cross else [])], [])
    if args.write_table:
        write_table(table)
    if args.out and failed:
        write_record(args.out, [], failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
