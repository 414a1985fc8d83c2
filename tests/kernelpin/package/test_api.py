"""kernelpin as a library: every command is a function of the package, named like the command, taking its inputs
explicitly and returning data; the CLI renders the same results (its --json is compared field by field)."""

from __future__ import annotations

import ast
import inspect
import json
import re
from pathlib import Path

import pytest

import kernelpin
from kernelpin import environment
from kernelpin.errors import KernelpinError
from testkit.fake_kernel import CPU_213


@pytest.fixture
def hub_source():
    return kernelpin.HubSource(kernelpin.HubSettings.from_env())


def test_add_lock_sync_verify_remove_without_a_subprocess(img2gray, project, cli, hf_env, hub_source):
    root = project("")
    app = kernelpin.find_project(root)
    added = kernelpin.add(app, hub_source, {"acme/img2gray": "^0.1"})
    assert added.entries["acme/img2gray"].value == "^0.1"
    assert [(k.repo_id, k.version) for k in added.lock.kernels] == [("acme/img2gray", "0.1.1")]
    assert added.changes and kernelpin.check_lock(app) == []
    assert kernelpin.lock(app, hub_source).changes == []  # fresh: nothing to change, nothing written

    env = environment.current({"torch": "2.13"})
    plan = kernelpin.sync_plan(app, hub_source, env)
    assert [(row.variant, len(row.missing)) for row in plan.variants] == [(CPU_213, 3)]
    synced = kernelpin.sync(app, hub_source, env)
    assert [row.variant for row in synced.variants] == [CPU_213] and synced.lock.changes == []
    status, out, _ = cli("sync", "--torch", "2.13", "--json")
    assert status == 0 and sorted(json.loads(out)["synced"][0]["reused"]) == sorted(synced.variants[0].downloaded)

    verified = kernelpin.verify(app, hub_source)
    assert verified.ok and {row.status for row in verified.files} == {"ok"}
    status, out, _ = cli("verify", "--json")
    assert json.loads(out) == {"ok": True, "files": [row.as_json() for row in verified.files]}

    (row,) = kernelpin.outdated(app, hub_source)
    assert (row.locked, row.newest_satisfying) == ("0.1.1", "0.1.1")
    status, out, _ = cli("outdated", "--json")
    assert json.loads(out) == [row.as_json()]
    listed = kernelpin.versions(app, hub_source, "acme/img2gray")
    assert [v.version for v in listed.versions if v.locked] == ["0.1.1"]
    cached = kernelpin.cache(hub_source.settings.cache_dir, app)
    assert [r.locked for r in cached.revisions] == [True] and cached.unused == []

    removed = kernelpin.remove(app, hub_source, ["acme/img2gray"])
    assert not removed.lock.kernels and removed.repo_ids == ["acme/img2gray"]
    assert "acme/img2gray" not in (root / "pyproject.toml").read_text()


def test_library_errors_are_kernelpins_errors(img2gray, project, hub_source):
    app = kernelpin.find_project(project('"acme/img2gray" = "^0.1"\n'))
    with pytest.raises(KernelpinError, match="--locked forbids updating it"):
        kernelpin.sync(app, hub_source, environment.current({"torch": "2.13"}), mode=kernelpin.LockMode.LOCKED)
    with pytest.raises(KernelpinError, match="no kernelpin.lock"):
        kernelpin.verify(app, hub_source)
    assert not (app.lockfile).exists()


def test_lock_sync_verify_take_the_project_here_and_the_hub_of_the_environment(img2gray, project, monkeypatch):
    """As the CLI: the project around the working directory, the Hub HF_ENDPOINT names, this machine's torch."""
    root = project('"acme/img2gray" = "^0.1"\n')
    (root / "src").mkdir()
    monkeypatch.chdir(root / "src")  # found from below, as `kernelpin lock` finds it
    assert [(k.repo_id, k.version) for k in kernelpin.lock().lock.kernels] == [("acme/img2gray", "0.1.1")]
    assert kernelpin.check_lock() == []
    assert [(row.variant, len(row.missing)) for row in kernelpin.sync_plan().variants] == [(CPU_213, 3)]
    assert [row.variant for row in kernelpin.sync().variants] == [CPU_213]
    assert kernelpin.verify().ok
    assert [(row.repo, row.locked) for row in kernelpin.outdated()] == [("acme/img2gray", "0.1.1")]


def test_the_cli_sync_is_the_library_sync_rendered(img2gray, project, cli, monkeypatch):
    """`kernelpin sync` calls kernelpin.sync (and --dry-run kernelpin.sync_plan) instead of re-running its steps;
    a re-lock's changes are still shown before anything is installed."""
    from kernelpin.commands import sync as syncing

    project('"acme/img2gray" = "^0.1"\n')
    calls = []
    for name in ("sync", "sync_plan"):
        real = getattr(syncing, name)
        monkeypatch.setattr(
            syncing, name, lambda *a, _name=name, _real=real, **k: calls.append(_name) or _real(*a, **k)
        )
    status, out, err = cli("sync", "--torch", "2.13", "--dry-run")
    assert status == 0 and calls == ["sync_plan"] and "Locked: " in err and "Would sync acme/img2gray" in out
    status, out, err = cli("sync", "--torch", "2.13")
    assert status == 0 and calls == ["sync_plan", "sync"] and f"acme/img2gray 0.1.1: {CPU_213}: 3 downloaded" in out


def _kernelpin_classes() -> dict[str, set[str]]:
    """Every class kernelpin defines (public names), by name -> the names of its bases."""
    classes: dict[str, set[str]] = {}
    for path in Path(kernelpin.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                classes[node.name] = {getattr(base, "id", getattr(base, "attr", "")) for base in node.bases}
    return classes


def test_dir_lists_the_api_and_every_type_it_returns_or_raises_is_exported() -> None:
    """dir(kernelpin) lists the functions, the types they return and the errors and warnings they raise; each
    name resolves; every class a function's annotation names and every KernelpinError or warning kernelpin
    defines is among them."""
    names = dir(kernelpin)
    assert names == sorted(kernelpin.__all__) and len(names) == len(set(names))
    assert all(getattr(kernelpin, name) is not None for name in names)
    classes = _kernelpin_classes()
    returned = {
        word
        for name in names
        if inspect.isfunction(getattr(kernelpin, name))
        for word in re.findall(r"\b[A-Z]\w*", str(inspect.signature(getattr(kernelpin, name)).return_annotation))
    }
    assert returned & set(classes) - set(names) == set()

    def raised(name: str) -> bool:
        return bool({"KernelpinError", "UserWarning"} & classes[name]) or any(
            raised(base) for base in classes[name] if base in classes
        )

    assert {name for name in classes if raised(name)} - set(names) == set()
    assert issubclass(kernelpin.IntegrityError, kernelpin.KernelpinError) and kernelpin.Synced.__name__ == "Synced"
