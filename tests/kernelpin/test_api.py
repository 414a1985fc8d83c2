"""kernelpin as a library: every command is a function of the package, named like the command, taking its inputs
explicitly and returning data; the CLI renders the same results (its --json is compared field by field)."""

from __future__ import annotations

import json

import pytest
from testkit.fake_kernel import CPU_213

import kernelpin
from kernelpin import environment
from kernelpin.errors import KernelpinError


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
        kernelpin.sync(app, hub_source, environment.current({"torch": "2.13"}), locked=True)
    with pytest.raises(KernelpinError, match="no kernelpin.lock"):
        kernelpin.verify(app, hub_source)
    assert not (app.lockfile).exists()
