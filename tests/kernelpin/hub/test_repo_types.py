"""Kernel and model repositories: the Hub keeps kernels in `kernel` repositories (`/api/kernels/...`), older
mirrors in `model` repositories. kernelpin finds either (kernel first), records the type it resolved in the
lock, and syncs and loads from it; one probe (source.repository_refs) decides "no such repository" for
resolving and publishing alike."""

from __future__ import annotations

import httpx2
import pytest
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

import kernelpin
from kernelpin.hub.listing import Refs
from kernelpin.hub.source import repository_refs
from kernelpin.store import lockfiles
from testkit.fake_kernel import CPU_213, publish


@pytest.mark.parametrize("repo_type", ["kernel", "model"])
def test_lock_sync_load_from_either_repository_type(new_repo, project, cli, hf_env, repo_type):
    repo_id, repo = new_repo("typed", repo_type)
    commit = publish(repo, "1.2.0", variants=(CPU_213,))
    root = project(f'"{repo_id}" = "^1"\n')
    status, _, err = cli("lock")
    assert status == 0, err
    (kernel,) = lockfiles.read(root / "kernelpin.lock").kernels
    assert (kernel.repo_type, kernel.commit, kernel.version) == (repo_type, commit, "1.2.0")
    assert f'repo-type = "{repo_type}"' in (root / "kernelpin.lock").read_text()
    status, _, err = cli("sync")
    assert status == 0, err
    assert (hf_env / f"{repo_type}s--{repo_id.replace('/', '--')}" / "snapshots" / commit / "build" / CPU_213).is_dir()
    module = kernelpin.load(repo_id)
    assert module.VERSION == "1.2.0" and module.gray([(10, 20, 30)]) == [18]


def test_a_kernel_repository_wins_over_a_model_repository_of_the_same_name(new_repo, hub, project, cli):
    repo_id, model = new_repo("both", "model")
    publish(model, "1.0.0", variants=(CPU_213,))
    kernel_commit = publish(hub.repo(repo_id, "kernel"), "1.1.0", variants=(CPU_213,))
    root = project(f'"{repo_id}" = "^1"\n')
    assert cli("lock")[0] == 0
    (kernel,) = lockfiles.read(root / "kernelpin.lock").kernels
    assert (kernel.repo_type, kernel.version, kernel.commit) == ("kernel", "1.1.0", kernel_commit)
    project(f'"{repo_id}" = {{ version = "^1", repo-type = "model" }}\n')
    assert cli("lock")[0] == 0
    assert lockfiles.read(root / "kernelpin.lock").kernels[0].repo_type == "model"


class ScriptedRefs:
    """A refs listing answering per repository type as a server would: the probe's rule is what is tested."""

    def __init__(self, answers: dict[str, int]) -> None:
        self.answers, self.asked = answers, []

    def __call__(self, repo_type: str) -> Refs:
        self.asked.append(repo_type)
        status = self.answers[repo_type]
        if status == 200:
            return Refs(repo_type, {}, {})
        response = httpx2.Response(status, request=httpx2.Request("GET", f"http://hub/api/{repo_type}s/acme/x/refs"))
        error = RepositoryNotFoundError if status in (401, 404) and repo_type == "kernel" else HfHubHTTPError
        raise error(f"{status} Client Error", response=response)


@pytest.mark.parametrize(
    ("answers", "found", "asked"),
    [
        ({"kernel": 401, "model": 200}, "model", ["kernel", "model"]),  # the Hub: 401 RepositoryNotFound
        ({"kernel": 404, "model": 200}, "model", ["kernel", "model"]),  # a mirror: plain 404
        ({"kernel": 200, "model": 200}, "kernel", ["kernel"]),
        ({"kernel": 404, "model": 404}, None, ["kernel", "model"]),
    ],
    ids=["hub-401", "mirror-404", "kernel-first", "none"],
)
def test_one_probe_over_repository_types(answers, found, asked):
    list_refs = ScriptedRefs(answers)
    refs = repository_refs(list_refs, None)
    assert (refs.repo_type if refs else None, list_refs.asked) == (found, asked)


def test_the_probe_raises_what_is_not_absence():
    with pytest.raises(HfHubHTTPError, match="500"):
        repository_refs(ScriptedRefs({"kernel": 500, "model": 200}), None)
