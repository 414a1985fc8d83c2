"""pixi.toml and the consumer example point at what this repository really has (no pixi binary here)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from conda_build import REPO_ROOT, main as conda_build_main

WORKSPACE = tomllib.loads((REPO_ROOT / "pixi.toml").read_text())
CONSUMER_DIR = REPO_ROOT / "examples" / "consumer"
CONSUMER = tomllib.loads((CONSUMER_DIR / "pixi.toml").read_text())


def _all_tasks() -> dict[str, dict]:
    tasks = dict(WORKSPACE.get("tasks", {}))
    for name, feature in WORKSPACE["feature"].items():
        tasks |= {f"{name}.{task}": spec for task, spec in feature.get("tasks", {}).items()}
    return tasks


def test_every_script_a_task_runs_exists() -> None:
    tasks = _all_tasks()
    assert {"build", "dev.test", "cpu.bench", "cuda.bench"} <= set(tasks)
    scripts = {name: re.findall(r"python ([\w/]+\.py)", task["cmd"]) for name, task in tasks.items()}
    modules = {name: re.findall(r"python -m ([\w.]+)", task["cmd"]) for name, task in tasks.items()}
    assert sum(map(len, scripts.values())) + sum(map(len, modules.values())) >= 6
    for name, paths in scripts.items():
        assert all((REPO_ROOT / path).exists() for path in paths), f"task {name}: {tasks[name]['cmd']}"
    for name, names in modules.items():
        for module in names:
            assert (REPO_ROOT / (module.replace(".", "/") + ".py")).exists(), f"task {name}: {tasks[name]['cmd']}"


def test_build_task_arguments_are_conda_build_options(capsys) -> None:
    build = WORKSPACE["tasks"]["build"]
    rendered = build["cmd"].replace("{{ variant }}", build["args"][0]["default"]).split()

    assert rendered[:2] == ["python", "tools/conda_build.py"]
    try:
        conda_build_main([*rendered[2:], "--help"])
    except SystemExit as exit:
        assert exit.code == 0
    assert "--variant" in capsys.readouterr().out


def test_environments_pair_a_torch_flavour_with_its_virtual_packages() -> None:
    features = WORKSPACE["feature"]
    assert features["cpu"]["dependencies"]["pytorch"]["build"] == "cpu*"
    assert features["cuda"]["dependencies"]["pytorch"]["build"] == "cuda*"
    assert features["cuda"]["system-requirements"]["cuda"].startswith("13")
    assert set(WORKSPACE["environments"]) == {"cpu", "cuda"}


def test_consumer_uses_the_built_channel_before_conda_forge() -> None:
    local, *rest = CONSUMER["workspace"]["channels"]

    assert (CONSUMER_DIR / local).resolve() == REPO_ROOT / "output"  # conda_build.py's default --output-dir
    assert rest == ["conda-forge"]
    assert "img2gray" in CONSUMER["dependencies"]
    assert CONSUMER["feature"]["gpu"]["system-requirements"]["cuda"].startswith("13")
    assert (CONSUMER_DIR / "check.py").exists()
