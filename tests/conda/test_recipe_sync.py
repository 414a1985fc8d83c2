"""recipe/recipe.yaml builds with plain rattler-build and agrees with build.toml, the one source of truth."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from rattler_build import PlatformConfig, RenderConfig, Stage0Recipe

from tools.builder.config import BUILD_TOML, BuildConfig, BuildConfigError
from tools.conda import recipe_sync
from tools.conda.build import RECIPE, variant_config

BUILD = BuildConfig.load()


def test_recipe_renders_without_experimental_features() -> None:
    text = RECIPE.read_text()
    platform = PlatformConfig(target_platform="linux-64", experimental=False)

    variants = Stage0Recipe.from_file(RECIPE).render(variant_config(), RenderConfig(platform=platform))

    assert "load_from_file" not in text and "--experimental" not in text.replace("no experimental", "")
    assert {str(v.recipe.package.version) for v in variants} == {BUILD.version}
    assert {v.recipe.package.name for v in variants} == {BUILD.name}
    about = variants[0].recipe.about.to_dict()
    assert about["license"] == BUILD.license and about["license_file"] == ["LICENSE"]


def test_recipe_is_in_step_with_build_toml() -> None:
    assert recipe_sync.main(["--check"]) == 0


def test_a_version_bump_in_build_toml_alone_makes_the_check_fail_and_sync_fixes_it(tmp_path: Path, capsys) -> None:
    config = BuildConfig(**{**BUILD.__dict__, "version": "9.9.9", "cuda_capabilities": {"13.0": ("9.0",)}})
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE.read_text())

    stale = recipe.read_text() != recipe_sync.synced(recipe.read_text(), config)
    recipe.write_text(recipe_sync.synced(recipe.read_text(), config))

    assert stale
    assert 'version: "9.9.9"' in recipe.read_text()
    assert (
        'cuda_capabilities: ${{ "" if cuda_compiler_version == "None" else "9.0" if match(cuda_compiler_version, ">=13.0,<14") else "" }}'
        in recipe.read_text()
    )
    assert recipe_sync.synced(recipe.read_text(), config) == recipe.read_text()  # idempotent


def test_source_filter_is_exactly_the_declared_build_inputs() -> None:
    includes = recipe_sync.filter_includes(BUILD)

    assert "LICENSE" in includes and "build.toml" in includes
    for path in BUILD.sources(cuda=True):
        assert path in includes
    assert "tools/builder/op.py" in includes and "kernelpin/**" in includes and "torch-ext/img2gray/**" in includes


def test_every_source_file_of_the_repository_is_declared_in_build_toml() -> None:
    """A header added to csrc/ but not to build.toml would be missing from the recipe's source copy."""
    on_disk = {
        p.relative_to(BUILD.root).as_posix()
        for folder in ("csrc", "torch-ext")
        for p in (BUILD.root / folder).glob("*")
        if p.suffix in (".h", ".cuh", ".cpp", ".cu")
    }

    assert on_disk == set(BUILD.sources(cuda=True)) | set(BUILD.sources(cuda=True, abi="stable"))


def test_no_other_module_parses_build_toml() -> None:
    """One reader: tools/builder/config.py."""
    readers = [
        path.relative_to(BUILD.root).as_posix()
        for folder in ("tools", "tests", "kernelpin", "benchmarks")
        for path in (BUILD.root / folder).rglob("*.py")
        if path != Path(__file__) and '"build.toml"' in path.read_text() and "tomllib" in path.read_text()
    ]
    assert readers == ["tools/builder/config.py"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kernel": {"x": {"backend": "rocm", "src": ["csrc/img2gray.h"]}}}, "backend 'rocm'"),
        ({"torch": {"src": ["../outside.cpp"]}}, "normalized path inside the repository"),
        ({"torch": {"src": ["csrc/missing.cpp"]}}, "does not exist"),
        ({"general": {"name": "img2gray"}}, "needs version"),
        # One list for every toolkit (the form before per-toolkit lists): which CUDA compiles it is unknown.
        ({"cuda": {"capabilities": ["8.0", "9.0"]}}, "one list per CUDA toolkit"),
        (
            {"cuda": {"capabilities": {"12.6": ["8.0", "10.0"]}}},
            r'"12.6": CUDA 12.6 cannot compile 10.0 \(it compiles 5.0 to 9.0\)',
        ),
        (
            {"cuda": {"capabilities": {"13.0": ["7.0", "9.0+PTX"]}}},
            "CUDA 13.0 cannot compile 7.0 \\(it compiles 7.5 to 12.1\\)",
        ),
        ({"cuda": {"capabilities": {"12.4": ["8.0"]}}}, r'"12.4": not a CUDA toolkit whose architectures are known'),
        ({"cuda": {"capabilities": {"13.0": []}}}, "needs a list like"),
    ],
)
def test_a_broken_build_toml_names_the_problem(change: dict, message: str) -> None:
    config = tomllib.loads((BUILD.root / BUILD_TOML).read_text()) | change

    with pytest.raises(BuildConfigError, match=message):
        BuildConfig.from_dict(config, BUILD.root)


@pytest.mark.parametrize(
    ("toolkit", "key"),
    [("12.6", "12.6"), ("12.8", "12.6"), ("12.9", "12.9"), ("13.0", "13.0"), ("13.2", "13.0"), ("13.4.1", "13.0")],
)
def test_a_toolkit_compiles_the_list_of_the_newest_key_at_or_below_it_in_its_major(toolkit: str, key: str) -> None:
    assert BUILD.capabilities_for(toolkit) == BUILD.cuda_capabilities[key]


@pytest.mark.parametrize("toolkit", ["12.4", "11.8", "14.0"])
def test_a_toolkit_without_a_list_of_its_major_is_refused_by_name(toolkit: str) -> None:
    """CUDA 14 may drop architectures as 13.0 did (sm_50..sm_72): it gets no 13.x list by default."""
    with pytest.raises(BuildConfigError, match=rf"no list for CUDA {toolkit}: add a \"{toolkit}\" = \[...\] entry"):
        BUILD.capabilities_for(toolkit)
