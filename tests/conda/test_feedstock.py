"""The feedstock form of the recipe (a release archive's url + sha256) and conda-forge's v1-recipe lints.

conda-smithy's linter is not installable here (PyPI's `conda-smithy` is an empty 0.0.0 placeholder), so the
rules it applies to v1 recipes that concern this recipe are checked directly: about.homepage,
about.repository, about.license_file (shipped), extra.recipe-maintainers, tests, no experimental jinja,
platform selectors on c_stdlib_version, a url + sha256 source.
"""

from __future__ import annotations

import hashlib
import tarfile
from pathlib import Path

import pytest
import yaml
from rattler_build import PlatformConfig, RenderConfig, Stage0Recipe

from tests.conda.support import conda_forge_pins
from tools.builder.config import BuildConfig
from tools.conda.build import PROJECT_VARIANTS, RECIPE
from tools.conda.feedstock import write_feedstock

BUILD = BuildConfig.load()


@pytest.fixture(scope="module")
def feedstock(tmp_path_factory: pytest.TempPathFactory):
    return write_feedstock("HEAD", tmp_path_factory.mktemp("feedstock"))


def test_archive_is_deterministic_and_its_sha256_is_in_the_recipe(feedstock, tmp_path: Path) -> None:
    again = write_feedstock("HEAD", tmp_path)
    recipe = yaml.safe_load(feedstock.recipe.read_text())

    assert again.sha256 == feedstock.sha256 == hashlib.sha256(feedstock.archive.read_bytes()).hexdigest()
    assert recipe["source"] == {"url": feedstock.url, "sha256": feedstock.sha256}
    assert feedstock.url == f"{BUILD.repository}/releases/download/v{BUILD.version}/{feedstock.archive.name}"
    assert recipe["build"]["script"]["env"]["IMG2GRAY_SOURCE_COMMIT"] == feedstock.commit


def test_archive_holds_everything_the_build_reads(feedstock) -> None:
    prefix = f"{BUILD.name}-{BUILD.version}/"
    with tarfile.open(feedstock.archive) as archive:
        names = {name.removeprefix(prefix) for name in archive.getnames()}

    for path in [*BUILD.build_inputs(), "LICENSE"]:
        assert path in names, path


def test_feedstock_recipe_renders_with_plain_rattler_build(feedstock) -> None:
    platform = PlatformConfig(target_platform="linux-64", experimental=False)
    pins = conda_forge_pins("linux-64")
    variants = Stage0Recipe.from_file(feedstock.recipe).render(pins, RenderConfig(platform=platform))

    assert sorted(path.name for path in feedstock.recipe.parent.iterdir()) == ["check_img2gray.py", "recipe.yaml"]
    assert len(variants) == len(pins["cuda_compiler_version"]) * len(pins["pytorch"])


@pytest.mark.parametrize("recipe_path", ["repository", "feedstock"])
def test_conda_forge_v1_recipe_lints(recipe_path: str, feedstock) -> None:
    text = (RECIPE if recipe_path == "repository" else feedstock.recipe).read_text()
    recipe = yaml.safe_load(text)

    assert "load_from_file" not in text
    assert recipe["about"]["homepage"] and recipe["about"]["repository"]
    assert recipe["about"]["license_file"] == "LICENSE" and (BUILD.root / "LICENSE").read_text().strip()
    assert "Apache License" in (BUILD.root / "LICENSE").read_text()
    assert recipe["extra"]["recipe-maintainers"]
    assert recipe["tests"]
    if recipe_path == "feedstock":
        assert set(recipe["source"]) == {"url", "sha256"}


def test_c_stdlib_version_carries_platform_selectors() -> None:
    variants = yaml.safe_load(PROJECT_VARIANTS.read_text())

    assert all(isinstance(entry, dict) and "if" in entry for entry in variants["c_stdlib_version"])
    assert all(isinstance(entry, dict) and "if" in entry for entry in variants["c_stdlib"])
