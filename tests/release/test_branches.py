"""The major-version branch `v<major>`: what `kernels.get_kernel(repo, version=<major>)` loads.

Publishing tags `vX.Y.Z` and moves `v<major>` to the same commit, never backwards and never to a prerelease.
The rule is one pure function (kernelpin.publish.plan_major_branch); `kernelpin publish` applies it through
the Hub API, and the test release helper (testkit.releasing.release_into_mirror) through git, which is how
releases reach the read-only test Hub, where the branches are then read back through the Hub API.
"""

from __future__ import annotations

import pytest
from huggingface_hub import HfApi

from kernelpin.publish import BranchPlan, plan_major_branch
from kernelpin.ranges import Version
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
        ("1.2.1", {"v1.3.0": A, "v1.2.0": B}, {"v1": A},
         BranchPlan("v1", False, "v1 stays at 1.3.0: it is newer than 1.2.1 (branches never move back)")),
        ("2.0.0-rc.1", {"v1.3.0": A}, {"v1": A}, BranchPlan("v2", False, "v2 not moved: 2.0.0-rc.1 is a prerelease")),
        ("2.0.0", {"v1.3.0": A, "v2.0.0-rc.1": B}, {"v1": A}, BranchPlan("v2", True, "v2 created at 2.0.0")),
        # Two tags on the branch's commit: the highest decides.
        ("1.3.5", {"v1.3.0": A, "1.4.0": A}, {"v1": A},
         BranchPlan("v1", False, "v1 stays at 1.4.0: it is newer than 1.3.5 (branches never move back)")),
        ("1.5.0", {"v1.3.0": A}, {"v1": C},
         BranchPlan("v1", False, f"v1 not moved: it points at {C[:12]}, which no version tag names, so kernelpin "
                                 "cannot tell whether 1.5.0 is newer; move it yourself if it is")),
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
