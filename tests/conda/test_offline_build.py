"""The offline build (`python -m tools.conda.build --offline`) yields a real, indexed channel with the CPU package."""

from __future__ import annotations

import asyncio
import json
import re
import stat
from pathlib import Path

import pytest
from rattler.package import AboutJson
from rattler.package_streaming import PackageArchive
from rattler_build import Package

from tests.conda.support import OfflineBuild, machine_like_h200
from tools.conda.build import build_offline, offline_variant_config, render_variants
from tools.conda.channel import NoCandidateError, solve_environment
from tools.conda.standins import build_standin_channel, standins


def test_cpu_package_is_named_after_both_pins_and_indexed(offline_build: OfflineBuild) -> None:
    torch_tag = offline_build.machine.torch_minor.replace(".", "")
    repodata = json.loads((offline_build.channel_dir / "linux-64" / "repodata.json").read_text())

    assert offline_build.package.parent == offline_build.channel_dir / "linux-64"
    assert re.fullmatch(rf"img2gray-0\.1\.0-cpu_torch{torch_tag}_h[0-9a-f]{{7}}_0\.conda", offline_build.package.name)
    assert list(repodata["packages.conda"]) == [offline_build.package.name]
    assert (offline_build.channel_dir / "noarch" / "repodata.json").exists()
    # Readable by a channel server and other users (failed before: rattler-build leaves it 0600).
    assert stat.S_IMODE(offline_build.package.stat().st_mode) == 0o644


def test_cpu_package_records_no_path_of_the_build_machine_in_about_json(offline_build: OfflineBuild) -> None:
    """Failed before: info/about.json listed the stand-in channel, file:///tmp/img2gray-standins-.../standins/."""

    async def read_about() -> AboutJson:
        return await (await PackageArchive.from_path(offline_build.package)).about_json()

    about = asyncio.run(read_about())
    assert about.channels == []
    assert about.license == "Apache-2.0" and about.home  # the rest of the record is intact


def test_cpu_package_metadata_and_files(offline_build: OfflineBuild) -> None:
    package = Package.from_file(offline_build.package)
    torch_minor = offline_build.machine.torch_minor

    assert f"pytorch {torch_minor}.* cpu*" in package.depends
    assert not any(dep.startswith("__cuda") for dep in package.depends)
    assert "site-packages/img2gray/metadata.json" in package.files  # the release step reads it from here
    assert any(re.fullmatch(r"site-packages/img2gray/_img2gray_[0-9a-f]{10}\.abi3\.so", f) for f in package.files)


def test_cuda_machine_stand_ins_wrap_its_nvcc() -> None:
    cuda_machine = machine_like_h200(torch_cuda="13.0", cuda_home="/usr/local/cuda", nvcc_version="13.0.88")
    by_name = {standin.name: standin for standin in standins(cuda_machine)}

    nvcc = by_name["machine-cuda-nvcc_linux-64"]
    assert nvcc.version == "13.0.88"
    assert 'export CUDA_HOME="/usr/local/cuda"' in nvcc.files["etc/conda/activate.d/machine-cuda-nvcc_linux-64.sh"]
    assert by_name["pytorch"].build_string.startswith("cuda130_generic_py312_h")
    assert by_name["pytorch"].build_number == 200 and "__cuda" in by_name["pytorch"].depends
    assert by_name["cuda-version"].version == "13.0"


def test_offline_build_refuses_a_flavour_the_installed_torch_is_not(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"torch 2\.11\.0 is a cpu build, so offline it builds the cpu variant only"):
        build_offline(tmp_path, which="cuda", machine=machine_like_h200())
    assert not any(tmp_path.iterdir())


def test_h200_cuda_variant_environments_resolve_against_its_stand_ins(tmp_path: Path) -> None:
    """Render + solve (no nvcc here) of what `tools.conda.build --offline` builds on the H200."""
    cuda_machine = machine_like_h200(torch_cuda="13.0", cuda_home="/usr/local/cuda", nvcc_version="13.0.88")
    channel = build_standin_channel(cuda_machine, tmp_path / "standins")
    variants = render_variants(offline_variant_config(cuda_machine))
    assert len(variants) == 2  # the exact and the stable-ABI package

    for variant in variants:
        requirements = variant.recipe.requirements.to_dict()
        build_env = solve_environment([channel], requirements["build"], cuda="13.0")
        host_env = solve_environment([channel], requirements["host"], cuda="13.0")

        assert {r.name.normalized for r in build_env} == {
            "machine-gxx_linux-64",
            "machine-sysroot_linux-64",
            "machine-cuda-nvcc_linux-64",
            "ninja",
        }
        assert {(r.name.normalized, str(r.build).split("_h")[0]) for r in host_env} >= {
            ("pytorch", "cuda130_generic_py312"),
            ("cuda-version", "machine"),
            ("cuda-cudart-dev", "machine"),
        }
        with pytest.raises(NoCandidateError, match="__cuda"):
            solve_environment([channel], requirements["host"], cuda=None)  # a CUDA torch needs the driver


def test_library_uses_no_python_abi_beyond_the_packages_python_floor(
    offline_build: OfflineBuild, tmp_path: Path
) -> None:
    """The package is Python-version independent (one build for every python >= its floor): abi3audit's check,
    through HF's kernel-abi-check, on the library inside the .conda, at the floor its run requirement states."""
    from kernel_abi_check import ObjectFile
    from rattler.package_streaming import extract

    [floor] = [
        spec.removeprefix("python >=")
        for spec in Package.from_file(offline_build.package).depends
        if spec.startswith("python >=")
    ]
    extract(offline_build.package, tmp_path)
    [library] = (tmp_path / "site-packages" / "img2gray").glob("*.abi3.so")
    assert ObjectFile(str(library)).check_python_abi(floor) == []


def test_stable_package_serves_every_pytorch_from_the_floor_and_holds_the_stable_library(
    offline_stable_build: OfflineBuild,
) -> None:
    """The CPU stable-ABI package built offline through the recipe: its run requirement is the stable range, not
    the host torch's minor (the stand-in pytorch's run_exports pin it, as conda-forge's do), and it holds the
    torch-stable-abi211 variant."""
    package = Package.from_file(offline_stable_build.package)
    torch_minor = offline_stable_build.machine.torch_minor

    assert re.fullmatch(r"img2gray-0\.1\.0-cpu_stableabi211_h[0-9a-f]{7}_100\.conda", offline_stable_build.package.name)
    assert "pytorch >=2.11,<3 cpu*" in package.depends
    assert not any(dep.startswith(f"pytorch >={torch_minor}") for dep in package.depends), package.depends


def test_stable_package_library_is_the_hub_stable_variant_byte_for_byte(
    offline_stable_build: OfflineBuild, stable_build: Path, tmp_path: Path
) -> None:
    """The library in the package is `tools.builder.op --abi stable`'s (the Hub's torch-stable-abi211 variant) of
    the same sources and torch, so metadata.json's digest (and a release signature over it) vouch for a conda install."""
    from rattler.package_streaming import extract

    extract(offline_stable_build.package, tmp_path)
    installed = tmp_path / "site-packages" / "img2gray"
    [library] = installed.glob("*.abi3.so")
    [hub_library] = stable_build.glob("*.abi3.so")
    metadata = json.loads((installed / "metadata.json").read_text())

    assert metadata["variant"] == json.loads((stable_build / "metadata.json").read_text())["variant"]
    assert metadata["variant"].startswith("torch-stable-abi211-cpu-")
    assert library.name == hub_library.name and library.read_bytes() == hub_library.read_bytes()
