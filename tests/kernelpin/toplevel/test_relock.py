"""kernelpin.relock: the lock mode is one value (LockMode) where the CLI has flags, each function takes the modes that
mean something for it and names them when given another; the re-lock takes its options as one object
(RelockOptions). Issue 52: before, `lock` took `dry_run`, `sync` `locked` and `frozen`, and relock nine positional
parameters."""

from __future__ import annotations

import dataclasses

import pytest

import kernelpin
from kernelpin import environment
from kernelpin.errors import KernelpinError
from kernelpin.relock import LockMode, RelockOptions, release_checker, relock


@pytest.fixture
def hub_source():
    return kernelpin.HubSource(kernelpin.HubSettings.from_env())


@pytest.mark.parametrize("mode", [LockMode.LOCKED, LockMode.FROZEN])
def test_lock_and_add_take_update_or_dry_run_only(mode):
    """Refused before any project or Hub is looked at: the call itself is wrong."""
    with pytest.raises(ValueError, match=rf"^lock\(mode={mode}\): lock takes LockMode.UPDATE or LockMode.DRY_RUN$"):
        kernelpin.lock(mode=mode)
    with pytest.raises(ValueError, match=rf"^add\(mode={mode}\): add takes LockMode.UPDATE or LockMode.DRY_RUN$"):
        kernelpin.add(None, None, {}, mode=mode)  # type: ignore[arg-type]  # refused before either is used


def test_sync_takes_update_locked_or_frozen_only(project, hub_source):
    app = kernelpin.find_project(project('"acme/img2gray" = "^0.1"\n'))
    expected = r"^sync\(mode=LockMode.DRY_RUN\): sync takes LockMode.UPDATE or LockMode.LOCKED or LockMode.FROZEN$"
    for sync in (kernelpin.sync, kernelpin.sync_plan):
        with pytest.raises(ValueError, match=expected):
            sync(app, hub_source, environment.current({"torch": "2.13"}), mode=LockMode.DRY_RUN)
    assert not app.lockfile.exists()


def test_dry_run_resolves_and_writes_nothing(img2gray, project, hub_source):
    root = project('"acme/img2gray" = "^0.1"\n')
    app = kernelpin.find_project(root)
    done = kernelpin.lock(app, hub_source, mode=LockMode.DRY_RUN)
    assert [(k.repo_id, k.version) for k in done.lock.kernels] == [("acme/img2gray", "0.1.1")] and done.changes
    assert not app.lockfile.exists()
    pyproject = (root / "pyproject.toml").read_bytes()
    added = kernelpin.add(app, hub_source, {"acme/img2gray": "^0.1.0"}, mode=LockMode.DRY_RUN)
    assert added.entries["acme/img2gray"].value == "^0.1.0"
    assert (root / "pyproject.toml").read_bytes() == pyproject and not app.lockfile.exists()
    assert kernelpin.lock(app, hub_source).changes and app.lockfile.exists()  # UPDATE, the default, writes


def test_locked_and_frozen_keep_their_messages(img2gray, project, hub_source):
    app = kernelpin.find_project(project('"acme/img2gray" = "^0.1"\n'))
    env = environment.current({"torch": "2.13"})
    with pytest.raises(KernelpinError, match=r"^--frozen needs .*kernelpin\.lock; run `kernelpin lock` first"):
        kernelpin.sync(app, hub_source, env, mode=LockMode.FROZEN)
    with pytest.raises(KernelpinError, match=r"^kernelpin\.lock is stale and --locked forbids updating it:"):
        kernelpin.sync_plan(app, hub_source, env, mode=LockMode.LOCKED)
    assert not app.lockfile.exists()
    assert kernelpin.sync_plan(app, hub_source, env).lock.changes and app.lockfile.exists()  # UPDATE re-locks


def test_relock_takes_one_frozen_options_object(img2gray, project, hub_source):
    app = kernelpin.find_project(project('"acme/img2gray" = "^0.1"\n'))
    options = RelockOptions(upgrade=frozenset({"acme/other"}), mode=LockMode.DRY_RUN)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.mode = LockMode.UPDATE  # type: ignore[misc]
    with release_checker(app, hub_source) as checker, app.edit_lock():
        with pytest.raises(
            KernelpinError, match=r"^--upgrade-package acme/other: not in \[tool.kernels.dependencies\]"
        ):
            relock(app, hub_source, checker, options)
        warned: list[str] = []
        done = relock(app, hub_source, checker, dataclasses.replace(options, upgrade=frozenset(), warn=warned.append))
        with pytest.raises(ValueError, match=r"^relock\(mode=LockMode.FROZEN\)"):
            relock(app, hub_source, checker, dataclasses.replace(options, upgrade=frozenset(), mode=LockMode.FROZEN))
    assert [k.repo_id for k in done.lock.kernels] == ["acme/img2gray"] and not app.lockfile.exists()
