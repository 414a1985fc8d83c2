"""`kernelpin variants` (issue 45): the command `kernels` 0.18 added and 0.19 made the replacement of the
deprecated `kernels versions`, judged against the installed `kernels` itself on the test Hub."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib.metadata import entry_points, version

import pytest
from packaging.version import Version

from testkit.fake_kernel import publish
from testkit.releasing import hub_env

KERNELS = Version(version("kernels"))
# `kernels variants --all-versions` from 0.18; before, `kernels versions` printed the same blocks.
KERNELS_ARGS = ["variants", "--all-versions"] if Version("0.18") <= KERNELS else ["versions"]


@pytest.fixture
def two_lines(new_repo) -> str:
    """A kernel repository with the majors 0 and 1 (branches v0, v1), each of testkit's five builds."""
    repo_id, repo = new_repo("variants", repo_type="kernel")
    publish(repo, "0.1.0")
    repo.branch("v0")
    publish(repo, "1.0.0")
    repo.branch("v1")
    return repo_id


def _blocks(text: str) -> dict[str, list[tuple[str, bool, bool]]]:
    """`Version N[ (commit)]:` blocks of (variant, compatible, preferred), as both tools print them."""
    blocks: dict[str, list[tuple[str, bool, bool]]] = {}
    current: list[tuple[str, bool, bool]] = []
    for line in text.splitlines():
        if header := re.match(r"(Version \d+|Revision \S+)( \([0-9a-f]{12}\))?:$", line):
            current = blocks.setdefault(header[1], [])
        elif accepted := re.match(r"(\S+) compatible(, preferred)? ✅$", line):
            current.append((accepted[1], True, bool(accepted[2])))
        elif rejected := re.match(r"(\S+): .+$", line):
            current.append((rejected[1], False, False))
    return blocks


def _kernels(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    [script] = [ep for ep in entry_points(group="console_scripts") if ep.name == "kernels"]
    code = (
        f"import sys; from {script.module} import {script.attr} as main; sys.argv = ['kernels', *sys.argv[1:]]; main()"
    )
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300)


def test_the_same_builds_fit_and_the_same_one_is_preferred_as_in_kernels(hub, hf_env, cli, two_lines, tmp_path):
    env = hub_env(hub.endpoint, tmp_path / "kernels-hf", HF_HUB_DISABLE_TELEMETRY="0")
    judged = _kernels([*KERNELS_ARGS, two_lines], env)
    assert judged.returncode == 0, f"kernels {KERNELS}: {judged.stderr[-2000:]}"
    status, out, err = cli("variants", "--all-versions", two_lines)
    assert status == 0, err
    theirs, ours = _blocks(judged.stdout), _blocks(out)
    assert set(ours) == set(theirs) == {"Version 0", "Version 1"}, (KERNELS, judged.stdout, out)
    for label, rows in theirs.items():
        # kernels lists the rejected builds in the order of a set; the accepted ones, and the verdicts, must agree.
        assert sorted(ours[label]) == sorted(rows), (KERNELS, label)
        assert [row for row in ours[label] if row[1]] == [row for row in rows if row[1]], (KERNELS, label)
        assert ours[label][0] == ("torch213-cxx11-cpu-x86_64-linux", True, True)


def test_json_has_kernels_shape(hub, hf_env, cli, two_lines, tmp_path):
    status, out, _ = cli("variants", two_lines, "--json")  # default: the newest major, as kernels
    document = json.loads(out)
    assert status == 0 and document["repo_id"] == two_lines and [b["version"] for b in document["revisions"]] == [1]
    [block] = document["revisions"]
    assert block["revision"] == "refs/heads/v1" and re.fullmatch(r"[0-9a-f]{40}", block["commit"])
    assert set(block["variants"][0]) == {"variant", "compatible", "preferred", "reason"}
    if Version("0.18") <= KERNELS:  # the keys of `kernels variants --json`, plus kernelpin's commit and environment
        judged = _kernels(
            ["variants", two_lines, "--json"], hub_env(hub.endpoint, tmp_path / "k", HF_HUB_DISABLE_TELEMETRY="0")
        )
        theirs = json.loads(judged.stdout)
        assert set(theirs) <= set(document) and set(theirs["revisions"][0]) <= set(block)
        assert [
            (v["variant"], v["compatible"], v["preferred"])
            for v in theirs["revisions"][0]["variants"]
            if v["compatible"]
        ] == [(v["variant"], v["compatible"], v["preferred"]) for v in block["variants"] if v["compatible"]]


def test_another_machine_a_revision_and_only_compatible(hub, hf_env, cli, two_lines):
    status, out, _ = cli(
        "variants",
        two_lines,
        "--version",
        "0",
        "--torch",
        "2.12",
        "--cuda",
        "12.9",
        "--os",
        "linux",
        "--cpu-arch",
        "x86_64",
        "--only-compatible",
    )
    assert status == 0 and out.splitlines()[2:] == ["torch212-cxx11-cu129-x86_64-linux compatible, preferred ✅"]
    assert out.startswith("Version 0:\n")
    status, out, _ = cli("variants", two_lines, "--revision", "v0.1.0", "--torch", "2.11", "--only-compatible")
    assert (
        status == 0 and out.startswith("Revision v0.1.0:\n") and out.rstrip().endswith("No compatible variants found.")
    )


def test_errors_name_the_versions_there_are(hub, hf_env, cli, two_lines, new_repo):
    status, _, err = cli("variants", two_lines, "--version", "7")
    assert status == 1 and err.strip() == f"error: {two_lines}: no version 7 (the branch v7); versions: 0, 1"
    untagged, repo = new_repo("no-branches", repo_type="kernel")
    publish(repo, "1.0.0")
    status, _, err = cli("variants", untagged)
    assert status == 1 and "has no major-version branch (v1, v2, ...)" in err and "--revision" in err
    with pytest.raises(SystemExit) as exit_:
        cli("variants", two_lines, "--version", "1", "--all-versions")
    assert exit_.value.code == 2
