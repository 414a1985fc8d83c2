"""Issue 50: the CLI takes `kernels`' shapes beside its own: `kernelpin lock [DIR]` and `kernelpin download [DIR]`
(install what the lock names, as `kernels download DIR` does). Failed before: `lock .` said "unexpected argument
'.'", and `download` was an unknown command."""

from __future__ import annotations

import json

from testkit.fake_kernel import CPU_213, publish
from tests.kernelpin.helpers import TRUSTED_ORG, snapshot_dir


def _released(new_repo) -> tuple[str, str]:
    repo_id, repo = new_repo("shapes", "kernel", TRUSTED_ORG)
    publish(repo, "1.0.0")
    commit = publish(repo, "1.1.0")
    repo.branch("v1")
    return repo_id, commit


def test_lock_takes_the_project_directory_as_kernels_lock_does(new_repo, project, cli, tmp_path, monkeypatch):
    repo_id, commit = _released(new_repo)
    root = project(f'"{repo_id}" = 1\n')
    status, _, err = cli("lock", ".")
    assert status == 0, err
    (root / "kernelpin.lock").unlink()
    monkeypatch.chdir(tmp_path)  # elsewhere: DIR names the project
    status, out, err = cli("lock", str(root), "--json")
    assert status == 0, err
    assert json.loads(out)["kernels"][0]["commit"] == commit and (root / "kernelpin.lock").is_file()
    status, _, err = cli("lock", str(root), "--project", str(tmp_path))
    assert status == 1 and "name two projects; give one of them" in err


def test_download_installs_what_the_lock_names_without_resolving(new_repo, project, cli, hf_env, tmp_path, monkeypatch):
    repo_id, commit = _released(new_repo)
    root = project(f'"{repo_id}" = 1\n')
    assert cli("lock")[0] == 0
    lock_text = (root / "kernelpin.lock").read_text()
    monkeypatch.chdir(tmp_path)
    status, out, err = cli("download", str(root))
    assert status == 0, err
    assert f"{repo_id} " in out and f": {CPU_213}: " in out and "downloaded" in out and "all verified" in out
    variant = snapshot_dir(hf_env, repo_id, commit, "kernel") / "build" / CPU_213
    assert (variant / "__init__.py").is_file()
    assert (root / "kernelpin.lock").read_text() == lock_text  # nothing re-locked
    status, out, err = cli("download", str(root), "--all-variants", "--json")
    assert status == 0, err
    assert len(json.loads(out)["synced"]) > 1
