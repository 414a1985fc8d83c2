"""A release moved to another commit is warned about: a tag moved by force, and (issue 28, 15) a release re-tagged
`v1.0.0+rebuild` on another commit, its `v1.0.0` deleted: build metadata does not make a new version (SemVer §10)."""

from __future__ import annotations

import dataclasses

from kernelpin.format import lockfile
from testkit.fake_kernel import CPU_213, publish


def moved_release(new_repo, project, cli, retag) -> tuple[str, str, str, str]:
    """A release 1.0.0 locked, then rebuilt on another commit that `retag(repo)` makes the release: the repository,
    both commits and `lock --upgrade`'s stderr."""
    repo_id, repo = new_repo()
    first = publish(repo, "1.0.0", variants=(CPU_213,))
    project(f'"{repo_id}" = "^1"\n')
    assert cli("lock")[0] == 0
    repo.write({"CHANGELOG": "rebuilt"})
    second = repo.commit("rebuild")
    retag(repo)
    status, _, err = cli("lock", "--upgrade")
    assert status == 0, err
    return repo_id, first, second, err


def test_a_moved_tag_is_reported_loudly(new_repo, project, cli):
    repo_id, first, second, err = moved_release(new_repo, project, cli, lambda repo: repo.git("tag", "-f", "v1.0.0"))
    assert (
        f"warning: {repo_id}: version 1.0.0 now points at another commit ({first[:12]} -> {second[:12]}): "
        "the publisher moved its tag"
    ) in err


def test_a_release_retagged_with_build_metadata_on_another_commit_is_a_moved_release(new_repo, project, cli):
    # Failed before: `lock --upgrade` reported an ordinary `~ 1.0.0 -> 1.0.0+rebuild`, no warning.
    def retag(repo):
        repo.git("tag", "-d", "v1.0.0")
        repo.tag("v1.0.0+rebuild")

    repo_id, first, second, err = moved_release(new_repo, project, cli, retag)
    assert (
        f"warning: {repo_id}: version 1.0.0 (now 1.0.0+rebuild) now points at another commit ({first[:12]} -> "
        f"{second[:12]}): the publisher moved its tag"
    ) in err


def test_changes_tell_a_moved_release_from_an_upgrade():
    kernel = lockfile.LockedKernel(
        repo_id="acme/k",
        repo_type="kernel",
        requirement="^1",
        commit="a" * 40,
        ref="refs/tags/v1.0.0",
        version="1.0.0",
        tag=None,
        variants=(),
    )

    def at(version: str | None, commit: str) -> lockfile.Lock:
        return lockfile.Lock((dataclasses.replace(kernel, version=version, commit=commit),))

    moved = "! acme/k: version 1.0.0 (now 1.0.0+b.2) now points at another commit"
    assert lockfile.changes(at("1.0.0", "a" * 40), at("1.0.0+b.2", "b" * 40))[0].startswith(moved)
    assert lockfile.changes(at("1.0.0+b.1", "a" * 40), at("1.0.0", "b" * 40))[0].startswith(
        "! acme/k: version 1.0.0+b.1 (now 1.0.0)"
    )
    assert lockfile.changes(at("1.0.0", "a" * 40), at("1.0.1", "b" * 40)) == ["~ acme/k: 1.0.0 -> 1.0.1"]
    assert lockfile.changes(at("1.0.0-rc.1", "a" * 40), at("1.0.0", "b" * 40)) == ["~ acme/k: 1.0.0-rc.1 -> 1.0.0"]
    assert lockfile.changes(at(None, "a" * 40), at("1.0.0", "b" * 40)) == [f"~ acme/k: {'a' * 12} -> 1.0.0"]
    assert lockfile.changes(at("1.0.0", "a" * 40), at(None, "b" * 40)) == [f"~ acme/k: 1.0.0 -> {'b' * 12}"]
