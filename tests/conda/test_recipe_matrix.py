"""Rendering recipe/ (no build): with conda-forge's global pins alone, with the project's matrix
(tools/conda/variants.yaml) and with the offline override."""

from __future__ import annotations

import os
import re

import pytest
from rattler import BuildString, MatchSpec, PackageRecord
from rattler_build import VariantConfig

from tests.conda.support import conda_forge_pins, machine_like_h200
from tools.builder.config import TOOLKIT_ARCHS, BuildConfig
from tools.conda.build import (
    RECIPE,
    abi_of,
    cuda_version_of,
    offline_variant_config,
    render_variants,
    select_variants,
    variant_config,
)

BUILD = BuildConfig.load()
# kernel-builder's required set (its docs, Sept 2026): torch 2.12 and 2.13 x cu126, cu130, cu132, and its default
# capabilities for CUDA >= 13. The conda packages' CUDA 12 is 12.9 instead, the toolkit of conda-forge's own CUDA 12
# pytorch (tests/conda/test_host_solve.py); its list is kernel-builder's with 12.9's name for sm_110 (10.1).
EXACT_PINS = ("2.12", "2.13")
CONDA_CUDA = ("12.9", "13.0", "13.2")
KERNEL_BUILDER_CUDA13_ARCHS = "7.5;8.0;8.6;8.7;8.9;9.0;10.0;10.3;11.0;12.0;12.1+PTX"
CUDA12_9_ARCHS = "7.5;8.0;8.6;8.7;8.9;9.0;10.0;10.1;10.3;12.0;12.1+PTX"
CUDA_FLAVOURS = (None, *CONDA_CUDA)
SERVED_MINORS = ("2.11", "2.12", "2.13", "2.14", "2.15")


def pytorch_record(version: str, cuda: str | None) -> PackageRecord:
    """conda-forge's pytorch build of `version` (a record only), to match run requirements against."""
    build = (
        "cpu_generic_py312_h1a2b3c4_0" if cuda is None else f"cuda{cuda.replace('.', '')}_generic_py312_h5d6e7f8_200"
    )
    return PackageRecord(
        name="pytorch",
        version=version,
        build=BuildString(build),
        build_number=int(build.rsplit("_", 1)[1]),
        subdir="linux-64",
    )


def admits(variant, version: str, cuda: str | None) -> bool:
    [pytorch] = [spec for spec in variant.recipe.requirements.to_dict()["run"] if spec.startswith("pytorch ")]
    return MatchSpec(pytorch).matches(pytorch_record(version, cuda))


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
        wanted = (
            [f"arm-variant * {pins['arm_variant_type'][0]}"] if cuda != "None" and "aarch64" in target_platform else []
        )
        assert arm_variant == wanted
        if cuda != "None":  # a toolkit between two keys of build.toml (12.9) compiles the older key's list
            assert variant.recipe.build.script["env"]["TORCH_CUDA_ARCH_LIST"] == ";".join(BUILD.capabilities_for(cuda))


def test_version_independent_package_is_tested_on_the_oldest_and_newest_python() -> None:
    """conda-smithy's hint for version-independent Python packages: the Python test runs at python_min and at the
    newest python."""
    [variant, *_] = render_variants(variant_config())
    [python_test] = [test["python"] for test in variant.recipe.to_dict()["tests"] if "python" in test]
    assert python_test["python_version"] == [f"{variant.variant['python_min']}.*", "*"]


def test_full_matrix_is_every_exact_pin_and_one_stable_build_times_every_cuda_flavour() -> None:
    variants = render_variants(variant_config())
    by_pins = {(abi_of(v), str(v.variant["pytorch"]), cuda_version_of(v)): v for v in variants}

    assert len(variants) == (len(EXACT_PINS) + 1) * len(CUDA_FLAVOURS) == 12
    assert set(by_pins) == {("exact", torch, cuda) for torch in EXACT_PINS for cuda in CUDA_FLAVOURS} | {
        ("stable", BUILD.stable_abi.version, cuda) for cuda in CUDA_FLAVOURS
    }  # compiled against its floor
    assert len({v.recipe.build.string for v in variants}) == 12
    assert {str(v.variant["pytorch"]) for v in variants if abi_of(v) == "exact"} == set(EXACT_PINS)


def test_cuda_flavours_are_kernel_builders_with_the_capabilities_each_toolkit_compiles() -> None:
    """The CUDA flavours are 12.9 (conda-forge's CUDA 12), 13.0 and 13.2; each compiles from 7.5 (T4, Colab) to the
    newest capability its toolkit has, with PTX of that one: CUDA 12.9 Blackwell included (10.1 is 13.0's 11.0), CUDA
    13 kernel-builder's list for CUDA >= 13. Failed on the 12.6 matrix (its list stopped at 9.0+PTX)."""
    variants = render_variants(variant_config())
    arch_lists = {
        cuda_version_of(v): v.recipe.build.script["env"]["TORCH_CUDA_ARCH_LIST"] for v in variants if cuda_version_of(v)
    }

    assert sorted(arch_lists) == sorted(CONDA_CUDA)
    assert arch_lists["13.0"] == arch_lists["13.2"] == KERNEL_BUILDER_CUDA13_ARCHS
    assert arch_lists["12.9"] == CUDA12_9_ARCHS
    for cuda, arch_list in arch_lists.items():
        archs = [arch.removesuffix("+PTX") for arch in arch_list.split(";")]
        assert arch_list == ";".join(BUILD.capabilities_for(cuda))
        assert set(archs) <= TOOLKIT_ARCHS[cuda], cuda
        assert archs[0] == "7.5" and archs[-1] == max(
            TOOLKIT_ARCHS[cuda], key=lambda arch: tuple(map(int, arch.split(".")))
        )
        assert arch_list.endswith("+PTX") and arch_list.count("+PTX") == 1
    for v in variants:
        assert v.recipe.package.name == "img2gray"
        assert str(v.recipe.package.version) == BUILD.version


def test_stable_packages_admit_every_pytorch_from_the_floor_on_and_refuse_older() -> None:
    """The stable-ABI packages (CPU and one per CUDA flavour) admit pytorch 2.11 to 2.15 of their flavour, refuse
    2.10 and the other flavour; pytorch's run_exports (which pin the host's minor) are ignored for them only."""
    stable = select_variants(render_variants(variant_config()), "all", abi="stable")

    assert sorted(cuda_version_of(v) or "None" for v in stable) == ["12.9", "13.0", "13.2", "None"]
    for variant in stable:
        cuda = cuda_version_of(variant)
        other = "13.0" if cuda is None else None
        for version in ("2.11.0", "2.12.1", "2.13.0", "2.14.1", "2.15.0"):
            assert admits(variant, version, cuda), (variant.recipe.build.string, version)
            assert not admits(variant, version, other)
        assert not admits(variant, "2.10.2", cuda)
        assert not admits(variant, "3.0.0", cuda)  # a new major may retire shims: checked before it is admitted
        assert variant.recipe.requirements.to_dict()["ignore_run_exports"] == {"by_name": ["pytorch"]}


def test_every_pytorch_minor_from_2_11_to_2_15_has_a_cpu_and_a_cuda_package() -> None:
    """Every CUDA flavour too; the minors without an exact pin (2.11, 2.14, 2.15) through the stable packages only."""
    variants = render_variants(variant_config())
    for minor in SERVED_MINORS:
        for cuda in CUDA_FLAVOURS:
            serving = [v for v in variants if cuda_version_of(v) == cuda and admits(v, f"{minor}.0", cuda)]
            assert serving, (minor, cuda)
            assert {abi_of(v) for v in serving} == ({"exact", "stable"} if minor in EXACT_PINS else {"stable"})
        assert not [v for v in variants if admits(v, "2.10.0", cuda_version_of(v))]


def test_a_variant_config_with_an_unknown_torch_abi_is_refused() -> None:
    config = variant_config().to_dict() | {"pytorch": ["2.13"], "torch_abi": ["stabel"]}
    with pytest.raises(ValueError, match="torch_abi 'stabel' in the variant config: it is one of exact, stable"):
        render_variants(VariantConfig(config, zip_keys=[["cuda_compiler_version", "cxx_compiler_version"]]))
    with pytest.raises(ValueError, match="abi 'stabel': it is one of exact, stable or any"):
        select_variants(render_variants(variant_config()), "all", abi="stabel")


def test_build_strings_and_requirements_name_both_pins() -> None:
    for variant in render_variants(variant_config()):
        torch, cuda, stable = str(variant.variant["pytorch"]), cuda_version_of(variant), abi_of(variant) == "stable"
        requirements = variant.recipe.requirements.to_dict()
        flavour = "cpu" if cuda is None else "cuda" + cuda.replace(".", "")
        number = (0 if cuda is None else 200) + (100 if stable else 0)
        build = "cpu*" if cuda is None else "cuda*"
        host_spec = f"pytorch {torch}.* {build}"
        run_spec = f"pytorch >={BUILD.stable_abi.version},<3 {build}" if stable else host_spec
        torch_tag = (
            "stableabi" + BUILD.stable_abi.version.replace(".", "") if stable else "torch" + torch.replace(".", "")
        )

        assert re.fullmatch(rf"{flavour}_{torch_tag}_h[0-9a-f]{{7}}_{number}", variant.recipe.build.string)
        assert variant.recipe.build.number == number
        assert {"gxx_linux-64 14.*", "sysroot_linux-64 2.28.*", "ninja"} <= set(requirements["build"])
        assert host_spec in requirements["host"] and run_spec in requirements["run"]
        assert ("ignore_run_exports" in requirements) == stable
        assert "python 3.10.*" in requirements["host"] and "python >=3.10" in requirements["run"]
        script = variant.recipe.build.to_dict()["script"]
        if cuda is None:
            assert not any("cuda" in spec for spec in requirements["build"] + requirements["host"])
            assert "__cuda" not in requirements["run"]
        else:
            assert f"cuda-nvcc_linux-64 {cuda}.*" in requirements["build"]
            assert f"cuda-version =={cuda}" in requirements["host"]
            assert "__cuda" in requirements["run"]
            assert script["env"]["TORCH_CUDA_ARCH_LIST"].split(";") == list(BUILD.capabilities_for(cuda))


def test_offline_override_points_the_same_recipe_at_machine_stand_ins() -> None:
    """Both ABIs are built against the machine's one torch."""
    exact, stable = render_variants(offline_variant_config(machine_like_h200()))

    assert re.fullmatch(r"cpu_torch211_h[0-9a-f]{7}_0", exact.recipe.build.string)
    assert re.fullmatch(r"cpu_stableabi211_h[0-9a-f]{7}_100", stable.recipe.build.string)
    for variant in (exact, stable):
        requirements = variant.recipe.requirements.to_dict()
        assert {"machine-gxx_linux-64 13.*", "machine-sysroot_linux-64 2.39.*"} <= set(requirements["build"])
        assert {"python 3.12.*", "pytorch 2.11.* cpu*"} <= set(requirements["host"])


def test_offline_override_on_a_cuda_machine_renders_its_cuda_variant() -> None:
    """What `python -m tools.conda.build --offline` renders on the H200 (torch 2.11+cu130, nvcc 13.0)."""
    cuda_machine = machine_like_h200(torch_cuda="13.0", cuda_home="/usr/local/cuda", nvcc_version="13.0.88")
    exact, stable = render_variants(offline_variant_config(cuda_machine))

    assert re.fullmatch(r"cuda130_torch211_h[0-9a-f]{7}_200", exact.recipe.build.string)
    assert re.fullmatch(r"cuda130_stableabi211_h[0-9a-f]{7}_300", stable.recipe.build.string)
    for variant in (exact, stable):
        requirements = variant.recipe.requirements.to_dict()
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


def test_rendering_records_the_commit_time_for_the_build(monkeypatch) -> None:
    """Failed before: the build ran without SOURCE_DATE_EPOCH, so a CUDA build in the recipe's source copy (no .git)
    dated its staged sources 0, and its library differed from tools.builder.op's of the same commit."""
    from tools.builder.op import fixed_timestamp

    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    [variant, *_] = render_variants(variant_config())

    assert "SOURCE_DATE_EPOCH" not in os.environ
    assert variant.recipe.build.script["env"]["SOURCE_DATE_EPOCH"] == fixed_timestamp() != "0"


def test_rendering_keeps_a_commit_the_caller_gives(monkeypatch) -> None:
    monkeypatch.setenv("IMG2GRAY_SOURCE_COMMIT", "0123456789abcdef0123456789abcdef01234567")
    [variant, *_] = render_variants(variant_config())

    assert variant.recipe.build.script["env"]["IMG2GRAY_SOURCE_COMMIT"] == "0123456789abcdef0123456789abcdef01234567"
    assert os.environ["IMG2GRAY_SOURCE_COMMIT"] == "0123456789abcdef0123456789abcdef01234567"
