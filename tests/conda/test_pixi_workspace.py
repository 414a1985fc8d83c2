"""pixi.toml and the consumer example point at what this repository really has (no pixi binary here).

pixi's manifest rules checked here (pixi >= 0.71, manifest reference and schema): `[workspace].platforms`
entries are conda subdirs or inline tables `{ name?, platform, <virtual package keys> }` with unique names;
a feature's `platforms` names workspace platforms; `[system-requirements]` is deprecated in their favour.
"""

from __future__ import annotations

import re
import tomllib

import pytest
from packaging.specifiers import SpecifierSet

from tools.conda.build import REPO_ROOT, render_variants, select_variants, variant_config
from tools.conda.build import main as conda_build_main

CONSUMER_DIR = REPO_ROOT / "examples" / "consumer"
MANIFESTS = {"workspace": REPO_ROOT / "pixi.toml", "consumer": CONSUMER_DIR / "pixi.toml"}
WORKSPACE = tomllib.loads(MANIFESTS["workspace"].read_text())
CONSUMER = tomllib.loads(MANIFESTS["consumer"].read_text())
SUBDIRS = {"linux-64", "linux-aarch64", "osx-64", "osx-arm64", "win-64", "noarch"}
# Virtual-package keys pixi accepts on a platform table, and the platform table's own keys.
VIRTUAL_PACKAGE_KEYS = {"cuda", "glibc", "libc", "linux", "archspec", "macos", "osx", "windows"}
PLATFORM_KEYS = {"name", "platform"} | VIRTUAL_PACKAGE_KEYS


def _all_tasks() -> dict[str, dict]:
    tasks = dict(WORKSPACE.get("tasks", {}))
    for name, feature in WORKSPACE["feature"].items():
        tasks |= {f"{name}.{task}": spec for task, spec in feature.get("tasks", {}).items()}
    return tasks


def _platforms(manifest: dict) -> dict[str, dict]:
    """Workspace platform name -> its table (a bare subdir is a table without virtual packages)."""
    named: dict[str, dict] = {}
    for entry in manifest["workspace"]["platforms"]:
        table = {"platform": entry} if isinstance(entry, str) else entry
        assert set(table) <= PLATFORM_KEYS, f"unknown platform keys {set(table) - PLATFORM_KEYS} in {entry}"
        assert table.get("platform", table.get("name")) in SUBDIRS, entry
        name = table.get("name", table.get("platform"))
        assert name not in named, f"platform name {name} declared twice"
        named[name] = table
    return named


def _tables(value: object, path: str = ""):
    if isinstance(value, dict):
        for key, child in value.items():
            yield f"{path}.{key}".lstrip("."), child
            yield from _tables(child, f"{path}.{key}")


def test_every_script_a_task_runs_exists() -> None:
    tasks = _all_tasks()
    assert {"build", "dev.test", "cpu.bench", "cuda.bench"} <= set(tasks)
    scripts = {name: re.findall(r"python ([\w/]+\.py)", task["cmd"]) for name, task in tasks.items()}
    modules = {name: re.findall(r"python -m ([\w.]+)", task["cmd"]) for name, task in tasks.items()}
    assert sum(map(len, scripts.values())) + sum(map(len, modules.values())) >= 6
    for name, paths in scripts.items():
        assert all((REPO_ROOT / path).exists() for path in paths), f"task {name}: {tasks[name]['cmd']}"
    for name, names in modules.items():
        for module in names:  # a module file, or a package run through its __main__.py
            path = REPO_ROOT.joinpath(*module.split("."))
            assert path.with_suffix(".py").is_file() or (path / "__main__.py").is_file(), (
                f"task {name}: {tasks[name]['cmd']}"
            )


def _rendered_build(*args: str) -> list[str]:
    build = WORKSPACE["tasks"]["build"]
    values = {spec["arg"]: spec["default"] for spec in build["args"]}
    values |= dict(zip(values, args, strict=False))
    command = build["cmd"]
    for name, value in values.items():
        command = command.replace("{{ " + name + " }}", value)
    return command.split()


def test_build_task_arguments_are_conda_build_options(capsys) -> None:
    rendered = _rendered_build()

    assert rendered[:3] == ["python", "-m", "tools.conda.build"]
    with pytest.raises(SystemExit) as exited:
        conda_build_main([*rendered[3:], "--help"])
    assert exited.value.code == 0
    assert "--variant" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "count"),
    [
        ((), 12),
        (("cpu",), 3),
        (("cuda", "2.13"), 3),
        (("cuda", "2.13", "13.0"), 1),
        (("cpu", "2.11", "None"), 1),
        (("cpu", "2.13", "None", "exact"), 1),
        (("cuda", "any", "12.9", "stable"), 1),
        (("all", "any", "any", "stable"), 4),
    ],
)
def test_build_task_arguments_select_variants(args: tuple[str, ...], count: int) -> None:
    """`pixi run build cuda 2.13 13.0 exact` (what a CI job runs) selects exactly one variant of the matrix."""
    rendered = _rendered_build(*args)
    options = dict(zip(rendered[3::2], rendered[4::2], strict=False))
    variants = render_variants(variant_config())
    which = "all" if options["--variant"] == "auto" else options["--variant"]

    assert len(select_variants(variants, which, options["--pytorch"], options["--cuda"], options["--abi"])) == count


@pytest.mark.parametrize("manifest", list(MANIFESTS))
def test_manifests_declare_virtual_packages_on_platforms_not_system_requirements(manifest: str) -> None:
    data = tomllib.loads(MANIFESTS[manifest].read_text())
    platforms = _platforms(data)

    assert not [path for path, _ in _tables(data) if path.endswith("system-requirements")]
    assert SpecifierSet(data["workspace"]["requires-pixi"]).contains("0.71.0")
    assert not SpecifierSet(data["workspace"]["requires-pixi"]).contains("0.70.9")
    for name, feature in data.get("feature", {}).items():
        for platform in feature.get("platforms", []):
            assert platform in platforms, f"feature {name} names platform {platform}, not declared in [workspace]"


def test_environments_pair_a_torch_flavour_with_its_virtual_packages() -> None:
    features = WORKSPACE["feature"]
    platforms = _platforms(WORKSPACE)

    assert features["cpu"]["dependencies"]["pytorch"]["build"] == "cpu*"
    assert features["cuda"]["dependencies"]["pytorch"]["build"] == "cuda*"
    assert all(platforms[name].get("cuda", "").startswith("13") for name in features["cuda"]["platforms"])
    assert not any("cuda" in platforms[name] for name in features["cpu"]["platforms"])
    # The stable-ABI packages are built through the recipe (rattler-build brings each CUDA's nvcc), so no
    # environment pins a toolkit for them.
    assert set(WORKSPACE["environments"]) == {"cpu", "cuda"}


def test_consumer_uses_the_built_channel_before_conda_forge() -> None:
    local, *rest = CONSUMER["workspace"]["channels"]
    platforms = _platforms(CONSUMER)

    assert (CONSUMER_DIR / local).resolve() == REPO_ROOT / "output"  # tools.conda.build's default --output-dir
    assert rest == ["conda-forge"]
    assert "img2gray" in CONSUMER["dependencies"]
    assert all(platforms[name]["cuda"].startswith("13") for name in CONSUMER["feature"]["gpu"]["platforms"])
    assert (CONSUMER_DIR / "check.py").exists()


def _environments_with_task(task: str) -> list[str]:
    """The environments of pixi.toml in which `pixi run TASK` finds the task (default: [tasks] only)."""
    environments = {"default": [], **{name: spec["features"] for name, spec in WORKSPACE["environments"].items()}}
    return [
        name
        for name, features in environments.items()
        if task in WORKSPACE.get("tasks", {}) or any(task in WORKSPACE["feature"][f].get("tasks", {}) for f in features)
    ]


def test_documented_pixi_commands_name_an_environment_where_the_task_is_ambiguous() -> None:
    """`pixi run TASK` for a task of several environments makes pixi ask which one (or fail without a terminal).
    Failed before: README said `pixi run publish-dry-run`, a task of both `cpu` and `cuda`."""
    documents = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
    for document in documents:
        for command in re.findall(r"pixi run ((?:-e \S+ )?[\w-]+)", document.read_text()):
            environment, _, task = command.rpartition(" ")
            found = _environments_with_task(task)
            if not found:  # a command, not a task (pixi run python ...)
                continue
            # pixi takes the default environment when the task is there, else the only one that has it.
            assert environment or "default" in found or len(found) == 1, (
                f"{document.name}: `pixi run {task}` is a task of {found}: say -e"
            )
            if environment:
                assert environment.removeprefix("-e ") in found, f"{document.name}: `pixi run {command}`"


def test_publish_tasks_default_to_the_repository_the_docs_name() -> None:
    """Failed before: pixi.toml published to kernels-community/img2gray, README/docs/build.toml say acme/img2gray."""
    from tools.builder.config import BuildConfig

    repository = "/".join(BuildConfig.load().repository.rstrip("/").split("/")[-2:])
    for name in ("publish", "publish-dry-run"):
        [argument] = WORKSPACE["feature"]["dev"]["tasks"][name]["args"]
        assert argument["default"] == repository, name
    assert f'"{repository}"' in (REPO_ROOT / "README.md").read_text()


def test_environments_install_what_their_tasks_and_tests_import() -> None:
    """Failed before: PyYAML (tests) came only through another package, matplotlib (benchmarks/plot.py) from
    nowhere, and the cuda bench's torchvision and kornia peers from nowhere."""
    dev = WORKSPACE["feature"]["dev"]["dependencies"]
    cuda = WORKSPACE["feature"]["cuda"]["dependencies"]
    assert "import yaml" in (REPO_ROOT / "tests" / "conda" / "test_feedstock.py").read_text() and "pyyaml" in dev
    assert "import matplotlib" in (REPO_ROOT / "benchmarks" / "plot.py").read_text() and "matplotlib-base" in dev
    peers = re.findall(r"torchvision|kornia", WORKSPACE["feature"]["cuda"]["tasks"]["bench"]["description"])
    assert peers and all(peer in cuda for peer in peers)
    assert "plot" in WORKSPACE["feature"]["dev"]["tasks"]
