"""Issue 50: where kernelpin says its output matches a `kernels` command's (`variants`, `describe-api`, `info` with
and without --dep-tree, and their --json), the two are compared on the same releases with the order: `kernels variants` sorts the whole trace with one
key (kernels' _sort_variants) and kernelpin gives that order, breaking kernels' ties by name (kernels keeps the
listing's arbitrary order there); a build that fits has no reason (null), as in kernels; describe-api shows the
revision as kernels does (v1, not refs/heads/v1). kernelpin's extras (the commit, the environment, signatures and
summaries of functions, other public names) are additive (docs/kernelpin.md). Failed before: the rejected builds by
name, reasons on fitting builds, `Version 1 (commit):`, `refs/heads/v1`."""

from __future__ import annotations

import json
import re

import pytest
from packaging.version import Version

from kernelpin.loading import kernels_internals
from testkit.fake_kernel import CPU_213, kernel_files, write_variant
from testkit.releasing import hub_env
from tests.kernelpin.commands.test_describe_api import api_kernel  # noqa: F401 (fixture)
from tests.kernelpin.commands.test_info_dep_tree import CUDA_213, release
from tests.kernelpin.commands.test_variants_command import KERNELS, _kernels, two_lines  # noqa: F401 (fixture)

# kernelpin's keys after kernels' in `info --json` (docs/kernelpin.md, `kernelpin info`).
KERNELPIN_INFO_KEYS = {
    "commit",
    "ref",
    "repo_type",
    "release",
    "variants",
    "kernel_requirements",
    "dependency_releases",
}


def _same_key_order(ours: object, theirs: object, where: str = "") -> None:
    """kernels' keys first in kernelpin's JSON, in kernels' order, at every level (kernelpin's own keys after)."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and list(ours)[: len(theirs)] == list(theirs), where
        for key, value in theirs.items():
            _same_key_order(ours[key], value, f"{where}.{key}")
    elif isinstance(theirs, list):
        assert isinstance(ours, list), where
        for index, (mine, their) in enumerate(zip(ours, theirs, strict=False)):
            _same_key_order(mine, their, f"{where}[{index}]")


def _kernels_order(rows: list[dict]) -> list[str]:
    """The order kernels' own sort gives `rows` (variant, compatible, reason), ties kept in the names' order."""
    module = kernels_internals.module("variants", "this test")
    decisions = [
        module.VariantAccepted(module.parse_variant(row["variant"]))
        if row["compatible"]
        else module.VariantRejected(module.parse_variant(row["variant"]), row["reason"] or "")
        for row in sorted(rows, key=lambda row: row["variant"])
    ]
    return [decision.variant.variant_str for decision in module._sort_variants(decisions)]


@pytest.mark.skipif(Version("0.18") > KERNELS, reason="`kernels variants` (and --json) came in kernels 0.18")
def test_variants_has_kernels_fields_and_order(hub, hf_env, cli, two_lines, tmp_path):
    env = hub_env(hub.endpoint, tmp_path / "k", HF_HUB_DISABLE_TELEMETRY="0")
    for args in (["variants", two_lines], ["variants", "--all-versions", two_lines]):
        judged = _kernels([*args, "--json"], env)
        assert judged.returncode == 0, judged.stderr[-2000:]
        theirs = json.loads(judged.stdout)
        status, out, err = cli(*args, "--json")
        assert status == 0, err
        ours = json.loads(out)
        _same_key_order(ours, theirs)
        assert ours["repo_id"] == theirs["repo_id"]
        assert [(r["version"], r["revision"]) for r in ours["revisions"]] == [
            (r["version"], r["revision"]) for r in theirs["revisions"]
        ]
        for mine, their in zip(ours["revisions"], theirs["revisions"], strict=True):
            fields = {(v["variant"], v["compatible"], v["preferred"], v["reason"] is None) for v in their["variants"]}
            assert {(v["variant"], v["compatible"], v["preferred"], v["reason"] is None) for v in mine["variants"]} == (
                fields
            )
            assert [v["variant"] for v in mine["variants"]] == _kernels_order(their["variants"])
        # The text: kernels' headers, and the builds in the same order as the JSON.
        judged = _kernels(args, env)
        status, out, _ = cli(*args)
        headers = [line for line in judged.stdout.splitlines() if re.match(r"(Version|Revision) ", line)]
        assert [line for line in out.splitlines() if re.match(r"(Version|Revision) ", line)] == headers
        rows = [re.split(r"[: ]", line, maxsplit=1)[0] for line in out.splitlines() if line.startswith("torch")]
        assert rows == [v["variant"] for r in ours["revisions"] for v in r["variants"]]


@pytest.mark.skipif(Version("0.18") > KERNELS, reason="`kernels describe-api` came in kernels 0.18")
def test_describe_api_shows_what_kernels_shows_in_its_order(hub, hf_env, cli, api_kernel, tmp_path):
    env = hub_env(hub.endpoint, tmp_path / "k", HF_HUB_DISABLE_TELEMETRY="0")
    theirs = json.loads(_kernels(["describe-api", api_kernel, "--json"], env).stdout)
    ours = json.loads(cli("describe-api", api_kernel, "--json")[1])
    _same_key_order(ours, theirs)
    for key in ("schema_version", "repo_id", "revision", "variant"):
        assert ours[key] == theirs[key], key
    assert [f["name"] for f in ours["functions"]] == [f["name"] for f in theirs["functions"]]
    assert [(layer["name"], layer["attributes"]) for layer in ours["layers"]] == [
        (layer["name"], layer["attributes"]) for layer in theirs["layers"]
    ]
    text = _kernels(["describe-api", api_kernel], env).stdout.splitlines()
    mine = cli("describe-api", api_kernel)[1].splitlines()
    # Every line kernels prints, in its order: the same line, or (functions) kernelpin's signature of that name.
    at = 0
    for line in text:
        wanted = line.strip()
        while at < len(mine) and not (
            mine[at] == line or (line.startswith("  ") and re.match(rf"\s+(async )?{re.escape(wanted)}\(", mine[at]))
        ):
            at += 1
        assert at < len(mine), (line, mine)
        at += 1


@pytest.fixture
def dependency_tree(new_repo) -> dict[str, str]:
    """Releases whose kernel-depends form a tree (top -> left -> leaf, top -> right -> leaf; right's CUDA build
    depends on another kernel), with Python dependencies at two levels and the optional keys kernels shows."""
    leaf_id, leaf = new_repo("leaf", "kernel")
    leaf_commit = release(leaf, "2.1.0", {}, extra={"python-depends": ["einops"], "kernels-minver": "0.12.0"})
    left_id, left = new_repo("left", "kernel")
    release(left, "1.0.0", {CPU_213: [{"repo-id": leaf_id, "version": 2}]})
    cuda_only_id, cuda_only = new_repo("cuda-only", "kernel")
    release(cuda_only, "1.0.0", {})
    right_id, right = new_repo("right", "kernel")
    release(
        right,
        "3.0.0",
        {CPU_213: [{"repo-id": leaf_id, "version": 2}], CUDA_213: [{"repo-id": cuda_only_id, "version": 1}]},
    )
    top_id, top = new_repo("top", "kernel")
    depends = [{"repo-id": right_id, "version": 3}, {"repo-id": left_id, "revision": "v1.0.0"}]
    release(
        top,
        "1.2.0",
        dict.fromkeys((CPU_213, CUDA_213), depends),
        extra={"python-depends": ["tvm-ffi"], "upstream": "https://github.com/acme/top"},
    )
    return {"top": top_id, "left": left_id, "right": right_id, "leaf": leaf_id, "leaf_commit": leaf_commit}


@pytest.mark.skipif(Version("0.19") > KERNELS, reason="`kernels info` shows the build and kernel-depends from 0.19")
def test_info_prints_what_kernels_info_prints_then_kernelpins_lines(hub, hf_env, cli, dependency_tree, tmp_path):
    """`kernels info` (with and without --dep-tree, each way of naming the revision): kernelpin's text starts with
    kernels' output byte for byte, and its --json has kernels' keys with kernels' values in kernels' order, then
    kernelpin's. Failed before: other header lines, a tree of releases instead of names, a string `version`, a
    flat list of {repo, requirement} under kernel_depends, sorted keys."""
    env = hub_env(hub.endpoint, tmp_path / "k", HF_HUB_DISABLE_TELEMETRY="0")
    top, left, leaf = dependency_tree["top"], dependency_tree["left"], dependency_tree["leaf"]
    for args in (
        [top],
        [top, "--dep-tree"],
        [top, "--version", "1"],
        [left, "--revision", "v1.0.0", "--dep-tree"],
        [leaf, "--revision", dependency_tree["leaf_commit"]],
    ):
        judged = _kernels(["info", *args], env)
        assert judged.returncode == 0, f"kernels {KERNELS}: {judged.stderr[-2000:]}"
        status, out, err = cli("info", *args)
        assert status == 0, err
        assert out.startswith(judged.stdout), (args, judged.stdout, out)
        assert out[len(judged.stdout) :].startswith("Commit: ")  # kernelpin's lines, after kernels' (documented)
        judged = _kernels(["info", *args, "--json"], env)
        assert judged.returncode == 0, f"kernels {KERNELS}: {judged.stderr[-2000:]}"
        theirs = json.loads(judged.stdout)
        status, out, err = cli("info", *args, "--json")
        assert status == 0, err
        ours = list(json.loads(out).items())
        assert ours[: len(theirs)] == list(theirs.items()), args
        assert {key for key, _ in ours[len(theirs) :]} <= KERNELPIN_INFO_KEYS, args
        if args == [top, "--dep-tree"]:  # the tree this test builds is the one kernels saw
            assert theirs["dependency_tree"] == {left: {leaf: {}}, dependency_tree["right"]: {leaf: {}}}
            assert theirs["python_depends"] == ["einops", "tvm-ffi"] and theirs["version"] == 1


def _info_judged(cli, env: dict[str, str], args: list[str]) -> None:
    """kernelpin info ARGS against the installed kernels' info ARGS: from 0.19, its text a prefix of kernelpin's
    and its --json keys the first of kernelpin's; before, a subset of 0.19's lines (no Variant, no kernel
    dependencies, only the kernel's own Python dependencies), each of them one of kernelpin's in their order, and
    each of their keys with kernelpin's value (right for a kernel without kernel-depends)."""
    judged = _kernels(["info", *args], env)
    assert judged.returncode == 0, f"kernels {KERNELS}: {judged.stderr[-2000:]}"
    status, out, err = cli("info", *args)
    assert status == 0, err
    theirs = json.loads(_kernels(["info", *args, "--json"], env).stdout)
    ours = json.loads(cli("info", *args, "--json")[1])
    if Version("0.19") <= KERNELS:
        assert out.startswith(judged.stdout), (args, judged.stdout, out)
        assert list(ours.items())[: len(theirs)] == list(theirs.items()), args
    else:
        lines = judged.stdout.splitlines()
        assert [line for line in out.splitlines() if line in lines] == lines, args
        assert {key: ours[key] for key in theirs} == theirs, args


def test_info_of_a_repository_without_a_version_branch_reads_main_as_kernels_does(hub, hf_env, cli, new_repo, tmp_path):
    """kernels info falls back to main where no vN branch exists (every version). Failed before: 'has no
    major-version branch'."""
    repo_id, repo = new_repo("main-only", "kernel")
    repo.write(kernel_files("1.0.0", variants=(CPU_213,)), clear=True)
    repo.commit("build on main")
    _info_judged(cli, hub_env(hub.endpoint, tmp_path / "k", HF_HUB_DISABLE_TELEMETRY="0"), [repo_id])
    assert "Revision: main\n" in cli("info", repo_id)[1]


@pytest.mark.skipif(
    Version("0.19") <= KERNELS, reason="test_info_prints_what_kernels_info_prints_then_kernelpins_lines judges 0.19+"
)
def test_info_says_what_kernels_before_0_19_says(hub, hf_env, cli, dependency_tree, tmp_path):
    """kernels 0.17.2 and 0.18 print a subset of 0.19's lines (no Variant, no kernel dependencies, only the kernel's
    own Python dependencies): for a kernel without kernel-depends, each of their lines is one of kernelpin's, in
    their order, and each of their --json keys has kernelpin's value (docs/kernelpin.md, `kernelpin info`)."""
    env = hub_env(hub.endpoint, tmp_path / "k", HF_HUB_DISABLE_TELEMETRY="0")
    leaf = dependency_tree["leaf"]
    for args in ([leaf], [leaf, "--revision", dependency_tree["leaf_commit"]]):
        _info_judged(cli, env, args)


def test_info_of_a_build_on_disk_as_kernels_info_path(hub, hf_env, cli, new_repo, tmp_path):
    """`kernels info PATH` describes a build on disk (and, from 0.19, resolves its kernel-depends on the Hub);
    kernelpin info takes the same path. Failed before: a path was refused as a repository id."""
    dep_id, dep = new_repo("plain", "kernel")
    release(dep, "1.0.0", {})
    root = tmp_path / "checkout"
    directory = write_variant(root / "build" / CPU_213, "3.1.0", CPU_213)
    document = json.loads((directory / "metadata.json").read_text())
    document.update({"kernel-depends": [{"repo-id": dep_id, "version": 1}], "upstream": "https://github.com/acme/x"})
    (directory / "metadata.json").write_text(json.dumps(document))
    env = hub_env(hub.endpoint, tmp_path / "k", HF_HUB_DISABLE_TELEMETRY="0")
    _info_judged(cli, env, [str(root)])
    if Version("0.19") <= KERNELS:  # --dep-tree is new in 0.19
        _info_judged(cli, env, [str(root), "--dep-tree"])
    status, out, _ = cli("info", str(root), "--dep-tree")
    assert status == 0 and out.startswith(f"Path: {root}\nVariant: {CPU_213}\n")
    assert out.endswith(f"Dependency releases:\n{root} on disk ({CPU_213})\n`-- {dep_id} 1 -> 1.0.0 ({CPU_213})\n"), out
    assert json.loads(cli("info", str(root), "--json")[1])["kernel_depends"] == [dep_id]
    status, _, err = cli("info", str(root), "--version", "1")
    assert status == 1 and "not a directory; drop them" in err
