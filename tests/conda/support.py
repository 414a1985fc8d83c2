"""Shared by the conda tests: the offline build's result and machine facts for render-only tests."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from rattler_build import JinjaConfig, PlatformConfig, VariantConfig

from tools.conda.standins import Machine

CONDA_FORGE_PINS = Path(__file__).with_name("conda_forge_pinning.yaml")


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
        python_executable="/opt/torch/.venv/bin/python3", python_version="3.12.3", torch_version="2.11.0",
        torch_cuda=None, cxx="/usr/bin/g++", cc="/usr/bin/gcc", gcc_version="13.3.0", glibc_version="2.39",
        ninja="/opt/torch/.venv/bin/ninja", ninja_version="1.13.0", cuda_home=None, nvcc_version=None,
    )
    return dataclasses.replace(machine, **changes)


def conda_forge_pins(target_platform: str) -> VariantConfig:
    """The excerpt of conda-forge's global pins, read as conda-smithy reads the real file (selectors evaluated)."""
    return VariantConfig.from_conda_build_config(
        CONDA_FORGE_PINS, JinjaConfig(platform=PlatformConfig(target_platform=target_platform)))
