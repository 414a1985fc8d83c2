"""Every CUDA toolkit of the build matrix, installed from PyPI and compiling the op's device code here.

    python -m tools.maintainer.toolkits [--toolkit 13.2 ...] [--archs 9.0] [--install-only]
                                        [--out benchmarks/results/cpu/toolkits.json]

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
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
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
        raise ToolkitError(f"CUDA {toolkit.release}: pip could not install {' '.join(toolkit.packages)}:\n{done.stderr}")
    for tool in toolkit.bin_dir(base).parent.rglob("*"):  # wheels do not keep the executable bit everywhere
        if tool.is_file() and tool.parent.name == "bin":
            tool.chmod(0o755)
    (prefix / MARKER).write_text(pins)
    return prefix


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--toolkit", action="append", choices=sorted(TOOLKITS), help="default: every toolkit")
    parser.add_argument("--install-only", action="store_true")
    args = parser.parse_args(argv)
    for release in args.toolkit or sorted(TOOLKITS, key=cuda_release):
        started = time.monotonic()
        prefix = install(TOOLKITS[release])
        print(f"CUDA {release}: {prefix} ({time.monotonic() - started:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
