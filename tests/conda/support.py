"""Shared by the conda tests: the offline build's result and machine facts for render-only tests."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from rattler_build import JinjaConfig, PlatformConfig, VariantConfig

from tools.conda.standins import Machine

CONDA_FORGE_PINS = Path(__file__).with_name("conda_forge_pinning.yaml")
# Run by an environment's python: the installed img2gray's files match its recorded digests, and the op matches the
# reference on the CPU; prints where img2gray was imported from.
OP_CHECK = (
    "import base64, hashlib, pathlib, torch, img2gray\n"
    "package = pathlib.Path(img2gray.__file__).parent\n"
    "for name, digest in img2gray.metadata()['digest']['files'].items():  # base64, as kernels_data writes it\n"
    "    assert base64.b64encode(hashlib.sha256((package / name).read_bytes()).digest()).decode() == digest, name\n"
    "x = torch.rand(2, 3, 32, 48, generator=torch.Generator().manual_seed(1))\n"
    "r, g, b = x.double().unbind(1)\n"
    "reference = (0.299 * r + 0.587 * g + 0.114 * b).unsqueeze(1)\n"
    "torch.testing.assert_close(torch.ops.img2gray.img2gray(x).double(), reference, rtol=1e-6, atol=1e-6)\n"
    "print(package)\n"
)


@dataclass(frozen=True)
class OfflineBuild:
    machine: Machine
    channel_dir: Path  # the built img2gray channel (indexed)
    standins_url: str  # the machine stand-in channel the build resolved against
    package: Path  # the CPU .conda

    @property
    def channel_url(self) -> str:
        return self.channel_dir.as_uri()


def machine_like_h200(**changes: object) -> Machine:
    """Facts of the H200 box (CPU-only unless `changes` add CUDA): render-only tests use them."""
    machine = Machine(
        python_executable="/opt/torch/.venv/bin/python3",
        python_version="3.12.3",
        torch_version="2.11.0",
        torch_cuda=None,
        cxx="/usr/bin/g++",
        cc="/usr/bin/gcc",
        gcc_version="13.3.0",
        glibc_version="2.39",
        ninja="/opt/torch/.venv/bin/ninja",
        ninja_version="1.13.0",
        cuda_home=None,
        nvcc_version=None,
    )
    return dataclasses.replace(machine, **changes)


def conda_forge_pins(target_platform: str) -> VariantConfig:
    """The excerpt of conda-forge's global pins, read as conda-smithy reads the real file (selectors evaluated)."""
    return VariantConfig.from_conda_build_config(
        CONDA_FORGE_PINS, JinjaConfig(platform=PlatformConfig(target_platform=target_platform))
    )


# conda-forge's builds, as repodata records only (no archives): the same names, versions and build string convention
# (pytorch: {cpu|cudaXYZ}_{blas}_py{XY}_h{hash}_{n}, CUDA builds +200 and requiring __cuda), for what an img2gray
# environment and an img2gray build's host environment (python, tomli, pytorch, cuda-version, cuda-cudart-dev) take.
PYTORCH_MINORS = ("2.10", "2.11", "2.12", "2.13", "2.14", "2.15")
# conda-forge's pytorch is built with CUDA 12.9 and 13.0 (pytorch-cpu-feedstock#393, #477): its CUDA 12 builds need
# cuda-version >=12.9. cuda-version exists for every release, each asking only for a driver of its major (`__cuda
# >=12`: minor-version compatibility), and so does cuda-cudart-dev, pinned to its own minor.
PYTORCH_CUDA = ("12.9", "13.0")
CUDA_VERSIONS = ("12.6", "12.9", "13.0", "13.2")
PYTHONS = ("3.10", "3.11", "3.12")


def conda_forge_records(subdir: str = "linux-64") -> dict[str, dict[str, object]]:
    records: dict[str, dict[str, object]] = {}

    def add(name: str, version: str, build: str, number: int, depends: list[str]) -> None:
        records[f"{name}-{version}-{build}.conda"] = {
            "name": name,
            "version": version,
            "build": build,
            "build_number": number,
            "depends": depends,
            "subdir": subdir,
            "license": "BSD-3-Clause",
        }

    for python in PYTHONS:
        add("python", f"{python}.9", "hd63b3ec_0_cpython", 0, ["__glibc >=2.17,<3.0.a0"])
    add("tomli", "2.2.1", "pyhd8ed1ab_1", 1, ["python >=3.9"])
    for cuda in CUDA_VERSIONS:
        major, minor = (int(part) for part in cuda.split("."))
        add("cuda-version", cuda, "h4f385c5_3", 3, [f"__cuda >={major}"])
        add("cuda-cudart-dev", f"{cuda}.77", "h5888daf_0", 0, [f"cuda-version >={cuda},<{major}.{minor + 1}.0a0"])
    for minor in PYTORCH_MINORS:
        for python in PYTHONS:
            py = "py" + python.replace(".", "")
            python_pin = f"python >={python},<{python[:2]}{int(python[2:]) + 1}.0a0"
            add("pytorch", f"{minor}.0", f"cpu_generic_{py}_h1a2b3c4_0", 0, [python_pin])
            for cuda in PYTORCH_CUDA:
                major = int(cuda.split(".")[0])
                add(
                    "pytorch",
                    f"{minor}.0",
                    f"cuda{cuda.replace('.', '')}_generic_{py}_h5d6e7f8_200",
                    200,
                    [python_pin, "__cuda", f"cuda-version >={cuda},<{major + 1}.0a0"],
                )
    return records


def write_channel(channel_dir: Path, records: dict[str, dict[str, object]], subdir: str = "linux-64") -> str:
    """A file:// channel holding `records` in `subdir` (and an empty noarch/)."""
    for name, packages in ((subdir, records), ("noarch", {})):
        (channel_dir / name).mkdir(parents=True, exist_ok=True)
        repodata = {"info": {"subdir": name}, "packages": {}, "packages.conda": packages, "repodata_version": 1}
        (channel_dir / name / "repodata.json").write_text(json.dumps(repodata, indent=1))
    return channel_dir.resolve().as_uri()
