"""`kernelpin publish --create-pr` and `--private`, as kernel-builder's upload has them.

The test Hub (olah behind testkit/hub_front.py) answers reads only: list_repo_refs, repo_info (whose `private` is
always false: olah has no private repositories) and files. It has no route for create_repo (POST /api/repos/create),
preupload, create_commit (POST .../commit/<rev>, which opens a pull request with create_pr=1), create_tag or
create_branch: each is a 404/405. So the refusals that happen before any write, and the refusal of the writes
themselves, run against it end to end; what publish asks of the Hub's write endpoints once they answer is checked at
the huggingface_hub call boundary (`WritesRecorded`: reads go to olah, the write methods are recorded), because no
server here can answer them (docs/releasing.md says the same).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub import CommitInfo, HfApi

from kernelpin.publisher.release import PublishError, TagExistsError, check_release, publish
from testkit.fake_kernel import write_variant
from testkit.hub import HubServer
from testkit.releasing import hub_env, release_into_mirror, run, stage

CPU = "torch213-cxx11-cpu-x86_64-linux"


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HubServer, dict[str, Path]]]:
    """acme/gray released at v1.0.0 on the test Hub; staged layouts of v1.0.0 (again) and v1.1.0."""
    root = tmp_path_factory.mktemp("hub")
    server = HubServer(root)
    staged = {
        version: stage([write_variant(root / f"b{version}", version, CPU)], root / f"v{version}", "acme/gray")
        for version in ("1.0.0", "1.1.0")
    }
    release_into_mirror(server.repo("acme/gray"), staged["1.0.0"], "v1.0.0")
    with server:
        yield server, staged


def publish_cli(server: HubServer, home: Path, *args: str | Path) -> Any:
    return run(
        [sys.executable, "-m", "kernelpin", "publish", *map(str, args)], env=hub_env(server.endpoint, home), check=False
    )


def test_create_pr_refuses_a_tag_that_exists_before_uploading(hub, tmp_path):
    server, staged = hub
    before = server.repo("acme/gray").git("show-ref")
    done = publish_cli(server, tmp_path, staged["1.0.0"], "--repo", "acme/gray", "--create-pr")
    assert done.returncode == 1
    assert "acme/gray already has tag v1.0.0" in done.stderr and "Bump the kernel's version" in done.stderr
    assert server.repo("acme/gray").git("show-ref") == before


def test_private_refuses_an_existing_public_repository(hub, tmp_path):
    """olah's repo_info says the repository is public: --private must not publish into it."""
    server, staged = hub
    before = server.repo("acme/gray").git("show-ref")
    done = publish_cli(server, tmp_path, staged["1.1.0"], "--repo", "acme/gray", "--private")
    assert done.returncode == 1
    (error,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]  # one line
    assert "acme/gray exists and is public" in error and "--private was given" in error
    assert "update_repo_settings('acme/gray', private=True)" in error
    assert server.repo("acme/gray").git("show-ref") == before


@pytest.mark.parametrize(
    ("repo_id", "flags"),
    [("acme/gray", ["--create-pr"]), ("acme/new", ["--create-pr"]), ("acme/new", ["--private"])],
)
def test_a_server_without_write_endpoints_refuses_the_pull_request_and_the_new_repository(
    hub, tmp_path, repo_id, flags
):
    """olah answers neither preupload/commit (the pull request) nor create_repo: publish says it takes no uploads."""
    server, staged = hub
    before = server.repo("acme/gray").git("show-ref")
    done = publish_cli(server, tmp_path, staged["1.1.0"], "--repo", repo_id, *flags)
    assert done.returncode == 1
    assert f"{server.endpoint} does not accept uploads to {repo_id} (40" in done.stderr
    assert server.repo("acme/gray").git("show-ref") == before
    assert not (server.mirrors / "models" / "acme" / "new").exists()


def test_dry_run_says_what_the_flags_change(hub, tmp_path):
    server, staged = hub
    done = publish_cli(
        server, tmp_path, staged["1.1.0"], "--repo", "acme/gray", "--create-pr", "--private", "--dry-run"
    )
    assert done.returncode == 0, done.stderr
    assert "would upload 5 files" in done.stdout or "Dry run: would upload" in done.stdout
    assert "to acme/gray as a pull request" in done.stdout and "tagged" not in done.stdout.splitlines()[0]
    assert "into a private repository" in done.stdout
    assert "after the merge, publish again without --create-pr to tag v1.1.0" in done.stdout
    listed = json.loads(
        publish_cli(
            server, tmp_path, staged["1.1.0"], "--repo", "acme/gray", "--create-pr", "--dry-run", "--json"
        ).stdout
    )
    assert listed["create_pr"] is True and listed["private"] is False and listed["branch"] is None


class WritesRecorded(HfApi):
    """The real client against the test Hub for reads; the write endpoints olah has no route for are recorded
    and answered as the Hub documents them (CommitInfo with pr_num/pr_url for create_pr)."""

    def __init__(self, endpoint: str, private: bool | None = None) -> None:
        super().__init__(endpoint=endpoint, token=False)
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.private = private

    def create_repo(self, repo_id: str, **kwargs: Any) -> Any:
        self.calls.append(("create_repo", {"repo_id": repo_id, **kwargs}))

    def upload_folder(self, **kwargs: Any) -> Any:
        self.calls.append(("upload_folder", kwargs))
        oid = "c" * 40
        pr = {"pr_url": f"{self.endpoint}/{kwargs['repo_id']}/discussions/7"} if kwargs.get("create_pr") else {}
        return CommitInfo(
            commit_url=f"{self.endpoint}/{kwargs['repo_id']}/commit/{oid}",
            commit_message="",
            commit_description="",
            _endpoint=self.endpoint,
            oid=oid,
            **pr,
        )

    def repo_info(self, *args: Any, **kwargs: Any) -> Any:
        info = super().repo_info(*args, **kwargs)  # olah's answer, then the visibility the test gives
        if self.private is not None:
            info.private = self.private
        return info

    def create_tag(self, repo_id: str, **kwargs: Any) -> None:
        self.calls.append(("create_tag", {"repo_id": repo_id, **kwargs}))

    def create_branch(self, repo_id: str, **kwargs: Any) -> None:
        self.calls.append(("create_branch", {"repo_id": repo_id, **kwargs}))

    def delete_branch(self, repo_id: str, **kwargs: Any) -> None:
        self.calls.append(("delete_branch", {"repo_id": repo_id, **kwargs}))


def test_create_pr_opens_a_pull_request_and_tags_nothing(hub):
    server, staged = hub
    api = WritesRecorded(server.endpoint)
    published = publish(api, check_release(staged["1.1.0"]), "acme/gray", create_pr=True)
    assert [name for name, _ in api.calls] == ["upload_folder"]
    upload = api.calls[0][1]
    assert (
        upload["create_pr"] is True and upload["repo_type"] == "model" and upload["commit_message"] == "Release v1.1.0"
    )
    assert published.tag is None and published.created is False
    assert published.pull_request is not None and published.pull_request.number == 7
    assert published.pull_request.url.endswith("/acme/gray/discussions/7")
    assert not published.branch.move
    assert "pull request #7; merge it, then run the same publish without --create-pr" in published.branch.note


def test_without_create_pr_the_release_is_tagged_and_the_branch_moved(hub):
    """The same boundary without the flags: what publish always did (the control for the test above)."""
    server, staged = hub
    api = WritesRecorded(server.endpoint)
    published = publish(api, check_release(staged["1.1.0"]), "acme/gray")
    assert [name for name, _ in api.calls] == ["upload_folder", "create_tag", "delete_branch", "create_branch"]
    assert not api.calls[0][1].get("create_pr")
    assert published.tag == "v1.1.0" and published.pull_request is None and published.branch.move


def test_private_creates_a_missing_repository_private(hub):
    server, staged = hub
    api = WritesRecorded(server.endpoint)
    published = publish(api, check_release(staged["1.1.0"]), "acme/fresh", private=True)
    assert api.calls[0] == (
        "create_repo",
        {"repo_id": "acme/fresh", "repo_type": "kernel", "exist_ok": True, "private": True},
    )
    assert published.created and published.private is True and published.tag == "v1.1.0"


def test_private_publishes_into_an_existing_private_repository(hub):
    server, staged = hub
    api = WritesRecorded(server.endpoint, private=True)
    published = publish(api, check_release(staged["1.1.0"]), "acme/gray", private=True, create_pr=True)
    assert [name for name, _ in api.calls] == ["upload_folder"]
    assert published.private is True and not published.created


def test_private_refuses_a_repository_of_unknown_visibility(hub):
    server, staged = hub
    api = WritesRecorded(server.endpoint)
    api.private = None
    with pytest.raises(PublishError, match="exists and is public"):  # olah says false, not unknown
        publish(api, check_release(staged["1.1.0"]), "acme/gray", private=True)
    assert api.calls == []
    with pytest.raises(TagExistsError):
        publish(api, check_release(staged["1.0.0"]), "acme/gray", private=True)
