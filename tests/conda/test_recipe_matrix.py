"""Rendering recipe/ (no build): with conda-forge's global pins alone, with the project's matrix
(tools/conda/variants.yaml) and with the offline override."""

from __future__ import annotations

import os
import re

import pytest

from tests.conda.support import conda_forge_pins, machine_like_h200
from tools.builder.config import BuildConfig
from tools.conda.build import RECIPE, cuda_version_of, offline_variant_config, render_variants, variant_config

BUILD = BuildConfig.load()


@pytest.mark.parametrize("target_platform", ["linux-64", "linux-aarch64"])
def test_recipe_renders_with_conda_forge_global_pins_alone(target_platform: str) -> None:
    """The recipe defers to the global pins: it has no variant file, and every compiler, CUDA, python and pytorch
    pin of a rendered variant is the global pins' own. Failed before: a variants.yaml in recipe/ overrode pytorch,
    cxx_compiler_version, cuda_compiler_version and zip_keys, and conda-forge would have built its matrix."""
    assert sorted(path.name for path in RECIPE.parent.iterdir() if path.suffix in (".yaml", ".yml")) == ["recipe.yaml"]
    pins = conda_forge_pins(target_platform)
    variants = render_variants(pins, target_platform=target_platform)
    [python_min], [pytorch] = pins["python_min"], pins["pytorch"]
    by_cuda = {(cuda_version_of(v) or "None"): v for v in variants}

    assert sorted(by_cuda) == sorted(pins["cuda_compiler_version"])
    for cuda, variant in by_cuda.items():
        requirements = variant.recipe.requirements.to_dict()
        position = pins["cuda_compiler_version"].index(cuda)  # zipped with the compiler and stdlib versions
        assert f"gxx_{target_platform} {pins['cxx_compiler_version'][position]}.*" in requirements["build"]
        assert f"sysroot_{target_platform} {pins['c_stdlib_version'][position]}.*" in requirements["build"]
        assert f"python {python_min}.*" in requirements["host"] and f"python >={python_min}" in requirements["run"]
        assert any(spec.startswith(f"pytorch {pytorch}.*") for spec in requirements["run"])
        arm_variant = [spec for spec in requirements["build"] if spec.startswith("arm-variant")]
        wanted = [f"arm-variant * {pins['arm_variant_type'][0]}"] if cuda != "None" and "aarch64" in target_platform else []
        assert arm_variant == wanted


def test_version_independent_package_is_tested_on_the_oldest_and_newest_python() -> None:
    """conda-smithy's hint for version-independent Python packages: the Python test runs at python_min and at the
    newest python."""
    [variant, *_] = render_variants(variant_config())
    [python_test] = [test["python"] for test in variant.recipe.to_dict()["tests"] if "python" in test]
    assert python_test["python_version"] == [f"{variant.variant['python_min']}.*", "*"]


def test_full_matrix_is_every_pytorch_minor_times_every_cuda_flavour() -> None:
    variants = render_variants(variant_config())
    by_pins = {(str(v.variant["pytorch"]), cuda_version_of(v)): v for v in variants}

    assert len(variants) == 9
    assert set(by_pins) == {(torch, cuda) for torch in ("2.11", "2.12", "2.13") for cuda in (None, "12.9", "13.0")}
    assert len({v.recipe.build.string for v in variants}) == 9
    for v in variants:
        assert v.recipe.package.name == "img2gray"
        assert str(v.recipe.package.version) == BUILD.version


def test_build_strings_and_requirements_name_both_pins() -> None:
    for variant in render_variants(variant_config()):
        torch, cuda = str(variant.variant["pytorch"]), cuda_version_of(variant)
        requirements = variant.recipe.requirements.to_dict()
        flavour = "cpu" if cuda is None else "cuda" + cuda.replace(".", "")
        number = 0 if cuda is None else 200
        pytorch_spec = f"pytorch {torch}.* {'cpu' if cuda is None else 'cuda'}*"

        assert re.fullmatch(rf"{flavour}_torch{torch.replace('.', '')}_h[0-9a-f]{{7}}_{number}",
                            variant.recipe.build.string)
        assert variant.recipe.build.number == number
        assert {"gxx_linux-64 14.*", "sysroot_linux-64 2.28.*", "ninja"} <= set(requirements["build"])
        assert pytorch_spec in requirements["host"] and pytorch_spec in requirements["run"]
        assert "python 3.10.*" in requirements["host"] and "python >=3.10" in requirements["run"]
        script = variant.recipe.build.to_dict()["script"]
        if cuda is None:
            assert not any("cuda" in spec for spec in requirements["build"] + requirements["host"])
            assert "__cuda" not in requirements["run"]
        else:
            assert f"cuda-nvcc_linux-64 {cuda}.*" in requirements["build"]
            assert f"cuda-version =={cuda}" in requirements["host"]
            assert "__cuda" in requirements["run"]
            arch_list = script["env"]["TORCH_CUDA_ARCH_LIST"].split(";")
            assert arch_list == list(BUILD.cuda_capabilities)
            assert {"8.0", "9.0"} <= set(arch_list) and arch_list[-1].endswith("+PTX")


def test_offline_override_points_the_same_recipe_at_machine_stand_ins() -> None:
    [variant] = render_variants(offline_variant_config(machine_like_h200()))
    requirements = variant.recipe.requirements.to_dict()

    assert re.fullmatch(r"cpu_torch211_h[0-9a-f]{7}_0", variant.recipe.build.string)
    assert {"machine-gxx_linux-64 13.*", "machine-sysroot_linux-64 2.39.*"} <= set(requirements["build"])
    assert {"python 3.12.*", "pytorch 2.11.* cpu*"} <= set(requirements["host"])


def test_offline_override_on_a_cuda_machine_renders_its_cuda_variant() -> None:
    """What `python -m tools.conda.build --offline` renders on the H200 (torch 2.11+cu130, nvcc 13.0)."""
    cuda_machine = machine_like_h200(torch_cuda="13.0", cuda_home="/usr/local/cuda", nvcc_version="13.0.88")
    [cuda_variant] = render_variants(offline_variant_config(cuda_machine))
    requirements = cuda_variant.recipe.requirements.to_dict()

    assert re.fullmatch(r"cuda130_torch211_h[0-9a-f]{7}_200", cuda_variant.recipe.build.string)
    assert "machine-cuda-nvcc_linux-64 13.0.*" in requirements["build"]
    assert {"pytorch 2.11.* cuda*", "cuda-version ==13.0"} <= set(requirements["host"])
    assert "__cuda" in requirements["run"]


def test_rendering_records_the_commit_and_leaves_the_environment_alone(monkeypatch) -> None:
    # Failed before: rendering set IMG2GRAY_SOURCE_COMMIT in the process environment and left it there, so a later
    # build in a copy without .git (tests/conda/test_reproducible_package.py) recorded this checkout's commit only
    # where a render had run before it in the same process.
    monkeypatch.delenv("IMG2GRAY_SOURCE_COMMIT", raising=False)
    [variant, *_] = render_variants(variant_config())

    assert "IMG2GRAY_SOURCE_COMMIT" not in os.environ
    commit = variant.recipe.build.script["env"]["IMG2GRAY_SOURCE_COMMIT"]
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?", commit), commit


def test_rendering_keeps_a_commit_the_caller_gives(monkeypatch) -> None:
    monkeypatch.setenv("IMG2GRAY_SOURCE_COMMIT", "0123456789abcdef0123456789abcdef01234567")
    [variant, *_] = render_variants(variant_config())

    assert variant.recipe.build.script["env"]["IMG2GRAY_SOURCE_COMMIT"] == "0123456789abcdef0123456789abcdef01234567"
    assert os.environ["IMG2GRAY_SOURCE_COMMIT"] == "0123456789abcdef0123456789abcdef01234567"
