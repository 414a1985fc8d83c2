"""`kernelpin info --dep-tree` (issue 45): the whole kernel-depends tree, each kernel with the release its
requirement resolves to and the build this machine takes; judged against `kernels info --dep-tree` (0.19+)."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points, version

from packaging.version import Version

from testkit.fake_kernel import CPU_213, variant_files
from testkit.releasing import hub_env

KERNELS = Version(version("kernels"))
CUDA_213 = "torch213-cxx11-cu130-x86_64-linux"


def release(
    repo, version_: str, depends: dict[str, dict], variants=(CPU_213, CUDA_213), extra: dict | None = None
) -> str:
    """A tagged release on branch v<major> whose builds list `depends` (variant -> kernel-depends) and the
    metadata.json keys `extra` (upstream, python-depends, ...)."""
    files = {}
    for variant in variants:
        own = variant_files(version_, variant)
        document = json.loads(own["metadata.json"])
        document.update({**(extra or {}), "kernel-depends": depends.get(variant, [])})
        own["metadata.json"] = json.dumps(document).encode()
        files.update({f"build/{variant}/{path}": data for path, data in own.items()})
    repo.write(files, clear=True)
    commit = repo.commit(f"release {version_}")
    repo.tag(f"v{version_}")
    repo.branch(f"v{version_.split('.')[0]}", commit)
    return commit


def _kernels(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    [script] = [ep for ep in entry_points(group="console_scripts") if ep.name == "kernels"]
    code = (
        f"import sys; from {script.module} import {script.attr} as main; sys.argv = ['kernels', *sys.argv[1:]]; main()"
    )
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300)


def _shape(node: dict) -> dict:
    """Our tree as kernels' `dependency_tree` nests it: {repo_id: {...}}, below the top."""
    return {child["repo"]: _shape(child) for child in node["depends"]}


def test_the_whole_tree_with_releases_and_builds(hub, hf_env, cli, new_repo, tmp_path):
    leaf_id, leaf = new_repo("leaf", "kernel")
    release(leaf, "2.1.0", {})
    left_id, left = new_repo("left", "kernel")
    release(left, "1.0.0", {CPU_213: [{"repo-id": leaf_id, "version": 2}]})
    right_id, right = new_repo("right", "kernel")
    cuda_only_id, cuda_only = new_repo("cuda-only", "kernel")
    release(cuda_only, "1.0.0", {})
    # The CPU build needs leaf, the CUDA build another kernel: the tree is that of this machine's build.
    release(
        right,
        "3.0.0",
        {CPU_213: [{"repo-id": leaf_id, "version": 2}], CUDA_213: [{"repo-id": cuda_only_id, "version": 1}]},
    )
    top_id, top = new_repo("top", "kernel")
    release(
        top,
        "1.2.0",
        {
            variant: [{"repo-id": right_id, "version": 3}, {"repo-id": left_id, "version": 1}]
            for variant in (CPU_213, CUDA_213)
        },
    )
    status, out, err = cli("info", top_id, "--dep-tree")
    assert status == 0, err
    tree = out[out.index("Dependency releases:\n") :].splitlines()[1:]
    assert tree == [
        f"{top_id} 1.2.0 ({CPU_213})",
        f"|-- {left_id} 1 -> 1.0.0 ({CPU_213})",
        f"|   `-- {leaf_id} 2 -> 2.1.0 ({CPU_213})",
        f"`-- {right_id} 3 -> 3.0.0 ({CPU_213})",
        f"    `-- {leaf_id} 2 -> 2.1.0 ({CPU_213})",
    ]
    status, out, _ = cli(
        "info",
        top_id,
        "--dep-tree",
        "--torch",
        "2.13",
        "--cuda",
        "13.0",
        "--os",
        "linux",
        "--cpu-arch",
        "x86_64",
        "--json",
    )
    document = json.loads(out)["dependency_releases"]
    assert _shape(document) == {left_id: {}, right_id: {cuda_only_id: {}}}  # CUDA 13.0 builds depend otherwise
    assert json.loads(out)["dependency_tree"] == _shape(document)  # kernels' shape of the same tree
    assert [child["variant"] for child in document["depends"]] == [CUDA_213, CUDA_213]
    assert document["depends"][1]["depends"][0]["commit"] and document["depends"][1]["depends"][0]["version"] == "1.0.0"
    if Version("0.19") <= KERNELS:  # --dep-tree is new in kernels 0.19; 0.17.2 and 0.18 have no tree to judge by
        judged = _kernels(
            ["info", top_id, "--dep-tree", "--json"],
            hub_env(hub.endpoint, tmp_path / "k", HF_HUB_DISABLE_TELEMETRY="0"),
        )
        assert judged.returncode == 0, f"kernels {KERNELS}: {judged.stderr[-2000:]}"
        status, out, _ = cli("info", top_id, "--dep-tree", "--json")
        assert json.loads(judged.stdout)["dependency_tree"] == _shape(json.loads(out)["dependency_releases"])


def test_a_cycle_and_a_kernel_without_a_build_here_are_shown_not_followed(hub, hf_env, cli, new_repo):
    first_id, first = new_repo("cycle-a", "kernel")
    second_id, second = new_repo("cycle-b", "kernel")
    gpu_id, gpu = new_repo("gpu", "kernel")
    release(gpu, "1.0.0", {}, variants=(CUDA_213,))
    release(second, "1.0.0", {CPU_213: [{"repo-id": first_id, "version": 1}]})
    release(first, "1.0.0", {CPU_213: [{"repo-id": second_id, "version": 1}, {"repo-id": gpu_id, "version": 1}]})
    status, out, err = cli("info", first_id, "--dep-tree")
    assert status == 0, err
    assert out[out.index("Dependency releases:\n") :].splitlines()[1:] == [
        f"{first_id} 1.0.0 ({CPU_213})",
        f"|-- {second_id} 1 -> 1.0.0 ({CPU_213})",
        (
            f"|   `-- {first_id} 1 -> 1.0.0 ({CPU_213}): cycle: {first_id} -> {second_id} -> {first_id}; lock and load "
            "refuse it"
        ),
        (
            f"`-- {gpu_id} 1 -> 1.0.0 (no build): no build fits linux/x86_64, torch 2.13 (cxx11 ABI), no CUDA, "
            f"Python {sys.version_info.major}.{sys.version_info.minor}"
        ),
    ]
