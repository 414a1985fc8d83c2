"""The major-version branch `v<major>`: what `kernels.get_kernel(repo, version=<major>)` loads.

Publishing tags `vX.Y.Z` and moves `v<major>` to the same commit, never backwards and never to a prerelease.
The rule is one pure function (kernelpin.publisher.release.plan_major_branch); `kernelpin publish` applies it through
the Hub API, and the test release helper (testkit.releasing.release_into_mirror) through git, which is how
releases reach the read-only test Hub, where the branches are then read back through the Hub API.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from huggingface_hub import HfApi
from huggingface_hub.utils import filter_repo_objects

from kernelpin.format.ranges import Version
from kernelpin.publisher.release import BranchPlan, check_release, plan_major_branch, publish, upload_patterns
from testkit.fake_kernel import write_variant
from testkit.hub import HubServer
from testkit.releasing import release_into_mirror, stage

CPU = "torch213-cxx11-cpu-x86_64-linux"
A, B, C = "a" * 40, "b" * 40, "c" * 40


@pytest.mark.parametrize(
    ("version", "tags", "branches", "expected"),
    [
        ("0.1.0", {}, {"main": A}, BranchPlan("v0", True, "v0 created at 0.1.0")),
        ("1.4.0", {"v1.3.0": A}, {"v1": A}, BranchPlan("v1", True, "v1 moved from 1.3.0 to 1.4.0")),
        (
            "1.2.1",
            {"v1.3.0": A, "v1.2.0": B},
            {"v1": A},
            BranchPlan("v1", False, "v1 stays at 1.3.0: it is newer than 1.2.1 (branches never move back)"),
        ),
        ("2.0.0-rc.1", {"v1.3.0": A}, {"v1": A}, BranchPlan("v2", False, "v2 not moved: 2.0.0-rc.1 is a prerelease")),
        ("2.0.0", {"v1.3.0": A, "v2.0.0-rc.1": B}, {"v1": A}, BranchPlan("v2", True, "v2 created at 2.0.0")),
        # Two tags on the branch's commit: the highest decides.
        (
            "1.3.5",
            {"v1.3.0": A, "1.4.0": A},
            {"v1": A},
            BranchPlan("v1", False, "v1 stays at 1.4.0: it is newer than 1.3.5 (branches never move back)"),
        ),
        (
            "1.5.0",
            {"v1.3.0": A},
            {"v1": C},
            BranchPlan(
                "v1",
                False,
                f"v1 not moved: it points at {C[:12]}, which no version tag names, so kernelpin "
                "cannot tell whether 1.5.0 is newer; move it yourself if it is",
            ),
        ),
    ],
    ids=["first", "forward", "backport", "prerelease", "new-major", "highest-tag", "untagged-branch"],
)
def test_plan_major_branch(version, tags, branches, expected):
    assert plan_major_branch(Version.parse(version), tags, branches) == expected


def test_releases_move_the_branch_as_publish_would(tmp_path):
    hub = HubServer(tmp_path / "hub")
    repo = hub.repo("acme/lines", "kernel")
    commits = {}
    for version in ("1.2.0", "1.3.0", "1.2.1", "1.4.0-rc.1", "0.9.0"):
        staged = stage([write_variant(tmp_path / "b" / version, version, CPU)], tmp_path / "s" / version, "acme/lines")
        commits[version] = release_into_mirror(repo, staged, f"v{version}")
    with hub:
        refs = HfApi(endpoint=hub.endpoint).list_repo_refs("acme/lines", repo_type="kernel")
    branches = {ref.name: ref.target_commit for ref in refs.branches}
    tags = {ref.name: ref.target_commit for ref in refs.tags}
    # v1 stayed at 1.3.0 when 1.2.1 came later, and a prerelease does not move it; v0 was created.
    assert branches["v1"] == commits["1.3.0"] and branches["v0"] == commits["0.9.0"]
    assert all(tags[f"v{version}"] == commit for version, commit in commits.items())


class RecordingHub:
    """The huggingface_hub calls publish makes, recorded against refs given up front (no writable Hub API
    server exists offline; the order of the calls is what this checks)."""

    def __init__(self, tags: dict[str, str], branches: dict[str, str]) -> None:
        self.endpoint, self.calls = "https://hub.test", []
        self.tags, self.branches = tags, branches

    def list_repo_refs(self, repo_id, repo_type):
        return SimpleNamespace(
            tags=[SimpleNamespace(name=name, target_commit=commit) for name, commit in self.tags.items()],
            branches=[SimpleNamespace(name=name, target_commit=commit) for name, commit in self.branches.items()],
        )

    def upload_folder(self, **kwargs):
        self.calls.append(("upload_folder", kwargs["repo_type"]))
        return SimpleNamespace(oid=C, commit_url=f"https://hub.test/commit/{C}")

    def create_tag(self, repo_id, tag, revision, repo_type, tag_message):
        self.calls.append(("create_tag", tag, revision))

    def delete_branch(self, repo_id, branch, repo_type):
        self.calls.append(("delete_branch", branch))

    def create_branch(self, repo_id, branch, revision, repo_type):
        self.calls.append(("create_branch", branch, revision))


@pytest.mark.parametrize(
    ("version", "branches", "expected"),
    [
        ("1.4.0", {"main": A, "v1": A}, [("delete_branch", "v1"), ("create_branch", "v1", C)]),
        ("2.0.0", {"main": A, "v1": A}, [("create_branch", "v2", C)]),
        ("1.2.1", {"main": A, "v1": A}, []),
    ],
    ids=["moved", "created", "kept"],
)
def test_publish_moves_the_branch_after_tagging(tmp_path, version, branches, expected):
    staged = stage([write_variant(tmp_path / "b", version, CPU)], tmp_path / "s", "acme/lines")
    hub = RecordingHub({"v1.3.0": A}, branches)
    published = publish(hub, check_release(staged), "acme/lines")
    assert hub.calls == [("upload_folder", "kernel"), ("create_tag", f"v{version}", C), *expected]
    assert published.branch.move is bool(expected)


def test_upload_patterns_match_every_file_of_the_release_and_nothing_else(tmp_path):
    # upload_folder's allow_patterns are fnmatch globs: a file named a[1].bin was not uploaded before,
    # and the tag would have lacked it.
    variant = write_variant(tmp_path / "b", "1.0.0", CPU, extra={"table[1].bin": b"x", "star*.bin": b"y"})
    release = check_release(stage([variant], tmp_path / "s", "acme/lines"))
    paths = [f.path for f in release.files]
    assert "build/torch213-cxx11-cpu-x86_64-linux/table[1].bin" in paths
    assert list(filter_repo_objects(paths, allow_patterns=upload_patterns(release))) == paths
    assert (
        list(
            filter_repo_objects(
                ["build/torch213-cxx11-cpu-x86_64-linux/stars.bin"], allow_patterns=upload_patterns(release)
            )
        )
        == []
    )
